//! The v4 path (issue #26, docs/architecture.md § IPv4 and NAT): ILNPv6 packets
//! carried in UDP over IPv4, for hosts on IPv4-only or NATed networks.
//!
//! A v4 path is a locator like any other (`0004:ADDR:PORT`, `ilnp_wire::v4path`), so
//! the ILCC, LUs, preferences and the nonce rules are unchanged. What is new here:
//!
//! * **Which packets take it.** Every packet the core sends to a v4-path locator
//!   leaves as `Action::SendV4` (one pass over the actions at each entry point's
//!   exit, `route`), to the address the locator names, or to the path observed
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

use crate::action::Action;
use crate::admission::TokenBucket;
use crate::challenge::is_echo_reply;
use crate::config::CoreConfig;
use crate::event::{Event, Outcome, Stats};
use crate::ilcc::{Ilcc, IlccKey, Tier};
use crate::local::LocalLocators;
use crate::locator::LocatorState;
use crate::peers::PeerInfo;
use ilnp_wire::icmpv6::{Icmpv6Type, Repr};
use ilnp_wire::{ilnp_addr, split_addr, translate, Locator, Nid};
use rand_core::RngCore;
use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv6Addr, SocketAddrV4};
use std::time::{Duration, Instant};

/// A path challenge is answered within this long (one NAT'd round trip, generously).
pub const V4_CHALLENGE_TIMEOUT: Duration = Duration::from_secs(1);
/// Echo payload marker (tells a path challenge apart in a capture).
const ECHO_MARK: &[u8] = b"ilnp-v4-path-challenge:";
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
const OLD_PATH_WAIT_MIN: Duration = Duration::from_millis(30);
const OLD_PATH_WAIT_MAX: Duration = Duration::from_millis(300);

#[derive(Debug, Clone)]
struct PathChallenge {
    loc: Locator,
    candidate: SocketAddrV4,
    echo_word: u32,
    echo_body: Vec<u8>,
    /// the path validated so far, where the confirmation went (None: none)
    old: Option<SocketAddrV4>,
    old_word: u32,
    old_body: Vec<u8>,
    /// the candidate answered its echo
    candidate_ok: bool,
    /// the old path's echo came back from the candidate: the peer moved there
    old_confirmed: bool,
    /// decided then if the old path stays silent (set when the candidate answers)
    decide_at: Option<Instant>,
    deadline: Instant,
    old_wait: Duration,
}

/// The rebinding validations' own limits.
#[derive(Debug)]
struct Validations {
    bucket: TokenBucket,
    holdoff: HashMap<(IlccKey, SocketAddrV4), Instant>,
}

impl Default for Validations {
    fn default() -> Self {
        Validations { bucket: TokenBucket::new(V4_VALIDATION_RATE, V4_VALIDATION_BURST), holdoff: HashMap::new() }
    }
}

/// The v4 path's own state: open path challenges and the keepalive timer.
#[derive(Debug, Default)]
pub(crate) struct V4Paths {
    open: HashMap<IlccKey, Vec<PathChallenge>>,
    limits: Validations,
    keepalive_at: Option<Instant>,
    /// our usable v4-path locators at the last local change (a new one is warmed up)
    locals: Vec<Locator>,
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

    fn open_count(&self) -> usize {
        self.open.values().map(Vec::len).sum()
    }

    fn hold_off(&mut self, now: Instant, key: IlccKey, candidate: SocketAddrV4) {
        let h = &mut self.limits.holdoff;
        h.retain(|_, until| *until > now);
        if h.len() >= V4_HOLDOFF_MAX {
            if let Some(k) = h.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k) {
                h.remove(&k);
            }
        }
        h.insert((key, candidate), now + V4_CANDIDATE_HOLDOFF);
    }
}

/// The rest of the core's state the v4 paths read and change (`Core::v4_parts`).
pub(crate) struct V4Cx<'a> {
    pub cfg: &'a CoreConfig,
    pub ilcc: &'a mut Ilcc,
    pub stats: &'a mut Stats,
    pub rng: &'a mut dyn RngCore,
    pub local: &'a LocalLocators,
    pub peers: &'a BTreeMap<Nid, PeerInfo>,
}

