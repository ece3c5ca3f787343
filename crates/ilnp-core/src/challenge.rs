//! Peer restart (issue #10 item 3): a packet from a correspondent we have an ILCC
//! entry for, carrying a nonce that is not the one it showed us.
//!
//! Either the peer restarted and lost its state (a new nonce, legitimately), or
//! someone off the path forges its NID (RFC 6744 §6: the nonce is what stops that).
//! We cannot tell from the packet, so we ask the old peer: an ICMPv6 Echo Request
//! with our nonce for the old session to every locator we know for it. A live old
//! peer accepts it (our nonce is right) and its stack answers with the old nonce: the
//! new nonce is a forgery, it stays dropped. If instead the node at an old locator
//! answers our echo (its identifier and random payload, which an off-path forger
//! never saw) with the *new* nonce, the peer there restarted: the entry takes the new
//! nonce at once, one round trip after the first new packet, and the latest packet
//! with it is delivered. No answer at all within a few round trips proves nothing
//! (a firewall, a handoff, a lossy or dead link look the same as a forgery): the
//! session keeps its nonce and locators, the newcomer's packets stay dropped until the
//! entry idles out or an operator flushes it (`peer_challenge_unanswered`).
//!
//! While a challenge is open the fast path is told the old nonce is unknown, so it
//! punts that peer's packets and the core sees the answer (and delivers the old
//! peer's traffic itself for those few round trips). Challenges are rate limited per
//! NID (one open at a time, and a hold-off after a forgery) and globally (a token
//! bucket and a bound on open ones), so forged packets cannot turn the host into a
//! ping source or keep a peer's traffic on the slow path. Every outcome is counted.

use crate::action::Action;
use crate::config::CoreConfig;
use crate::event::{Event, Outcome, Stats};
use crate::ilcc::{Ilcc, IlccKey, RemoteLocator};
use crate::local::LocalLocators;
use crate::locator::LocatorState;
use ilnp_wire::icmpv6::{Icmpv6Type, Repr};
use ilnp_wire::{ilnp_addr, Locator, Nonce};
use rand_core::RngCore;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A live peer answers within this many smoothed round trips...
pub const CHALLENGE_RTTS: u32 = 3;
/// ...but never sooner than this (scheduling, a slow path on the other side)...
pub const CHALLENGE_MIN: Duration = Duration::from_millis(50);
/// ...nor later than this.
pub const CHALLENGE_MAX: Duration = Duration::from_secs(1);
/// Without an RTT sample for the peer.
pub const CHALLENGE_DEFAULT: Duration = Duration::from_millis(300);
/// After a challenge was answered (a forgery) or went unanswered, no new one for
/// that NID for this long:
/// a forger cannot keep the peer's traffic on the slow path, and a real restart of
/// the peer in that window waits at most this long.
pub const CHALLENGE_HOLDOFF: Duration = Duration::from_secs(1);
/// Global token bucket: challenges per second, and the burst.
pub const CHALLENGE_RATE: u32 = 20;
pub const CHALLENGE_BURST: u32 = 20;
/// At most this many open at once.
pub const CHALLENGE_MAX_OPEN: usize = 64;
/// Echo payload: a marker (tells our challenge apart in a capture) and 8 random bytes.
const ECHO_MARK: &[u8] = b"ilnp-restart-challenge:";

#[derive(Debug, Clone)]
pub(crate) struct Challenge {
    /// the echo's data word (identifier, sequence) and body: 96 random bits an
    /// off-path forger would have to guess to fake the restarted peer's answer
    echo_word: u32,
    echo_body: Vec<u8>,
    /// the old locators the echo went to
    old_locs: Vec<Locator>,
    new_nonce: Nonce,
    new_src: Locator,
    deadline: Instant,
    /// the latest packet with the new nonce that has something for the stack
    /// (identifier form; not a nonce-only packet), delivered on replacement
    held: Option<Vec<u8>>,
}

