//! ILNP Communication Cache (RFC 6741 §5): one entry per correspondent and NID of
//! ours it talks to (`IlccKey`).

use crate::action::IlccSnapshot;
use crate::event::ser_display;
pub use crate::ilcc_key::IlccKey;
use crate::locator::LocatorState;
pub use crate::remote_locator::RemoteLocator;
use crate::timers::{DeadlineIndex, LiveItems, TopItem};
use ilnp_wire::checksum::ChecksumRule;
use ilnp_wire::icmpv6::LuEntry;
use ilnp_wire::{Locator, Nid, Nonce};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn ser_rule<S: serde::Serializer>(v: &ChecksumRule, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_str())
}

fn ser_nonce<S: serde::Serializer>(v: &Nonce, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&hex(v.as_bytes()))
}

fn ser_opt_nonce<S: serde::Serializer>(v: &Option<Nonce>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) => s.collect_str(&hex(n.as_bytes())),
        None => s.serialize_none(),
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A Locator Update we sent and wait to see acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLu {
    pub entries: Vec<LuEntry>,
    pub first_sent: Instant,
    pub attempts: u32,
    pub next_at: Instant,
    /// recovery by re-resolution (`Core::recover_from_dns`): where DNS says the peer
    /// is now. The LU goes there; the session moves there only when the ack comes
    /// back with the peer's own nonce from one of them (not before: a DNS answer is
    /// not proof). Empty: an ordinary LU to the entry's locators. Not kept in the
    /// state file (a restart falls back to the known locators and re-resolves).
    pub candidates: Vec<RemoteLocator>,
    /// a local locator the peer already knows (the source it last saw from us):
    /// while it is usable the LU leaves from it first (`lu.rs` `lu_sources`)
    pub known_local: Option<Locator>,
}

impl PendingLu {
    /// An LU due at once (its entries are filled in when it is first sent).
    pub fn due_now(now: Instant) -> PendingLu {
        PendingLu {
            entries: Vec::new(),
            first_sent: now,
            attempts: 0,
            next_at: now,
            candidates: Vec::new(),
            known_local: None,
        }
    }
}

/// An ILCC entry's tier. Index order is `Ilcc`'s per-tier counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    #[default]
    Established = 0,
    Embryonic = 1,
}

/// Per-correspondent state.
#[derive(Debug, Clone, Serialize)]
pub struct IlccEntry {
    #[serde(serialize_with = "ser_display")]
    pub nid: Nid,
    /// locators of the correspondent, best first
    pub remote_locators: Vec<RemoteLocator>,
    /// the local locator we use as source towards this peer
    #[serde(serialize_with = "ser_display")]
    pub local_locator: Locator,
    #[serde(serialize_with = "ser_nonce")]
    pub nonce_tx: Nonce,
    #[serde(serialize_with = "ser_opt_nonce")]
    pub nonce_rx: Option<Nonce>,
    /// true if we sent the first packet
    pub initiator: bool,
    #[serde(skip)]
    pub created: Instant,
    #[serde(skip)]
    pub last_used: Instant,
    /// packets/bytes seen by the slow path (the fast path counts in its maps)
    pub slow_pkts_in: u64,
    pub slow_pkts_out: u64,
    pub slow_bytes_in: u64,
    pub slow_bytes_out: u64,
    #[serde(skip)]
    pub pending_lu: Option<PendingLu>,
    /// smoothed LU round trip (RFC 6298-style), microseconds; seeds the next LU's timer
    pub srtt_us: Option<u64>,
    /// body of the last acknowledged LU: a late duplicate ack for it is expected, not a drop
    #[serde(skip)]
    pub last_acked_lu: Option<Vec<LuEntry>>,
    /// embryonic (unconfirmed responder state, bounded, evictable, slow path only)
    /// or established (admission.rs)
    pub tier: Tier,
    /// we sent the peer something (our nonce-only hello or an answer) since the
    /// entry was created: its next packet shows it is there (admission.rs)
    pub answered: bool,
    /// admission order of an embryonic entry (eviction takes the oldest)
    #[serde(skip)]
    pub emb_seq: u64,
    /// TCP/UDP checksum rule on the wire with this peer (`Core::checksum_rule`)
    #[serde(serialize_with = "ser_rule")]
    pub checksum_rule: ChecksumRule,
    /// the peer uses one nonce for both directions and reflects ours in its replies
    /// (FreeBSD ILNP6, the Linux 4.9 code: `CoreConfig::shared_nonce`); only then is
    /// our own nonce accepted from it, and only on replies to what we sent
    /// (`accepts_reply_nonce`)
    pub shared_nonce: bool,
    /// which of our NIDs the correspondent talks to: None = the stable one
    /// (`CoreConfig::local_nid`), else a temporary one (`nids.rs`)
    #[serde(skip)]
    pub local_nid: Option<Nid>,
    /// this NID's live item in the ILCC's `DeadlineIndex` (the index keeps no map
    /// of its own for the ILCC: checking or moving an entry's item costs no second
    /// lookup); None: no live item (its heap items, if any, are stale)
    #[serde(skip)]
    pub(crate) indexed: Option<Instant>,
}

