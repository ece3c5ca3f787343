//! This host's NIDs (issue #44 item 2): the stable one (`CoreConfig::local_nid`,
//! the one in DNS, always answering) and the temporary ones the shell draws for
//! outgoing sessions (`[privacy]`, RFC 8981's temporary addresses carried over to
//! NIDs). The core accepts packets to any of them; each ILCC entry remembers which
//! of ours its correspondent talks to (`IlccEntry::local_nid`, None = the stable
//! one), and every packet the core makes for that entry (LU, hello, challenge,
//! nonce-only, fallback probe) comes from that NID, never from another of ours, so
//! no packet joins two of our NIDs up.
//!
//! The ILCC is keyed by ⟨remote NID, our NID⟩ (`IlccKey`; docs/architecture.md
//! § ILCC): a correspondent talking to two of our NIDs (a session on a temporary
//! one, another to the stable one in DNS) has two entries, each with its own
//! nonces, locators, LUs and fast-path entry, so nothing it receives joins the
//! two NIDs up beyond what their concurrent use from one locator already shows.

use ilnp_wire::Nid;
use std::collections::BTreeMap;

/// Why a temporary NID was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NidRefused {
    /// zero, all-ones or the group bit set (`Nid::check_unicast`)
    NotUnicast,
    /// one of ours already (the stable NID or a temporary one)
    Local,
    /// a correspondent we know (ILCC entry or peer record) has it
    Correspondent,
}

impl std::fmt::Display for NidRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NidRefused::NotUnicast => "not a unicast NID",
            NidRefused::Local => "already one of this host's NIDs",
            NidRefused::Correspondent => "a known correspondent's NID",
        })
    }
}

/// One temporary NID as the core keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TempNid {
    /// new sessions may use it (false once the shell deprecated it: RFC 8981
    /// §3.4, its sessions go on, new ones should not start)
    pub preferred: bool,
}

/// The temporary NIDs (the stable one is the configuration's).
#[derive(Clone, Debug, Default)]
pub struct LocalNids {
    temp: BTreeMap<Nid, TempNid>,
}

