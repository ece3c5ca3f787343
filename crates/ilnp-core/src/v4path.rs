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
//!   path validation; the limits are the peer-restart challenges'). Until then the
//!   packets are delivered (their nonce is right) and replies keep the old path.
//! * **Keepalives.** A session whose source locator is a v4 path sends a nonce-only
//!   packet (RFC 6741 §13.1) after `v4_keepalive` without traffic, so the NAT keeps
//!   its mapping (many expire UDP mappings after 30 s).

use crate::challenge::{is_echo_reply, CHALLENGE_MAX_OPEN};
use crate::event::{Event, Outcome};
use crate::{Action, Core, LocatorState, RemoteLocator, Tier};
use ilnp_wire::icmpv6::{Icmpv6Type, Repr};
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{ilnp_addr, split_addr, Locator, Nid};
use std::collections::HashMap;
use std::net::{Ipv6Addr, SocketAddrV4};
use std::time::{Duration, Instant};

/// A path challenge is answered within this long (one NAT'd round trip, generously).
pub const V4_CHALLENGE_TIMEOUT: Duration = Duration::from_secs(1);
/// Echo payload marker (tells a path challenge apart in a capture).
const ECHO_MARK: &[u8] = b"ilnp-v4-path-challenge:";

#[derive(Debug, Clone)]
struct PathChallenge {
    loc: Locator,
    candidate: SocketAddrV4,
    echo_word: u32,
    echo_body: Vec<u8>,
    deadline: Instant,
}

/// The v4 path's own state: open path challenges and the keepalive timer.
#[derive(Debug, Default)]
pub(crate) struct V4Paths {
    open: HashMap<Nid, PathChallenge>,
    keepalive_at: Option<Instant>,
    /// our usable v4-path locators at the last local change (a new one is warmed up)
    locals: Vec<Locator>,
    /// the outer IPv4 source of the datagram being handled (`handle_inbound_v4`)
    pub(crate) rx_via: Option<SocketAddrV4>,
}

impl V4Paths {
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.open.values().map(|c| c.deadline).chain(self.keepalive_at).min()
    }
}

