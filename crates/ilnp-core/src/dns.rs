//! Peers learned from DNS (RFC 6742 NID + L64 records, LP already followed by the
//! shell's resolver proxy): the cache rules.
//!
//! * A DNS peer record lives for its records' TTL (the smallest of the NID and
//!   locator TTLs, at least [`DNS_MIN_HOLD`] so the application that was just handed
//!   the identifier address can still open its session); an expired record creates
//!   no session (the application re-resolves and the proxy teaches us again).
//! * DNS only feeds *new* sessions: an existing ILCC entry keeps the locators it
//!   learned from Locator Updates and packets (RFC 6740 §5: an LU is fresher than
//!   DNS, and nothing learned from DNS may override a nonce-verified LU).
//! * A peer-file record is the operator's word: DNS does not replace it.
//! * A record belongs to the name that taught it (keyed by name and NID): only that
//!   name's answers replace it while it lives or a session uses it. Another name's
//!   answer with the same NID and other locators (a zone owner publishing someone
//!   else's NID) is not stored and its client gets the plain answer, so an
//!   application that resolved a name only ever reaches locators that name's zone
//!   published; the same NID and locators under another name (an alias) refresh it.

use crate::action::Action;
use crate::event::{Event, Outcome};
use crate::ilcc::{PendingLu, RemoteLocator};
use crate::locator::LocatorState;
use crate::machine::Core;
use crate::peers::{PeerInfo, PeerLocator, PeerRecord};
use ilnp_wire::named_enum;
use ilnp_wire::Nid;
use serde::Serialize;
use std::time::{Duration, Instant};

/// A record with a TTL shorter than this (down to 0, RFC 6742 §3.1 for mobile
/// nodes) is still held this long: the answer is already in the application's hands.
pub const DNS_MIN_HOLD: Duration = Duration::from_secs(2);

/// At most this many records learned from DNS are held (a local application, or a
/// page it loads, can make the host resolve any number of names): past it, expired
/// ones are swept, then the one that expires first and has no session makes room;
/// if every one has a session, the answer is not stored (`dns_peer_full`; the
/// application gets the plain answer).
pub const DNS_MAX_RECORDS: usize = 4096;

pub use crate::peers::PeerSource;

/// What one name resolved to, after LP records were followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsPeer {
    pub name: String,
    pub nid: Nid,
    /// non-empty; lower preference preferred
    pub locators: Vec<PeerLocator>,
    /// the smallest TTL among the records used (seconds)
    pub ttl_s: u32,
}

named_enum! {
    #[serde_names]
    /// What `Core::peer_from_dns` did with an answer.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
    pub enum DnsPeerResult {
        /// stored (new, or replacing an earlier DNS record)
        Learned = "learned",
        /// stored for later sessions; the active session keeps its LU-learned locators
        SessionKept = "session_kept",
        /// a peer-file record exists for this NID: left as configured
        StaticKept = "static_kept",
        /// our own NID: nothing to learn
        OwnNid = "own_nid",
        /// no locator: nothing stored
        NoLocator = "no_locator",
        /// `DNS_MAX_RECORDS` held, each with a session: nothing stored
        Full = "full",
        /// the NID is held for another name, with other locators (live or with a
        /// session): nothing stored, the client gets the plain answer
        OtherName = "other_name",
    }
}

impl DnsPeerResult {
    /// The record was stored (and so is in the next state file).
    pub fn stored(self) -> bool {
        matches!(self, DnsPeerResult::Learned | DnsPeerResult::SessionKept)
    }

    /// The client may be given the identifier address: a new session to the NID
    /// goes to locators this answer's name published (or the operator's).
    pub fn identifier_answer(self) -> bool {
        !matches!(self, DnsPeerResult::NoLocator | DnsPeerResult::Full | DnsPeerResult::OtherName)
    }
}

impl Core {
    /// A name resolved to `peer` (the proxy calls this before it answers the
    /// application, so the first packet finds the record).
    pub fn peer_from_dns(&mut self, now: Instant, peer: DnsPeer) -> (DnsPeerResult, Vec<Action>) {
        let result = self.learn_dns(now, &peer);
        if result.stored() {
            self.stats.bump(Outcome::DnsPeerLearned);
        } else {
            self.stats.bump(Outcome::DnsPeerIgnored);
        }
        let locators = peer.locators.iter().map(|l| format!("{}|{}", l.loc, l.pref)).collect();
        let ev =
            Event::DnsPeer { name: peer.name, nid: peer.nid, locators, ttl_s: peer.ttl_s, result: result.as_str() };
        (result, vec![Action::Event(ev)])
    }

