//! The v4 path (issue #26, docs/architecture.md § IPv4 and NAT): ILNPv6 packets
//! carried in UDP over IPv4, for hosts on IPv4-only or NATed networks.
//!
//! A v4 path is a locator like any other (`0004:ADDR:PORT`, `ilnp_wire::v4path`), so
//! the ILCC, LUs, preferences and the nonce rules are unchanged. What is new here:
//!
//! * **Which packets take it.** Every packet the core sends to a v4-path locator
//!   leaves as `Action::SendV4` (one pass over the actions at each entry point's
//!   exit, `v4_route`), to the address the locator names, or to the path observed
//!   behind a NAT.
//! * **NAT.** A correspondent behind a NAT advertises its private address; its
//!   datagrams arrive from the NAT's. The first verified packet on a v4 path whose
//!   outer source differs from what the locator names records that source
//!   (`RemoteLocator::via`, `v4_nat_detected`): replies go there.
//! * **Rebinding without a hijack.** A verified packet from yet another outer
//!   source (the NAT changed its mapping, or an on-path attacker who saw the nonce
//!   replays from its own address) does not move the path: an Echo Request with 96
//!   random bits goes to the new source inside the v4 path, and only its Echo Reply,
//!   from that source and with the correspondent's nonce, moves it (RFC 9000 §8.2's
//!   path validation). A second Echo Request goes over the *old* path: answered
//!   from the old address, the correspondent is still there and the candidate is
//!   refused (what an attacker that once saw the nonce replays from its own address
//!   cannot get past); answered from the candidate, or not at all within a few
//!   round trips (the old mapping is gone, as in a real rebinding), the candidate's
//!   own answer suffices. Validations have their own limits (`Validations`), apart
//!   from the peer-restart challenges', so forgeries, which open those, never hold
//!   a validation back. Until then the packets are delivered (their nonce is right)
//!   and replies keep the old path.
//! * **Keepalives.** A session whose source locator is a v4 path sends a nonce-only
//!   packet (RFC 6741 §13.1) after `v4_keepalive` without traffic, so the NAT keeps
//!   its mapping (many expire UDP mappings after 30 s).

use crate::admission::TokenBucket;
use ilnp_wire::{Locator, Nid};
use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

/// A path challenge is answered within this long (one NAT'd round trip, generously).
pub const V4_CHALLENGE_TIMEOUT: Duration = Duration::from_secs(1);
/// Echo payload marker (tells a path challenge apart in a capture).
pub(crate) const ECHO_MARK: &[u8] = b"ilnp-v4-path-challenge:";
/// ... and of its confirmation over the old path.
const OLD_PATH_MARK: &[u8] = b"ilnp-v4-path-old-path:";
/// Validations open at once, over all peers, and per peer (a replay from several
/// ports cannot displace a real rebinding's: a peer's slots only fill, never evict).
pub const V4_VALIDATION_MAX_OPEN: usize = 64;
pub const V4_VALIDATION_PER_PEER: usize = 4;
/// The validations' own budget (challenges per second, burst), apart from the
/// peer-restart challenges' (challenge.rs): forged packets open those, never these.
pub const V4_VALIDATION_RATE: f64 = 10.0;
pub const V4_VALIDATION_BURST: u32 = 20;
/// A candidate refused or unanswered is not challenged again for this long (per
/// peer and candidate address: another candidate is not held back).
pub const V4_CANDIDATE_HOLDOFF: Duration = Duration::from_secs(1);
/// Hold-offs kept at most (the oldest go first).
const V4_HOLDOFF_MAX: usize = 1024;
/// How long the old path's answer is awaited once the candidate answered: a few of
/// the session's round trips, within these bounds (no RTT known: the upper one).
pub(crate) const OLD_PATH_WAIT_MIN: Duration = Duration::from_millis(30);
pub(crate) const OLD_PATH_WAIT_MAX: Duration = Duration::from_millis(300);

#[derive(Debug, Clone)]
pub(crate) struct PathChallenge {
    pub(crate) loc: Locator,
    pub(crate) candidate: SocketAddrV4,
    pub(crate) echo_word: u32,
    pub(crate) echo_body: Vec<u8>,
    /// the path validated so far, where the confirmation went (None: none)
    pub(crate) old: Option<SocketAddrV4>,
    pub(crate) old_word: u32,
    pub(crate) old_body: Vec<u8>,
    /// the candidate answered its echo
    pub(crate) candidate_ok: bool,
    /// the old path's echo came back from the candidate: the peer moved there
    pub(crate) old_confirmed: bool,
    /// decided then if the old path stays silent (set when the candidate answers)
    pub(crate) decide_at: Option<Instant>,
    pub(crate) deadline: Instant,
    pub(crate) old_wait: Duration,
}