impl IlccEntry {
    /// A fresh entry: counters zero, no LU pending, no RTT sample yet.
    pub fn new(
        nid: Nid,
        remote_locators: Vec<RemoteLocator>,
        local_locator: Locator,
        nonce_tx: Nonce,
        nonce_rx: Option<Nonce>,
        initiator: bool,
        now: Instant,
    ) -> IlccEntry {
        IlccEntry {
            nid,
            remote_locators,
            local_locator,
            nonce_tx,
            nonce_rx,
            initiator,
            created: now,
            last_used: now,
            slow_pkts_in: 0,
            slow_pkts_out: 0,
            slow_bytes_in: 0,
            slow_bytes_out: 0,
            pending_lu: None,
            srtt_us: None,
            last_acked_lu: None,
            tier: Tier::Established,
            answered: false,
            emb_seq: 0,
            checksum_rule: ChecksumRule::Rfc6741,
            shared_nonce: false,
            local_nid: None,
            indexed: None,
        }
    }

    /// The entry's key in the ILCC.
    pub fn key(&self) -> IlccKey {
        IlccKey { remote: self.nid, local: self.local_nid }
    }

    /// Which of our NIDs the correspondent talks to, given the stable one.
    pub fn ours(&self, stable: Nid) -> Nid {
        self.local_nid.unwrap_or(stable)
    }

    /// The remote locator to send to: the active one, else the lowest preference
    /// among valid ones. When every locator has outlived its lifetime, the best aged
    /// one is still used: a live session must survive a late LU (RFC 6741 §5.2).
    /// Among them, one the entry's local locator can send to comes first (IPv6 to
    /// IPv6, v4 path to v4 path: `Core::fit_local` picks the local locator).
    pub fn best_remote(&self) -> Option<&RemoteLocator> {
        let usable = |r: &&RemoteLocator| matches!(r.state, LocatorState::Active | LocatorState::Valid);
        let other_family = |r: &RemoteLocator| !r.loc.same_family(self.local_locator);
        self.remote_locators
            .iter()
            .filter(usable)
            .min_by_key(|r| (other_family(r), r.state != LocatorState::Active, r.pref))
            .or_else(|| {
                self.remote_locators
                    .iter()
                    .filter(|r| r.state == LocatorState::Aged)
                    .min_by_key(|r| (other_family(r), r.pref))
            })
    }

