//! Multihoming load balancing (issue #12, seed 002 §IV-H): which (source,
//! destination) locator pair each packet to a correspondent takes.
//!
//! Policies, per correspondent or global:
//! * `failover` (default): one pair, the ILCC entry's (today's behaviour).
//! * `per-flow`: the identifier 5-tuple is hashed (a seed from the configuration or
//!   the local NID, so the choice survives a daemon restart) onto one of
//!   [`SLOTS`] slots; each slot is given to a pair by weighted rendezvous hashing,
//!   so when a pair dies only its slots (flows) move, the others keep their path.
//! * `per-packet`: a **smooth weighted round robin** schedule (nginx's SWRR) of
//!   length Σ weights, walked by one per-peer sequence number. Chosen over deficit
//!   counters because the schedule is a plain table: the fast path walks it with
//!   one shared atomic increment (exact across CPUs, no per-CPU drift) and O(1)
//!   work per packet whatever the number of locators, and SWRR interleaves the
//!   pairs (80/20 → A A B A A, not A A A A B), which keeps per-path bursts short.
//!   Over any window of Σ weights consecutive packets the split is exact.
//!
//! Weights. A pair (local `l`, remote `r`) weighs `w_local(l) × w_remote(r)`:
//! * `w_local`: the weight configured for `l`'s uplink (`locator_weight`,
//!   `ilnpctl locator set DEV weight N`), default 1; 0 = not balanced onto (backup).
//!   Local locators whose uplink has no default router are left out while one with
//!   a router exists (unreachable).
//! * `w_remote`: the peer's advertised preferences are tiers, as RFC 6742 reads them
//!   (lower preferred): only the peer's usable locators of its best preference carry
//!   traffic, each with weight 1 (equal preference = share equally). A peer steers
//!   which of its locators we use (and demotes a dead one, e.g. its router gone →
//!   20, which leaves the tier at once); we steer the split over our uplinks.
//!
//! Bounds: at most [`MAX_PAIRS`] pairs (8 remote locators of equal preference × 2
//! uplinks fit), weights reduced so the schedule fits [`SLOTS`]. The fast path and
//! the slow path use the same [`BalanceTable`], so they choose the same pairs.

use crate::action::Action;
pub use crate::balance_table::{BalanceChange, BalanceTable};
use crate::config::CoreConfig;
use crate::ilcc::{Ilcc, IlccEntry, IlccKey};
use crate::local::LocalLocators;
use crate::locator::LocatorState;
use ilnp_wire::l4::FlowPorts;
use ilnp_wire::{Locator, Nid};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// Most locator pairs balanced over per correspondent (the fast path's table).
pub const MAX_PAIRS: usize = 16;
/// Schedule / flow-slot table length (the fast path's table).
pub const SLOTS: usize = 256;

/// The policy and its names: `ilnp_wire::policy` (the control protocol names it too).
pub use ilnp_wire::Policy;

/// A balancing request the core refuses, naming the bad item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BalanceError {
    /// a policy for a correspondent that is neither a peer nor in the ILCC
    UnknownPeer(Nid),
    /// the change would leave every uplink with weight 0
    AllWeightsZero,
}

impl fmt::Display for BalanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BalanceError::UnknownPeer(n) => write!(f, "unknown peer {n}"),
            BalanceError::AllWeightsZero => f.write_str("every uplink would have weight 0: nothing to balance onto"),
        }
    }
}

impl std::error::Error for BalanceError {}

/// The 64-bit finaliser of MurmurHash3 (also splitmix64's): cheap, every input bit
/// reaches every output bit. The egress program has the same function.
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The flow hash of an identifier-form packet: seed, both NIDs, protocol and ports.
/// Identical in `bpf/ilnp_egress.c` (`flow_hash`).
pub fn flow_hash(seed: u64, src: Nid, dst: Nid, f: FlowPorts) -> u64 {
    let ports = (u64::from(f.proto.0) << 32) | (u64::from(f.sport) << 16) | u64::from(f.dport);
    mix64(mix64(mix64(seed ^ src.0) ^ dst.0) ^ ports)
}