/// The v4 paths' work, each with the state it is lent.
impl V4Paths {
    /// A packet from the entry `key`'s locator `src` was accepted (its nonce checked, or the
    /// responder's first): learn or check the v4 path it came on.
    pub(crate) fn observe(
        &mut self,
        cx: &mut V4Cx<'_>,
        now: Instant,
        key: IlccKey,
        src: Locator,
        out: &mut Vec<Action>,
    ) {
        let Some(from) = self.rx_via else { return };
        if !src.is_v4_path() {
            cx.stats.bump(Outcome::V4InnerNotV4Path);
            return;
        }
        let Some(e) = cx.ilcc.get_mut(&key) else { return };
        let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == src) else { return };
        let current = r.v4_destination();
        if current == Some(from) {
            // from where the path says: heard (a no-NAT path is defined by its own
            // address; only now does the fast path carry it, `IlccEntry::snapshot`)
            if !r.v4_heard {
                r.v4_heard = true;
                out.extend(e.snapshot().map(Action::IlccUpsert));
            }
            return;
        }
        if !r.v4_heard {
            // the first datagram on this path: it defines it (as the first packet
            // defines an entry); a different address than advertised is a NAT
            r.v4_heard = true;
            if src.as_v4_path() != Some(from) {
                r.via = Some(from);
                out.extend(e.snapshot().map(Action::IlccUpsert));
                cx.stats.bump(Outcome::V4NatDetected);
                out.push(Action::Event(Event::V4Path {
                    nid: key.remote,
                    locator: src,
                    via: from.to_string(),
                    outcome: "NAT detected",
                }));
            }
            return;
        }
        cx.stats.bump(Outcome::V4PathUnvalidatedRx);
        let mine = self.open.get(&key).map(Vec::as_slice).unwrap_or_default();
        if mine.iter().any(|c| c.loc == src && c.candidate == from) {
            return;
        }
        if self.limits.holdoff.get(&(key, from)).is_some_and(|t| *t > now) {
            cx.stats.bump(Outcome::V4PathChallengeHeldOff);
            return;
        }
        if mine.len() >= V4_VALIDATION_PER_PEER
            || self.open_count() >= V4_VALIDATION_MAX_OPEN
            || !self.limits.bucket.take(now)
        {
            cx.stats.bump(Outcome::V4PathChallengeRateLimited);
            return;
        }
        let (echo_word, old_word) = (cx.rng.next_u32(), cx.rng.next_u32());
        let echo_body = echo_body(&mut *cx.rng, ECHO_MARK);
        let old_body = echo_body_old(&mut *cx.rng);
        let e = cx.ilcc.get(&key).expect("present");
        let (us, them) = (ilnp_addr(e.local_locator, e.ours(cx.cfg.local_nid)), ilnp_addr(src, key.remote));
        let echo = Repr { msg_type: Icmpv6Type::ECHO_REQUEST, code: 0, data_word: echo_word, body: &echo_body };
        out.push(Action::SendV4 { pkt: echo.packet(us, them, 64, Some(&e.nonce_tx)), to: from });
        // and over the old path: is the peer still there?
        let old = current.filter(|o| *o != from);
        if let Some(to) = old {
            let echo = Repr { msg_type: Icmpv6Type::ECHO_REQUEST, code: 0, data_word: old_word, body: &old_body };
            out.push(Action::SendV4 { pkt: echo.packet(us, them, 64, Some(&e.nonce_tx)), to });
        }
        let old_wait = e
            .srtt_us
            .map_or(OLD_PATH_WAIT_MAX, |us| Duration::from_micros(us.saturating_mul(4)))
            .clamp(OLD_PATH_WAIT_MIN, OLD_PATH_WAIT_MAX);
        self.open.entry(key).or_default().push(PathChallenge {
            loc: src,
            candidate: from,
            echo_word,
            echo_body,
            old,
            old_word,
            old_body,
            candidate_ok: false,
            old_confirmed: false,
            decide_at: None,
            deadline: now + V4_CHALLENGE_TIMEOUT,
            old_wait,
        });
        cx.stats.bump(Outcome::V4PathChallengeSent);
        out.push(Action::Event(Event::V4Path {
            nid: key.remote,
            locator: src,
            via: from.to_string(),
            outcome: "challenged",
        }));
    }

    /// A verified identifier-form packet for the entry `key`: an answer to one of its path
    /// challenges (consumed: it was ours)? The candidate's own echo counts only from
    /// the candidate; the old path's from the candidate confirms the move, from
    /// anywhere else (the old address) refuses it: the peer is still there.
    pub(crate) fn challenge_answer(
        &mut self,
        cx: &mut V4Cx<'_>,
        now: Instant,
        key: IlccKey,
        ident: &[u8],
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(list) = self.open.get_mut(&key) else { return false };
        let via = self.rx_via;
        let Some(i) = list.iter().position(|c| {
            is_echo_reply(ident, c.echo_word, &c.echo_body) || is_echo_reply(ident, c.old_word, &c.old_body)
        }) else {
            return false;
        };
        let c = &mut list[i];
        if is_echo_reply(ident, c.echo_word, &c.echo_body) {
            if via != Some(c.candidate) {
                return true; // ours, but not from where it was sent: counts for nothing
            }
            c.candidate_ok = true;
            c.decide_at.get_or_insert(now + c.old_wait);
        } else if via == Some(c.candidate) {
            c.old_confirmed = true;
            cx.stats.bump(Outcome::V4PathConfirmedOldPath);
        } else {
            // the old path answered from elsewhere: the peer did not move
            let c = list.remove(i);
            self.refused(cx, now, key, c, out);
            return true;
        }
        let c = &list[i];
        if c.candidate_ok && (c.old_confirmed || c.old.is_none()) {
            let c = list.remove(i);
            self.rebind(cx, key, c, out);
        }
        true
    }

    fn refused(&mut self, cx: &mut V4Cx<'_>, now: Instant, key: IlccKey, c: PathChallenge, out: &mut Vec<Action>) {
        self.hold_off(now, key, c.candidate);
        self.open.retain(|_, l| !l.is_empty());
        cx.stats.bump(Outcome::V4PathRefusedOldPath);
        out.push(Action::Event(Event::V4Path {
            nid: key.remote,
            locator: c.loc,
            via: c.candidate.to_string(),
            outcome: "refused: the peer answered on the old path",
        }));
    }

    fn rebind(&mut self, cx: &mut V4Cx<'_>, key: IlccKey, c: PathChallenge, out: &mut Vec<Action>) {
        self.open.retain(|_, l| !l.is_empty());
        // the other validations of this peer's locator are moot now
        if let Some(l) = self.open.get_mut(&key) {
            l.retain(|o| o.loc != c.loc);
        }
        self.open.retain(|_, l| !l.is_empty());
        if let Some(e) = cx.ilcc.get_mut(&key) {
            if let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == c.loc) {
                r.via = (c.loc.as_v4_path() != Some(c.candidate)).then_some(c.candidate);
            }
            out.extend(e.snapshot().map(Action::IlccUpsert));
        }
        cx.stats.bump(Outcome::V4PathRebound);
        out.push(Action::Event(Event::V4Path {
            nid: key.remote,
            locator: c.loc,
            via: c.candidate.to_string(),
            outcome: "rebound",
        }));
    }

    /// Path challenges nobody answered; keepalives due.
    pub(crate) fn due(&mut self, cx: &mut V4Cx<'_>, now: Instant, out: &mut Vec<Action>) {
        let mut won = Vec::new();
        let mut failed = Vec::new();
        for (key, list) in self.open.iter_mut() {
            let mut i = 0;
            while i < list.len() {
                let c = &list[i];
                if c.candidate_ok && c.decide_at.is_some_and(|t| t <= now) {
                    // the old path stayed silent: its mapping is gone, the peer moved
                    won.push((*key, list.remove(i)));
                } else if !c.candidate_ok && c.deadline <= now {
                    failed.push((*key, list.remove(i)));
                } else {
                    i += 1;
                }
            }
        }
        self.open.retain(|_, l| !l.is_empty());
        for (key, c) in won {
            cx.stats.bump(Outcome::V4PathOldPathSilent);
            self.rebind(cx, key, c, out);
        }
        for (key, c) in failed {
            self.hold_off(now, key, c.candidate);
            cx.stats.bump(Outcome::V4PathChallengeFailed);
            let via = c.candidate.to_string();
            out.push(Action::Event(Event::V4Path {
                nid: key.remote,
                locator: c.loc,
                via,
                outcome: "unanswered: path kept",
            }));
        }
        if self.keepalive_at.is_some_and(|t| t <= now) {
            self.keepalives(cx, now, out);
        }
    }

    /// One nonce-only packet per established session over a v4 path that was quiet
    /// for the keepalive interval. O(ILCC entries) once per interval.
    fn keepalives(&mut self, cx: &mut V4Cx<'_>, now: Instant, out: &mut Vec<Action>) {
        let every = cx.cfg.v4_keepalive;
        let local_nid = cx.cfg.local_nid;
        let mut sent = 0;
        for e in cx.ilcc.iter() {
            let quiet = now.saturating_duration_since(e.last_used) >= every;
            if !e.local_locator.is_v4_path() || e.tier != Tier::Established || e.nonce_rx.is_none() || !quiet {
                continue;
            }
            let Some(r) = e.best_remote().filter(|r| r.loc.is_v4_path()) else { continue };
            let pkt = translate::nonce_only_packet(
                ilnp_addr(e.local_locator, e.ours(local_nid)),
                ilnp_addr(r.loc, e.nid),
                &e.nonce_tx,
            );
            out.push(Action::SendWire { pkt, uplink: cx.local.uplink_of(e.local_locator) });
            sent += 1;
        }
        cx.stats.add(Outcome::V4KeepaliveSent, sent);
        self.keepalive_at = Some(now + every);
    }

    /// On a change of our locators: keepalives run while one is a v4 path, and a new
    /// v4 path is warmed up at once.
    ///
    /// Warming: a nonce-only packet from the new v4 path to each established
    /// correspondent's v4 path, while the session still runs elsewhere. It resolves
    /// the neighbours along the path, opens the NAT's mapping, and shows the
    /// correspondent where that mapping is (`observe`), so when the old network
    /// goes the LU over the v4 path takes one round trip, not one plus address
    /// resolution on every hop (measured: 17 ms on a cold LAN path, the datagrams
    /// in flight meanwhile lost). Like an ICE connectivity check, without a server.
    pub(crate) fn locals_changed(&mut self, cx: &mut V4Cx<'_>, now: Instant, out: &mut Vec<Action>) {
        let v4: Vec<Locator> = cx.local.usable().map(|l| l.loc).filter(|l| l.is_v4_path()).collect();
        let on = !cx.cfg.v4_keepalive.is_zero() && !v4.is_empty();
        self.keepalive_at = match (on, self.keepalive_at) {
            (true, Some(t)) => Some(t),
            (true, None) => Some(now + cx.cfg.v4_keepalive),
            (false, _) => None,
        };
        let new: Vec<Locator> = v4.iter().copied().filter(|l| !self.locals.contains(l)).collect();
        self.locals = v4;
        let local_nid = cx.cfg.local_nid;
        for from in new {
            for e in cx.ilcc.iter().filter(|e| e.tier == Tier::Established && e.nonce_rx.is_some()) {
                // its v4 path: from the entry, else from its record (a responder's
                // entry knows only the locator the session began on)
                let known =
                    e.remote_locators.iter().filter(|r| r.state != LocatorState::Expired).map(|r| (r.loc, r.pref));
                let record =
                    cx.peers.get(&e.nid).into_iter().flat_map(|p| p.record.locators.iter().map(|l| (l.loc, l.pref)));
                let Some((to, _)) = known.chain(record).filter(|(l, _)| l.is_v4_path()).min_by_key(|(_, p)| *p) else {
                    continue;
                };
                let pkt =
                    translate::nonce_only_packet(ilnp_addr(from, e.ours(local_nid)), ilnp_addr(to, e.nid), &e.nonce_tx);
                out.push(Action::SendWire { pkt, uplink: cx.local.uplink_of(from) });
                cx.stats.bump(Outcome::V4PathWarmed);
            }
        }
    }
}