/// The rebinding validations' own limits.
#[derive(Debug)]
pub(crate) struct Validations {
    pub(crate) bucket: TokenBucket,
    pub(crate) holdoff: HashMap<(Nid, SocketAddrV4), Instant>,
}

impl Default for Validations {
    fn default() -> Self {
        Validations { bucket: TokenBucket::new(V4_VALIDATION_RATE, V4_VALIDATION_BURST), holdoff: HashMap::new() }
    }
}

/// The v4 path's own state: open path challenges and the keepalive timer.
#[derive(Debug, Default)]
pub(crate) struct V4Paths {
    pub(crate) open: HashMap<Nid, Vec<PathChallenge>>,
    pub(crate) limits: Validations,
    pub(crate) keepalive_at: Option<Instant>,
    /// our usable v4-path locators at the last local change (a new one is warmed up)
    pub(crate) locals: Vec<Locator>,
    /// the outer IPv4 source of the datagram being handled (`handle_inbound_v4`)
    pub(crate) rx_via: Option<SocketAddrV4>,
}

impl V4Paths {
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.open
            .values()
            .flatten()
            .map(|c| c.decide_at.unwrap_or(c.deadline).min(c.deadline))
            .chain(self.keepalive_at)
            .min()
    }

    pub(crate) fn open_count(&self) -> usize {
        self.open.values().map(Vec::len).sum()
    }

    pub(crate) fn hold_off(&mut self, now: Instant, nid: Nid, candidate: SocketAddrV4) {
        let h = &mut self.limits.holdoff;
        h.retain(|_, until| *until > now);
        if h.len() >= V4_HOLDOFF_MAX {
            if let Some(k) = h.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k) {
                h.remove(&k);
            }
        }
        h.insert((nid, candidate), now + V4_CANDIDATE_HOLDOFF);
    }
}

pub(crate) fn echo_body_old(rng: &mut dyn rand_core::RngCore) -> Vec<u8> {
    echo_body(rng, OLD_PATH_MARK)
}

pub(crate) fn echo_body(rng: &mut dyn rand_core::RngCore, mark: &[u8]) -> Vec<u8> {
    let mut body = mark.to_vec();
    let mut rnd = [0u8; 8];
    rng.fill_bytes(&mut rnd);
    body.extend_from_slice(&rnd);
    body
}

#[cfg(test)]
mod tests {
    use crate::action::Action;
    use crate::event::{Event, Outcome};
    use crate::locator::{LocalLocator, LocatorState};
    use crate::machine::Core;
    use crate::tests::{core, NA, NB};
    use ilnp_wire::icmpv6::{LocatorUpdate, LuEntry, LuOperation};
    use ilnp_wire::translate::{self, Csum};
    use ilnp_wire::{ilnp_addr, Locator, Nid, Nonce};
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::time::{Duration, Instant};

