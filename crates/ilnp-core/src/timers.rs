//! Timers: LU retransmissions, remote locator lifetimes, idle ILCC entries and the
//! end of soft-handoff quiet periods.
//!
//! The ILCC's deadlines live in a [`DeadlineIndex`]: a binary heap of
//! `(instant, NID)` with lazy deletion. Each entry has at most one live item, which
//! is never later than the entry's real next deadline (a lower bound); the top item
//! is kept exact (`Ilcc::tidy`), so `poll_timeout` is a peek and `handle_timeout`
//! visits only entries whose item is due.

use ilnp_wire::Nid;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::time::Instant;

/// Where each NID's live item is kept. [`DeadlineIndex`] keeps its own map; the
/// ILCC keeps it in the entry itself (`IlccEntry::indexed`), so that checking or
/// moving an entry's item costs no lookup in a second table (with 10^5 entries, or
/// 10^5 simulated cores, that lookup was a cache miss per packet).
pub trait LiveItems<K = Nid> {
    /// The NID's live item.
    fn live_item(&self, nid: &K) -> Option<Instant>;
    /// Makes `at` the NID's live item (None: it has none); a NID the store does not
    /// know is left alone.
    fn set_live_item(&mut self, nid: &K, at: Option<Instant>);
    /// At least the number of NIDs with a live item (compaction's measure).
    fn live_bound(&self) -> usize;
    /// Every live item.
    fn live_items(&self) -> Vec<(Instant, K)>;
}

impl<K: Copy + Eq + Hash> LiveItems<K> for HashMap<K, Instant> {
    fn live_item(&self, nid: &K) -> Option<Instant> {
        self.get(nid).copied()
    }
    fn set_live_item(&mut self, nid: &K, at: Option<Instant>) {
        match at {
            Some(t) => {
                self.insert(*nid, t);
            }
            None => {
                self.remove(nid);
            }
        }
    }
    fn live_bound(&self) -> usize {
        self.len()
    }
    fn live_items(&self) -> Vec<(Instant, K)> {
        self.iter().map(|(n, t)| (*t, *n)).collect()
    }
}

/// What `DeadlineIndex::fix_top_with`'s caller says of the top item `(t, nid)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopItem {
    /// not the NID's live item: dropped
    Stale,
    /// the live item and the NID's real deadline: the top is exact
    Exact,
    /// the live item, a lower bound: the real deadline (None: none) replaces it
    Moved(Option<Instant>),
}

/// Deadlines keyed by NID: a min-heap with lazy deletion. The `*_in` methods take
/// the live items from a store of the caller's; the others use the index's own map.
#[derive(Debug)]
pub struct DeadlineIndex<K = Nid> {
    heap: BinaryHeap<Reverse<(Instant, K)>>,
    /// each NID's live item (the methods without `_in`); a heap item that
    /// disagrees with its NID's live item is stale
    live: HashMap<K, Instant>,
    /// heap items looked at (tests bound it; never timed)
    visits: u64,
}

impl<K> Default for DeadlineIndex<K> {
    fn default() -> Self {
        DeadlineIndex { heap: BinaryHeap::new(), live: HashMap::new(), visits: 0 }
    }
}

impl<K: Copy + Ord + Hash> DeadlineIndex<K> {
    /// Makes `at` the NID's deadline if it is earlier than its live one (or it has
    /// none); a later one is left for `fix_top` (the live item stays a lower bound).
    pub fn schedule(&mut self, nid: K, at: Option<Instant>) {
        let mut live = std::mem::take(&mut self.live);
        self.schedule_in(&mut live, nid, at);
        self.live = live;
    }

    /// `schedule` with the live items in `live`.
    pub fn schedule_in(&mut self, live: &mut impl LiveItems<K>, nid: K, at: Option<Instant>) {
        match (at, live.live_item(&nid)) {
            (None, _) => live.set_live_item(&nid, None),
            (Some(t), Some(cur)) if cur <= t => {}
            (Some(t), _) => {
                live.set_live_item(&nid, Some(t));
                self.push(t, nid);
                self.compact_in(live);
            }
        }
    }

    /// A heap item for a live item the caller has just set in its store (its
    /// `compact_in` follows, once per batch).
    pub fn push(&mut self, t: Instant, nid: K) {
        self.heap.push(Reverse((t, nid)));
    }

    /// The NID's live item, if any.
    pub fn live(&self, nid: &K) -> Option<Instant> {
        self.live.get(nid).copied()
    }

    /// The NID has no deadline any more (its heap item goes stale).
    pub fn forget(&mut self, nid: &K) {
        self.live.remove(nid);
    }