    fn learn_dns(&mut self, now: Instant, peer: &DnsPeer) -> DnsPeerResult {
        if peer.nid == self.cfg.local_nid {
            return DnsPeerResult::OwnNid;
        }
        if peer.locators.is_empty() {
            return DnsPeerResult::NoLocator;
        }
        let old = self.peers.get(&peer.nid);
        if old.is_some_and(|p| p.source == PeerSource::Static) {
            return DnsPeerResult::StaticKept;
        }
        let mut locators = peer.locators.clone();
        locators.sort_by_key(|l| l.pref);
        locators.dedup_by_key(|l| l.loc);
        let hold = Duration::from_secs(peer.ttl_s.into()).max(DNS_MIN_HOLD);
        let mut name = peer.name.clone();
        let mut expires = now + hold;
        if let Some(p) = old.filter(|p| p.record.name != peer.name) {
            let held = p.expires.is_some_and(|t| t > now) || self.ilcc.knows(peer.nid);
            let same = |l: &[PeerLocator]| {
                let mut v: Vec<_> = l.iter().map(|l| l.loc).collect();
                v.sort();
                v
            };
            if held && same(&p.record.locators) != same(&locators) {
                self.stats.bump(Outcome::DnsPeerOtherName);
                return DnsPeerResult::OtherName;
            }
            if held {
                // an alias: the record keeps the name that taught it
                name = p.record.name.clone();
                expires = expires.max(p.expires.unwrap_or(expires));
            }
        }
        if old.is_none() && !self.make_room_for_dns(now) {
            self.stats.bump(Outcome::DnsPeerFull);
            return DnsPeerResult::Full;
        }
        let old = self.peers.get(&peer.nid);
        let non_ilnp = old.is_some_and(|p| p.non_ilnp);
        let lu_failed = old.is_some_and(|p| p.lu_failed);
        let record = PeerRecord { name, nid: peer.nid, locators };
        self.peers.insert(
            peer.nid,
            PeerInfo {
                record,
                non_ilnp,
                source: PeerSource::Dns,
                expires: Some(expires),
                ttl_s: Some(peer.ttl_s),
                lu_failed,
            },
        );
        if self.ilcc.knows(peer.nid) {
            DnsPeerResult::SessionKept
        } else {
            DnsPeerResult::Learned
        }
    }

    /// Recovery when both ends moved (thesis §7.2.2): the shell re-resolved the name
    /// of a peer whose Locator Update went unacknowledged at every known locator.
    /// Only then — our last LU failed, none is in flight and no nonce-verified LU came
    /// from the peer since (so never over an LU's locators) — an LU is sent at once to
    /// the re-resolved locators (it carries our nonce: the peer checks it as usual).
    /// The session keeps its locators until that LU's ack comes back with the peer's
    /// own nonce from one of them (`Core::handle_lu`): a DNS answer is not proof
    /// (a zone owner, a spoofed answer), the peer's nonce is.
    /// Returns Some(true): an LU is on its way there; Some(false): DNS still lists the
    /// locators the session already has (the peer's own update may not be in yet: ask
    /// again later); None: nothing to recover.
    pub fn recover_from_dns(&mut self, now: Instant, peer: DnsPeer) -> (Option<bool>, Vec<Action>) {
        let (_, mut out) = self.peer_from_dns(now, peer.clone());
        if !self.peers.get(&peer.nid).is_some_and(|p| p.lu_failed) {
            return (None, out);
        }
        // each of the peer's entries (one per NID of ours it talks to) on its own
        let (mut stale, mut due) = (false, Vec::new());
        for key in self.ilcc.keys_of(peer.nid) {
            let Some(e) = self.ilcc.get_mut(&key) else { continue };
            if e.pending_lu.is_some() || peer.locators.is_empty() {
                continue;
            }
            let known: Vec<_> = e.remote_locators.iter().map(|r| r.loc).collect();
            if peer.locators.iter().all(|l| known.contains(&l.loc)) {
                stale = true;
                continue;
            }
            let mut candidates: Vec<RemoteLocator> =
                peer.locators.iter().map(|l| RemoteLocator::new(l.loc, l.pref, LocatorState::Valid, None)).collect();
            candidates.sort_by_key(|r| r.pref);
            candidates.truncate(self.cfg.max_remote_locators.max(1));
            e.pending_lu = Some(PendingLu { candidates, ..PendingLu::due_now(now) });
            due.push(key);
        }
        if due.is_empty() {
            return (stale.then_some(false), out);
        }
        if let Some(p) = self.peers.get_mut(&peer.nid) {
            p.lu_failed = false;
        }
        self.stats.bump(Outcome::DnsRecoveryLuSent);
        out.extend(self.send_due_lus(now, &due));
        self.ilcc.tidy();
        self.finish(&mut out);
        (Some(true), out)
    }