/// The open peer-restart challenges and their limits: the sub-machine owns them;
/// the rest of the core's state it reads or changes comes in as arguments
/// (`ChallengeCx`).
#[derive(Debug, Default)]
pub(crate) struct Challenges {
    open: HashMap<IlccKey, Challenge>,
    holdoff: HashMap<IlccKey, Instant>,
    tokens: u32,
    refilled: Option<Instant>,
}

/// The rest of the core's state the challenges read or change, lent by `Core` for
/// one call (disjoint borrows of its fields).
pub(crate) struct ChallengeCx<'a> {
    pub cfg: &'a CoreConfig,
    pub ilcc: &'a mut Ilcc,
    pub stats: &'a mut Stats,
    pub local: &'a LocalLocators,
    pub rng: &'a mut dyn RngCore,
}

impl Challenges {
    pub(crate) fn is_open(&self, key: &IlccKey) -> bool {
        self.open.contains_key(key)
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.open.values().map(|c| c.deadline).min()
    }

    /// Fast-path entries of challenged peers carry no rx nonce (their packets are punted).
    pub(crate) fn mask(&self, out: &mut [Action]) {
        if self.open.is_empty() {
            return;
        }
        for a in out {
            if let Action::IlccUpsert(s) = a {
                if self.open.contains_key(&s.key()) {
                    s.nonce_rx = None;
                }
            }
        }
    }

    /// Per-entry hold-off, bound on open ones, then the global bucket.
    pub(crate) fn admit(&mut self, now: Instant, key: IlccKey) -> bool {
        self.holdoff.retain(|_, until| *until > now);
        if self.holdoff.contains_key(&key) || self.open.len() >= CHALLENGE_MAX_OPEN {
            return false;
        }
        let per = Duration::from_millis(1000 / CHALLENGE_RATE as u64);
        match self.refilled {
            None => {
                self.tokens = CHALLENGE_BURST;
                self.refilled = Some(now);
            }
            Some(last) => {
                let n = (now.saturating_duration_since(last).as_millis() / per.as_millis()) as u32;
                if n > 0 {
                    self.tokens = self.tokens.saturating_add(n).min(CHALLENGE_BURST);
                    self.refilled = Some(last + per * n);
                }
            }
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }

    /// A packet for the entry `key` with `nonce`, not the one the entry knows (already counted
    /// as `bad_nonce` and not delivered): open a challenge if none is open and the
    /// limits allow, else keep the open one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bad_nonce(
        &mut self,
        cx: &mut ChallengeCx<'_>,
        now: Instant,
        key: IlccKey,
        nonce: Nonce,
        src: Locator,
        ident: Vec<u8>,
        out: &mut Vec<Action>,
    ) {
        if let Some(c) = self.open.get_mut(&key) {
            if c.old_locs.contains(&src) && is_echo_reply(&ident, c.echo_word, &c.echo_body) {
                // the node at an old locator answered with a new nonce: it restarted,
                // and this is its nonce (whoever sent the packet that opened the
                // challenge: a forger racing a real restart does not win)
                c.new_nonce = nonce;
                c.new_src = src;
                self.replace(cx.ilcc, cx.stats, now, key, "answered with a new nonce: peer restarted", out);
                return;
            }
            if c.new_nonce == nonce && carries_data(&ident) {
                c.held = Some(ident);
            }
            return;
        }
        if !self.admit(now, key) {
            cx.stats.bump(Outcome::PeerChallengeRateLimited);
            return;
        }
        let Some(e) = cx.ilcc.get(&key) else { return };
        let src_addr = ilnp_addr(e.local_locator, e.ours(cx.cfg.local_nid));
        let echo_word = cx.rng.next_u32();
        let mut echo_body = ECHO_MARK.to_vec();
        let mut rnd = [0u8; 8];
        cx.rng.fill_bytes(&mut rnd);
        echo_body.extend_from_slice(&rnd);
        let echo = Repr { msg_type: Icmpv6Type::ECHO_REQUEST, code: 0, data_word: echo_word, body: &echo_body };
        let uplink = cx.local.uplink_of(e.local_locator);
        let old_locs: Vec<Locator> =
            e.remote_locators.iter().filter(|r| r.state != LocatorState::Expired).map(|r| r.loc).collect();
        // the fast path must punt this peer's packets before the echo leaves: on a
        // LAN the answer is back in tens of microseconds (masked by `mask`)
        out.extend(e.snapshot().map(Action::IlccUpsert));
        for l in &old_locs {
            let pkt = echo.packet(src_addr, ilnp_addr(*l, key.remote), 64, Some(&e.nonce_tx));
            out.push(Action::SendWire { pkt, uplink });
        }
        let deadline = now + challenge_timeout(e.srtt_us);
        let c = Challenge {
            echo_word,
            echo_body,
            old_locs,
            new_nonce: nonce,
            new_src: src,
            deadline,
            held: carries_data(&ident).then_some(ident),
        };
        self.open.insert(key, c);
        cx.stats.bump(Outcome::PeerChallengeSent);
        out.push(Action::Event(Event::PeerChallenge { nid: key.remote, outcome: "sent" }));
    }