impl Core {
    /// A UDP datagram that arrived on the v4 path's port from `from`: its payload,
    /// a wire-form ILNPv6 packet, is handled as a punted packet is, and the path it
    /// came on is learned or checked.
    pub fn handle_inbound_v4(&mut self, now: Instant, pkt: &[u8], csum: Csum, from: SocketAddrV4) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_inbound_v4_into(now, pkt, csum, from, &mut out);
        out
    }

    /// `handle_inbound_v4` into a buffer of the caller's (cleared first).
    pub fn handle_inbound_v4_into(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        from: SocketAddrV4,
        out: &mut Vec<Action>,
    ) {
        self.v4.rx_via = Some(from);
        self.handle_inbound_into(now, pkt, csum, out);
        self.v4.rx_via = None;
    }

    /// A packet from `nid`'s locator `src` was accepted (its nonce checked, or the
    /// responder's first): learn or check the v4 path it came on.
    pub(crate) fn v4_observe(&mut self, now: Instant, nid: Nid, src: Locator, out: &mut Vec<Action>) {
        let Some(from) = self.v4.rx_via else { return };
        if !src.is_v4_path() {
            self.stats.bump(Outcome::V4InnerNotV4Path);
            return;
        }
        let Some(e) = self.ilcc.get_mut(&nid) else { return };
        let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == src) else { return };
        let current = r.v4_destination();
        if current == Some(from) {
            return;
        }
        if !r.v4_heard {
            // the first datagram on this path: it defines it (as the first packet
            // defines an entry); a different address than advertised is a NAT
            r.v4_heard = true;
            if src.as_v4_path() != Some(from) {
                r.via = Some(from);
                out.extend(e.snapshot().map(Action::IlccUpsert));
                self.stats.bump(Outcome::V4NatDetected);
                out.push(Action::Event(Event::V4Path {
                    nid,
                    locator: src,
                    via: from.to_string(),
                    outcome: "NAT detected",
                }));
            }
            return;
        }
        self.stats.bump(Outcome::V4PathUnvalidatedRx);
        if self.v4.open.get(&nid).is_some_and(|c| c.loc == src && c.candidate == from) {
            return;
        }
        if self.v4.open.len() >= CHALLENGE_MAX_OPEN || !self.challenges.admit(now, nid) {
            self.stats.bump(Outcome::V4PathChallengeRateLimited);
            return;
        }
        let echo_word = self.rng.next_u32();
        let mut echo_body = ECHO_MARK.to_vec();
        let mut rnd = [0u8; 8];
        self.rng.fill_bytes(&mut rnd);
        echo_body.extend_from_slice(&rnd);
        let e = self.ilcc.get(&nid).expect("present");
        let echo = Repr { msg_type: Icmpv6Type::ECHO_REQUEST, code: 0, data_word: echo_word, body: &echo_body };
        let pkt =
            echo.packet(ilnp_addr(e.local_locator, self.cfg.local_nid), ilnp_addr(src, nid), 64, Some(&e.nonce_tx));
        out.push(Action::SendV4 { pkt, to: from });
        self.v4.open.insert(
            nid,
            PathChallenge { loc: src, candidate: from, echo_word, echo_body, deadline: now + V4_CHALLENGE_TIMEOUT },
        );
        self.stats.bump(Outcome::V4PathChallengeSent);
        out.push(Action::Event(Event::V4Path { nid, locator: src, via: from.to_string(), outcome: "challenged" }));
    }

    /// A verified identifier-form packet from `nid`: the answer to its path
    /// challenge (consumed: it was ours), from the candidate address?
    pub(crate) fn v4_challenge_answer(&mut self, nid: Nid, ident: &[u8], out: &mut Vec<Action>) -> bool {
        let Some(c) = self.v4.open.get(&nid) else { return false };
        if self.v4.rx_via != Some(c.candidate) || !is_echo_reply(ident, c.echo_word, &c.echo_body) {
            return false;
        }
        let c = self.v4.open.remove(&nid).expect("checked");
        if let Some(e) = self.ilcc.get_mut(&nid) {
            if let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == c.loc) {
                r.via = (c.loc.as_v4_path() != Some(c.candidate)).then_some(c.candidate);
            }
            out.extend(e.snapshot().map(Action::IlccUpsert));
        }
        self.stats.bump(Outcome::V4PathRebound);
        out.push(Action::Event(Event::V4Path {
            nid,
            locator: c.loc,
            via: c.candidate.to_string(),
            outcome: "rebound",
        }));
        true
    }

    /// Path challenges nobody answered; keepalives due.
    pub(crate) fn v4_due(&mut self, now: Instant, out: &mut Vec<Action>) {
        let failed: Vec<Nid> = self.v4.open.iter().filter(|(_, c)| c.deadline <= now).map(|(n, _)| *n).collect();
        for nid in failed {
            let c = self.v4.open.remove(&nid).expect("listed");
            self.stats.bump(Outcome::V4PathChallengeFailed);
            let via = c.candidate.to_string();
            out.push(Action::Event(Event::V4Path { nid, locator: c.loc, via, outcome: "unanswered: path kept" }));
        }
        if self.v4.keepalive_at.is_some_and(|t| t <= now) {
            self.v4_keepalives(now, out);
        }
    }

    /// One nonce-only packet per established session over a v4 path that was quiet
    /// for the keepalive interval. O(ILCC entries) once per interval.
    fn v4_keepalives(&mut self, now: Instant, out: &mut Vec<Action>) {
        let every = self.cfg.v4_keepalive;
        let local_nid = self.cfg.local_nid;
        let mut sent = 0;
        for e in self.ilcc.iter() {
            let quiet = now.saturating_duration_since(e.last_used) >= every;
            if !e.local_locator.is_v4_path() || e.tier != Tier::Established || e.nonce_rx.is_none() || !quiet {
                continue;
            }
            let Some(r) = e.best_remote().filter(|r| r.loc.is_v4_path()) else { continue };
            let pkt = translate::nonce_only_packet(
                ilnp_addr(e.local_locator, local_nid),
                ilnp_addr(r.loc, e.nid),
                &e.nonce_tx,
            );
            out.push(Action::SendWire { pkt, uplink: self.local.uplink_of(e.local_locator) });
            sent += 1;
        }
        self.stats.add(Outcome::V4KeepaliveSent, sent);
        self.v4.keepalive_at = Some(now + every);
    }

    /// On a change of our locators: keepalives run while one is a v4 path, and a new
    /// v4 path is warmed up at once.
    ///
    /// Warming: a nonce-only packet from the new v4 path to each established
    /// correspondent's v4 path, while the session still runs elsewhere. It resolves
    /// the neighbours along the path, opens the NAT's mapping, and shows the
    /// correspondent where that mapping is (`v4_observe`), so when the old network
    /// goes the LU over the v4 path takes one round trip, not one plus address
    /// resolution on every hop (measured: 17 ms on a cold LAN path, the datagrams
    /// in flight meanwhile lost). Like an ICE connectivity check, without a server.
    pub(crate) fn v4_locals_changed(&mut self, now: Instant, out: &mut Vec<Action>) {
        let v4: Vec<Locator> = self.local.usable().map(|l| l.loc).filter(|l| l.is_v4_path()).collect();
        let on = !self.cfg.v4_keepalive.is_zero() && !v4.is_empty();
        self.v4.keepalive_at = match (on, self.v4.keepalive_at) {
            (true, Some(t)) => Some(t),
            (true, None) => Some(now + self.cfg.v4_keepalive),
            (false, _) => None,
        };
        let new: Vec<Locator> = v4.iter().copied().filter(|l| !self.v4.locals.contains(l)).collect();
        self.v4.locals = v4;
        let local_nid = self.cfg.local_nid;
        for from in new {
            for e in self.ilcc.iter().filter(|e| e.tier == Tier::Established && e.nonce_rx.is_some()) {
                // its v4 path: from the entry, else from its record (a responder's
                // entry knows only the locator the session began on)
                let known =
                    e.remote_locators.iter().filter(|r| r.state != LocatorState::Expired).map(|r| (r.loc, r.pref));
                let record =
                    self.peers.get(&e.nid).into_iter().flat_map(|p| p.record.locators.iter().map(|l| (l.loc, l.pref)));
                let Some((to, _)) = known.chain(record).filter(|(l, _)| l.is_v4_path()).min_by_key(|(_, p)| *p) else {
                    continue;
                };
                let pkt = translate::nonce_only_packet(ilnp_addr(from, local_nid), ilnp_addr(to, e.nid), &e.nonce_tx);
                out.push(Action::SendWire { pkt, uplink: self.local.uplink_of(from) });
                self.stats.bump(Outcome::V4PathWarmed);
            }
        }
    }

    /// Packets to a v4-path locator leave as UDP/IPv4: to the path observed behind a
    /// NAT, else to the address and port the locator names. The exit pass of every
    /// entry point.
    pub(crate) fn v4_route(&self, out: &mut [Action]) {
        for a in out.iter_mut() {
            let Action::SendWire { pkt, .. } = a else { continue };
            let Some(dst) = pkt.get(24..40) else { continue };
            let (loc, nid) = split_addr(Ipv6Addr::from(<[u8; 16]>::try_from(dst).expect("16 bytes")));
            if !loc.is_v4_path() {
                continue;
            }
            let observed = self.ilcc.get(&nid).and_then(|e| e.remote_locators.iter().find(|r| r.loc == loc));
            let Some(to) = observed.and_then(|r| r.v4_destination()).or_else(|| loc.as_v4_path()) else { continue };
            *a = Action::SendV4 { pkt: std::mem::take(pkt), to };
        }
    }

    /// Moves `nid`'s source locator to one of a family its locators have. When none
    /// of ours reaches any of theirs (we are on an IPv4-only network, and the entry
    /// only knows the IPv6 locator the session began on), the peer record's other
    /// locators are added first (a static peer's or DNS's v4 path: the responder's
    /// entry starts with the initiator's source locator alone).
    pub(crate) fn fit_local(&mut self, nid: Nid) {
        let Some(e) = self.ilcc.get_mut(&nid) else { return };
        if self.local.fitting(e.local_locator, &e.remote_locators).is_none() {
            let max = self.cfg.max_remote_locators.max(1);
            for l in self.peers.get(&nid).map(|p| p.record.locators.as_slice()).unwrap_or_default() {
                if e.remote_locators.len() < max && !e.has_remote(l.loc) {
                    e.remote_locators.push(RemoteLocator::new(l.loc, l.pref, LocatorState::Valid, None));
                }
            }
        }
        if let Some(l) = self.local.fitting(e.local_locator, &e.remote_locators) {
            e.local_locator = l;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::{core, NA, NB};
    use crate::{Action, Core, Event, LocalLocator, LocatorState, Outcome};
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
        assert_eq!(challenge.len(), 1);
        assert_eq!(challenge[0].0, new, "the challenge goes to the new address");
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
        assert_eq!(b.stats().get("v4_path_rebound"), 1);
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.remote_v4 == Some(new))), "{out:?}");
        assert!(!out.iter().any(|x| matches!(x, Action::DeliverLocal(_))), "the answer is ours, not the stack's");
        let reply = b.handle_outbound(t, &crate::tests::udp(NB, NA, b"x"), Csum::Complete);
        assert_eq!(sent(&reply)[0].0, new, "replies follow the validated path");
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
        // it opened a peer-restart challenge: A's next packet answers it (and its
        // hold-off also holds path challenges for a second)
        let out = a.handle_outbound(t, &crate::tests::udp(NA, NB, b"real"), Csum::Complete);
        b.handle_inbound_v4(t, &sent(&out).pop().unwrap().1, Csum::Complete, v4([198, 51, 100, 1], 40000));
        assert_eq!(b.stats().get("peer_challenge_answered"), 1);
        let t = t + Duration::from_secs(2);
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
        let entries = b.ilcc_entries().count();
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
        assert_eq!(b.ilcc_entries().count(), entries);
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