    /// Marks locators whose lifetime ran out at `now` as Aged (kept and still
    /// accepted, RFC 6741 §5.2); a new active one is chosen if the active one aged.
    /// Returns the locators that aged.
    pub fn age_locators(&mut self, now: Instant) -> Vec<Locator> {
        let mut aged = Vec::new();
        let mut active_aged = false;
        for r in &mut self.remote_locators {
            if matches!(r.state, LocatorState::Active | LocatorState::Valid) && r.expires.is_some_and(|t| t <= now) {
                active_aged |= r.state == LocatorState::Active;
                r.state = LocatorState::Aged;
                aged.push(r.loc);
            }
        }
        if active_aged {
            if let Some(b) = self.best_remote().map(|r| r.loc) {
                self.activate_remote(b);
            }
        }
        aged
    }

    /// No packet either way for `idle` at `now`, and no LU in flight.
    pub fn is_idle(&self, now: Instant, idle: Duration) -> bool {
        now.saturating_duration_since(self.last_used) >= idle && self.pending_lu.is_none()
    }

    /// When the entry next has timer work: its LU (re)transmission, a remote
    /// locator's lifetime end, or (no LU in flight) its idle deadline.
    pub fn next_deadline(&self, idle: Duration) -> Option<Instant> {
        let lu = self.pending_lu.as_ref().map(|p| p.next_at);
        let idle = self.pending_lu.is_none().then(|| self.last_used + idle);
        [lu, idle, self.next_expiry()].into_iter().flatten().min()
    }

    /// The earliest lifetime end among locators still Active/Valid.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.remote_locators
            .iter()
            .filter(|r| matches!(r.state, LocatorState::Active | LocatorState::Valid))
            .filter_map(|r| r.expires)
            .min()
    }

    /// Whether `n` is the correspondent's own nonce (RFC 6744): the only value
    /// accepted on data, nonce-only packets and Locator Update advertisements, which
    /// it sends unasked. Nothing is accepted before the peer showed it.
    pub fn accepts_nonce(&self, n: &Nonce) -> bool {
        self.nonce_rx == Some(*n)
    }

    /// Whether `n` may be on a *reply* to something we sent (an LU ack matching our
    /// pending LU, an Echo Reply to our challenge, an ICMPv6 error quoting our
    /// packet): the peer's own nonce, or, from a shared-nonce peer only, ours for it
    /// reflected (docs/security.md: an observer of our direction learns `nonce_tx`;
    /// it must not move a session of a peer that never reflects).
    pub fn accepts_reply_nonce(&self, n: &Nonce) -> bool {
        self.accepts_nonce(n) || self.is_reflected(n)
    }

    /// `n` is ours reflected by a shared-nonce peer (not the peer's own).
    pub fn is_reflected(&self, n: &Nonce) -> bool {
        self.shared_nonce && self.nonce_rx.is_some_and(|rx| rx != *n) && self.nonce_tx == *n
    }

    pub fn has_remote(&self, loc: Locator) -> bool {
        self.remote_locators.iter().any(|r| r.loc == loc && r.state != LocatorState::Expired)
    }

    /// Marks `loc` as the active remote locator (others that were active become valid).
    pub fn activate_remote(&mut self, loc: Locator) {
        for r in &mut self.remote_locators {
            if r.loc == loc {
                if r.state != LocatorState::Aged {
                    r.state = LocatorState::Active;
                }
            } else if r.state == LocatorState::Active {
                r.state = LocatorState::Valid;
            }
        }
    }

    /// What the fast path holds; None for an embryonic entry (only established
    /// peers are in the BPF map, so unconfirmed traffic stays where it is counted).
    pub fn snapshot(&self) -> Option<IlccSnapshot> {
        if self.tier == Tier::Embryonic {
            return None;
        }
        let remote = self.best_remote()?;
        Some(IlccSnapshot {
            nid: self.nid,
            local_loc: self.local_locator,
            remote_loc: remote.loc,
            remote_locs: self
                .remote_locators
                .iter()
                .filter(|r| r.state != LocatorState::Expired)
                .map(|r| r.loc)
                .collect(),
            nonce_tx: self.nonce_tx,
            nonce_rx: self.nonce_rx,
            full_address_checksum: self.checksum_rule == ChecksumRule::FullAddress,
            // only a path heard from (its own address or the NAT's, checked by the
            // core): until then the fast path punts both ways, so the core sees the
            // first datagram and no replay from elsewhere can define the path
            remote_v4: remote.v4_destination().filter(|_| remote.v4_heard),
            local_nid: self.local_nid,
        })
    }
}