/// The default flow seed: stable for a host across restarts (derived from its NID).
pub fn default_flow_seed(local_nid: Nid) -> u64 {
    mix64(local_nid.0 ^ 0x696c_6e70_6261_6c61) // "ilnpbala"
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Weights divided by their common divisor, scaled down (each kept ≥ 1) if their
/// sum still exceeds what the schedule holds.
pub fn reduce_weights(w: &[u32]) -> Vec<u32> {
    let g = w.iter().copied().fold(0, gcd).max(1);
    let mut r: Vec<u32> = w.iter().map(|x| x / g).collect();
    let sum: u64 = r.iter().map(|&x| u64::from(x)).sum();
    if sum > SLOTS as u64 {
        let target = (SLOTS - MAX_PAIRS) as u64;
        r = r.iter().map(|&x| ((u64::from(x) * target / sum) as u32).max(1)).collect();
    }
    r
}

/// Smooth weighted round robin: each step every pair gains its weight, the
/// largest (first on ties) is taken and pays the total. Over Σw steps pair i is
/// taken exactly w_i times, interleaved.
pub fn swrr_schedule(w: &[u32]) -> Vec<u8> {
    let total: i64 = w.iter().map(|&x| i64::from(x)).sum();
    let mut cur = vec![0i64; w.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, &x) in cur.iter_mut().zip(w) {
            *c += i64::from(x);
        }
        let best = (0..w.len()).max_by_key(|&i| (cur[i], std::cmp::Reverse(i))).expect("non-empty");
        cur[best] -= total;
        out.push(best as u8);
    }
    out
}

/// Per-flow slots: each of `SLOTS` slots goes to the pair owning the highest
/// scoring of all pairs' virtual nodes (one per unit of weight). A pair's score
/// depends only on the slot, the seed and the pair itself, so removing a pair
/// moves only the slots it owned.
pub fn flow_slots(pairs: &[(Locator, Locator)], w: &[u32], seed: u64) -> Vec<u8> {
    (0..SLOTS as u64)
        .map(|s| {
            let base = mix64(seed ^ mix64(s));
            let mut best = (0u64, 0u8);
            for (i, ((l, r), &wi)) in pairs.iter().zip(w).enumerate() {
                let pk = mix64(base ^ mix64(l.0 ^ mix64(r.0)));
                for j in 0..u64::from(wi) {
                    let score = mix64(pk ^ j);
                    if score >= best.0 {
                        best = (score, i as u8);
                    }
                }
            }
            best.1
        })
        .collect()
}

/// The pairs and weights for one correspondent, from our usable locators and its
/// best-preference tier (empty: nothing to balance over, use the failover pair).
pub fn candidate_pairs(
    local: &LocalLocators,
    e: &IlccEntry,
    weights: &BTreeMap<u32, u32>,
) -> Vec<((Locator, Locator), u32)> {
    let usable: Vec<_> = local.usable().collect();
    let routed = usable.iter().any(|l| l.has_router);
    let locals: Vec<(Locator, u32)> = usable
        .iter()
        .filter(|l| l.has_router || !routed)
        .map(|l| (l.loc, weights.get(&l.ifindex).copied().unwrap_or(1)))
        .filter(|&(_, w)| w > 0)
        .collect();
    let live = |r: &&crate::ilcc::RemoteLocator| matches!(r.state, LocatorState::Active | LocatorState::Valid);
    let tier_of = |aged: bool| -> Vec<Locator> {
        let ok = |r: &&crate::ilcc::RemoteLocator| if aged { r.state == LocatorState::Aged } else { live(r) };
        let best = e.remote_locators.iter().filter(ok).map(|r| r.pref).min();
        let mut v: Vec<Locator> =
            e.remote_locators.iter().filter(ok).filter(|r| Some(r.pref) == best).map(|r| r.loc).collect();
        v.sort();
        v
    };
    let mut remotes = tier_of(false);
    if remotes.is_empty() {
        remotes = tier_of(true);
    }
    let mut out = Vec::new();
    for &(l, w) in &locals {
        for &r in &remotes {
            if out.len() < MAX_PAIRS {
                out.push(((l, r), w));
            }
        }
    }
    out
}

