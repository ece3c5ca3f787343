//! ILCC admission (issue #11, seed 004): who gets state, in which tier, and how
//! much we send to sources nobody has confirmed.
//!
//! * `Admission::Socket` (default): the fast path only punts a packet from an
//!   unknown NID when a local socket would take it (`bpf_sk_lookup_*` in
//!   `bpf/ilnp_ingress.c`); what reaches the core from an unknown NID becomes an
//!   **embryonic** entry: bounded (`CoreConfig::ilcc_embryonic_max`), the oldest
//!   evicted first, kept out of the BPF map (its traffic stays in the slow path,
//!   where promotion is seen), never sent Locator Updates. It is **promoted** to
//!   established when the peer shows it is there: a packet with its nonce after we
//!   answered (our hello or the application's reply reached the claimed locator).
//!   Entries our side creates (initiator) are established at once, and so are
//!   those of a peer in our database arriving from a locator the database lists
//!   for it (we could have initiated to it; `admit_known_peer`). Established
//!   entries are never evicted to make room (embryonic ones never touch them).
//! * `Admission::Open`: the behaviour before the policy (one tier, every new NID
//!   established up to `ilcc_max_entries`, a hello per entry): the seed's
//!   "without policy" baseline for experiments.
//!
//! No reflection: the nonce-only hello goes once per admitted entry and only while
//! the global token bucket (`hello_rate_pps`, `hello_burst`) has a token; every
//! packet sent towards an embryonic entry is counted (`tx_to_embryonic`).
//!
//! Refusals (`AdmissionState::answer_unadmitted`): a TCP/UDP packet from an unknown NID that
//! no socket takes is passed up statelessly by the fast path, which remembers where
//! it came from in a small LRU map (an [`AnswerHint`]). Our stack's answer (a TCP RST,
//! an ICMPv6 error) reaches the core without an entry; the core sends it, and only
//! it (never data), to the hinted locator under the same global budget as the
//! hellos, with a nonce derived from a secret key, the peer's NID, locator and nonce
//! (`nonce_key.rs`): the entry the same peer gets once the port opens, and the one
//! we open to it, carry that very nonce, so the peer's core does not take it for a
//! restart (nor the Linux 4.9 prototype, which keeps the first nonce it sees).
//!
//! Eviction: the oldest entry of the source locator that holds the most embryonic
//! entries. Oldest, not random: a legitimate handshake survives a fixed number of
//! later admissions from its own network, whatever the attacker's luck. Per
//! locator: a flood from one network (with ingress filtering, BCP 38, a spoofer
//! can only pick NIDs inside its own /64) evicts its own entries, never a new peer
//! elsewhere; a flood that also randomises locators makes every locator hold one
//! entry, and the rule falls back to the oldest overall (FIFO).

use crate::action::{drop_packet, Action, IlccSnapshot};
pub use crate::admission_terms::{Admission, AnswerHint, ANSWER_HINT_MAX_AGE};
use crate::config::CoreConfig;
use crate::event::{DropReason, Event, Outcome, Stats};
use crate::ilcc::{Ilcc, IlccEntry, IlccKey, RemoteLocator, Tier};
use crate::local::LocalLocators;
use crate::locator::LocatorState;
use crate::nonce_key::NonceKey;
use ilnp_wire::translate::{self, Csum, WireMeta};
use ilnp_wire::{ilnp_addr, ClassifyError, Locator, Nid, Nonce, Packet};
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

/// A token bucket with an injected clock: `rate` tokens per second up to `burst`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenBucket {
    pub rate_per_s: f64,
    pub burst: f64,
    tokens: f64,
    #[serde(skip)]
    last: Option<Instant>,
}

impl TokenBucket {
    /// Starts full.
    pub fn new(rate_per_s: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { rate_per_s: rate_per_s.max(0.0), burst, tokens: burst, last: None }
    }

    /// Takes a token at `now` if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        if self.has_token(now) {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl TokenBucket {
    /// Whether a token is there at `now` beyond `reserve` (refilled, none taken).
    pub fn has_token_above(&mut self, now: Instant, reserve: f64) -> bool {
        self.has_token(now) && self.tokens >= reserve + 1.0
    }

    /// Whether a token is there at `now` (refilled, none taken).
    pub fn has_token(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate_per_s).min(self.burst);
        }
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        self.tokens >= 1.0
    }
}

/// A source locator holding at most this many embryonic entries is *sparse*: not
/// where a flood comes from. Packets towards it may take the budget's reserve.
pub const SPARSE_LOCATOR_MAX: usize = 2;

/// Eviction order of the embryonic tier: per source locator, its entries by
/// admission (sequence number); the locators ranked by how many entries they hold,
/// then by their oldest. The victim is the oldest entry of the locator holding the
/// most. Items of entries removed by other paths (idle expiry, flush, promotion)
/// are skipped when met and swept once they outnumber live ones, so the order
/// stays O(bound) and every operation O(log n).
#[derive(Debug, Default)]
pub struct EmbryonicOrder {
    by_loc: HashMap<Locator, BTreeMap<u64, IlccKey>>,
    /// (items, oldest item's sequence reversed, locator): the last is the victim's
    rank: BTreeSet<(usize, Reverse<u64>, Locator)>,
    items: usize,
    next: u64,
}

impl EmbryonicOrder {
    fn rank_key(&self, loc: Locator) -> Option<(usize, Reverse<u64>, Locator)> {
        let m = self.by_loc.get(&loc)?;
        m.first_key_value().map(|(s, _)| (m.len(), Reverse(*s), loc))
    }