    /// A packet with the entry's own nonce arrived: if a challenge was open, the old
    /// peer is alive and the new nonce was a forgery.
    pub(crate) fn answered(
        &mut self,
        ilcc: &Ilcc,
        stats: &mut Stats,
        now: Instant,
        key: IlccKey,
        out: &mut Vec<Action>,
    ) {
        if self.open.remove(&key).is_none() {
            return;
        }
        self.holdoff.insert(key, now + CHALLENGE_HOLDOFF);
        stats.bump(Outcome::PeerChallengeAnswered);
        out.push(Action::Event(Event::PeerChallenge { nid: key.remote, outcome: "answered: new nonce was forged" }));
        out.extend(ilcc.get(&key).and_then(|e| e.snapshot()).map(Action::IlccUpsert));
    }

    /// Whether an identifier-form packet from `src` is the Echo Reply to the open
    /// challenge for `key` (our random bits, from one of the locators the echo went to).
    pub(crate) fn answers(&self, key: &IlccKey, src: Locator, ident: &[u8]) -> bool {
        self.open.get(key).is_some_and(|c| c.old_locs.contains(&src) && is_echo_reply(ident, c.echo_word, &c.echo_body))
    }

    /// Challenges nobody answered. Silence proves nothing (the peer may be behind a
    /// firewall, moving, on a lossy link): the session keeps its nonce and locators,
    /// the newcomer's held packet is discarded, the fast path gets the entry back,
    /// and the NID is not challenged again for the hold-off.
    pub(crate) fn due(&mut self, ilcc: &Ilcc, stats: &mut Stats, now: Instant, out: &mut Vec<Action>) {
        let due: Vec<IlccKey> = self.open.iter().filter(|(_, c)| c.deadline <= now).map(|(n, _)| *n).collect();
        for key in due {
            self.open.remove(&key);
            self.holdoff.insert(key, now + CHALLENGE_HOLDOFF);
            stats.bump(Outcome::PeerChallengeUnanswered);
            out.push(Action::Event(Event::PeerChallenge {
                nid: key.remote,
                outcome: "unanswered: session kept, new nonce refused",
            }));
            out.extend(ilcc.get(&key).and_then(|e| e.snapshot()).map(Action::IlccUpsert));
        }
    }

    /// The old peer is gone: its entry takes the new nonce and source locator, and
    /// the held packet is delivered.
    fn replace(
        &mut self,
        ilcc: &mut Ilcc,
        stats: &mut Stats,
        now: Instant,
        key: IlccKey,
        why: &'static str,
        out: &mut Vec<Action>,
    ) {
        let Some(c) = self.open.remove(&key) else { return };
        let Some(e) = ilcc.get_mut(&key) else { return };
        let pref = e.remote_locators.iter().find(|r| r.loc == c.new_src).map_or(10, |r| r.pref);
        e.nonce_rx = Some(c.new_nonce);
        e.remote_locators = vec![RemoteLocator::new(c.new_src, pref, LocatorState::Active, Some(now))];
        e.srtt_us = None;
        e.last_acked_lu = None;
        e.last_used = now;
        out.extend(e.snapshot().map(Action::IlccUpsert));
        stats.bump(Outcome::PeerRestartReplaced);
        out.push(Action::Event(Event::PeerChallenge { nid: key.remote, outcome: why }));
        out.extend(c.held.map(Action::DeliverLocal));
    }
}