    pub fn clear(&mut self) {
        self.heap.clear();
        self.live.clear();
    }

    /// The earliest live deadline, if the top is exact (see `fix_top`).
    pub fn peek(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// Drops stale items from the top and replaces a top lower bound by the real
    /// deadline `real(nid)` until the top is exact.
    pub fn fix_top(&mut self, mut real: impl FnMut(&K) -> Option<Instant>) {
        let mut live = std::mem::take(&mut self.live);
        self.fix_top_in(&mut live, |_, nid| real(nid));
        self.live = live;
    }

    /// `fix_top` with the live items in `live` (`real` is given the store too).
    pub fn fix_top_in<L: LiveItems<K>>(&mut self, live: &mut L, mut real: impl FnMut(&L, &K) -> Option<Instant>) {
        self.fix_top_with(|t, nid| {
            if live.live_item(nid) != Some(t) {
                return TopItem::Stale;
            }
            let d = real(live, nid);
            if d == Some(t) {
                return TopItem::Exact;
            }
            live.set_live_item(nid, d);
            TopItem::Moved(d)
        });
    }

    /// `fix_top` for a caller that judges each top item `(t, nid)` itself in one
    /// look at its store (the ILCC: one map lookup per item instead of three);
    /// `Moved(d)`: the caller has made `d` the NID's live item.
    pub fn fix_top_with(&mut self, mut judge: impl FnMut(Instant, &K) -> TopItem) {
        while let Some(&Reverse((t, nid))) = self.heap.peek() {
            self.visits += 1;
            match judge(t, &nid) {
                TopItem::Exact => return,
                TopItem::Stale => {
                    self.heap.pop();
                }
                TopItem::Moved(d) => {
                    self.heap.pop();
                    if let Some(d) = d {
                        self.heap.push(Reverse((d, nid)));
                    }
                }
            }
        }
    }

    /// Pops every live item due at `now`; their NIDs have no live item afterwards.
    pub fn take_due(&mut self, now: Instant) -> Vec<K> {
        let mut live = std::mem::take(&mut self.live);
        let due = self.take_due_in(&mut live, now);
        self.live = live;
        due
    }

    /// `take_due` with the live items in `live`.
    pub fn take_due_in(&mut self, live: &mut impl LiveItems<K>, now: Instant) -> Vec<K> {
        let mut due = Vec::new();
        while let Some(&Reverse((t, nid))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.visits += 1;
            self.heap.pop();
            if live.live_item(&nid) == Some(t) {
                live.set_live_item(&nid, None);
                due.push(nid);
            }
        }
        due
    }

    /// Rebuilds the heap from the live items when stale ones dominate.
    pub fn compact_in(&mut self, live: &impl LiveItems<K>) {
        if self.heap.len() > 2 * live.live_bound() + 64 {
            self.heap = live.live_items().into_iter().map(Reverse).collect();
        }
    }

    /// Whether `(t, nid)` is an item of the heap (O(n): tests only).
    #[cfg(test)]
    pub(crate) fn holds(&self, t: Instant, nid: K) -> bool {
        self.heap.iter().any(|Reverse(x)| *x == (t, nid))
    }

    pub fn visits(&self) -> u64 {
        self.visits
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::config::CoreConfig;
    use crate::ilcc::IlccKey;
    use crate::ilcc::{IlccEntry, RemoteLocator};
    use crate::locator::LocatorState;
    use crate::machine::Core;
    use crate::tests::{local, session, wire, LA, LB2, NA};
    use ilnp_wire::Locator;
    use ilnp_wire::Nonce;
    use std::time::Duration;

    #[test]
    fn an_lu_due_with_no_local_locator_waits_instead_of_staying_due() {
        // found by fuzz/core_session: every uplink gone while an LU is pending left its
        // timer due at `now` after handle_timeout, and ilnpd's loop spun on it
        let t0 = Instant::now();
        let mut c = Core::new(CoreConfig::new(crate::tests::P, NA), Box::new(crate::tests::TestRng::new(7)));
        let peer = Nid(0x0200_00ff_fe00_00bb);
        let r = RemoteLocator::new(Locator(0x2001_0db8_000b_0000), 10, LocatorState::Active, None);
        let mut e = IlccEntry::new(peer, vec![r], LA, Nonce::N32([1, 2, 3, 4]), None, false, t0);
        e.pending_lu = Some(crate::ilcc::PendingLu { attempts: 1, ..crate::ilcc::PendingLu::due_now(t0) });
        c.ilcc.insert(e).unwrap();
        c.ilcc.tidy();
        assert_eq!(c.poll_timeout(), Some(t0));
        let out = c.handle_timeout(t0);
        assert!(!out.iter().any(|a| matches!(a, Action::SendWire { .. })), "nothing to send from: {out:?}");
        let next = c.poll_timeout().expect("the LU still waits");
        assert!(next > t0, "a timer stays due at now: the shell would spin");
        let p = c.ilcc.get(&IlccKey::stable(peer)).unwrap().pending_lu.as_ref().unwrap();
        assert_eq!(p.attempts, 1, "no attempt counted while nothing could be sent");
    }

    #[test]
    fn index_keeps_the_earliest_and_skips_stale_items() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let mut d = DeadlineIndex::default();
        d.schedule(Nid(1), Some(t + s(10)));
        d.schedule(Nid(2), Some(t + s(5)));
        d.schedule(Nid(1), Some(t + s(3))); // earlier: replaces (old item stale)
        d.schedule(Nid(2), Some(t + s(8))); // later: the live item stays a lower bound
        assert_eq!(d.peek(), Some(t + s(3)));
        d.forget(&Nid(1));
        d.fix_top(|n| (*n == Nid(2)).then_some(t + s(8)));
        assert_eq!(d.peek(), Some(t + s(8)), "stale and lower-bound items fixed");
        assert_eq!(d.take_due(t + s(7)), []);
        assert_eq!(d.take_due(t + s(20)), [Nid(2)]);
        assert_eq!(d.peek(), None);
    }

    #[test]
    fn poll_and_handle_timeout_visit_a_bounded_number_of_entries() {
        const N: u64 = 100_000;
        let t0 = Instant::now();
        let mut cfg = CoreConfig::new(crate::tests::P, NA);
        cfg.ilcc_max_entries = N as usize + 10;
        let mut c = Core::new(cfg, Box::new(crate::tests::TestRng::new(7)));
        c.set_local_locators(t0, vec![local(LA)]);
        for i in 0..N {
            let nid = Nid(0x0200_0000_0000_0000 + i * 2);
            let r = RemoteLocator::new(Locator(0x2001_0db8_0000_0000 + (i << 16)), 10, LocatorState::Active, None);
            let mut e = IlccEntry::new(nid, vec![r], LA, Nonce::N32([1, 2, 3, 4]), None, false, t0);
            e.last_used = t0 + Duration::from_millis(i % 1000);
            c.ilcc.insert(e).unwrap();
        }
        c.ilcc.tidy();
        let idle = c.cfg.idle_timeout;
        assert_eq!(c.poll_timeout(), Some(t0 + idle));
        let v0 = c.ilcc.visits();
        for _ in 0..1000 {
            assert_eq!(c.poll_timeout(), Some(t0 + idle));
        }
        assert_eq!(c.ilcc.visits(), v0, "poll_timeout visits nothing");
        // nothing due: handle_timeout looks at the top only
        for k in 1..=100 {
            assert!(c.handle_timeout(t0 + Duration::from_secs(k)).is_empty());
        }
        assert!(c.ilcc.visits() - v0 <= 100 * 2, "{} visits for 100 idle calls", c.ilcc.visits() - v0);
        // the fast path keeps one of the 100 entries of the first millisecond alive
        let hot = Nid(0x0200_0000_0000_0000);
        c.note_activity(IlccKey::stable(hot), t0 + Duration::from_secs(200));
        let v1 = c.ilcc.visits();
        assert_eq!(c.poll_timeout(), Some(t0 + idle));
        // the other 99 expire: about 100 visits, not 10^5
        let out = c.handle_timeout(t0 + idle);
        let removed = out.iter().filter(|a| matches!(a, Action::IlccRemove(_))).count();
        assert_eq!(removed, 99);
        assert!(c.ilcc.visits() - v1 <= 2 * 100 + 4, "{} visits", c.ilcc.visits() - v1);
        assert_eq!(c.ilcc.iter().count(), N as usize - 99);
        assert_eq!(c.poll_timeout(), Some(t0 + idle + Duration::from_millis(1)), "the next millisecond's entries");
        assert!(c.ilcc.get(&IlccKey::stable(hot)).is_some());
    }

    #[test]
    fn deadlines_follow_lu_state() {
        let (_a, mut b, _, _) = session();
        let t0 = Instant::now();
        let idle = b.cfg.idle_timeout;
        assert!(b.poll_timeout().unwrap() >= t0 + idle - Duration::from_secs(1));
        assert_eq!(wire(&b.set_local_locators(t0, vec![local(LB2)])).len(), 1);
        assert_eq!(b.poll_timeout(), Some(t0 + Duration::from_millis(250)), "the LU retransmission");
    }
}