/// An entry as `ilnpctl ilcc show` displays it: the entry plus its ages at the
/// time of the view (derefs to the entry).
#[derive(Debug, Clone, Serialize)]
pub struct IlccView {
    #[serde(flatten)]
    pub entry: IlccEntry,
    /// seconds since the last packet either way
    pub idle_s: f64,
    /// seconds since the entry was created
    pub age_s: f64,
}

impl IlccView {
    pub fn new(entry: &IlccEntry, now: Instant) -> IlccView {
        IlccView {
            entry: entry.clone(),
            idle_s: now.saturating_duration_since(entry.last_used).as_secs_f64(),
            age_s: now.saturating_duration_since(entry.created).as_secs_f64(),
        }
    }
}

impl std::ops::Deref for IlccView {
    type Target = IlccEntry;
    fn deref(&self) -> &IlccEntry {
        &self.entry
    }
}

/// The cache is at its configured bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// The cache: bounded per tier, keyed by ⟨remote NID, our NID⟩ (`IlccKey`; see
/// docs/architecture.md on keying), with an index of the entries' timer deadlines. Both tiers share the map
/// (one lookup per packet); `max_entries` bounds the established tier,
/// `max_embryonic` the embryonic one (its eviction order is admission.rs's).
#[derive(Debug, Default)]
pub struct Ilcc {
    entries: HashMap<IlccKey, IlccEntry>,
    /// each correspondent's entries: which of our NIDs (`IlccKey::local`) it talks
    /// to, so that a question about a correspondent (`knows`, `keys_of`) costs one
    /// lookup, not a walk (the DNS cache asks it for every record it sweeps)
    remotes: HashMap<Nid, Vec<Option<Nid>>>,
    max_entries: usize,
    max_embryonic: usize,
    /// entries per tier: [established, embryonic]
    counts: [usize; 2],
    idle: Duration,
    deadlines: DeadlineIndex<IlccKey>,
    /// entries handed out for change since the last `tidy` (their deadline may have moved)
    dirty: Vec<IlccKey>,
}