impl LocalNids {
    pub fn get(&self, nid: Nid) -> Option<TempNid> {
        self.temp.get(&nid).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Nid, TempNid)> + '_ {
        self.temp.iter().map(|(&n, &t)| (n, t))
    }

    pub fn len(&self) -> usize {
        self.temp.len()
    }

    pub fn is_empty(&self) -> bool {
        self.temp.is_empty()
    }

    /// Takes `nid` (preferred); the core checked it first (`Core::add_temporary_nid`).
    pub(crate) fn add(&mut self, nid: Nid) {
        self.temp.insert(nid, TempNid { preferred: true });
    }

    /// New sessions should no longer use `nid`. False if it is not one of these.
    pub(crate) fn deprecate(&mut self, nid: Nid) -> bool {
        self.temp.get_mut(&nid).map(|t| t.preferred = false).is_some()
    }

    /// `nid` is no longer ours. False if it was not one of these.
    pub(crate) fn remove(&mut self, nid: Nid) -> bool {
        self.temp.remove(&nid).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::event::DropReason;
    use crate::event::Outcome;
    use crate::ilcc::IlccKey;
    use crate::machine::Core;
    use crate::tests::{core, delivered, local, parse_lu, udp, wire, LA, LB, NA, NB};
    use ilnp_wire::translate::Csum;
    use ilnp_wire::Locator;
    use ilnp_wire::{ipv6, split_addr};
    use std::time::Instant;

    const T1: Nid = Nid(0x1c2e_77a0_5b19_d403);
    const T2: Nid = Nid(0x3a01_9e42_c7d8_0f11);
    const LA2: Locator = Locator(0x2001_0db8_000a_0002);
    /// A's entry for B's session with T1
    const K1: IlccKey = IlccKey { remote: NB, local: Some(T1) };

    fn src_nid(w: &[u8]) -> Nid {
        split_addr(ipv6::Packet::new_checked(w).unwrap().src()).1
    }

    /// A (stable NA, temporary T1) opens a session from T1 to B; B answers.
    fn temp_session() -> (Core, Core, Instant) {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let mut b = core(NB, LB, 2, None);
        a.add_temporary_nid(T1).unwrap();
        let ab = wire(&a.handle_outbound(now, &udp(T1, NB, b"hi"), Csum::Complete)).pop().expect("sent");
        assert_eq!(src_nid(&ab), T1, "the wire carries the temporary NID, not the stable one");
        assert_eq!(delivered(&b.handle_inbound(now, &ab, Csum::Complete)), vec![udp(T1, NB, b"hi")]);
        let ba = wire(&b.handle_outbound(now, &udp(NB, T1, b"yo"), Csum::Complete)).pop().expect("answer");
        assert_eq!(delivered(&a.handle_inbound(now, &ba, Csum::Complete)), vec![udp(NB, T1, b"yo")]);
        (a, b, now)
    }

    #[test]
    fn a_session_on_a_temporary_nid_keeps_it_across_a_move() {
        let (mut a, mut b, now) = temp_session();
        assert_eq!(a.ilcc.get(&K1).unwrap().local_nid, Some(T1));
        assert_eq!(a.sessions_on(T1), 1);
        assert_eq!(a.sessions_on(NA), 0);
        let out = a.set_local_locators(now, vec![local(LA2)]);
        let lus: Vec<_> = wire(&out).into_iter().filter(|w| src_nid(w) == T1).collect();
        assert_eq!(lus.len(), wire(&out).len(), "every LU comes from T1, none from the stable NID");
        let lu = parse_lu(&lus[0]);
        assert_eq!(split_addr(lu.src), (LA2, T1));
        let acks = wire(&b.handle_inbound(now, &lus[0], Csum::Complete));
        assert_eq!(split_addr(ipv6::Packet::new_checked(&acks[0][..]).unwrap().dst()).1, T1);
        a.handle_inbound(now, &acks[0], Csum::Complete);
        // data after the move: to T1 at the new locator
        let ba = wire(&b.handle_outbound(now, &udp(NB, T1, b"moved"), Csum::Complete)).pop().unwrap();
        assert_eq!(split_addr(ipv6::Packet::new_checked(&ba[..]).unwrap().dst()), (LA2, T1));
        assert_eq!(delivered(&a.handle_inbound(now, &ba, Csum::Complete)), vec![udp(NB, T1, b"moved")]);
    }

    #[test]
    fn a_collision_is_refused_and_counted() {
        let (mut a, _b, _) = temp_session();
        assert_eq!(a.add_temporary_nid(NA), Err(NidRefused::Local));
        assert_eq!(a.add_temporary_nid(T1), Err(NidRefused::Local));
        assert_eq!(a.add_temporary_nid(NB), Err(NidRefused::Correspondent));
        assert_eq!(a.add_temporary_nid(Nid(0)), Err(NidRefused::NotUnicast));
        assert_eq!(a.add_temporary_nid(Nid(0x0100_0000_0000_0001)), Err(NidRefused::NotUnicast), "g bit");
        assert_eq!(a.stats().outcome(Outcome::TempNidRefused), 5);
        assert_eq!(a.add_temporary_nid(T2), Ok(()));
        assert_eq!(a.stats().outcome(Outcome::TempNidAdded), 2);
        assert_eq!(a.temporary_nids().len(), 2);
    }

    #[test]
    fn an_expired_temporary_nid_is_an_unknown_nid() {
        let (mut a, mut b, now) = temp_session();
        a.deprecate_temporary_nid(T1);
        assert!(!a.temporary_nids().get(T1).unwrap().preferred);
        // deprecated: its session goes on
        let ba = wire(&b.handle_outbound(now, &udp(NB, T1, b"still"), Csum::Complete)).pop().unwrap();
        assert_eq!(delivered(&a.handle_inbound(now, &ba, Csum::Complete)).len(), 1);
        let mut out = Vec::new();
        assert_eq!(a.remove_temporary_nid(T1, &mut out), Some(1));
        assert!(out.iter().any(|x| matches!(x, Action::IlccRemove(n) if *n == K1)));
        assert!(a.ilcc.get(&K1).is_none());
        // what a packet to a NID we never had gets
        let out = a.handle_inbound(now, &ba, Csum::Complete);
        assert!(delivered(&out).is_empty());
        assert_eq!(a.stats().dropped(DropReason::NotForUs), 1);
        // and a socket still bound to it sends nothing
        let mut out = a.handle_outbound(now, &udp(T1, NB, b"late"), Csum::Complete);
        assert!(wire(&out).is_empty());
        assert_eq!(a.stats().dropped(DropReason::OutSrcNotOurs), 1);
        assert_eq!(a.remove_temporary_nid(T1, &mut out), None);
    }

    fn nonce_of(w: &[u8]) -> ilnp_wire::Nonce {
        match ilnp_wire::classify(w).expect("ILNPv6") {
            ilnp_wire::Packet::Data(d) | ilnp_wire::Packet::NonceOnly(d) => d.nonce.nonce,
            ilnp_wire::Packet::Lu(lu) => lu.nonce.expect("nonce").nonce,
            p => panic!("{}", p.summary()),
        }
    }

    #[test]
    fn a_correspondent_holds_a_temporary_and_the_stable_nid_at_once() {
        let (mut a, mut b, now) = temp_session();
        // A to B from the stable NID while B's session with T1 lives: a second entry,
        // with a nonce of its own (T1's would join the two NIDs up)
        let ab = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().expect("carried");
        assert_eq!(src_nid(&ab), NA);
        assert_eq!(delivered(&b.handle_inbound(now, &ab, Csum::Complete)), vec![udp(NA, NB, b"x")]);
        let stable = IlccKey::stable(NB);
        let (e1, e0) = (a.ilcc.get(&K1).unwrap(), a.ilcc.get(&stable).unwrap());
        assert_ne!(e1.nonce_tx, e0.nonce_tx, "one nonce per entry");
        assert_eq!(nonce_of(&ab), e0.nonce_tx);
        // B answers each NID, each answer delivered to it
        let ba0 = wire(&b.handle_outbound(now, &udp(NB, NA, b"0"), Csum::Complete)).pop().unwrap();
        let ba1 = wire(&b.handle_outbound(now, &udp(NB, T1, b"1"), Csum::Complete)).pop().unwrap();
        assert_eq!(delivered(&a.handle_inbound(now, &ba0, Csum::Complete)), vec![udp(NB, NA, b"0")]);
        assert_eq!(delivered(&a.handle_inbound(now, &ba1, Csum::Complete)), vec![udp(NB, T1, b"1")]);
        // B's nonce for one NID is refused on the other's (a packet to NA with the
        // nonce B uses towards T1: a bad nonce there, never delivered)
        let mut forged = ba1.clone();
        forged[24..40].copy_from_slice(&ba0[24..40]);
        assert!(delivered(&a.handle_inbound(now, &forged, Csum::Complete)).is_empty());
        assert_eq!(a.stats().dropped(DropReason::BadNonce), 1);
        assert_eq!((a.sessions_on(T1), a.sessions_on(NA), a.ilcc.len()), (1, 1, 2));
        // A moves: one LU per entry, each from its own NID with its own nonce
        let out = a.set_local_locators(now, vec![local(LA2)]);
        let lus = wire(&out);
        let mut from: Vec<Nid> = lus.iter().map(|w| src_nid(w)).collect();
        from.dedup();
        assert_eq!(from.len(), 2, "{from:?}");
        for w in &lus {
            let key = if src_nid(w) == T1 { K1 } else { stable };
            assert_eq!(nonce_of(w), a.ilcc.get(&key).unwrap().nonce_tx, "each LU carries its entry's nonce");
        }
        for w in &lus {
            for ack in wire(&b.handle_inbound(now, w, Csum::Complete)) {
                a.handle_inbound(now, &ack, Csum::Complete);
            }
        }
        for (ours, body) in [(NA, b"m0"), (T1, b"m1")] {
            let w = wire(&b.handle_outbound(now, &udp(NB, ours, body), Csum::Complete)).pop().unwrap();
            assert_eq!(split_addr(ipv6::Packet::new_checked(&w[..]).unwrap().dst()), (LA2, ours));
            assert_eq!(delivered(&a.handle_inbound(now, &w, Csum::Complete)), vec![udp(NB, ours, body)]);
        }
        // T1 going ends only its own session
        let mut out = Vec::new();
        assert_eq!(a.remove_temporary_nid(T1, &mut out), Some(1));
        assert_eq!(out, vec![Action::IlccRemove(K1)]);
        assert!(a.ilcc.get(&stable).is_some());
    }

    #[test]
    fn the_stable_nid_still_serves_incoming_sessions() {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, None);
        a.add_temporary_nid(T1).unwrap();
        let mut b = core(NB, LB, 2, Some((NA, LA)));
        let w = wire(&b.handle_outbound(now, &udp(NB, NA, b"to the name"), Csum::Complete)).pop().unwrap();
        assert_eq!(delivered(&a.handle_inbound(now, &w, Csum::Complete)), vec![udp(NB, NA, b"to the name")]);
        assert_eq!(a.ilcc.get(&IlccKey::stable(NB)).unwrap().local_nid, None);
        let back = wire(&a.handle_outbound(now, &udp(NA, NB, b"r"), Csum::Complete)).pop().unwrap();
        assert_eq!(src_nid(&back), NA);
    }

    #[test]
    fn a_responder_on_a_temporary_nid_answers_from_it() {
        // B knows A only by T1 (a correspondent that learned it from A's packets)
        let now = Instant::now();
        let mut a = core(NA, LA, 1, None);
        a.add_temporary_nid(T1).unwrap();
        let mut b = core(NB, LB, 2, Some((T1, LA)));
        let w = wire(&b.handle_outbound(now, &udp(NB, T1, b"q"), Csum::Complete)).pop().unwrap();
        let out = a.handle_inbound(now, &w, Csum::Complete);
        assert_eq!(delivered(&out).len(), 1);
        for p in wire(&out) {
            assert_eq!(src_nid(&p), T1, "the hello comes from T1");
        }
        assert_eq!(a.ilcc.get(&K1).unwrap().local_nid, Some(T1));
    }

    #[test]
    fn a_restart_keeps_temporary_nids_and_their_sessions() {
        let (a, mut b, now) = temp_session();
        let snap = a.snapshot(now);
        assert_eq!(snap.temporary_nids, vec![(T1.0, true)]);
        assert_eq!(snap.entries[0].local_nid, Some(T1.0));
        let json = serde_json::to_string(&snap).unwrap();
        let back: crate::snapshot::CoreSnapshot = serde_json::from_str(&json).unwrap();
        let mut a2 = core(NA, LA, 9, Some((NB, LB)));
        a2.restore(now, &back).unwrap();
        assert!(a2.is_local_nid(T1));
        assert_eq!(a2.ilcc.get(&K1).unwrap().local_nid, Some(T1));
        let ba = wire(&b.handle_outbound(now, &udp(NB, T1, b"after"), Csum::Complete)).pop().unwrap();
        assert_eq!(delivered(&a2.handle_inbound(now, &ba, Csum::Complete)).len(), 1);
        let ab = wire(&a2.handle_outbound(now, &udp(T1, NB, b"x"), Csum::Complete)).pop().unwrap();
        assert_eq!(src_nid(&ab), T1);
        // a file of an earlier build (no temporary NIDs, no entry NIDs) still reads
        let old = json.replace(&format!(",\"temporary_nids\":[[{},true]]", T1.0), "");
        let old = old.replace(&format!(",\"local_nid\":{}", T1.0), "");
        let back: crate::snapshot::CoreSnapshot = serde_json::from_str(&old).unwrap();
        assert!(back.temporary_nids.is_empty() && back.entries[0].local_nid.is_none());
    }
}