    fn push(&mut self, loc: Locator, key: IlccKey) -> u64 {
        self.next += 1;
        if let Some(k) = self.rank_key(loc) {
            self.rank.remove(&k);
        }
        self.by_loc.entry(loc).or_default().insert(self.next, key);
        self.rank.extend(self.rank_key(loc));
        self.items += 1;
        self.next
    }

    /// Takes the oldest item of the locator holding the most items.
    fn pop_victim(&mut self) -> Option<(u64, IlccKey)> {
        let k = *self.rank.last()?;
        self.rank.remove(&k);
        let m = self.by_loc.get_mut(&k.2)?;
        let (seq, key) = m.pop_first()?;
        if m.is_empty() {
            self.by_loc.remove(&k.2);
        }
        self.rank.extend(self.rank_key(k.2));
        self.items -= 1;
        Some((seq, key))
    }

    fn len(&self) -> usize {
        self.items
    }

    /// Items (live or not yet swept) of `loc`.
    fn count_at(&self, loc: Locator) -> usize {
        self.by_loc.get(&loc).map_or(0, BTreeMap::len)
    }

    /// Keeps the items `live` accepts (and rebuilds the ranking).
    fn retain(&mut self, mut live: impl FnMut(u64, IlccKey) -> bool) {
        for m in self.by_loc.values_mut() {
            m.retain(|s, n| live(*s, *n));
        }
        self.by_loc.retain(|_, m| !m.is_empty());
        self.items = self.by_loc.values().map(BTreeMap::len).sum();
        let keys: Vec<Locator> = self.by_loc.keys().copied().collect();
        self.rank = keys.into_iter().filter_map(|l| self.rank_key(l)).collect();
    }
}

/// The core's admission state: the sub-machine deciding who gets ILCC state and
/// what goes to unconfirmed sources. It owns its own state; the rest of the core's
/// it reads or changes comes in as arguments (`AdmissionCx`).
#[derive(Debug)]
pub struct AdmissionState {
    pub order: EmbryonicOrder,
    /// the one budget for packets towards unconfirmed sources: hellos and refusals
    pub hello: TokenBucket,
    /// the key of the nonces we derive (responder, stateless answers)
    pub(crate) key: NonceKey,
}

/// The rest of the core's state admission reads or changes, lent by `Core` for
/// one call (disjoint borrows of its fields).
pub(crate) struct AdmissionCx<'a> {
    pub cfg: &'a CoreConfig,
    pub ilcc: &'a mut Ilcc,
    pub stats: &'a mut Stats,
    pub local: &'a LocalLocators,
    pub rng: &'a mut dyn RngCore,
}

/// A responder's entry `AdmissionState::admit_responder` made, for
/// `AdmissionState::greet_responder`.
pub(crate) struct Admitted {
    tier: Tier,
    nonce_tx: Nonce,
    /// the fast path's entry as made (None: embryonic)
    snap: Option<IlccSnapshot>,
}

/// Counts the status shows: entries per tier and the policy's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TierCounts {
    pub established: usize,
    pub embryonic: usize,
    pub max_established: usize,
    pub max_embryonic: usize,
}

impl AdmissionState {
    pub fn new(rate_per_s: f64, burst: u32) -> AdmissionState {
        AdmissionState {
            order: EmbryonicOrder::default(),
            hello: TokenBucket::new(rate_per_s, burst),
            key: NonceKey::default(),
        }
    }

    /// The budget's reserve: the tokens only packets towards sparse locators take
    /// (half the burst), so a flood from one network, which drains the rest, does
    /// not keep a new peer elsewhere from its hello and its handshake's answers.
    fn reserve(&self) -> f64 {
        (self.hello.burst / 2.0).floor()
    }

    /// A token of the one budget for a packet towards an unconfirmed source at
    /// `loc` (an embryonic entry's; None: a stateless refusal). Only a sparse
    /// locator's (`SPARSE_LOCATOR_MAX`) may take the reserve; what we send towards
    /// unconfirmed sources stays within `hello_rate_pps`/`hello_burst` either way.
    pub(crate) fn take_towards(&mut self, now: Instant, loc: Option<Locator>) -> bool {
        let sparse = loc.is_some_and(|l| self.order.count_at(l) <= SPARSE_LOCATOR_MAX);
        let reserve = if sparse { 0.0 } else { self.reserve() };
        if !self.hello.has_token_above(now, reserve) {
            return false;
        }
        self.hello.take(now)
    }