/// Build the table for a policy over candidate pairs.
pub fn build_table(key: IlccKey, policy: Policy, cands: &[((Locator, Locator), u32)], seed: u64) -> BalanceTable {
    let pairs: Vec<(Locator, Locator)> = cands.iter().map(|c| c.0).collect();
    let weights = reduce_weights(&cands.iter().map(|c| c.1).collect::<Vec<_>>());
    let slots = match policy {
        Policy::PerPacket => swrr_schedule(&weights),
        _ => flow_slots(&pairs, &weights, seed),
    };
    BalanceTable { key, policy, pairs, weights, slots, flow_seed: seed, seq: 0 }
}

/// The core's balancing configuration and per-correspondent tables: the
/// sub-machine owns them; the rest of the core's state it reads comes in as
/// arguments (`BalanceCx`).
#[derive(Clone, Debug, Default)]
pub struct Balancer {
    /// policy for correspondents without their own
    pub default_policy: Policy,
    pub peer_policy: BTreeMap<Nid, Policy>,
    /// configured weight per uplink ifindex (absent: 1)
    pub weights: BTreeMap<u32, u32>,
    pub flow_seed: u64,
    /// current table per ILCC entry whose correspondent's policy is not failover
    pub tables: HashMap<IlccKey, BalanceTable>,
}

impl Balancer {
    pub fn new(local_nid: Nid) -> Balancer {
        Balancer { flow_seed: default_flow_seed(local_nid), ..Balancer::default() }
    }

    pub fn policy_of(&self, nid: Nid) -> Policy {
        self.peer_policy.get(&nid).copied().unwrap_or(self.default_policy)
    }

    /// The pair for the next packet of the entry `key` (None: failover, use the
    /// entry's pair); `local_nid`: the packet's source NID. Per-packet advances the
    /// entry's sequence.
    pub fn choose(&mut self, key: IlccKey, local_nid: Nid, f: FlowPorts) -> Option<(Locator, Locator)> {
        let t = self.tables.get_mut(&key)?;
        let h = if t.policy == Policy::PerFlow { flow_hash(t.flow_seed, local_nid, key.remote, f) } else { 0 };
        let pair = t.pick(t.seq, h);
        if t.policy == Policy::PerPacket {
            t.seq = t.seq.wrapping_add(1);
        }
        Some(pair)
    }

    /// Recompute the table of the entry `key`; returns the change for the fast path, if any.
    pub fn refresh(&mut self, key: IlccKey, local: &LocalLocators, e: Option<&IlccEntry>) -> Option<BalanceChange> {
        let policy = self.policy_of(key.remote);
        let cands = match e {
            Some(e) if policy != Policy::Failover => candidate_pairs(local, e, &self.weights),
            _ => Vec::new(),
        };
        if cands.is_empty() {
            return self.tables.remove(&key).map(|_| BalanceChange::Remove(key));
        }
        let mut t = build_table(key, policy, &cands, self.flow_seed);
        match self.tables.get(&key) {
            Some(old) if old.pairs == t.pairs && old.slots == t.slots && old.policy == t.policy => None,
            old => {
                t.seq = old.map_or(0, |o| o.seq);
                self.tables.insert(key, t.clone());
                Some(BalanceChange::Upsert(t))
            }
        }
    }
}

/// What `ilnpctl status` / `policy` show.
#[derive(Clone, Debug, Serialize)]
pub struct BalanceView {
    pub default_policy: Policy,
    /// NID → policy, for correspondents with their own
    pub peer_policy: BTreeMap<Nid, Policy>,
    /// uplink ifindex → configured weight
    pub weights: BTreeMap<u32, u32>,
    pub flow_seed: u64,
    pub peers: Vec<BalancePeerView>,
}

/// One correspondent's current balancing.
#[derive(Clone, Debug, Serialize)]
pub struct BalancePeerView {
    pub nid: Nid,
    pub policy: Policy,
    /// "local>remote" with the pair's reduced weight
    pub pairs: Vec<(String, u32)>,
    pub seq: u64,
}

/// The rest of the core's state balancing reads, lent by `Core` for one call
/// (disjoint borrows of its fields).
pub(crate) struct BalanceCx<'a> {
    pub cfg: &'a CoreConfig,
    pub ilcc: &'a Ilcc,
    pub local: &'a LocalLocators,
}