/// Packets to a v4-path locator leave as UDP/IPv4: to the path observed behind a
/// NAT, else to the address and port the locator names. The exit pass of every
/// entry point.
/// `stable`: our stable NID (the entry is the one of the packet's source NID).
pub(crate) fn route(ilcc: &Ilcc, stable: Nid, out: &mut [Action]) {
    let addr = |b: &[u8]| split_addr(Ipv6Addr::from(<[u8; 16]>::try_from(b).expect("16 bytes")));
    for a in out.iter_mut() {
        let Action::SendWire { pkt, .. } = a else { continue };
        let (Some(src), Some(dst)) = (pkt.get(8..24), pkt.get(24..40)) else { continue };
        let (loc, nid) = addr(dst);
        if !loc.is_v4_path() {
            continue;
        }
        let key = IlccKey::new(nid, addr(src).1, stable);
        let observed = ilcc.get(&key).and_then(|e| e.remote_locators.iter().find(|r| r.loc == loc));
        let Some(to) = observed.and_then(|r| r.v4_destination()).or_else(|| loc.as_v4_path()) else { continue };
        *a = Action::SendV4 { pkt: std::mem::take(pkt), to };
    }
}

fn echo_body_old(rng: &mut dyn rand_core::RngCore) -> Vec<u8> {
    echo_body(rng, OLD_PATH_MARK)
}

fn echo_body(rng: &mut dyn rand_core::RngCore, mark: &[u8]) -> Vec<u8> {
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
    use crate::ilcc::IlccKey;
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
        assert_eq!(r.ilcc.get(&IlccKey::stable(NA)).unwrap().remote_locators[0].via, None);
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