    /// A verified-format packet from `meta.src_nid`, which has no entry. Creates
    /// the responder's entry in the tier the policy says (evicting the oldest
    /// embryonic one if that tier is full). `listed_pref`: the preference the peer
    /// database gives `meta.src_loc` for that NID (None: not listed there). None if
    /// no entry could be made; else the caller ends a fallback to the peer and
    /// calls `greet_responder`.
    pub(crate) fn admit_responder(
        &mut self,
        cx: &mut AdmissionCx<'_>,
        now: Instant,
        meta: &WireMeta,
        listed_pref: Option<u16>,
        out: &mut Vec<Action>,
    ) -> Option<Admitted> {
        let nid = meta.src_nid;
        // a peer our database lists, arriving from a locator the database gives it,
        // is one our side could have initiated to: established at once (unless that
        // tier is full), so a one-way flow from it gets our Locator Updates
        let known = listed_pref.is_some();
        let tier = match cx.cfg.admission {
            Admission::Open => Tier::Established,
            Admission::Socket if known && !cx.ilcc.is_full() => Tier::Established,
            Admission::Socket => Tier::Embryonic,
        };
        if cx.ilcc.tier_is_full(tier)
            && (tier == Tier::Established || !self.evict_oldest_embryonic(cx.ilcc, cx.stats, out))
        {
            return None;
        }
        // socket: the nonce a refusal to this peer would have carried (see answer_unadmitted)
        let nonce_tx = match cx.cfg.admission {
            _ if cx.cfg.shared_nonce(nid) => meta.nonce,
            Admission::Socket => self.key.derive(cx.cfg, &mut *cx.rng, nid, meta.src_loc, &meta.nonce),
            Admission::Open => crate::nonce_key::random_nonce(&mut *cx.rng, cx.cfg.nonce_len),
        };
        let pref = listed_pref.unwrap_or(10);
        let mut e = IlccEntry::new(
            nid,
            vec![RemoteLocator::new(meta.src_loc, pref, LocatorState::Active, Some(now))],
            meta.dst_loc,
            nonce_tx,
            Some(meta.nonce),
            false,
            now,
        );
        e.tier = tier;
        // the NID it wrote to (ours: inbound checked), None for the stable one (nids.rs)
        e.local_nid = (meta.dst_nid != cx.cfg.local_nid).then_some(meta.dst_nid);
        cx.cfg.apply_peer_settings(&mut e);
        if tier == Tier::Embryonic {
            e.emb_seq = self.order.push(meta.src_loc, e.key());
            self.sweep_order(cx.ilcc);
        }
        let snap = e.snapshot();
        cx.ilcc.insert(e).ok()?;
        Some(Admitted { tier, nonce_tx, snap })
    }

    /// Counts and reports the entry `admit_responder` made for `meta.src_nid`, and
    /// sends the hello if the budget allows.
    pub(crate) fn greet_responder(
        &mut self,
        cx: &mut AdmissionCx<'_>,
        now: Instant,
        meta: &WireMeta,
        admitted: Admitted,
        out: &mut Vec<Action>,
    ) {
        let nid = meta.src_nid;
        let Admitted { tier, nonce_tx, snap } = admitted;
        cx.stats.bump(Outcome::PeerCreated);
        cx.stats.bump(match (tier, cx.cfg.admission) {
            (Tier::Embryonic, _) => Outcome::AdmittedEmbryonic,
            (Tier::Established, Admission::Open) => Outcome::AdmittedOpen,
            (Tier::Established, Admission::Socket) => Outcome::AdmittedKnownPeer,
        });
        out.push(Action::Event(Event::PeerCreated {
            nid,
            initiator: false,
            local_locator: meta.dst_loc,
            remote_locator: meta.src_loc,
        }));
        out.extend(snap.map(Action::IlccUpsert));
        // tell the initiator our nonce now, even if the application never answers
        // (one-way UDP): our Locator Updates must verify (RFC 6741 §13.1). Towards
        // an unconfirmed source only under the global budget.
        if tier == Tier::Embryonic && !self.take_towards(now, Some(meta.src_loc)) {
            cx.stats.bump(Outcome::HelloRateLimited);
            return;
        }
        let pkt = translate::nonce_only_packet(
            ilnp_addr(meta.dst_loc, meta.dst_nid),
            ilnp_addr(meta.src_loc, nid),
            &nonce_tx,
        );
        cx.stats.bump(Outcome::HelloSent);
        if let Some(e) = cx.ilcc.get_mut(&IlccKey::new(nid, meta.dst_nid, cx.cfg.local_nid)) {
            e.answered = true;
            if e.tier == Tier::Embryonic {
                cx.stats.bump(Outcome::TxToEmbryonic);
            }
        }
        out.push(Action::SendWire { pkt, uplink: cx.local.uplink_of(meta.dst_loc) });
    }