    /// Room for one more DNS record (`DNS_MAX_RECORDS`): expired ones are swept, then
    /// the one that expires first without a session goes. False: every one has a
    /// session.
    fn make_room_for_dns(&mut self, now: Instant) -> bool {
        let held = |peers: &std::collections::BTreeMap<Nid, PeerInfo>| {
            peers.values().filter(|p| p.source == PeerSource::Dns).count()
        };
        if held(&self.peers) < DNS_MAX_RECORDS {
            return true;
        }
        let before = self.peers.len();
        let ilcc = &self.ilcc;
        self.peers.retain(|nid, p| {
            let expired = p.expires.is_some_and(|t| t <= now);
            p.source != PeerSource::Dns || !expired || ilcc.knows(*nid)
        });
        self.stats.add(Outcome::DnsPeerExpired, (before - self.peers.len()) as u64);
        if held(&self.peers) < DNS_MAX_RECORDS {
            return true;
        }
        let victim = self
            .peers
            .iter()
            .filter(|(nid, p)| p.source == PeerSource::Dns && !self.ilcc.knows(**nid))
            .min_by_key(|(_, p)| p.expires)
            .map(|(nid, _)| *nid);
        match victim {
            Some(nid) => {
                self.peers.remove(&nid);
                self.stats.bump(Outcome::DnsPeerEvicted);
                true
            }
            None => false,
        }
    }

    /// The name of a peer learned from DNS (what the shell re-resolves).
    pub fn dns_name(&self, nid: Nid) -> Option<&str> {
        self.peers.get(&nid).filter(|p| p.source == PeerSource::Dns).map(|p| p.record.name.as_str())
    }