fn challenge_timeout(srtt_us: Option<u64>) -> Duration {
    match srtt_us {
        Some(us) => (Duration::from_micros(us) * CHALLENGE_RTTS).clamp(CHALLENGE_MIN, CHALLENGE_MAX),
        None => CHALLENGE_DEFAULT,
    }
}

/// Not a nonce-only packet (No Next Header): worth holding for the stack.
fn carries_data(pkt: &[u8]) -> bool {
    ilnp_wire::ipv6::upper_layer_info(pkt).is_ok_and(|u| u.proto != ilnp_wire::ipv6::NextHeader::NONE)
}

/// Whether an identifier-form packet is the Echo Reply to our challenge.
pub(crate) fn is_echo_reply(pkt: &[u8], word: u32, body: &[u8]) -> bool {
    let Ok(ul) = ilnp_wire::ipv6::upper_layer_info(pkt) else { return false };
    if ul.proto != ilnp_wire::ipv6::NextHeader::ICMPV6 || !ul.is_whole() {
        return false;
    }
    let Ok(m) = ilnp_wire::icmpv6::Message::new_checked(&pkt[ul.offset..]) else { return false };
    // Message::body() starts at the data word
    m.msg_type() == Icmpv6Type::ECHO_REPLY && m.data_word() == word && m.as_bytes().get(8..) == Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DropReason;
    use crate::tests::{core, delivered, echo_reply_for, events, session, udp, wire, LA, LB, NA, NB};
    use ilnp_wire::translate::Csum;
    use ilnp_wire::Nid;
    use ilnp_wire::{classify, Packet};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// b has a session with a; a's daemon restarts without state (new core, new seed)
    /// and opens a new session to b.
    fn restarted_a(now: Instant) -> (crate::machine::Core, Vec<u8>) {
        let mut a2 = core(NA, LA, 77, Some((NB, LB)));
        let w = wire(&a2.handle_outbound(now, &udp(NA, NB, b"syn"), Csum::Complete)).pop().unwrap();
        (a2, w)
    }

    /// Issue #42: silence is not proof. The peer does not answer (a firewall, a
    /// handoff, its link down): the session keeps its nonce and locator, the
    /// newcomer gets nothing, and the peer's own packets go on being accepted.
    #[test]
    fn an_unanswered_challenge_keeps_the_session_and_refuses_the_newcomer() {
        let (mut a, mut b, _, _) = session();
        let t0 = Instant::now();
        let before = b.ilcc.get(&IlccKey::stable(NA)).unwrap().clone();
        let (mut a2, w) = restarted_a(t0);
        let out = b.handle_inbound(t0, &w, Csum::Complete);
        assert_eq!(b.stats().dropped(DropReason::BadNonce), 1);
        assert_eq!(b.stats().outcome(Outcome::PeerChallengeSent), 1);
        assert!(delivered(&out).is_empty(), "not accepted blindly");
        // the fast path is told to punt the peer while the challenge is open
        // ... before the echo leaves (a LAN answer would otherwise beat the map write)
        let masked = out.iter().position(|x| matches!(x, Action::IlccUpsert(s) if s.nid == NA && s.nonce_rx.is_none()));
        let sent = out.iter().position(|x| matches!(x, Action::SendWire { .. }));
        assert!(masked.is_some() && masked < sent, "{out:?}");
        let echo = wire(&out).pop().expect("the echo request challenge");
        assert!(matches!(classify(&echo), Ok(Packet::Data(_))));
        let deadline = b.poll_timeout().unwrap();
        assert!(deadline <= t0 + CHALLENGE_MAX && deadline >= t0 + CHALLENGE_MIN, "{:?}", deadline - t0);
        // the newcomer gets the echo (here it is the restarted a, at the old locator,
        // behind a firewall that drops echo requests: it does not answer)
        let _ = a2.handle_inbound(t0, &echo, Csum::Complete);
        let out = b.handle_timeout(deadline);
        assert_eq!(b.stats().outcome(Outcome::PeerRestartReplaced), 0);
        assert_eq!(b.stats().outcome(Outcome::PeerChallengeUnanswered), 1);
        assert!(delivered(&out).is_empty(), "the held packet is not delivered");
        // the fast path gets the entry back, with its old nonce
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.nid == NA && s.nonce_rx == before.nonce_rx)));
        let e = b.ilcc.get(&IlccKey::stable(NA)).unwrap();
        assert_eq!((e.nonce_rx, e.best_remote().map(|r| r.loc)), (before.nonce_rx, Some(LA)), "session kept");
        // an attacker's datagram a second for a minute, the peer silent: never taken
        for i in 1..=60u64 {
            let t = deadline + Duration::from_secs(i);
            assert!(delivered(&b.handle_inbound(t, &w, Csum::Complete)).is_empty());
            b.handle_timeout(t + CHALLENGE_MAX);
        }
        assert_eq!(b.stats().outcome(Outcome::PeerRestartReplaced), 0);
        assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().nonce_rx, before.nonce_rx);
        // bounded: at most one echo per hold-off and challenge (≤ one a second here)
        assert!(
            b.stats().outcome(Outcome::PeerChallengeSent) <= 61,
            "{}",
            b.stats().outcome(Outcome::PeerChallengeSent)
        );
        // the real peer comes back: its own packets are delivered at once
        let t = deadline + Duration::from_secs(62);
        let w = wire(&a.handle_outbound(t, &udp(NA, NB, b"back"), Csum::Complete)).pop().unwrap();
        assert_eq!(delivered(&b.handle_inbound(t, &w, Csum::Complete)).len(), 1);
    }

    #[test]
    fn the_restarted_peer_answering_with_its_new_nonce_is_taken_at_once() {
        let (_a, mut b, _, _) = session();
        let t0 = Instant::now();
        let (mut a2, w) = restarted_a(t0);
        let echo = wire(&b.handle_inbound(t0, &w, Csum::Complete)).pop().unwrap();
        let req = delivered(&a2.handle_inbound(t0, &echo, Csum::Complete)).pop().expect("echo request delivered");
        // a2's stack answers; a2 sends it with its new nonce (and now knows b's)
        let reply = wire(&a2.handle_outbound(t0 + ms(1), &echo_reply_for(&req), Csum::Complete)).pop().unwrap();
        // a forged echo reply (right nonce, wrong payload) changes nothing
        let mut forged = echo_reply_for(&req);
        let n = forged.len();
        forged[n - 1] ^= 1;
        let forged = wire(&a2.handle_outbound(t0 + ms(1), &forged, Csum::Complete)).pop().unwrap();
        b.handle_inbound(t0 + ms(1), &forged, Csum::Complete);
        assert_eq!(b.stats().outcome(Outcome::PeerRestartReplaced), 0, "a guessed payload is not an answer");
        let out = b.handle_inbound(t0 + ms(2), &reply, Csum::Complete);
        assert_eq!(b.stats().outcome(Outcome::PeerRestartReplaced), 1, "one round trip, no deadline");
        // the latest packet with the new nonce was held (one packet, bounded memory)
        let held = delivered(&out);
        assert_eq!(held.len(), 1);
        assert_ne!(held[0], udp(NA, NB, b"syn"), "the latest, not the first");
        let back = wire(&b.handle_outbound(t0 + ms(2), &udp(NB, NA, b"syn-ack"), Csum::Complete)).pop().unwrap();
        assert_eq!(delivered(&a2.handle_inbound(t0 + ms(3), &back, Csum::Complete)).len(), 1);
    }

    #[test]
    fn a_live_old_peer_answers_and_the_forgery_stays_dropped() {
        let (mut a, mut b, _, _) = session();
        let t0 = Instant::now();
        let (_forger, w) = restarted_a(t0);
        let out = b.handle_inbound(t0, &w, Csum::Complete);
        let echo = wire(&out).pop().unwrap();
        // the live a accepts the challenge (b's nonce is right) and its stack answers
        let out = a.handle_inbound(t0, &echo, Csum::Complete);
        assert_eq!(delivered(&out).len(), 1, "echo request for a's stack");
        assert_eq!(a.stats().dropped(DropReason::BadNonce), 0);
        // a's kernel answers with an echo reply; any packet with a's old nonce will do
        let reply = wire(&a.handle_outbound(t0 + ms(2), &udp(NA, NB, b"alive"), Csum::Complete)).pop().unwrap();
        let out = b.handle_inbound(t0 + ms(2), &reply, Csum::Complete);
        assert_eq!(delivered(&out).len(), 1, "the old peer's traffic is delivered");
        assert_eq!(b.stats().outcome(Outcome::PeerChallengeAnswered), 1);
        assert!(events(&out).iter().any(|e| matches!(e, Event::PeerChallenge { nid: NA, .. })));
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.nid == NA && s.nonce_rx.is_some())));
        // nothing left to time out, the nonce is unchanged
        let out = b.handle_timeout(t0 + CHALLENGE_MAX + ms(1));
        assert!(delivered(&out).is_empty());
        assert_eq!(b.stats().outcome(Outcome::PeerRestartReplaced), 0);
        // more forged packets during the hold-off: dropped, not challenged again
        let out = b.handle_inbound(t0 + ms(100), &w, Csum::Complete);
        assert!(wire(&out).is_empty() && delivered(&out).is_empty());
        assert_eq!(b.stats().outcome(Outcome::PeerChallengeRateLimited), 1);
        assert_eq!(b.stats().dropped(DropReason::BadNonce), 2);
        // after the hold-off (from the answer at t0 + 2 ms) a new challenge may be opened
        b.handle_inbound(t0 + ms(2) + CHALLENGE_HOLDOFF, &w, Csum::Complete);
        assert_eq!(b.stats().outcome(Outcome::PeerChallengeSent), 2);
    }

    #[test]
    fn one_open_challenge_per_peer_and_a_global_bucket() {
        let mut c = Challenges::default();
        let t0 = Instant::now();
        let mut admitted = 0;
        for i in 0..100u64 {
            if c.admit(t0, IlccKey::stable(Nid(i))) {
                admitted += 1;
            }
        }
        assert_eq!(admitted, CHALLENGE_BURST);
        // refills at CHALLENGE_RATE per second
        let later = t0 + Duration::from_millis(1000 / CHALLENGE_RATE as u64 * 2);
        assert!(c.admit(later, IlccKey::stable(Nid(500))));
        assert!(c.admit(later, IlccKey::stable(Nid(501))));
        assert!(!c.admit(later, IlccKey::stable(Nid(502))));
        // a repeated bad nonce while open sends nothing new
        let (_a, mut b, _, _) = session();
        let (_x, w) = restarted_a(t0);
        let n1 = wire(&b.handle_inbound(t0, &w, Csum::Complete)).len();
        let n2 = wire(&b.handle_inbound(t0, &w, Csum::Complete)).len();
        assert_eq!((n1, n2), (1, 0));
        assert_eq!(b.stats().outcome(Outcome::PeerChallengeSent), 1);
    }

    #[test]
    fn timeout_follows_the_rtt_within_bounds() {
        assert_eq!(challenge_timeout(None), CHALLENGE_DEFAULT);
        assert_eq!(challenge_timeout(Some(1_000)), CHALLENGE_MIN);
        assert_eq!(challenge_timeout(Some(100_000)), ms(300));
        assert_eq!(challenge_timeout(Some(5_000_000)), CHALLENGE_MAX);
    }
}