    /// admission = socket: our stack's answer (a TCP RST or an ICMPv6 error, never
    /// data) towards `nid`, which has no entry: the answer to a packet the fast path
    /// passed up because no socket took it. Sent as plain IPv6 would, to where that
    /// packet came from (the fast path's `hint`), from the locator it arrived on,
    /// with the derived responder nonce, and only with a token of the global budget
    /// the hellos use: no state, and no more towards unconfirmed sources than the
    /// budget. Counted: `answer_sent`, `answer_rate_limited`, `answer_unadmitted`
    /// (no fresh hint). The budget is looked at first, so under a flood (empty
    /// bucket) the shell is not even asked for the hint (a map lookup each).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn answer_unadmitted(
        &mut self,
        cx: &mut AdmissionCx<'_>,
        now: Instant,
        nid: Nid,
        pkt: &[u8],
        csum: Csum,
        class: &Result<Packet<'_>, ClassifyError>,
        hints: &mut dyn FnMut(Nid) -> Option<AnswerHint>,
        out: &mut Vec<Action>,
    ) {
        let what = || format!("answer to {nid}");
        let reserve = self.reserve();
        if !self.hello.has_token_above(now, reserve) {
            drop_packet(cx.stats, out, DropReason::AnswerRateLimited, what());
            return;
        }
        let Some(h) = hints(nid).filter(|h| now.saturating_duration_since(h.at) <= ANSWER_HINT_MAX_AGE) else {
            drop_packet(cx.stats, out, DropReason::AnswerUnadmitted, what());
            return;
        };
        let Some(local) = Some(h.local_loc).filter(|l| cx.local.is_usable(*l)).or_else(|| cx.local.best()) else {
            drop_packet(cx.stats, out, DropReason::AnswerUnadmitted, what());
            return;
        };
        self.hello.take(now); // there is one (has_token_above above, same `now`)
        let nonce = self.key.derive(cx.cfg, &mut *cx.rng, nid, h.remote_loc, &h.peer_nonce);
        let rule = cx.cfg.checksum_rule(nid);
        let id_prefix = cx.cfg.id_prefix;
        let res = match class {
            Ok(Packet::IcmpError(err)) if csum == Csum::Complete => {
                err.to_wire(id_prefix, local, h.remote_loc, &nonce, &h.peer_nonce)
            }
            // an ICMPv6 error classify refused: not sent, as for an established peer
            Err(c) if ilnp_wire::classify::is_icmp_error(class) => Err(c.error),
            _ => translate::to_wire_rule(pkt, id_prefix, local, h.remote_loc, &nonce, csum, rule),
        };
        match res {
            Ok(pkt) => {
                cx.stats.bump(Outcome::AnswerSent);
                match h.via.filter(|_| h.remote_loc.is_v4_path()) {
                    // over the v4 path: to the datagram's outer source (v4path::route, at
                    // the exit, would take the address the inner locator names)
                    Some(to) => out.push(Action::SendV4 { pkt, to }),
                    None => out.push(Action::SendWire { pkt, uplink: cx.local.uplink_of(local) }),
                }
            }
            Err(e) => drop_packet(cx.stats, out, DropReason::OutMalformed, format!("{}: {e}", what())),
        }
    }

    /// A packet with the right nonce from `nid`'s embryonic entry: promoted if we
    /// answered it before (the peer received what we sent to its locator). Its
    /// order item goes stale, swept later (`sweep_order`).
    pub(crate) fn maybe_promote(&self, ilcc: &mut Ilcc, stats: &mut Stats, key: IlccKey, out: &mut Vec<Action>) {
        let Some(e) = ilcc.get(&key) else { return };
        if e.tier != Tier::Embryonic || !e.answered {
            return;
        }
        if ilcc.promote(&key).is_err() {
            stats.bump(Outcome::PromoteRefusedFull);
            return;
        }
        stats.bump(Outcome::Promoted);
        let e = ilcc.get_mut(&key).expect("present");
        out.extend(e.snapshot().map(Action::IlccUpsert));
    }

    /// Removes the oldest embryonic entry of the source locator holding the most.
    /// False if there is none.
    fn evict_oldest_embryonic(&mut self, ilcc: &mut Ilcc, stats: &mut Stats, out: &mut Vec<Action>) -> bool {
        while let Some((seq, key)) = self.order.pop_victim() {
            let live = ilcc.get(&key).is_some_and(|e| e.tier == Tier::Embryonic && e.emb_seq == seq);
            if live {
                ilcc.remove(&key);
                stats.bump(Outcome::EmbryonicEvicted);
                out.push(Action::Event(Event::PeerRemoved { nid: key.remote, reason: "embryonic_evicted" }));
                return true;
            }
        }
        false
    }

    /// Drops order items whose entry went (promoted, expired, flushed) once they
    /// are more than the live ones: amortised O(1) per admission.
    fn sweep_order(&mut self, ilcc: &Ilcc) {
        let live = ilcc.count(Tier::Embryonic) + 1;
        if self.order.len() <= 2 * live + 16 {
            return;
        }
        self.order.retain(|seq, key| ilcc.get(&key).is_some_and(|e| e.tier == Tier::Embryonic && e.emb_seq == seq));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DropReason;
    use crate::machine::Core;
    use crate::tests::{core, delivered, local, udp, wire, LA, LB, LB2, NA, NB};
    use ilnp_wire::icmpv6::Icmpv6Type;
    use ilnp_wire::ipv6::NextHeader;
    use ilnp_wire::test_support as ts;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Our nonce towards a responder's peer (`AdmissionState::responder_nonce`).
    fn responder_nonce(c: &mut Core, nid: Nid, loc: Locator, peer_nonce: &Nonce) -> Nonce {
        c.admission.key.derive(&c.cfg, &mut *c.rng, nid, loc, peer_nonce)
    }

    #[test]
    fn bucket_refills_at_its_rate_up_to_the_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 3);
        assert!((0..3).all(|_| b.take(t0)), "starts full");
        assert!(!b.take(t0), "burst spent");
        assert!(!b.take(t0 + ms(50)), "half a token");
        assert!(b.take(t0 + ms(100)), "one token after 100 ms at 10/s");
        // a long pause refills to the burst only
        let t1 = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| b.take(t1)).count(), 3);
    }

    /// A wire packet from `nid` (an ILNP host with its own core) to B.
    fn from(nid: Nid, seed: u64, now: Instant) -> (Core, Vec<u8>) {
        let mut c = core(nid, LA, seed, Some((NB, LB)));
        let pkt = wire(&c.handle_outbound(now, &udp(nid, NB, b"x"), Csum::Complete)).pop().unwrap();
        (c, pkt)
    }

    fn responder(max_emb: usize, hello_burst: u32) -> Core {
        let mut b = core(NB, LB, 2, None);
        b.cfg.ilcc_embryonic_max = max_emb;
        b.ilcc = crate::ilcc::Ilcc::new(b.cfg.ilcc_max_entries, max_emb, b.cfg.idle_timeout);
        b.admission = AdmissionState::new(1.0, hello_burst);
        b.cfg.admission = Admission::Socket;
        b
    }

    #[test]
    fn first_packet_is_embryonic_and_the_second_after_our_hello_promotes() {
        let now = Instant::now();
        let mut b = responder(4, 10);
        let (mut a, p1) = from(NA, 1, now);
        let out = b.handle_inbound(now, &p1, Csum::Complete);
        let e = b.ilcc.get(&IlccKey::stable(NA)).unwrap();
        assert_eq!((e.tier, e.answered), (Tier::Embryonic, true));
        assert!(!out.iter().any(|x| matches!(x, Action::IlccUpsert(_))), "embryonic stays out of the fast path");
        assert_eq!(wire(&out).len(), 1, "one hello");
        let p2 = wire(&a.handle_outbound(now, &udp(NA, NB, b"y"), Csum::Complete)).pop().unwrap();
        let out = b.handle_inbound(now + ms(1), &p2, Csum::Complete);
        assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().tier, Tier::Established);
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.nid == NA)), "now in the fast path");
        assert_eq!(b.stats().outcome(Outcome::Promoted), 1);
        assert_eq!(b.tier_counts().established, 1);
        assert_eq!(b.tier_counts().embryonic, 0);
    }

    #[test]
    fn a_restart_snapshot_keeps_established_entries_and_drops_embryonic_ones() {
        let now = Instant::now();
        let mut b = responder(4, 10);
        let (mut a, p1) = from(NA, 1, now);
        b.handle_inbound(now, &p1, Csum::Complete);
        let (_c, q) = from(Nid(0x0200_00ff_fe00_0c0c), 3, now);
        b.handle_inbound(now, &q, Csum::Complete);
        let p2 = wire(&a.handle_outbound(now, &udp(NA, NB, b"y"), Csum::Complete)).pop().unwrap();
        b.handle_inbound(now + ms(1), &p2, Csum::Complete);
        assert_eq!((b.tier_counts().established, b.tier_counts().embryonic), (1, 1));
        let snap = b.snapshot(now + ms(2));
        let nids: Vec<u64> = snap.entries.iter().map(|e| e.nid).collect();
        assert_eq!(nids, vec![NA.0], "an unconfirmed claim does not survive a restart");
    }

    #[test]
    fn without_our_answer_a_repeat_does_not_promote_and_a_wrong_nonce_never_does() {
        let now = Instant::now();
        let mut b = responder(4, 0); // burst 0 is taken as 1: one hello, then none
        let (_a, p) = from(NA, 1, now);
        b.handle_inbound(now, &p, Csum::Complete); // takes the only token
        let (_c, q) = from(Nid(0x0200_00ff_fe00_0c0c), 3, now);
        b.handle_inbound(now, &q, Csum::Complete);
        assert_eq!(b.stats().outcome(Outcome::HelloRateLimited), 1);
        b.handle_inbound(now, &q, Csum::Complete);
        assert_eq!(
            b.ilcc.get(&IlccKey::stable(Nid(0x0200_00ff_fe00_0c0c))).unwrap().tier,
            Tier::Embryonic,
            "never answered"
        );
        // a different core with NA's NID has another nonce: dropped, not promoted
        let (_x, forged) = from(NA, 99, now);
        b.handle_inbound(now, &forged, Csum::Complete);
        assert_eq!(b.stats().dropped(DropReason::BadNonce), 1);
        assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().tier, Tier::Embryonic);
    }

    #[test]
    fn a_full_embryonic_tier_evicts_the_oldest_and_never_an_established_entry() {
        let now = Instant::now();
        let mut b = responder(3, 100);
        // NA becomes established
        let (mut a, p1) = from(NA, 1, now);
        b.handle_inbound(now, &p1, Csum::Complete);
        let p2 = wire(&a.handle_outbound(now, &udp(NA, NB, b"y"), Csum::Complete)).pop().unwrap();
        b.handle_inbound(now, &p2, Csum::Complete);
        let nids: Vec<Nid> = (0..5u64).map(|i| Nid(0x0200_00ff_fe00_1000 + i)).collect();
        for (i, n) in nids.iter().enumerate() {
            let (_c, p) = from(*n, 10 + i as u64, now);
            b.handle_inbound(now + ms(i as u64), &p, Csum::Complete);
        }
        // 5 admitted into 3 slots: the two oldest went, in order
        assert_eq!(b.stats().outcome(Outcome::EmbryonicEvicted), 2);
        assert!(b.ilcc.get(&IlccKey::stable(nids[0])).is_none() && b.ilcc.get(&IlccKey::stable(nids[1])).is_none());
        assert!(nids[2..].iter().all(|n| b.ilcc.get(&IlccKey::stable(*n)).is_some()));
        assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().tier, Tier::Established, "established untouched");
        assert_eq!(
            b.tier_counts(),
            TierCounts { established: 1, embryonic: 3, max_established: 65536, max_embryonic: 3 }
        );
    }

    #[test]
    fn the_order_skips_entries_that_left_by_other_paths() {
        let now = Instant::now();
        let mut b = responder(2, 100);
        let n = |i: u64| Nid(0x0200_00ff_fe00_2000 + i);
        for i in 0..2 {
            let (_c, p) = from(n(i), 20 + i, now);
            b.handle_inbound(now, &p, Csum::Complete);
        }
        b.ilcc.remove(&IlccKey::stable(n(0))); // e.g. idle expiry
        for i in 2..4 {
            let (_c, p) = from(n(i), 20 + i, now);
            b.handle_inbound(now, &p, Csum::Complete);
        }
        // n(2) took n(0)'s free slot; n(3) evicted n(1), the oldest live one
        assert_eq!(b.stats().outcome(Outcome::EmbryonicEvicted), 1);
        assert!(
            b.ilcc.get(&IlccKey::stable(n(1))).is_none()
                && b.ilcc.get(&IlccKey::stable(n(2))).is_some()
                && b.ilcc.get(&IlccKey::stable(n(3))).is_some()
        );
        // many admissions keep the order bounded
        for i in 4..200 {
            let (_c, p) = from(n(i), 20 + i, now);
            b.handle_inbound(now, &p, Csum::Complete);
        }
        assert!(b.admission.order.len() <= 2 * 3 + 16, "{}", b.admission.order.len());
        assert_eq!(b.tier_counts().embryonic, 2);
    }

    #[test]
    fn hellos_towards_unconfirmed_sources_stay_within_the_budget() {
        let t0 = Instant::now();
        let mut b = responder(1000, 5); // 1 token/s, burst 5
        let mut sent = 0;
        for i in 0..200u64 {
            let (_c, p) = from(Nid(0x0200_00ff_fe01_0000 + i), 100 + i, t0);
            // 200 new sources over 2 s
            sent += wire(&b.handle_inbound(t0 + ms(i * 10), &p, Csum::Complete)).len();
        }
        assert!(sent <= 5 + 2, "{sent} hellos: burst 5 + 1/s for 2 s");
        assert_eq!(b.stats().outcome(Outcome::HelloSent) as usize, sent);
        assert_eq!(b.stats().outcome(Outcome::HelloRateLimited) as usize, 200 - sent);
        assert_eq!(b.stats().outcome(Outcome::TxToEmbryonic) as usize, sent);
    }

    #[test]
    fn open_admission_is_one_established_tier_as_before() {
        let now = Instant::now();
        let mut b = responder(1, 0);
        b.cfg.admission = Admission::Open;
        let (_a, p) = from(NA, 1, now);
        let out = b.handle_inbound(now, &p, Csum::Complete);
        assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().tier, Tier::Established);
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(_))));
        assert_eq!(b.stats().outcome(Outcome::AdmittedOpen), 1);
    }

    #[test]
    fn lus_go_to_established_entries_only() {
        let now = Instant::now();
        let mut b = responder(4, 10);
        let (_a, p) = from(NA, 1, now);
        b.handle_inbound(now, &p, Csum::Complete);
        let out = b.set_local_locators(now, vec![local(LB2)]);
        assert!(wire(&out).is_empty(), "no LU to an embryonic entry");
    }

    #[test]
    fn our_stacks_answer_to_an_unadmitted_packet_is_not_sent() {
        let now = Instant::now();
        let mut b = responder(4, 10);
        // the kernel's RST towards a random NID whose SYN found no socket
        let mut rst = ilnp_wire::test_support::tcp(
            ilnp_wire::ilnp_addr(ilnp_wire::test_support::P, NB),
            ilnp_wire::ilnp_addr(ilnp_wire::test_support::P, NA),
            80,
            4000,
            b"",
        );
        rst[40 + 13] = 0x14; // RST|ACK
        let out = b.handle_outbound(now, &rst, Csum::Complete);
        assert!(wire(&out).is_empty());
        assert_eq!(b.stats().dropped(DropReason::AnswerUnadmitted), 1);
        assert!(b.ilcc.get(&IlccKey::stable(NA)).is_none(), "no state");
        // open admission: as before (unknown peer, the application hears)
        b.cfg.admission = Admission::Open;
        b.handle_outbound(now, &rst, Csum::Complete);
        assert_eq!(b.stats().dropped(DropReason::UnknownPeer), 1);
    }

    /// A TCP segment in identifier form with the given flags and a correct checksum.
    fn tcp_seg(src: Nid, dst: Nid, sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        let (s, d) = (ilnp_addr(ts::P, src), ilnp_addr(ts::P, dst));
        let mut t = ts::tcp(s, d, sport, dport, b"");
        t[40 + 13] = flags;
        t[40 + 16..40 + 18].copy_from_slice(&[0, 0]);
        let c = ilnp_wire::checksum::compute(&s, &d, NextHeader::TCP, &t[40..]);
        t[40 + 16..40 + 18].copy_from_slice(&c.to_be_bytes());
        t
    }

    /// A's wire SYN to B (A initiates from its peer record), with A's nonce.
    fn syn_from_a(a: &mut Core, now: Instant) -> (Vec<u8>, Nonce) {
        let w = wire(&a.handle_outbound(now, &tcp_seg(NA, NB, 4000, 80, 0x02), Csum::Complete)).pop().unwrap();
        let n = crate::tests::nonce_of(&w);
        (w, n)
    }

    #[test]
    fn a_refusal_goes_to_the_hinted_locator_and_the_reopened_port_keeps_its_nonce() {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let mut b = responder(4, 10);
        let (_syn, na) = syn_from_a(&mut a, now);
        // B's fast path found no socket: it passed the SYN up and left this hint
        let hint = AnswerHint { remote_loc: LA, local_loc: LB, peer_nonce: na, at: now, via: None };
        let rst = tcp_seg(NB, NA, 80, 4000, 0x14);
        let out = b.handle_outbound_hinted(now + ms(1), &rst, Csum::Complete, &mut |n| (n == NA).then_some(hint));
        let w = wire(&out);
        assert_eq!(w.len(), 1, "the refusal is sent");
        let p = ilnp_wire::ipv6::Packet::new_checked(&w[0][..]).unwrap();
        assert_eq!(
            (p.src(), p.dst()),
            (ilnp_addr(LB, NB), ilnp_addr(LA, NA)),
            "from where it arrived, to where it came from"
        );
        let nb = crate::tests::nonce_of(&w[0]);
        assert_eq!(nb, responder_nonce(&mut b, NA, LA, &na), "the derived responder nonce");
        assert!(b.ilcc.get(&IlccKey::stable(NA)).is_none(), "no state");
        assert_eq!(b.stats().outcome(Outcome::AnswerSent), 1);
        // A takes it: its stack gets the RST (ECONNREFUSED), its core learns B's nonce
        let got = a.handle_inbound(now + ms(2), &w[0], Csum::Complete);
        let d = delivered(&got);
        assert_eq!(d.len(), 1, "{got:?}");
        assert_eq!(d[0][40 + 13], 0x14, "the RST reaches A's stack");
        assert_eq!(a.ilcc.get(&IlccKey::stable(NB)).unwrap().nonce_rx, Some(nb));
        // the port opens; A connects again on the same entry: B admits it with the
        // nonce the RST carried, so A's core sees no change (no restart challenge)
        let (syn2, _) = syn_from_a(&mut a, now + ms(10));
        b.handle_inbound(now + ms(11), &syn2, Csum::Complete);
        assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().nonce_tx, nb);
        let synack = wire(&b.handle_outbound(now + ms(12), &tcp_seg(NB, NA, 80, 4000, 0x12), Csum::Complete));
        let got = a.handle_inbound(now + ms(13), &synack[0], Csum::Complete);
        assert_eq!(delivered(&got).len(), 1, "A's stack gets the SYN-ACK: {got:?}");
        assert_eq!(a.stats().dropped(DropReason::BadNonce), 0);
        assert_eq!(a.stats().outcome(Outcome::PeerChallengeSent), 0);
    }

    #[test]
    fn a_port_unreachable_reaches_the_peer_with_its_quote_in_wire_form() {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let mut b = responder(4, 10);
        let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
        let na = crate::tests::nonce_of(&w);
        let hint = AnswerHint { remote_loc: LA, local_loc: LB, peer_nonce: na, at: now, via: None };
        // B's stack answers the identifier-form datagram with port unreachable
        let err = ts::icmp_error(
            ilnp_addr(ts::P, NB),
            ilnp_addr(ts::P, NA),
            Icmpv6Type::DEST_UNREACH,
            4,
            0,
            &udp(NA, NB, b"x"),
        );
        let out = b.handle_outbound_hinted(now, &err, Csum::Complete, &mut |_| Some(hint));
        let e = wire(&out);
        assert_eq!(e.len(), 1, "{out:?}");
        let got = a.handle_inbound(now + ms(1), &e[0], Csum::Complete);
        assert_eq!(a.stats().outcome(Outcome::IcmpErrorTranslated), 1, "A believes it: {got:?}");
        let d = delivered(&got);
        assert_eq!((d.len(), d[0][40], d[0][41]), (1, 1, 4), "port unreachable for A's stack");
        assert!(b.ilcc.get(&IlccKey::stable(NA)).is_none());
    }

    #[test]
    fn refusals_share_the_hello_budget_and_need_a_fresh_hint() {
        let t0 = Instant::now();
        let mut b = responder(4, 3); // 1 token/s, burst 3
        let rst = |n: u64| tcp_seg(NB, Nid(0x0200_00ff_fe03_0000 + n), 80, 4000, 0x14);
        let hint =
            |at| AnswerHint { remote_loc: LA, local_loc: LB, peer_nonce: Nonce::N32([1, 2, 3, 4]), at, via: None };
        let (mut sent, mut asked) = (0, 0);
        for i in 0..10 {
            let mut h = |_| {
                asked += 1;
                Some(hint(t0))
            };
            sent += wire(&b.handle_outbound_hinted(t0, &rst(i), Csum::Complete, &mut h)).len();
        }
        assert_eq!(sent, 2, "the burst but its reserve (half), then nothing");
        assert_eq!(b.stats().dropped(DropReason::AnswerRateLimited), 8);
        assert_eq!(asked, 2, "no hint looked up without a token");
        // a hello takes from the same bucket: after 1 s one token, spent by the refusal
        let t1 = t0 + ms(1000);
        assert_eq!(wire(&b.handle_outbound_hinted(t1, &rst(20), Csum::Complete, &mut |_| Some(hint(t1)))).len(), 1);
        assert!(wire(&b.handle_outbound_hinted(t1, &rst(21), Csum::Complete, &mut |_| Some(hint(t1)))).is_empty());
        // the reserve is left for a new peer at a sparse locator: its hello goes
        let (_c, p) = from(NA, 1, t1);
        b.handle_inbound(t1, &p, Csum::Complete);
        assert_eq!(b.stats().outcome(Outcome::HelloSent), 1, "the reserve's token");
        let (_c, p) = from(Nid(0x0200_00ff_fe03_7777), 2, t1);
        b.handle_inbound(t1, &p, Csum::Complete);
        assert_eq!(b.stats().outcome(Outcome::HelloRateLimited), 1, "no token left for the next hello");
        // no hint, or one older than ANSWER_HINT_MAX_AGE: not sent, no token taken
        let t2 = t1 + ANSWER_HINT_MAX_AGE + ms(2000);
        assert!(wire(&b.handle_outbound_hinted(t2, &rst(30), Csum::Complete, &mut |_| None)).is_empty());
        let old = hint(t2 - ANSWER_HINT_MAX_AGE - ms(1));
        assert!(wire(&b.handle_outbound_hinted(t2, &rst(31), Csum::Complete, &mut |_| Some(old))).is_empty());
        assert_eq!(b.stats().dropped(DropReason::AnswerUnadmitted), 2);
        assert_eq!(wire(&b.handle_outbound_hinted(t2, &rst(32), Csum::Complete, &mut |_| Some(hint(t2)))).len(), 1);
        assert_eq!(b.stats().outcome(Outcome::AnswerSent), 4);
        assert_eq!(b.tier_counts().embryonic, 2, "only the two peers' packets made state");
    }

    #[test]
    fn responder_nonces_are_keyed_and_bound_to_nid_locator_and_peer_nonce() {
        let mut b = responder(4, 10);
        let n = Nonce::N32([9, 9, 9, 9]);
        let x = responder_nonce(&mut b, NA, LA, &n);
        assert_eq!(x, responder_nonce(&mut b, NA, LA, &n), "stable");
        assert_ne!(x, responder_nonce(&mut b, NA, LB2, &n), "another locator");
        assert_ne!(x, responder_nonce(&mut b, NB, LA, &n), "another NID");
        assert_ne!(x, responder_nonce(&mut b, NA, LA, &Nonce::N32([9, 9, 9, 8])), "another peer nonce");
        let mut other = core(NB, LB, 77, None);
        assert_ne!(x, responder_nonce(&mut other, NA, LA, &n), "another key");
        other.cfg.nonce_len = 12;
        assert!(matches!(responder_nonce(&mut other, NA, LA, &n), Nonce::N96(_)));
        // derived 96-bit nonces keep DestOpts byte 12 (nonce byte 8) below 0x80 as random
        // ones do (crate::nonce_key::nonce96; tests/test_gso_exthdr.py): over 256 peers, never set
        let mut seen_high_bit_6 = false;
        for i in 0..256u64 {
            let x = responder_nonce(&mut other, Nid(NA.0 ^ i), LA, &n);
            let b = x.as_bytes();
            assert!(b[8] < 0x80, "derived nonce {b:02x?}");
            seen_high_bit_6 |= b[8] >= 0x40;
        }
        assert!(seen_high_bit_6, "the other bits still vary");
    }

    #[test]
    fn a_flood_from_one_locator_evicts_its_own_entries_not_a_peer_elsewhere() {
        let now = Instant::now();
        let mut b = responder(4, 100);
        let lc = Locator(0x2001_0db8_000c_0000);
        let c_nid = Nid(0x0200_00ff_fe00_000e);
        // C (another network) arrives first, then 50 flood NIDs from LA
        let mut c = core(c_nid, lc, 7, Some((NB, LB)));
        let pc = wire(&c.handle_outbound(now, &udp(c_nid, NB, b"c"), Csum::Complete)).pop().unwrap();
        b.handle_inbound(now, &pc, Csum::Complete);
        for i in 0..50u64 {
            let (_x, p) = from(Nid(0x0200_00ff_fe02_0000 + i), 200 + i, now);
            b.handle_inbound(now, &p, Csum::Complete);
        }
        assert_eq!(b.stats().outcome(Outcome::EmbryonicEvicted), 47);
        assert_eq!(b.ilcc.get(&IlccKey::stable(c_nid)).map(|e| e.tier), Some(Tier::Embryonic), "C kept");
        // and C's next packet (after our hello) still promotes it
        let pc2 = wire(&c.handle_outbound(now, &udp(c_nid, NB, b"c2"), Csum::Complete)).pop().unwrap();
        b.handle_inbound(now, &pc2, Csum::Complete);
        assert_eq!(b.ilcc.get(&IlccKey::stable(c_nid)).map(|e| e.tier), Some(Tier::Established));
    }

    #[test]
    fn a_configured_peer_from_its_configured_locator_is_established_at_once() {
        let now = Instant::now();
        let mut b = responder(4, 10);
        b.add_peer(crate::peers::PeerRecord {
            name: "a".into(),
            nid: NA,
            locators: vec![crate::peers::PeerLocator { loc: LA, pref: 10 }],
        });
        let (_a, p) = from(NA, 1, now);
        let out = b.handle_inbound(now, &p, Csum::Complete);
        assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().tier, Tier::Established);
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(_))));
        assert_eq!(b.stats().outcome(Outcome::AdmittedKnownPeer), 1);
        // the same NID from a locator the record does not list would be embryonic
        let mut c = responder(4, 10);
        c.add_peer(crate::peers::PeerRecord {
            name: "a".into(),
            nid: NA,
            locators: vec![crate::peers::PeerLocator { loc: LB2, pref: 10 }],
        });
        c.handle_inbound(now, &p, Csum::Complete);
        assert_eq!(c.ilcc.get(&IlccKey::stable(NA)).unwrap().tier, Tier::Embryonic);
    }
}