    /// The record a new session to `nid` may use: an expired DNS record is removed
    /// (counted `dns_peer_expired`) and does not count.
    pub(crate) fn live_peer(&mut self, now: Instant, nid: Nid) -> Option<&PeerInfo> {
        if self.peers.get(&nid).is_some_and(|p| p.expires.is_some_and(|t| t <= now)) {
            self.peers.remove(&nid);
            self.stats.bump(Outcome::DnsPeerExpired);
            return None;
        }
        self.peers.get(&nid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DropReason;
    use crate::ilcc::IlccKey;
    use crate::tests::{core, delivered, parse_lu, udp, wire, LA, LB, LB2, NA, NB};
    use ilnp_wire::translate::{self, Csum};
    use ilnp_wire::{ilnp_addr, ipv6, split_addr, Locator, Nonce};

    fn dns(nid: Nid, loc: Locator, ttl_s: u32) -> DnsPeer {
        DnsPeer { name: "mn.lab.example".into(), nid, locators: vec![PeerLocator { loc, pref: 10 }], ttl_s }
    }

    fn dst_locator(pkt: &[u8]) -> Locator {
        split_addr(ipv6::Packet::new_checked(pkt).unwrap().dst()).0
    }

    #[test]
    fn a_dns_peer_starts_a_session_until_its_ttl_runs_out() {
        let mut a = core(NA, LA, 1, None);
        let t0 = Instant::now();
        let (r, out) = a.peer_from_dns(t0, dns(NB, LB, 30));
        assert_eq!(r, DnsPeerResult::Learned);
        assert!(matches!(&out[0], Action::Event(Event::DnsPeer { result: "learned", ttl_s: 30, .. })));
        let p = a.peers().next().unwrap();
        assert_eq!((p.source, p.ttl_s), (PeerSource::Dns, Some(30)));
        let out = a.handle_outbound(t0 + Duration::from_secs(29), &udp(NA, NB, b"x"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB);
        // past the TTL: no new session from the stale record
        a.flush_ilcc();
        let out = a.handle_outbound(t0 + Duration::from_secs(31), &udp(NA, NB, b"x"), Csum::Complete);
        assert!(wire(&out).is_empty());
        assert_eq!(delivered(&out).len(), 1, "the application hears at once");
        assert_eq!(a.stats().dropped(DropReason::UnknownPeer), 1);
        assert_eq!(a.stats().get("dns_peer_expired"), 1);
        assert_eq!(a.peers().count(), 0);
    }

    #[test]
    fn a_restarted_core_keeps_the_dns_records_with_what_is_left_of_their_ttl() {
        let mut a = core(NA, LA, 1, None);
        let t0 = Instant::now();
        a.peer_from_dns(t0, dns(NB, LB, 30));
        let snap = a.snapshot(t0 + Duration::from_secs(10));
        let back: crate::snapshot::CoreSnapshot = serde_json::from_str(&serde_json::to_string(&snap).unwrap()).unwrap();
        assert_eq!(back, snap);
        // the restart, any time later: the time down does not count
        let t1 = t0 + Duration::from_secs(100);
        let mut r = core(NA, LA, 2, None);
        r.restore(t1, &back).unwrap();
        assert_eq!(r.dns_name(NB), Some("mn.lab.example"));
        let p = r.peers().next().unwrap();
        assert_eq!((p.source, p.ttl_s), (PeerSource::Dns, Some(30)));
        // 20 s of the TTL were left: a new session within them, none after
        let out = r.handle_outbound(t1 + Duration::from_secs(19), &udp(NA, NB, b"x"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB);
        r.flush_ilcc();
        let out = r.handle_outbound(t1 + Duration::from_secs(21), &udp(NA, NB, b"x"), Csum::Complete);
        assert!(wire(&out).is_empty());
        assert_eq!(r.stats().get("dns_peer_expired"), 1);
        // a peer-file record for the NID now: the operator's word wins
        let mut s = core(NA, LA, 3, Some((NB, LB2)));
        s.restore(t1, &back).unwrap();
        let p = s.peers().next().unwrap();
        assert_eq!((p.source, p.record.locators[0].loc), (PeerSource::Static, LB2));
    }

    #[test]
    fn a_zero_ttl_is_held_for_the_first_use() {
        let mut a = core(NA, LA, 1, None);
        let t0 = Instant::now();
        a.peer_from_dns(t0, dns(NB, LB, 0));
        let out = a.handle_outbound(t0 + Duration::from_millis(500), &udp(NA, NB, b"x"), Csum::Complete);
        assert_eq!(wire(&out).len(), 1);
    }

    #[test]
    fn dns_does_not_touch_an_active_session() {
        let mut a = core(NA, LA, 1, None);
        let t0 = Instant::now();
        a.peer_from_dns(t0, dns(NB, LB, 30));
        a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete);
        // the name now points elsewhere (e.g. a stale secondary): the session keeps LB
        let (r, _) = a.peer_from_dns(t0, dns(NB, LB2, 30));
        assert_eq!(r, DnsPeerResult::SessionKept);
        let out = a.handle_outbound(t0, &udp(NA, NB, b"y"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB);
        let e = a.ilcc.iter().next().unwrap();
        assert!(e.has_remote(LB) && !e.has_remote(LB2));
        // a later session uses the new record
        a.flush_ilcc();
        let out = a.handle_outbound(t0, &udp(NA, NB, b"z"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB2);
    }

    #[test]
    fn a_record_belongs_to_the_name_that_taught_it() {
        let mut a = core(NA, LA, 1, None);
        let t0 = Instant::now();
        let named = |name: &str, loc: Locator, ttl_s: u32| DnsPeer { name: name.into(), ..dns(NB, loc, ttl_s) };
        assert_eq!(a.peer_from_dns(t0, named("bank.example", LB, 30)).0, DnsPeerResult::Learned);
        // another zone publishes the same NID at its own locator: not stored, plain answer
        let (r, out) = a.peer_from_dns(t0, named("evil.example", LB2, 3600));
        assert_eq!(r, DnsPeerResult::OtherName);
        assert!(!r.identifier_answer() && !r.stored());
        assert!(matches!(&out[0], Action::Event(Event::DnsPeer { result: "other_name", .. })));
        assert_eq!(a.stats().get("dns_peer_other_name"), 1);
        assert_eq!(a.dns_name(NB), Some("bank.example"));
        let out = a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB, "a new session goes where the first name said");
        // an alias with the same locators is one record, still the first name's
        let (r, _) = a.peer_from_dns(t0, named("www.bank.example", LB, 60));
        assert!(r.identifier_answer() && r.stored());
        assert_eq!(a.dns_name(NB), Some("bank.example"));
        assert_eq!(a.peers().count(), 1);
        // past the TTL, but the session still uses the record: still held
        let t1 = t0 + Duration::from_secs(61);
        assert_eq!(a.peer_from_dns(t1, named("evil.example", LB2, 3600)).0, DnsPeerResult::OtherName);
        // the first name's own answer moves its record (for later sessions)
        assert_eq!(a.peer_from_dns(t1, named("bank.example", LB2, 30)).0, DnsPeerResult::SessionKept);
        // no session and expired: the NID is free for another name
        a.flush_ilcc();
        let t2 = t1 + Duration::from_secs(31);
        assert_eq!(a.peer_from_dns(t2, named("other.example", LB, 30)).0, DnsPeerResult::Learned);
        assert_eq!(a.dns_name(NB), Some("other.example"));
    }

    #[test]
    fn a_static_peer_and_our_own_nid_are_not_replaced() {
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let (r, _) = a.peer_from_dns(Instant::now(), dns(NB, LB2, 30));
        assert_eq!(r, DnsPeerResult::StaticKept);
        assert_eq!(a.peers().next().unwrap().record.locators[0].loc, LB);
        assert_eq!(a.peers().next().unwrap().source, PeerSource::Static);
        let (r, _) = a.peer_from_dns(Instant::now(), dns(NA, LB2, 30));
        assert_eq!(r, DnsPeerResult::OwnNid);
        let (r, _) =
            a.peer_from_dns(Instant::now(), DnsPeer { name: "x".into(), nid: NB, locators: vec![], ttl_s: 30 });
        assert_eq!(r, DnsPeerResult::NoLocator);
        assert_eq!(a.peers().count(), 1);
        assert_eq!(a.stats().get("dns_peer_ignored"), 3);
        assert_eq!(a.stats().get("dns_peer_learned"), 0);
    }

    #[test]
    fn re_resolution_retargets_a_session_only_after_a_failed_lu() {
        let mut a = core(NA, LA, 1, None);
        let t0 = Instant::now();
        a.peer_from_dns(t0, dns(NB, LB, 30));
        let first = wire(&a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
        // the peer answers once (its hello): its nonce is known
        let mut b = core(NB, LB, 2, None);
        let hello = wire(&b.handle_inbound(t0, &first, Csum::Complete)).pop().unwrap();
        a.handle_inbound(t0, &hello, Csum::Complete);
        assert_eq!(a.dns_name(NB), Some("mn.lab.example"));
        // no failed LU: DNS leaves the session alone
        assert_eq!(a.recover_from_dns(t0, dns(NB, LB2, 30)).0, None);
        // we move; the peer never acks (it moved too)
        let mut lb3 = crate::tests::local(Locator(0x2001_0db8_00a2_0000));
        lb3.ifindex = 3;
        a.set_local_locators(t0, vec![lb3]);
        let mut t = t0;
        for _ in 0..20 {
            t += Duration::from_secs(5);
            a.handle_timeout(t);
        }
        assert_eq!(a.stats().get("lu_failed"), 1);
        // DNS still lists the old locator: ask again later
        assert_eq!(a.recover_from_dns(t, dns(NB, LB, 30)).0, Some(false));
        let (done, out) = a.recover_from_dns(t, dns(NB, LB2, 30));
        assert_eq!(done, Some(true));
        // an LU leaves at once towards the new locator
        let lus: Vec<_> = wire(&out).into_iter().filter(|p| dst_locator(p) == LB2).collect();
        assert_eq!(lus.len(), 1, "LU to the re-resolved locator");
        assert_eq!(a.stats().get("dns_recovery_lu_sent"), 1);
        // while that LU is in flight, DNS does not touch the session again
        assert_eq!(a.recover_from_dns(t, dns(NB, LB, 30)).0, None);
        // ... and the session stays where it was: a DNS answer is not proof (issue #42)
        assert!(!out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.remote_loc == LB2)));
        let out = a.handle_outbound(t, &udp(NA, NB, b"y"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB);
        assert_eq!(a.stats().get("dns_peer_recovered"), 0);
        let e = a.ilcc.get(&IlccKey::stable(NB)).unwrap();
        let (nb, na) = (e.nonce_rx.expect("the peer's nonce"), e.nonce_tx);
        let lu = parse_lu(&lus[0]).lu;
        let ours = a.local.best().unwrap();
        let ack = |from: Locator, n: &Nonce| {
            translate::lu_packet(ilnp_addr(from, NB), ilnp_addr(ours, NA), n, &lu.ack()).unwrap()
        };
        // an ack from the new locator with a wrong nonce, or ours: nothing moves
        let guessed = Nonce::N32([1, 2, 3, 4]);
        assert_ne!(Some(guessed), e.nonce_rx);
        a.handle_inbound(t, &ack(LB2, &guessed), Csum::Complete);
        a.handle_inbound(t, &ack(LB2, &na), Csum::Complete);
        assert_eq!(a.stats().get("dns_peer_recovered"), 0);
        assert_eq!(a.ilcc.get(&IlccKey::stable(NB)).unwrap().best_remote().unwrap().loc, LB);
        // the peer's own nonce, from the re-resolved locator: the session moves there
        let out = a.handle_inbound(t, &ack(LB2, &nb), Csum::Complete);
        assert_eq!(a.stats().get("dns_peer_recovered"), 1, "{:?}", a.stats());
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.remote_loc == LB2)));
        let out = a.handle_outbound(t, &udp(NA, NB, b"z"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB2);
    }

    #[test]
    fn dns_records_are_capped_expired_first_then_the_soonest_without_a_session() {
        let mut a = core(NA, LA, 1, None);
        let t0 = Instant::now();
        let nid = |i: usize| Nid(0x0200_00ff_fe10_0000 + i as u64);
        // one record with a session, the rest without; the first half expires early
        a.peer_from_dns(t0, dns(nid(0), LB, 3600));
        a.handle_outbound(t0, &udp(NA, nid(0), b"x"), Csum::Complete);
        for i in 1..DNS_MAX_RECORDS {
            let ttl = if i < DNS_MAX_RECORDS / 2 { 10 } else { 3600 };
            assert_eq!(a.peer_from_dns(t0, dns(nid(i), LB, ttl)).0, DnsPeerResult::Learned);
        }
        assert_eq!(a.peers().count(), DNS_MAX_RECORDS);
        // full, nothing expired: the soonest to expire without a session goes
        let (r, _) = a.peer_from_dns(t0, dns(nid(DNS_MAX_RECORDS), LB, 3600));
        assert_eq!(r, DnsPeerResult::Learned);
        assert_eq!(a.peers().count(), DNS_MAX_RECORDS);
        assert_eq!(a.stats().get("dns_peer_evicted"), 1);
        // later: the expired half is swept at once
        let t = t0 + Duration::from_secs(11);
        a.peer_from_dns(t, dns(nid(DNS_MAX_RECORDS + 1), LB, 3600));
        assert!(a.peers().count() <= DNS_MAX_RECORDS / 2 + 3, "{}", a.peers().count());
        assert!(a.stats().get("dns_peer_expired") >= (DNS_MAX_RECORDS / 2 - 2) as u64);
        // the record with a session is never the one that goes
        assert!(a.peers().any(|p| p.record.nid == nid(0)));
    }

    #[test]
    fn locators_are_ordered_by_preference() {
        let mut a = core(NA, LA, 1, None);
        let p = DnsPeer {
            name: "mn".into(),
            nid: NB,
            locators: vec![PeerLocator { loc: LB2, pref: 20 }, PeerLocator { loc: LB, pref: 5 }],
            ttl_s: 60,
        };
        a.peer_from_dns(Instant::now(), p);
        let out = a.handle_outbound(Instant::now(), &udp(NA, NB, b"x"), Csum::Complete);
        assert_eq!(dst_locator(&wire(&out)[0]), LB);
    }
}