impl Balancer {
    /// After a public entry point: tables follow entries that changed (upserted),
    /// all of them when our locator set was reported, and removed entries lose theirs.
    pub(crate) fn follow(&mut self, cx: &BalanceCx<'_>, out: &mut Vec<Action>) {
        let mut keys: BTreeSet<IlccKey> = BTreeSet::new();
        let mut all = false;
        for a in out.iter() {
            match a {
                Action::IlccUpsert(s) => {
                    keys.insert(s.key());
                }
                Action::IlccRemove(k) => {
                    keys.insert(*k);
                }
                Action::LocalLocators(_) => all = true,
                _ => {}
            }
        }
        if all {
            keys.extend(cx.ilcc.iter().map(|e| e.key()));
            keys.extend(self.tables.keys().copied());
        }
        self.refresh_each(cx, keys, out);
    }

    /// `refresh` of each of `keys`, the changes into `out`.
    fn refresh_each(&mut self, cx: &BalanceCx<'_>, keys: impl IntoIterator<Item = IlccKey>, out: &mut Vec<Action>) {
        for key in keys {
            // failover and no table: nothing to do, O(1) per entry
            if self.policy_of(key.remote) == Policy::Failover && !self.tables.contains_key(&key) {
                continue;
            }
            if let Some(c) = self.refresh(key, cx.local, cx.ilcc.get(&key)) {
                out.push(Action::Balance(c));
            }
        }
    }

    /// `refresh` of every ILCC entry, the changes returned.
    fn refresh_entries(&mut self, cx: &BalanceCx<'_>) -> Vec<Action> {
        let mut out = Vec::new();
        let keys: Vec<IlccKey> = cx.ilcc.iter().map(|e| e.key()).collect();
        self.refresh_each(cx, keys, &mut out);
        out
    }

    /// The pair the next packet `pkt` of the entry `key` takes under its policy
    /// (None: failover); its table is refreshed first.
    pub(crate) fn choose_for(
        &mut self,
        cx: &BalanceCx<'_>,
        key: IlccKey,
        pkt: &[u8],
        out: &mut Vec<Action>,
    ) -> Option<(Locator, Locator)> {
        if self.policy_of(key.remote) == Policy::Failover && !self.tables.contains_key(&key) {
            return None;
        }
        self.refresh_each(cx, [key], out);
        let f = ilnp_wire::l4::flow_ports(pkt);
        self.choose(key, key.local.unwrap_or(cx.cfg.local_nid), f)
    }

    /// Sets the policy of one correspondent (`listed`: it has a peer record; else it
    /// needs an ILCC entry), or the default (`None`). Returns the fast path's changes.
    pub(crate) fn set_policy(
        &mut self,
        cx: &BalanceCx<'_>,
        peer: Option<Nid>,
        listed: bool,
        policy: Policy,
    ) -> Result<Vec<Action>, BalanceError> {
        let mut out = Vec::new();
        match peer {
            Some(n) if !listed && !cx.ilcc.knows(n) => return Err(BalanceError::UnknownPeer(n)),
            Some(n) => {
                self.peer_policy.insert(n, policy);
                self.refresh_each(cx, cx.ilcc.keys_of(n), &mut out);
            }
            None => {
                self.default_policy = policy;
                out = self.refresh_entries(cx);
            }
        }
        Ok(out)
    }

    /// Sets the balancing weight of the uplink `ifindex` (0 = backup only). Refused
    /// if every uplink carrying a locator would then weigh 0.
    pub(crate) fn set_uplink_weight(
        &mut self,
        cx: &BalanceCx<'_>,
        ifindex: u32,
        weight: u32,
    ) -> Result<Vec<Action>, BalanceError> {
        let mut w = self.weights.clone();
        w.insert(ifindex, weight);
        let mut uplinks: BTreeSet<u32> = cx.local.all().iter().map(|l| l.ifindex).collect();
        uplinks.insert(ifindex);
        if uplinks.iter().all(|u| w.get(u).copied().unwrap_or(1) == 0) {
            return Err(BalanceError::AllWeightsZero);
        }
        self.weights = w;
        Ok(self.refresh_entries(cx))
    }