impl Ilcc {
    /// `idle`: how long an unused entry lives.
    pub fn new(max_entries: usize, max_embryonic: usize, idle: Duration) -> Ilcc {
        Ilcc {
            entries: HashMap::new(),
            remotes: HashMap::new(),
            max_entries,
            max_embryonic,
            counts: [0; 2],
            idle,
            deadlines: DeadlineIndex::default(),
            dirty: Vec::new(),
        }
    }
    pub fn get(&self, key: &IlccKey) -> Option<&IlccEntry> {
        self.entries.get(key)
    }
    /// The entry for change; its deadline is re-indexed at the next `tidy`.
    pub fn get_mut(&mut self, key: &IlccKey) -> Option<&mut IlccEntry> {
        let e = self.entries.get_mut(key)?;
        self.dirty.push(*key);
        Some(e)
    }
    /// The keys of the correspondent's entries (one per NID of ours it talks to).
    pub fn keys_of(&self, remote: Nid) -> Vec<IlccKey> {
        self.remotes.get(&remote).map_or_else(Vec::new, |l| l.iter().map(|&local| IlccKey { remote, local }).collect())
    }
    /// Whether the correspondent has an entry (to any NID of ours).
    pub fn knows(&self, remote: Nid) -> bool {
        self.remotes.contains_key(&remote)
    }
    /// The established tier is at its bound.
    pub fn is_full(&self) -> bool {
        self.tier_is_full(Tier::Established)
    }
    pub fn tier_is_full(&self, tier: Tier) -> bool {
        let max = match tier {
            Tier::Established => self.max_entries,
            Tier::Embryonic => self.max_embryonic,
        };
        self.counts[tier as usize] >= max
    }
    /// Entries in `tier`.
    pub fn count(&self, tier: Tier) -> usize {
        self.counts[tier as usize]
    }
    /// Inserts unless its tier is full; never evicts an existing entry (a flood of
    /// new NIDs must not push out established sessions; the embryonic tier's
    /// eviction is the caller's decision).
    pub fn insert(&mut self, mut e: IlccEntry) -> Result<&mut IlccEntry, Full> {
        let key = e.key();
        if self.tier_is_full(e.tier) && !self.entries.contains_key(&key) {
            return Err(Full);
        }
        // a copy of an entry (or one removed and put back) has no live item yet
        e.indexed = None;
        self.counts[e.tier as usize] += 1;
        match self.entries.insert(key, e) {
            Some(old) => self.counts[old.tier as usize] -= 1,
            None => self.remotes.entry(key.remote).or_default().push(key.local),
        }
        self.dirty.push(key);
        Ok(self.entries.get_mut(&key).expect("just inserted"))
    }
    /// Moves an embryonic entry to the established tier, unless that is full.
    pub fn promote(&mut self, key: &IlccKey) -> Result<(), Full> {
        let full = self.is_full();
        let Some(e) = self.entries.get_mut(key) else { return Ok(()) };
        if e.tier == Tier::Established {
            return Ok(());
        }
        if full {
            return Err(Full);
        }
        e.tier = Tier::Established;
        self.counts[Tier::Embryonic as usize] -= 1;
        self.counts[Tier::Established as usize] += 1;
        Ok(())
    }
    pub fn remove(&mut self, key: &IlccKey) -> Option<IlccEntry> {
        // (its live item leaves with it: the heap items go stale)
        let e = self.entries.remove(key)?;
        self.counts[e.tier as usize] -= 1;
        if let Some(l) = self.remotes.get_mut(&key.remote) {
            l.retain(|x| *x != key.local);
            if l.is_empty() {
                self.remotes.remove(&key.remote);
            }
        }
        Some(e)
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = &IlccEntry> {
        self.entries.values()
    }
    pub fn clear(&mut self) -> Vec<IlccKey> {
        self.deadlines.clear();
        self.dirty.clear();
        self.counts = [0; 2];
        self.remotes.clear();
        self.entries.drain().map(|(k, _)| k).collect()
    }

    /// Re-indexes the entries changed since the last call and makes the index's
    /// earliest deadline exact. O(changed · log n).
    pub fn tidy(&mut self) {
        let idle = self.idle;
        let mut pushed = false;
        let mut last = None;
        for key in &self.dirty {
            // (an entry handed out twice in a row is looked at once)
            if last.replace(*key) == Some(*key) {
                continue;
            }
            let Some(e) = self.entries.get_mut(key) else { continue };
            // `DeadlineIndex::schedule_in`, with the entry at hand
            match (e.next_deadline(idle), e.indexed) {
                // later: the live item stays, a lower bound (fix_top below)
                (Some(t), Some(cur)) if cur <= t => {}
                (None, _) => e.indexed = None,
                (Some(t), _) => {
                    e.indexed = Some(t);
                    self.deadlines.push(t, *key);
                    pushed = true;
                }
            }
        }
        self.dirty.clear();
        if pushed {
            self.deadlines.compact_in(&self.entries);
        }
        let entries = &mut self.entries;
        self.deadlines.fix_top_with(|t, key| match entries.get_mut(key) {
            Some(e) if e.indexed == Some(t) => match e.next_deadline(idle) {
                d if d == Some(t) => TopItem::Exact,
                d => {
                    e.indexed = d;
                    TopItem::Moved(d)
                }
            },
            _ => TopItem::Stale,
        });
    }

    /// The earliest deadline of any entry (exact after `tidy`).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek()
    }