    fn v4(a: [u8; 4], port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from(a), port)
    }
    fn v4loc(a: [u8; 4]) -> Locator {
        Locator::v4_path(Ipv4Addr::from(a), 6740)
    }
    fn loc(l: Locator, pref: u16) -> LocalLocator {
        LocalLocator {
            loc: l,
            ifindex: 2,
            pref,
            lifetime_s: u32::MAX,
            state: LocatorState::Active,
            has_router: true,
            deprecated: false,
        }
    }
    /// the datagrams a core sends: (to, wire packet)
    fn sent(out: &[Action]) -> Vec<(SocketAddrV4, Vec<u8>)> {
        out.iter()
            .filter_map(|a| match a {
                Action::SendV4 { pkt, to } => Some((*to, pkt.clone())),
                _ => None,
            })
            .collect()
    }

    /// A (behind a NAT: private 10.0.0.2, seen as 198.51.100.1:40000) and B (public
    /// 192.0.2.1) with a session over v4 paths; returns both and B's first answer.
    fn nat_pair() -> (Core, Core, Instant) {
        let (la, lb) = (v4loc([10, 0, 0, 2]), v4loc([192, 0, 2, 1]));
        let mut a = core(NA, la, 1, Some((NB, lb)));
        let mut b = core(NB, lb, 1, None);
        let t = Instant::now();
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"hi"), Csum::Complete);
        let (to, pkt) = sent(&out).pop().expect("A sends over UDP/IPv4");
        assert_eq!(to, v4([192, 0, 2, 1], 6740));
        let out = b.handle_inbound_v4(t, &pkt, Csum::Complete, v4([198, 51, 100, 1], 40000));
        assert_eq!(b.stats().get("v4_nat_detected"), 1);
        // the fast path is told where the peer's datagrams come from and go to
        let upsert = out.iter().rev().find_map(|x| if let Action::IlccUpsert(s) = x { Some(s.clone()) } else { None });
        assert_eq!(upsert.and_then(|s| s.remote_v4), Some(v4([198, 51, 100, 1], 40000)), "{out:?}");
        // B's hello goes to the NAT's address, not to the private one A advertised
        assert!(sent(&out).iter().all(|(to, _)| *to == v4([198, 51, 100, 1], 40000)), "{out:?}");
        assert!(!sent(&out).is_empty());
        for (_, p) in sent(&out) {
            a.handle_inbound_v4(t, &p, Csum::Complete, v4([192, 0, 2, 1], 6740));
        }
        (a, b, t)
    }

    /// The upserts' `remote_v4`, in order.
    fn fast_v4(out: &[Action]) -> Vec<Option<SocketAddrV4>> {
        out.iter().filter_map(|x| if let Action::IlccUpsert(s) = x { Some(s.remote_v4) } else { None }).collect()
    }

    #[test]
    fn a_replay_cannot_define_a_path_without_a_nat() {
        // A (192.0.2.2) and B (192.0.2.1), both public: no NAT on either path
        let (a4, b4) = (v4([192, 0, 2, 2], 6740), v4([192, 0, 2, 1], 6740));
        let (la, lb) = (v4loc([192, 0, 2, 2]), v4loc([192, 0, 2, 1]));
        let mut a = core(NA, la, 1, Some((NB, lb)));
        let mut b = core(NB, lb, 1, None);
        let t = Instant::now();
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"hi"), Csum::Complete);
        // not heard from yet: the fast path does not carry the path
        assert!(fast_v4(&out).iter().all(Option::is_none), "{out:?}");
        let (_, seen) = sent(&out).pop().expect("A sends over UDP/IPv4");
        let out = b.handle_inbound_v4(t, &seen, Csum::Complete, a4);
        assert_eq!(fast_v4(&out).last(), Some(&Some(a4)), "heard from its own address: {out:?}");
        for (_, p) in sent(&out) {
            let back = a.handle_inbound_v4(t, &p, Csum::Complete, b4);
            assert_eq!(fast_v4(&back).last(), Some(&Some(b4)), "{back:?}");
        }
        // an attacker that saw A's datagram replays it from its own address: that is a
        // rebinding to validate, not the path's first datagram (no NAT detected)
        let x = v4([203, 0, 113, 5], 5555);
        let out = b.handle_inbound_v4(t, &seen, Csum::Complete, x);
        assert_eq!(b.stats().get("v4_nat_detected"), 0);
        assert_eq!(b.stats().get("v4_path_unvalidated_rx"), 1);
        assert!(fast_v4(&out).is_empty(), "{out:?}");
        let tos: Vec<_> = sent(&out).into_iter().map(|(to, _)| to).collect();
        assert_eq!(tos, vec![x, a4], "challenge to the candidate, confirmation over the old path");
        // a restarted B knows the path was heard: the same after a restore
        let snap = b.snapshot(t);
        let back: crate::snapshot::CoreSnapshot = serde_json::from_str(&serde_json::to_string(&snap).unwrap()).unwrap();
        let mut r = core(NB, lb, 2, None);
        let out = r.restore(t, &back).unwrap();
        assert_eq!(fast_v4(&out).last(), Some(&Some(a4)), "{out:?}");
        r.handle_inbound_v4(t, &seen, Csum::Complete, v4([203, 0, 113, 5], 5556));
        assert_eq!(r.stats().get("v4_nat_detected"), 0);
        assert_eq!(r.ilcc.get(&NA).unwrap().remote_locators[0].via, None);
    }

    #[test]
    fn nat_detected_and_replies_follow_the_observed_path() {
        let (mut a, mut b, t) = nat_pair();
        assert_eq!(a.stats().get("v4_nat_detected"), 0, "B is not behind a NAT");
        let out = b.handle_outbound(t, &crate::tests::udp(NB, NA, b"back"), Csum::Complete);
        assert_eq!(sent(&out).len(), 1);
        assert_eq!(sent(&out)[0].0, v4([198, 51, 100, 1], 40000));
        let got = a.handle_inbound_v4(t, &sent(&out)[0].1, Csum::Complete, v4([192, 0, 2, 1], 6740));
        assert!(got.iter().any(|x| matches!(x, Action::DeliverLocal(_))));
    }

    #[test]
    fn a_rebinding_moves_the_path_only_after_the_challenge_comes_back() {
        let (mut a, mut b, t) = nat_pair();
        let new = v4([198, 51, 100, 1], 41000);
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"after rebinding"), Csum::Complete);
        let (_, pkt) = sent(&out).pop().unwrap();
        let out = b.handle_inbound_v4(t, &pkt, Csum::Complete, new);
        // delivered (its nonce is right), but the path is challenged, not moved
        assert!(out.iter().any(|x| matches!(x, Action::DeliverLocal(_))));
        assert_eq!(b.stats().get("v4_path_challenge_sent"), 1);
        let challenge = sent(&out);
        assert_eq!(challenge.len(), 2, "one to the candidate, one over the old path: {challenge:?}");
        assert_eq!(challenge[0].0, new, "the challenge goes to the new address");
        assert_eq!(challenge[1].0, v4([198, 51, 100, 1], 40000), "its confirmation over the old path");
        let reply = b.handle_outbound(t, &crate::tests::udp(NB, NA, b"x"), Csum::Complete);
        assert_eq!(sent(&reply)[0].0, v4([198, 51, 100, 1], 40000), "replies keep the old path meanwhile");
        // A's stack answers the echo (identifier form), A sends the reply over the new mapping
        let echo = a.handle_inbound_v4(t, &challenge[0].1, Csum::Complete, v4([192, 0, 2, 1], 6740));
        let req =
            echo.iter().find_map(|x| if let Action::DeliverLocal(p) = x { Some(p.clone()) } else { None }).unwrap();
        let reply_ident = crate::tests::echo_reply_for(&req);
        let out = a.handle_outbound(t, &reply_ident, Csum::Complete);
        let (_, p) = sent(&out).pop().unwrap();
        // from the old address the answer does not count
        let fake = b.handle_inbound_v4(t, &p, Csum::Complete, v4([198, 51, 100, 1], 40000));
        assert_eq!(b.stats().get("v4_path_rebound"), 0, "{fake:?}");
        let out = b.handle_inbound_v4(t, &p, Csum::Complete, new);
        assert!(!out.iter().any(|x| matches!(x, Action::DeliverLocal(_))), "the answer is ours, not the stack's");
        // the old mapping is gone: its confirmation never comes back; a few RTTs later
        // the candidate's answer suffices
        assert_eq!(b.stats().get("v4_path_rebound"), 0);
        let due = b.poll_timeout().unwrap();
        assert!(due <= t + super::OLD_PATH_WAIT_MAX, "{due:?}");
        let out = b.handle_timeout(due);
        assert_eq!(b.stats().get("v4_path_rebound"), 1);
        assert_eq!(b.stats().get("v4_path_old_path_silent"), 1);
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.remote_v4 == Some(new))), "{out:?}");
        let reply = b.handle_outbound(t, &crate::tests::udp(NB, NA, b"x"), Csum::Complete);
        assert_eq!(sent(&reply)[0].0, new, "replies follow the validated path");
    }

    /// A's stack answers an Echo Request B sent it; the reply as A sends it (wire).
    fn answer_echo(a: &mut Core, t: Instant, req_wire: &[u8]) -> Vec<u8> {
        let echo = a.handle_inbound_v4(t, req_wire, Csum::Complete, v4([192, 0, 2, 1], 6740));
        let req =
            echo.iter().find_map(|x| if let Action::DeliverLocal(p) = x { Some(p.clone()) } else { None }).unwrap();
        let out = a.handle_outbound(t, &crate::tests::echo_reply_for(&req), Csum::Complete);
        sent(&out).pop().unwrap().1
    }

    #[test]
    fn a_candidate_that_answers_from_its_own_address_loses_to_the_old_path() {
        // an attacker that once saw A's nonce replays A's datagram from its own
        // address and answers the challenge sent there (it knows the nonce); A is
        // still on its old mapping and answers the confirmation sent over it
        let (mut a, mut b, t) = nat_pair();
        let (old, attacker) = (v4([198, 51, 100, 1], 40000), v4([203, 0, 113, 9], 5555));
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"seen once"), Csum::Complete);
        let (_, pkt) = sent(&out).pop().unwrap();
        let out = b.handle_inbound_v4(t, &pkt, Csum::Complete, attacker);
        let ch = sent(&out);
        assert_eq!((ch[0].0, ch[1].0), (attacker, old), "{ch:?}");
        // the attacker's answer (built with the nonce it saw: here A's own bytes)
        let forged_answer = answer_echo(&mut a, t, &ch[0].1);
        b.handle_inbound_v4(t, &forged_answer, Csum::Complete, attacker);
        assert_eq!(b.stats().get("v4_path_rebound"), 0, "not before the old path had its say");
        // A answers over its old path, from its old mapping
        let real = answer_echo(&mut a, t, &ch[1].1);
        let out = b.handle_inbound_v4(t, &real, Csum::Complete, old);
        assert!(!out.iter().any(|x| matches!(x, Action::DeliverLocal(_))), "ours: {out:?}");
        assert_eq!(b.stats().get("v4_path_refused_old_path"), 1);
        let out = b.handle_timeout(t + super::OLD_PATH_WAIT_MAX + super::V4_CHALLENGE_TIMEOUT);
        assert_eq!(b.stats().get("v4_path_rebound"), 0, "{out:?}");
        let reply = b.handle_outbound(t, &crate::tests::udp(NB, NA, b"x"), Csum::Complete);
        assert_eq!(sent(&reply)[0].0, old, "the path stays");
        // and the refused candidate is held off for a while
        b.handle_inbound_v4(t, &pkt, Csum::Complete, attacker);
        assert_eq!(b.stats().get("v4_path_challenge_held_off"), 1);
        assert_eq!(b.stats().get("v4_path_challenge_sent"), 1);
    }

    #[test]
    fn forgeries_do_not_hold_back_a_real_rebinding() {
        let (mut a, mut b, t) = nat_pair();
        let new = v4([198, 51, 100, 1], 41000);
        // forged datagrams (wrong nonce) from other ports, one every 100 ms: each a
        // bad_nonce drop, some a peer-restart challenge with its hold-off
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"f"), Csum::Complete);
        let (_, mut forged) = sent(&out).pop().unwrap();
        forged[44] ^= 0xff;
        for i in 0..10u16 {
            b.handle_inbound_v4(
                t + Duration::from_millis(100 * u64::from(i)),
                &forged,
                Csum::Complete,
                v4([203, 0, 113, 9], 6000 + i),
            );
        }
        assert!(b.stats().get("bad_nonce") >= 10);
        // the NAT really rebinds: A's next datagram comes from a new port, at once
        let t = t + Duration::from_millis(950);
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"rebound"), Csum::Complete);
        let out = b.handle_inbound_v4(t, &sent(&out).pop().unwrap().1, Csum::Complete, new);
        assert_eq!(b.stats().get("v4_path_challenge_rate_limited"), 0);
        assert_eq!(b.stats().get("v4_path_challenge_sent"), 1, "{out:?}");
        let ch = sent(&out);
        let answer = answer_echo(&mut a, t, &ch[0].1);
        b.handle_inbound_v4(t, &answer, Csum::Complete, new);
        b.handle_timeout(t + super::OLD_PATH_WAIT_MAX);
        assert_eq!(b.stats().get("v4_path_rebound"), 1);
    }

    #[test]
    fn an_unanswered_challenge_keeps_the_path_and_forgeries_cost_nothing() {
        let (mut a, mut b, t) = nat_pair();
        let attacker = v4([203, 0, 113, 9], 5555);
        // a packet without the right nonce from anywhere: dropped, no challenge
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"forged"), Csum::Complete);
        let (_, mut forged) = sent(&out).pop().unwrap();
        forged[44] ^= 0xff; // the nonce
        b.handle_inbound_v4(t, &forged, Csum::Complete, attacker);
        assert_eq!(b.stats().get("v4_path_challenge_sent"), 0);
        assert_eq!(b.stats().get("bad_nonce"), 1);
        // it opened a peer-restart challenge: A's next packet answers it (its
        // hold-off is the restart challenges' own: path validations are not held)
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"real"), Csum::Complete);
        b.handle_inbound_v4(t, &sent(&out).pop().unwrap().1, Csum::Complete, v4([198, 51, 100, 1], 40000));
        assert_eq!(b.stats().get("peer_challenge_answered"), 1);
        // a replayed verified packet from the attacker: challenged, never answered
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"replayed"), Csum::Complete);
        let (_, pkt) = sent(&out).pop().unwrap();
        b.handle_inbound_v4(t, &pkt, Csum::Complete, attacker);
        assert_eq!(b.stats().get("v4_path_challenge_sent"), 1);
        let due = b.poll_timeout().unwrap();
        assert!(due <= t + super::V4_CHALLENGE_TIMEOUT);
        let out = b.handle_timeout(t + super::V4_CHALLENGE_TIMEOUT);
        assert!(out.iter().any(|x| matches!(x, Action::Event(Event::V4Path { outcome: "unanswered: path kept", .. }))));
        assert_eq!(b.stats().get(Outcome::V4PathChallengeFailed.as_str()), 1);
        let reply = b.handle_outbound(t, &crate::tests::udp(NB, NA, b"x"), Csum::Complete);
        assert_eq!(sent(&reply)[0].0, v4([198, 51, 100, 1], 40000));
    }

    #[test]
    fn strangers_on_the_v4_path_get_no_state() {
        let (_a, mut b, t) = nat_pair();
        let entries = b.ilcc.iter().count();
        let lu = LocatorUpdate {
            operation: LuOperation::Advertisement,
            entries: vec![LuEntry { locator: v4loc([10, 9, 9, 9]), preference: 1, lifetime: 30 }],
        };
        let stranger = Nid(0x0200_00ff_fe00_0077);
        let n = Nonce::N32([1, 2, 3, 4]);
        let pkt = translate::lu_packet(
            ilnp_addr(v4loc([10, 9, 9, 9]), stranger),
            ilnp_addr(v4loc([192, 0, 2, 1]), NB),
            &n,
            &lu,
        )
        .unwrap();
        let out = b.handle_inbound_v4(t, &pkt, Csum::Complete, v4([203, 0, 113, 9], 5555));
        assert_eq!(b.stats().get("lu_unknown_peer"), 1);
        assert!(sent(&out).is_empty(), "not answered: {out:?}");
        assert_eq!(b.ilcc.iter().count(), entries);
        assert!(b.poll_timeout().is_none_or(|d| d > t + Duration::from_secs(1)), "no challenge or timer for it");
    }

    #[test]
    fn a_quiet_session_over_a_v4_path_sends_keepalives() {
        let (mut a, _b, t) = nat_pair();
        let every = a.config().v4_keepalive;
        assert_eq!(every, Duration::from_secs(25));
        let out = a.handle_timeout(t + every);
        let ka = sent(&out);
        assert_eq!(ka.len(), 1, "{out:?}");
        assert_eq!(ka[0].0, v4([192, 0, 2, 1], 6740));
        assert_eq!(ka[0].1[40], 59, "a nonce-only packet: Destination Options, then No Next Header");
        assert_eq!(a.stats().get("v4_keepalive_sent"), 1);
        assert!(a.poll_timeout().is_some_and(|d| d <= t + 2 * every));
    }

    #[test]
    fn the_source_locator_follows_the_family_of_the_peer() {
        // A has an IPv6 locator (preferred) and a v4 path; B only a v4 path
        let l6 = Locator(0x2001_0db8_000a_0000);
        let (la4, lb4) = (v4loc([10, 0, 0, 2]), v4loc([192, 0, 2, 1]));
        let mut a = core(NA, l6, 1, Some((NB, lb4)));
        let t = Instant::now();
        a.set_local_locators(t, vec![loc(l6, 10), loc(la4, 30)]);
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"hi"), Csum::Complete);
        let (_, pkt) = sent(&out).pop().expect("sent over the v4 path");
        assert_eq!(&pkt[8..24], &ilnp_addr(la4, NA).octets(), "from A's v4 path, not its IPv6 locator");
    }
}