    /// Sets the per-flow hash seed. Returns the fast path's changes.
    pub(crate) fn set_flow_seed(&mut self, cx: &BalanceCx<'_>, seed: u64) -> Vec<Action> {
        self.flow_seed = seed;
        self.refresh_entries(cx)
    }

    /// What `ilnpctl status` / `policy` show.
    pub fn view(&self) -> BalanceView {
        let mut peers: Vec<BalancePeerView> = self
            .tables
            .values()
            .map(|t| BalancePeerView {
                nid: t.key.remote,
                policy: t.policy,
                pairs: t.pairs.iter().zip(&t.weights).map(|((l, r), w)| (format!("{l}>{r}"), *w)).collect(),
                seq: t.seq,
            })
            .collect();
        peers.sort_by_key(|p| p.nid);
        BalanceView {
            default_policy: self.default_policy,
            peer_policy: self.peer_policy.clone(),
            weights: self.weights.clone(),
            flow_seed: self.flow_seed,
            peers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Core;
    use ilnp_wire::ipv6::NextHeader;

    const L1: Locator = Locator(0x2001_0db8_0001_0000);
    const L2: Locator = Locator(0x2001_0db8_0002_0000);

    #[test]
    fn swrr_is_exact_and_interleaved() {
        let s = swrr_schedule(&reduce_weights(&[80, 20]));
        assert_eq!(s, vec![0, 0, 1, 0, 0]);
        let s = swrr_schedule(&[1, 1, 1, 1, 1, 1, 1, 1]);
        assert_eq!(s, (0..8).collect::<Vec<u8>>());
        // any window of Σw packets has the exact split
        let w = [5, 3, 2];
        let s = swrr_schedule(&w);
        for (i, &wi) in w.iter().enumerate() {
            assert_eq!(s.iter().filter(|&&x| x as usize == i).count(), wi as usize);
        }
    }

    #[test]
    fn weights_reduce_into_the_table() {
        assert_eq!(reduce_weights(&[80, 20]), vec![4, 1]);
        assert_eq!(reduce_weights(&[100, 0]), vec![1, 0]);
        let big = reduce_weights(&[1000, 999, 1]);
        assert!(big.iter().sum::<u32>() as usize <= SLOTS && big[2] == 1, "{big:?}");
    }

    #[test]
    fn per_flow_slots_follow_weights_and_move_only_a_dead_pairs_slots() {
        let pairs = [(L1, L2), (L2, L2)];
        let s = flow_slots(&pairs, &[4, 1], 7);
        let a = s.iter().filter(|&&x| x == 0).count() as f64 / SLOTS as f64;
        assert!((a - 0.8).abs() < 0.08, "{a}");
        // pair 1 dies: pair 0's slots stay put
        let s2 = flow_slots(&pairs[..1], &[4], 7);
        assert!(s.iter().zip(&s2).all(|(x, y)| *x == 0 || *y == 0) && s2.iter().all(|&x| x == 0));
        // a different seed gives a different table; the same seed the same one
        assert_eq!(s, flow_slots(&pairs, &[4, 1], 7));
        assert_ne!(s, flow_slots(&pairs, &[4, 1], 8));
    }

    #[test]
    fn flow_hash_is_fixed_across_runs() {
        // a literal: the egress program (and a restarted daemon) must agree
        let f = FlowPorts { proto: NextHeader::UDP, sport: 4000, dport: 53 };
        assert_eq!(flow_hash(1, Nid(2), Nid(3), f), flow_hash(1, Nid(2), Nid(3), f));
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0xb456_bcfc_34c2_cb2c);
        assert_ne!(flow_hash(1, Nid(2), Nid(3), f), flow_hash(1, Nid(2), Nid(3), FlowPorts { sport: 4001, ..f }));
    }

    use crate::locator::LocalLocator;
    use crate::peers::{PeerLocator, PeerRecord};
    use crate::tests::{core, NA, NB};
    use ilnp_wire::split_addr;
    use ilnp_wire::translate::Csum;
    use std::time::Instant;

    const LB1: Locator = Locator(0x2001_0db8_00b1_0000);

    fn two_uplinks(a: &mut Core, now: Instant) {
        let mk = |loc, ifindex| LocalLocator { ifindex, ..crate::tests::local(loc) };
        a.set_local_locators(now, vec![mk(L1, 2), mk(L2, 3)]);
    }

    /// (source locator, destination locator, uplink) of every packet sent.
    fn send(
        a: &mut Core,
        now: Instant,
        n: usize,
        sport: impl Fn(usize) -> u16,
    ) -> Vec<(Locator, Locator, Option<u32>)> {
        (0..n)
            .flat_map(|i| {
                let pkt = ilnp_wire::test_support::udp(
                    ilnp_wire::ilnp_addr(crate::tests::P, NA),
                    ilnp_wire::ilnp_addr(crate::tests::P, NB),
                    sport(i),
                    9,
                    b"x",
                );
                let out = a.handle_outbound(now, &pkt, Csum::Complete);
                out.into_iter().filter_map(|x| match x {
                    Action::SendWire { pkt, uplink } => {
                        let p = ilnp_wire::ipv6::Packet::new_checked(pkt).unwrap();
                        Some((split_addr(p.src()).0, split_addr(p.dst()).0, uplink))
                    }
                    _ => None,
                })
            })
            .collect()
    }

    #[test]
    fn per_packet_80_20_is_exact_and_leaves_by_the_source_uplink() {
        let now = Instant::now();
        let mut a = core(NA, L1, 1, Some((NB, LB1)));
        two_uplinks(&mut a, now);
        a.set_uplink_weight(2, 80).unwrap();
        a.set_uplink_weight(3, 20).unwrap();
        let acts = a.set_policy(None, Policy::PerPacket).unwrap();
        assert!(acts.is_empty(), "no entry yet: {acts:?}");
        let sent = send(&mut a, now, 1000, |_| 4000);
        assert_eq!(sent.len(), 1000);
        let on1 = sent.iter().filter(|s| s.0 == L1).count();
        assert_eq!(on1, 800, "exact over 1000 packets");
        assert!(sent.iter().all(|s| s.2 == Some(if s.0 == L1 { 2 } else { 3 }) && s.1 == LB1), "{:?}", &sent[..5]);
        // the table went to the fast path with the counter where the slow path stands
        assert_eq!(a.balance.tables.get(&IlccKey::stable(NB)).unwrap().seq, 1000);
        // an uplink goes: at once everything on the other, and the fast path hears
        let mk = |loc, ifindex| LocalLocator { ifindex, ..crate::tests::local(loc) };
        let out = a.set_local_locators(now, vec![mk(L2, 3)]);
        assert!(out
            .iter()
            .any(|x| matches!(x, Action::Balance(BalanceChange::Upsert(t)) if t.pairs == vec![(L2, LB1)])));
        assert!(send(&mut a, now, 10, |_| 4000).iter().all(|s| s.0 == L2));
        // back to failover: the table is removed and the entry's pair used
        let out = a.set_policy(None, Policy::Failover).unwrap();
        assert_eq!(out, vec![Action::Balance(BalanceChange::Remove(IlccKey::stable(NB)))]);
    }

    /// A correspondent talking to two of our NIDs (the stable one and a temporary
    /// one: two ILCC entries) has a table per entry, each with its own per-packet
    /// position; its policy covers both, and back to failover removes both.
    #[test]
    fn a_correspondent_on_two_of_our_nids_has_a_table_per_entry() {
        const T1: Nid = Nid(0x1c2e_77a0_5b19_d403);
        let now = Instant::now();
        let mut a = core(NA, L1, 1, Some((NB, LB1)));
        two_uplinks(&mut a, now);
        a.add_temporary_nid(T1).unwrap();
        a.set_policy(Some(NB), Policy::PerPacket).unwrap();
        let from = |a: &mut Core, ours: Nid, n: usize| {
            for _ in 0..n {
                let pkt = ilnp_wire::test_support::udp(
                    ilnp_wire::ilnp_addr(crate::tests::P, ours),
                    ilnp_wire::ilnp_addr(crate::tests::P, NB),
                    4000,
                    9,
                    b"x",
                );
                assert!(a
                    .handle_outbound(now, &pkt, Csum::Complete)
                    .iter()
                    .any(|x| matches!(x, Action::SendWire { .. })));
            }
        };
        from(&mut a, NA, 3);
        from(&mut a, T1, 5);
        let (k0, k1) = (IlccKey::stable(NB), IlccKey { remote: NB, local: Some(T1) });
        assert_eq!((a.balance.tables[&k0].seq, a.balance.tables[&k1].seq), (3, 5));
        let mut out = a.set_policy(Some(NB), Policy::Failover).unwrap();
        out.sort_by_key(|x| format!("{x:?}"));
        let mut want = vec![Action::Balance(BalanceChange::Remove(k0)), Action::Balance(BalanceChange::Remove(k1))];
        want.sort_by_key(|x| format!("{x:?}"));
        assert_eq!(out, want);
        assert!(a.balance.tables.is_empty());
    }

    #[test]
    fn per_flow_keeps_each_flow_on_its_pair_until_that_pair_dies() {
        let now = Instant::now();
        let mut a = core(NA, L1, 1, Some((NB, LB1)));
        two_uplinks(&mut a, now);
        a.set_policy(Some(NB), Policy::PerFlow).unwrap();
        let first = send(&mut a, now, 100, |i| 5000 + i as u16);
        let again = send(&mut a, now, 100, |i| 5000 + i as u16);
        assert_eq!(first, again, "a flow never changes path");
        let on1 = first.iter().filter(|s| s.0 == L1).count();
        assert!((35..=65).contains(&on1), "100 flows near 50/50: {on1}");
        // a restarted host (same NID, same seed) puts every flow where it was
        let mut b = core(NA, L1, 99, Some((NB, LB1)));
        two_uplinks(&mut b, now);
        b.set_policy(Some(NB), Policy::PerFlow).unwrap();
        assert_eq!(send(&mut b, now, 100, |i| 5000 + i as u16), first);
        // L1's uplink goes: its flows move, L2's flows stay
        let mk = |loc, ifindex| LocalLocator { ifindex, ..crate::tests::local(loc) };
        a.set_local_locators(now, vec![mk(L2, 3)]);
        assert!(send(&mut a, now, 100, |i| 5000 + i as u16).iter().all(|s| s.0 == L2));
    }

    #[test]
    fn eight_equal_remote_locators_are_bounded_and_all_used() {
        let now = Instant::now();
        let mut a = core(NA, L1, 1, None);
        let locs: Vec<PeerLocator> =
            (0..8).map(|i| PeerLocator { loc: Locator(0x2001_0db8_0100_0000 + i), pref: 10 }).collect();
        a.add_peer(PeerRecord { name: "eight".into(), nid: NB, locators: locs });
        two_uplinks(&mut a, now);
        a.set_policy(Some(NB), Policy::PerPacket).unwrap();
        let sent = send(&mut a, now, 160, |_| 1);
        let t = a.balance.tables.get(&IlccKey::stable(NB)).unwrap();
        assert_eq!((t.pairs.len(), t.slots.len()), (16, 16));
        let mut dsts: Vec<Locator> = sent.iter().map(|s| s.1).collect();
        dsts.sort();
        dsts.dedup();
        assert_eq!(dsts.len(), 8);
    }

    #[test]
    fn bad_requests_name_the_item() {
        let now = Instant::now();
        let mut a = core(NA, L1, 1, Some((NB, LB1)));
        two_uplinks(&mut a, now);
        let stranger = Nid(0x0200_0000_0000_0077);
        let e = a.set_policy(Some(stranger), Policy::PerFlow).unwrap_err();
        assert!(e.to_string().contains(&stranger.to_string()), "{e}");
        a.set_uplink_weight(2, 0).unwrap();
        assert_eq!(a.set_uplink_weight(3, 0).unwrap_err(), BalanceError::AllWeightsZero);
        // weight 0 = backup: per-packet uses only uplink 3
        a.set_policy(None, Policy::PerPacket).unwrap();
        assert!(send(&mut a, now, 10, |_| 1).iter().all(|s| s.0 == L2));
    }

    #[test]
    fn policy_names() {
        for p in [Policy::Failover, Policy::PerFlow, Policy::PerPacket] {
            assert_eq!(p.as_str().parse::<Policy>(), Ok(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.as_str()));
        }
        assert!("round-robin".parse::<Policy>().unwrap_err().contains("round-robin"));
    }
}