    /// Entries whose indexed deadline is due at `now` (a deadline may be a lower
    /// bound: the caller checks each timer); they are re-indexed at the next `tidy`.
    pub fn take_due(&mut self, now: Instant) -> Vec<IlccKey> {
        self.tidy();
        // (a live item is an entry's: every key due has an entry, its item now None)
        let due = self.deadlines.take_due_in(&mut self.entries, now);
        self.dirty.extend(&due);
        due
    }

    /// Index items looked at so far (for tests bounding the work per call).
    pub fn visits(&self) -> u64 {
        self.deadlines.visits()
    }
}

/// The ILCC's live items are its entries' `indexed`.
impl LiveItems<IlccKey> for HashMap<IlccKey, IlccEntry> {
    fn live_item(&self, key: &IlccKey) -> Option<Instant> {
        self.get(key).and_then(|e| e.indexed)
    }
    fn set_live_item(&mut self, key: &IlccKey, at: Option<Instant>) {
        if let Some(e) = self.get_mut(key) {
            e.indexed = at;
        }
    }
    fn live_bound(&self) -> usize {
        self.len()
    }
    fn live_items(&self) -> Vec<(Instant, IlccKey)> {
        self.values().filter_map(|e| Some((e.indexed?, e.key()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::LA;
    use std::time::Duration;

    /// An entry's live item (`indexed`) always has its item in the index's heap,
    /// and after `tidy` the earliest deadline is exact, whatever mix of
    /// deadlines moving later, earlier, entries removed, re-inserted and timers due;
    /// and the per-correspondent index (`keys_of`, `knows`) always says what the
    /// entries say, with correspondents holding up to three of our NIDs.
    #[test]
    fn cached_index_items_agree_with_the_index() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut ilcc = Ilcc::new(1000, 100, Duration::from_secs(10));
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut now = t0;
        let (mut skipped, mut due_total) = (0, 0);
        for _ in 0..20_000 {
            let nid = Nid(rnd(200) + 1);
            let key = IlccKey { remote: nid, local: [None, Some(Nid(0xa1)), Some(Nid(0xa2))][rnd(3) as usize] };
            match rnd(6) {
                0 => {
                    ilcc.remove(&key);
                }
                1 | 2 if ilcc.get(&key).is_none() => {
                    let mut e = IlccEntry::new(nid, vec![], LA, Nonce::N32([1, 2, 3, 4]), None, false, now);
                    e.local_nid = key.local;
                    ilcc.insert(e).unwrap();
                }
                1 => {
                    // a copy put back (its `indexed` must not be trusted)
                    let e = ilcc.remove(&key).unwrap();
                    ilcc.insert(e).unwrap();
                }
                2 | 3 => {
                    if let Some(e) = ilcc.get_mut(&key) {
                        // mostly later (traffic), sometimes earlier
                        e.last_used = if rnd(4) == 0 { e.last_used - ms(rnd(500)).min(e.last_used - t0) } else { now };
                    }
                }
                _ => {
                    now += ms(rnd(300));
                    due_total += ilcc.take_due(now).len();
                }
            }
            ilcc.tidy();
            for e in ilcc.iter() {
                if let Some(i) = e.indexed {
                    assert!(ilcc.deadlines.holds(i, e.key()), "{:?}", e.nid);
                    skipped += 1;
                }
            }
            let exact = ilcc.iter().filter_map(|e| e.next_deadline(ilcc.idle)).min();
            assert_eq!(ilcc.next_deadline(), exact);
            let mut walked: Vec<IlccKey> = ilcc.iter().map(|e| e.key()).filter(|k| k.remote == nid).collect();
            let mut indexed = ilcc.keys_of(nid);
            walked.sort();
            indexed.sort();
            assert_eq!(indexed, walked);
            assert_eq!(ilcc.knows(nid), !walked.is_empty());
        }
        assert!(skipped > 1000 && due_total > 100, "{skipped} {due_total}");
    }
}
