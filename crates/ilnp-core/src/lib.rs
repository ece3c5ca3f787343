//! Sans-IO ILNPv6 protocol core: ILCC, peers, slow-path decisions, Locator Updates.
//! No sockets, no threads, no clock reads: time (`now`) and randomness are injected.

pub mod event;
pub mod ilcc;
pub mod peers;

pub use event::{DropReason, Event, Outcome, Stats};
pub use ilcc::{IlccEntry, RemoteLocator};
pub use ilnp_wire::{Locator, Nid, Nonce};
pub use peers::{PeerLocator, PeerRecord};
/// The randomness the core takes (re-exported so shells and fuzzers use the same trait).
pub use rand_core::{Error as RngError, RngCore};

use event::ser_display;
use ilnp_wire::icmpv6::{self, LocatorUpdate, LuEntry, LuOperation};
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{ilnp_addr, ipv6, split_addr, Error as WireError};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Validity state of a locator (RFC 6741 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LocatorState {
    Valid,
    Active,
    Aged,
    Expired,
}

/// Default Router Preference of the router(s) behind an uplink, from the Router
/// Advertisement (RFC 4191 §2.1; the kernel keeps it on the RA's default route).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouterPreference {
    Low,
    Medium,
    High,
}

/// Locator preference (lower preferred, RFC 6742) when neither configuration nor a
/// router says otherwise; peer files default to the same value.
pub const DEFAULT_LOCATOR_PREF: u16 = 10;

/// The preference we give (and advertise in LUs for) a local locator.
///
/// An explicit per-uplink configuration wins. Otherwise the uplink's best default
/// router preference decides: high 5, medium 10 (the default), low 15; an uplink
/// with no default router at all gets 20, so a locator whose router went away (RA
/// router lifetime 0) is demoted behind every routed one without being dropped (its
/// prefix may still be valid, RFC 4861 §6.3.4) — that demotion is a failover.
/// With equal preferences the newest locator wins (see `set_local_locators`).
pub fn locator_preference(configured: Option<u16>, router: Option<RouterPreference>) -> u16 {
    match (configured, router) {
        (Some(p), _) => p,
        (None, Some(RouterPreference::High)) => DEFAULT_LOCATOR_PREF - 5,
        (None, Some(RouterPreference::Medium)) => DEFAULT_LOCATOR_PREF,
        (None, Some(RouterPreference::Low)) => DEFAULT_LOCATOR_PREF + 5,
        (None, None) => DEFAULT_LOCATOR_PREF + 10,
    }
}

/// One of this host's locators, as learned from the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LocalLocator {
    #[serde(rename = "l64", serialize_with = "ser_display")]
    pub loc: Locator,
    /// uplink carrying this locator
    pub ifindex: u32,
    /// lower is preferred (RFC 6742)
    pub pref: u16,
    /// seconds; u32::MAX = infinite
    pub lifetime_s: u32,
    pub state: LocatorState,
    /// the uplink has a default router (its RA has not stopped: a router whose RAs
    /// stop disappears when its router lifetime ends, at once for a final RA)
    pub has_router: bool,
    /// the kernel deprecated the address (preferred lifetime 0, RFC 4862 §5.5.4)
    pub deprecated: bool,
}

impl LocalLocator {
    /// The network stopped offering this locator: no router behind its uplink, or
    /// its address is deprecated. One half of the soft-handoff retirement rule.
    pub fn ra_stopped(&self) -> bool {
        !self.has_router || self.deprecated
    }
}

/// What the fast path needs to know about one correspondent; written to the
/// BPF `ilnp_ilcc` map by ilnpd on `Action::IlccUpsert`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IlccSnapshot {
    pub nid: Nid,
    /// source locator to put on packets to this peer
    pub local_loc: Locator,
    /// destination locator to use for this peer
    pub remote_loc: Locator,
    /// every remote locator currently accepted as a source (includes remote_loc)
    pub remote_locs: Vec<Locator>,
    /// nonce we put on packets to the peer
    pub nonce_tx: Nonce,
    /// nonce the peer puts on packets to us; None until learned
    pub nonce_rx: Option<Nonce>,
}

/// Handoff policy (RFC 6740 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HandoffMode {
    /// keep accepting on an old locator until it goes quiet (default)
    Soft,
    /// age the old locator at once
    Hard,
}

/// Locator Update retransmission policy. The RFCs set none (wire-facts §6.2);
/// the prototypes used fixed 1 s timers. We start from an RTT-based value with a
/// floor and back off exponentially.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LuTimers {
    pub initial_rto: Duration,
    pub min_rto: Duration,
    pub max_rto: Duration,
    pub max_attempts: u32,
}

impl Default for LuTimers {
    fn default() -> Self {
        LuTimers {
            initial_rto: Duration::from_millis(250),
            min_rto: Duration::from_millis(50),
            max_rto: Duration::from_secs(4),
            max_attempts: 7,
        }
    }
}

#[derive(Clone, Debug)]
pub struct CoreConfig {
    pub id_prefix: Locator,
    pub local_nid: Nid,
    /// 4 (32-bit) or 12 (96-bit)
    pub nonce_len: usize,
    pub ilcc_max_entries: usize,
    pub idle_timeout: Duration,
    pub handoff: HandoffMode,
    /// Cap on the Lifetime we advertise for our locators in LUs (seconds); each
    /// locator's own valid lifetime (from the kernel) is advertised when shorter.
    pub lu_lifetime_s: u16,
    pub lu: LuTimers,
    /// Most remote locators kept per correspondent (the fast path's table holds 8).
    /// An LU may list up to 255 (RFC 6743 §2); the best by preference are kept and
    /// the whole body is still acknowledged. Bounds memory per entry.
    pub max_remote_locators: usize,
    /// Soft handoff: a local locator that is no longer the preferred one is retired
    /// (no longer advertised) once no packet arrived on it for this long and its RA
    /// stopped (`LocalLocator::ra_stopped`). Zero: never retired, a locator stays
    /// until its address goes away.
    pub soft_quiet_period: Duration,
}

impl CoreConfig {
    pub fn new(id_prefix: Locator, local_nid: Nid) -> CoreConfig {
        CoreConfig {
            id_prefix,
            local_nid,
            nonce_len: 4,
            ilcc_max_entries: 65536,
            idle_timeout: Duration::from_secs(600),
            handoff: HandoffMode::Soft,
            lu_lifetime_s: u16::MAX,
            lu: LuTimers::default(),
            max_remote_locators: 8,
            soft_quiet_period: Duration::from_secs(3),
        }
    }
}

/// Something the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// complete wire-form IPv6 packet → raw socket
    SendWire(Vec<u8>),
    /// complete identifier-form IPv6 packet → write to ilnp0
    DeliverLocal(Vec<u8>),
    /// write/refresh the fast-path entry of this peer
    IlccUpsert(IlccSnapshot),
    IlccRemove(Nid),
    /// sync the fast path's local locator table
    LocalLocators(Vec<LocalLocator>),
    Event(Event),
}

/// Static peer plus what we learned about it.
#[derive(Clone, Debug, Serialize)]
pub struct PeerInfo {
    #[serde(flatten)]
    pub record: PeerRecord,
    /// the peer answered our nonce with a Parameter Problem (RFC 6744 §6)
    pub non_ilnp: bool,
}

pub struct Core {
    cfg: CoreConfig,
    rng: Box<dyn rand_core::RngCore + Send>,
    ilcc: ilcc::Ilcc,
    peers: BTreeMap<Nid, PeerInfo>,
    local: Vec<LocalLocator>,
    /// when each local locator first appeared: among equal preferences the
    /// newest wins, so a host that moves uses the network it just joined
    /// (make-before-break; the seeds' kernels did the same with route metrics)
    first_seen: HashMap<Locator, Instant>,
    /// hard handoff: locators still configured but aged because a newer one took over
    hard_aged: BTreeSet<Locator>,
    /// the locators as the shell last reported them (re-evaluated when a quiet period ends)
    reported: Vec<LocalLocator>,
    /// soft handoff: locators still configured but retired (quiet, RA stopped):
    /// not advertised, not used as a source, late packets to them still accepted
    soft_retired: BTreeSet<Locator>,
    /// last packet that arrived on each local locator (fast path via
    /// `note_local_activity`, slow path here)
    local_rx: HashMap<Locator, Instant>,
    stats: Stats,
}

fn loc_list(entries: &[LuEntry]) -> Vec<String> {
    entries.iter().map(|e| format!("{}|{}", e.locator, e.preference)).collect()
}

impl Core {
    pub fn new(cfg: CoreConfig, rng: Box<dyn rand_core::RngCore + Send>) -> Core {
        let max = cfg.ilcc_max_entries;
        Core {
            cfg,
            rng,
            ilcc: ilcc::Ilcc::new(max),
            peers: BTreeMap::new(),
            local: Vec::new(),
            first_seen: HashMap::new(),
            hard_aged: BTreeSet::new(),
            reported: Vec::new(),
            soft_retired: BTreeSet::new(),
            local_rx: HashMap::new(),
            stats: Stats::default(),
        }
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    fn drop(&mut self, out: &mut Vec<Action>, reason: DropReason, detail: String) {
        self.stats.drop(reason);
        out.push(Action::Event(Event::drop(reason, detail)));
    }

    fn new_nonce(&mut self) -> Nonce {
        let mut b = [0u8; 12];
        self.rng.fill_bytes(&mut b);
        if self.cfg.nonce_len == 12 {
            Nonce::N96(b)
        } else {
            Nonce::N32([b[0], b[1], b[2], b[3]])
        }
    }

    // ---------------------------------------------------------------- peers

    pub fn add_peer(&mut self, peer: PeerRecord) {
        self.peers.insert(peer.nid, PeerInfo { record: peer, non_ilnp: false });
    }

    pub fn del_peer(&mut self, nid: Nid) -> bool {
        self.peers.remove(&nid).is_some()
    }

    pub fn peers(&self) -> impl Iterator<Item = &PeerInfo> {
        self.peers.values()
    }

    // ---------------------------------------------------------------- local locators

    pub fn local_locators(&self) -> &[LocalLocator] {
        &self.local
    }

    fn usable_local(&self) -> impl Iterator<Item = &LocalLocator> {
        self.local.iter().filter(|l| matches!(l.state, LocatorState::Active | LocatorState::Valid))
    }

    /// `self.local` is kept in preference order (lower pref, then newest first).
    fn best_local(&self) -> Option<Locator> {
        self.usable_local().next().map(|l| l.loc)
    }

    /// The kernel's view of our locators changed. Sends Locator Updates listing all
    /// valid locators to every correspondent when the valid set changes
    /// (RFC 6743 §2, RFC 6740 §6).
    pub fn set_local_locators(&mut self, now: Instant, mut locs: Vec<LocalLocator>) -> Vec<Action> {
        let mut out = Vec::new();
        self.reported = locs.clone();
        for l in &locs {
            self.first_seen.entry(l.loc).or_insert(now);
        }
        self.first_seen.retain(|k, _| locs.iter().any(|l| l.loc == *k));
        self.local_rx.retain(|k, _| locs.iter().any(|l| l.loc == *k));
        let seen = &self.first_seen;
        locs.sort_by_key(|l| (l.pref, std::cmp::Reverse(seen.get(&l.loc).copied()), l.loc));
        if self.soft_retiring() {
            for (locator, quiet) in self.retire_quiet(now, &mut locs) {
                self.stats.bump(Outcome::LocalLocatorRetired);
                out.push(Action::Event(Event::LocalLocatorRetired { locator, quiet_ms: quiet.as_millis() as u64 }));
            }
        } else {
            self.soft_retired.clear();
        }
        let old: BTreeSet<Locator> = self.usable_local().map(|l| l.loc).collect();
        // what an LU advertises: a preference change alone (a router came or went, its
        // RA preference changed) is a change too; lifetimes counting down are not
        let old_adv: BTreeSet<(Locator, u16)> = self.usable_local().map(|l| (l.loc, l.pref)).collect();
        let old_best = self.best_local();
        // hard handoff: locators that disappeared are kept as Aged so late packets
        // to them are recognised and dropped (and counted)
        if self.cfg.handoff == HandoffMode::Hard {
            // and when a new locator takes over, the previous ones are aged at once
            // (break-before-make, RFC 6740 §6): not advertised, not accepted
            self.hard_aged.retain(|a| locs.iter().any(|n| n.loc == *a));
            let newest = locs.iter().find(|l| !self.hard_aged.contains(&l.loc)).map(|l| l.loc);
            if let Some(nb) = newest.filter(|nb| !old.is_empty() && !old.contains(nb)) {
                self.hard_aged.extend(old.iter().copied().filter(|o| *o != nb));
            }
            for l in &mut locs {
                if self.hard_aged.contains(&l.loc) {
                    l.state = LocatorState::Aged;
                }
            }
            for l in &self.local {
                if !locs.iter().any(|n| n.loc == l.loc) {
                    let mut aged = l.clone();
                    aged.state = LocatorState::Aged;
                    locs.push(aged);
                }
            }
        }
        self.local = locs;
        let new: BTreeSet<Locator> = self.usable_local().map(|l| l.loc).collect();
        let new_adv: BTreeSet<(Locator, u16)> = self.usable_local().map(|l| (l.loc, l.pref)).collect();
        out.push(Action::LocalLocators(self.local.clone()));
        if old_adv == new_adv {
            return out;
        }
        out.push(Action::Event(Event::LocalLocatorsChanged {
            locators: self.local.iter().map(|l| format!("{}({:?})", l.loc, l.state)).collect(),
        }));
        let best = self.best_local();
        let nids: Vec<Nid> = self.ilcc.iter().map(|e| e.nid).collect();
        for nid in nids {
            let Some(e) = self.ilcc.get_mut(&nid) else { continue };
            // switch to the preferred locator when ours went away or a better one came
            if let Some(b) = best {
                if !new.contains(&e.local_locator) || Some(e.local_locator) == old_best {
                    e.local_locator = b;
                }
            }
            if new.is_empty() {
                continue;
            }
            e.pending_lu = Some(ilcc::PendingLu { entries: Vec::new(), first_sent: now, attempts: 0, next_at: now });
            if let Some(s) = e.snapshot() {
                out.push(Action::IlccUpsert(s));
            }
        }
        out.extend(self.send_due_lus(now));
        out
    }

    fn soft_retiring(&self) -> bool {
        self.cfg.handoff == HandoffMode::Soft && !self.cfg.soft_quiet_period.is_zero()
    }

    /// When a packet last arrived on `loc` (its first appearance if none has).
    fn last_local_activity(&self, loc: Locator) -> Option<Instant> {
        [self.local_rx.get(&loc), self.first_seen.get(&loc)].into_iter().flatten().max().copied()
    }

    /// Soft handoff, on the sorted reported set: marks Aged every locator retired
    /// before or now, returns those retired now with how long they were quiet.
    /// The preferred locator is never retired (a retired one that becomes the
    /// preferred again is back), nor one whose router came back or whose address
    /// is no longer deprecated. Packets arriving on a retired locator do not bring
    /// it back: the correspondents were told it is gone; they are still accepted.
    fn retire_quiet(&mut self, now: Instant, locs: &mut [LocalLocator]) -> Vec<(Locator, Duration)> {
        let usable = |l: &LocalLocator| matches!(l.state, LocatorState::Active | LocatorState::Valid);
        let preferred = locs.iter().find(|l| usable(l)).map(|l| l.loc);
        self.soft_retired
            .retain(|r| Some(*r) != preferred && locs.iter().any(|l| l.loc == *r && usable(l) && l.ra_stopped()));
        let mut newly = Vec::new();
        for l in locs.iter() {
            if Some(l.loc) == preferred || !usable(l) || !l.ra_stopped() || self.soft_retired.contains(&l.loc) {
                continue;
            }
            let quiet = self.last_local_activity(l.loc).map_or(Duration::MAX, |t| now.saturating_duration_since(t));
            if quiet >= self.cfg.soft_quiet_period {
                newly.push((l.loc, quiet));
            }
        }
        self.soft_retired.extend(newly.iter().map(|(l, _)| *l));
        for l in locs.iter_mut() {
            if self.soft_retired.contains(&l.loc) {
                l.state = LocatorState::Aged;
            }
        }
        newly
    }

    /// The next instant a soft-handoff candidate (usable, not preferred, RA
    /// stopped) will have been quiet for the quiet period, if any.
    fn next_retirement(&self) -> Option<Instant> {
        if !self.soft_retiring() {
            return None;
        }
        let best = self.best_local();
        self.usable_local()
            .filter(|l| Some(l.loc) != best && l.ra_stopped())
            .filter_map(|l| self.last_local_activity(l.loc))
            .map(|t| t + self.cfg.soft_quiet_period)
            .min()
    }

    /// A packet arrived on local locator `loc` at `last_rx` (the shell reads the
    /// fast path's per-locator timestamp; packets the core handles count by
    /// themselves). Older reports than what is known are ignored.
    pub fn note_local_activity(&mut self, loc: Locator, last_rx: Instant) {
        if !self.local.iter().any(|l| l.loc == loc) {
            return;
        }
        let t = self.local_rx.entry(loc).or_insert(last_rx);
        *t = (*t).max(last_rx);
    }

    /// When a packet last arrived on local locator `loc`, as far as the core knows.
    pub fn local_last_rx(&self, loc: Locator) -> Option<Instant> {
        self.local_rx.get(&loc).copied()
    }

    fn lu_entries(&self) -> Vec<LuEntry> {
        self.usable_local()
            .map(|l| LuEntry {
                locator: l.loc,
                preference: l.pref,
                lifetime: l.lifetime_s.min(u32::from(self.cfg.lu_lifetime_s)) as u16,
            })
            .collect()
    }

    fn send_due_lus(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let entries = self.lu_entries();
        if entries.is_empty() {
            return out;
        }
        let lu_timers = self.cfg.lu;
        let local_nid = self.cfg.local_nid;
        let hard = self.cfg.handoff == HandoffMode::Hard;
        let mut failed = Vec::new();
        for e in self.ilcc.iter_mut() {
            let Some(p) = e.pending_lu.as_ref() else { continue };
            if p.next_at > now {
                continue;
            }
            if p.attempts >= lu_timers.max_attempts {
                failed.push((e.nid, p.attempts));
                e.pending_lu = None;
                continue;
            }
            // first attempts go to the active locator; retries (or hard handoff,
            // where both ends may have moved) go to every known locator
            let targets: Vec<Locator> = if p.attempts == 0 && !hard {
                e.best_remote().map(|r| vec![r.loc]).unwrap_or_default()
            } else {
                e.remote_locators.iter().filter(|r| r.state != LocatorState::Expired).map(|r| r.loc).collect()
            };
            let src = ilnp_addr(e.local_locator, local_nid);
            let srtt = e.srtt_us.map(Duration::from_micros);
            let Some(p) = e.pending_lu.as_mut() else { continue };
            if p.attempts == 0 {
                p.entries = entries.clone();
                p.first_sent = now;
            }
            p.attempts += 1;
            // first timeout: twice the measured LU round trip to this peer if we have
            // one (floor min_rto), else initial_rto; then exponential backoff
            let base =
                srtt.map(|s| (s * 2).max(lu_timers.min_rto)).unwrap_or(lu_timers.initial_rto.max(lu_timers.min_rto));
            let rto = base * 2u32.saturating_pow(p.attempts - 1);
            p.next_at = now + rto.min(lu_timers.max_rto);
            let lu = LocatorUpdate { operation: LuOperation::Advertisement, entries: p.entries.clone() };
            for t in targets {
                if let Ok(pkt) = translate::lu_packet(src, ilnp_addr(t, e.nid), &e.nonce_tx, &lu) {
                    out.push(Action::SendWire(pkt));
                }
            }
            out.push(Action::Event(Event::LuSent { nid: e.nid, attempt: p.attempts, locators: loc_list(&p.entries) }));
        }
        for (nid, attempts) in failed {
            self.stats.bump(Outcome::LuFailed);
            out.push(Action::Event(Event::LuFailed { nid, attempts }));
        }
        out
    }

    // ---------------------------------------------------------------- outbound

    /// An identifier-form packet the kernel routed to ilnp0.
    pub fn handle_outbound(&mut self, now: Instant, pkt: &[u8], csum: Csum) -> Vec<Action> {
        let mut out = Vec::new();
        let p = match ipv6::Packet::new_checked(pkt) {
            Ok(p) => p,
            Err(e) => {
                self.drop(&mut out, DropReason::OutMalformed, e.to_string());
                return out;
            }
        };
        let (dl, dn) = split_addr(p.dst());
        let (sl, _) = split_addr(p.src());
        if dl != self.cfg.id_prefix || sl != self.cfg.id_prefix {
            // e.g. MLD reports the kernel sends on ilnp0: not ours to carry
            self.stats.bump(Outcome::OutNotIdentifier);
            return out;
        }
        if self.ilcc.get(&dn).is_none() {
            if let Err(reason) = self.create_initiator_entry(now, dn, &mut out) {
                self.stats.drop(reason);
                out.push(Action::Event(Event::drop(reason, format!("packet to {}", p.dst()))));
                unreachable_to_app(pkt, &mut out);
                return out;
            }
        }
        // the entry's source locator must still be ours and usable (it is moved to the
        // best one by set_local_locators; with none left the application hears at once)
        let usable = self.ilcc.get(&dn).is_some_and(|e| self.usable_local().any(|l| l.loc == e.local_locator));
        if !usable {
            self.stats.drop(DropReason::NoLocalLocator);
            out.push(Action::Event(Event::drop(DropReason::NoLocalLocator, format!("packet to {}", p.dst()))));
            unreachable_to_app(pkt, &mut out);
            return out;
        }
        let id_prefix = self.cfg.id_prefix;
        let Some(e) = self.ilcc.get_mut(&dn) else { return out };
        e.last_used = now;
        e.slow_pkts_out += 1;
        e.slow_bytes_out += pkt.len() as u64;
        let Some(remote) = e.best_remote().map(|r| r.loc) else {
            self.drop(&mut out, DropReason::NoRemoteLocator, format!("{dn}"));
            return out;
        };
        let res = match (is_icmp_error(pkt), e.nonce_rx) {
            // an error our stack raised about the peer's packet: the quote goes back in
            // the wire form it arrived in, with the peer's nonce, so the peer can match
            // it; the error itself carries our nonce (RFC 6744 §7)
            (true, Some(rx)) if csum == Csum::Complete => {
                translate::icmp_error_to_wire(pkt, id_prefix, e.local_locator, remote, &e.nonce_tx, &rx)
            }
            _ => translate::to_wire(pkt, id_prefix, e.local_locator, remote, &e.nonce_tx, csum),
        };
        match res {
            Ok(w) => out.push(Action::SendWire(w)),
            Err(err) => self.drop(&mut out, DropReason::OutMalformed, format!("{err}: {}", packet_summary(pkt))),
        }
        out
    }

    fn create_initiator_entry(&mut self, now: Instant, nid: Nid, out: &mut Vec<Action>) -> Result<(), DropReason> {
        let peer = match self.peers.get(&nid) {
            None => return Err(DropReason::UnknownPeer),
            Some(p) if p.non_ilnp => return Err(DropReason::NonIlnpPeerBlocked),
            Some(p) => p.record.clone(),
        };
        let local = self.best_local().ok_or(DropReason::NoLocalLocator)?;
        if self.ilcc.is_full() {
            return Err(DropReason::IlccFull);
        }
        let nonce_tx = self.new_nonce();
        let mut remote: Vec<RemoteLocator> =
            peer.locators.iter().map(|l| RemoteLocator::new(l.loc, l.pref, LocatorState::Valid, None)).collect();
        remote.sort_by_key(|r| r.pref);
        let mut e = IlccEntry::new(nid, remote, local, nonce_tx, None, true, now);
        let best = e.best_remote().map(|r| r.loc).ok_or(DropReason::NoRemoteLocator)?;
        e.activate_remote(best);
        let snap = e.snapshot();
        self.ilcc.insert(e).map_err(|_| DropReason::IlccFull)?;
        self.stats.bump(Outcome::PeerCreated);
        out.push(Action::Event(Event::PeerCreated {
            nid,
            initiator: true,
            local_locator: local,
            remote_locator: best,
        }));
        if let Some(s) = snap {
            out.push(Action::IlccUpsert(s));
        }
        Ok(())
    }

    // ---------------------------------------------------------------- inbound

    /// A wire-form packet an uplink punted to the daemon.
    pub fn handle_inbound(&mut self, now: Instant, pkt: &[u8], csum: Csum) -> Vec<Action> {
        let mut out = Vec::new();
        match ilnp_wire::destopts::find_nonce(pkt) {
            Err(WireError::MoreThanOneNonce) => {
                self.drop(&mut out, DropReason::MultiNonce, packet_summary(pkt));
                return out;
            }
            Err(e) => {
                self.drop(&mut out, DropReason::Malformed, format!("{e}: {}", packet_summary(pkt)));
                return out;
            }
            Ok(None) => {
                // no nonce on the outer packet: an ICMPv6 error quoting one of ours
                self.handle_icmp_error(pkt, None, &mut out);
                return out;
            }
            Ok(Some(nh)) => {
                if is_icmp_error(pkt) {
                    self.handle_icmp_error(pkt, Some(nh.nonce), &mut out);
                    return out;
                }
            }
        }
        if translate::is_lu(pkt) {
            self.handle_lu(now, pkt, &mut out);
            return out;
        }
        let (ident, meta) = match translate::to_identifier(pkt, self.cfg.id_prefix, csum) {
            Ok(x) => x,
            Err(e) => {
                self.drop(&mut out, DropReason::Malformed, format!("{e}: {}", packet_summary(pkt)));
                return out;
            }
        };
        if meta.dst_nid != self.cfg.local_nid {
            self.drop(&mut out, DropReason::NotForUs, packet_summary(pkt));
            return out;
        }
        match self.local.iter().find(|l| l.loc == meta.dst_loc) {
            None => {
                self.drop(&mut out, DropReason::UnknownLocalLocator, packet_summary(pkt));
                return out;
            }
            // soft handoff: a retired locator still accepts late packets (RFC 6740 §6)
            Some(l)
                if matches!(l.state, LocatorState::Aged | LocatorState::Expired)
                    && !self.soft_retired.contains(&l.loc) =>
            {
                self.drop(&mut out, DropReason::AgedLocalLocator, packet_summary(pkt));
                return out;
            }
            Some(_) => {}
        }
        let nid = meta.src_nid;
        if self.ilcc.get(&nid).is_none() {
            if self.ilcc.is_full() {
                self.drop(&mut out, DropReason::IlccFull, packet_summary(pkt));
                return out;
            }
            let nonce_tx = self.new_nonce();
            let pref = self
                .peers
                .get(&nid)
                .and_then(|p| p.record.locators.iter().find(|l| l.loc == meta.src_loc).map(|l| l.pref))
                .unwrap_or(10);
            let e = IlccEntry::new(
                nid,
                vec![RemoteLocator::new(meta.src_loc, pref, LocatorState::Active, Some(now))],
                meta.dst_loc,
                nonce_tx,
                Some(meta.nonce),
                false,
                now,
            );
            let snap = e.snapshot();
            if self.ilcc.insert(e).is_err() {
                self.drop(&mut out, DropReason::IlccFull, packet_summary(pkt));
                return out;
            }
            if let Some(p) = self.peers.get_mut(&nid) {
                p.non_ilnp = false;
            }
            self.stats.bump(Outcome::PeerCreated);
            out.push(Action::Event(Event::PeerCreated {
                nid,
                initiator: false,
                local_locator: meta.dst_loc,
                remote_locator: meta.src_loc,
            }));
            out.extend(snap.map(Action::IlccUpsert));
            // tell the initiator our nonce now, even if the application never
            // answers (one-way UDP): our Locator Updates must verify (RFC 6741 §13.1)
            out.push(Action::SendWire(translate::nonce_only_packet(
                ilnp_addr(meta.dst_loc, self.cfg.local_nid),
                ilnp_addr(meta.src_loc, nid),
                &nonce_tx,
            )));
        } else {
            let e = self.ilcc.get_mut(&nid).expect("checked");
            match e.nonce_rx {
                Some(n) if n != meta.nonce => {
                    let d = format!("{} (want {})", packet_summary(pkt), ilcc::hex(n.as_bytes()));
                    self.drop(&mut out, DropReason::BadNonce, d);
                    return out;
                }
                Some(_) => {}
                None => {
                    // the responder's first packet: learn its nonce (RFC 6744 §6);
                    // it answers our first packet at once, so this is an RTT sample
                    e.nonce_rx = Some(meta.nonce);
                    if e.initiator && e.srtt_us.is_none() {
                        e.srtt_us = Some(now.saturating_duration_since(e.created).as_micros() as u64);
                    }
                    out.extend(e.snapshot().map(Action::IlccUpsert));
                }
            }
            if !e.has_remote(meta.src_loc) && e.remote_locators.len() >= self.cfg.max_remote_locators.max(1) {
                // the peer's own packet (right nonce): delivered, its locator not kept
                self.stats.bump(Outcome::RemoteLocatorNotLearnedFull);
            } else if !e.has_remote(meta.src_loc) {
                // unknown source locator with the correct nonce: learn it (RFC 6744 §4)
                let pref = e.remote_locators.iter().map(|r| r.pref).max().unwrap_or(10);
                e.remote_locators.push(RemoteLocator::new(meta.src_loc, pref, LocatorState::Valid, Some(now)));
                self.stats.bump(Outcome::RemoteLocatorLearned);
                out.push(Action::Event(Event::RemoteLocatorLearned { nid, locator: meta.src_loc }));
                out.extend(e.snapshot().map(Action::IlccUpsert));
            }
        }
        // a verified packet arrived on this locator: it is not quiet
        self.local_rx.insert(meta.dst_loc, now);
        if self.soft_retired.contains(&meta.dst_loc) {
            self.stats.bump(Outcome::RetiredLocalLocatorRx);
        }
        let e = self.ilcc.get_mut(&nid).expect("present");
        e.last_used = now;
        e.slow_pkts_in += 1;
        e.slow_bytes_in += pkt.len() as u64;
        if let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == meta.src_loc) {
            r.last_heard = Some(now);
        }
        if meta.proto == ipv6::PROTO_NONE {
            // a nonce-only packet: nothing for the stack
            self.stats.bump(Outcome::NonceOnlyReceived);
            return out;
        }
        out.push(Action::DeliverLocal(ident));
        out
    }

    /// An ICMPv6 error punted to us: `outer_nonce` is the nonce on the error itself
    /// (an ILNPv6 correspondent puts its own on every ICMP it sends, RFC 6744 §7).
    fn handle_icmp_error(&mut self, pkt: &[u8], outer_nonce: Option<Nonce>, out: &mut Vec<Action>) {
        let meta = match translate::icmp_error_meta(pkt) {
            Ok(m) => m,
            Err(e) => {
                self.drop(out, DropReason::IcmpUnrelated, format!("{e}: {}", packet_summary(pkt)));
                return;
            }
        };
        // An error sent by a current correspondent itself must carry that
        // correspondent's nonce; missing or wrong → forgery (RFC 6744 §7, RFC 6741
        // §11.1). Until the peer has shown its nonce (e.g. a non-ILNP peer's Parameter
        // Problem, which cannot carry one) the quoted nonce check below is all we have.
        // From anyone else (routers) an outer nonce cannot be verified and is ignored.
        if let Ok(p) = ipv6::Packet::new_checked(pkt) {
            let (_, sender) = split_addr(p.src());
            if let Some(rx) = self.ilcc.get(&sender).and_then(|e| e.nonce_rx) {
                match outer_nonce {
                    None => return self.drop(out, DropReason::IcmpMissingNonce, packet_summary(pkt)),
                    Some(n) if n != rx => return self.drop(out, DropReason::IcmpBadNonce, packet_summary(pkt)),
                    Some(_) => {}
                }
            }
        }
        // Only errors that quote our own nonce for a current correspondent are
        // believed: an off-path forger does not know it (RFC 6741 §11.1).
        let ours = meta.local_nid == self.cfg.local_nid
            && self.ilcc.get(&meta.peer_nid).is_some_and(|e| e.nonce_tx == meta.nonce);
        if !ours {
            self.drop(out, DropReason::IcmpErrorUnverified, packet_summary(pkt));
            return;
        }
        let translated = match translate::icmp_error_to_identifier(pkt, self.cfg.id_prefix) {
            Ok((t, _)) => t,
            Err(e) => return self.drop(out, DropReason::IcmpUntranslatable, format!("{e}: {}", packet_summary(pkt))),
        };
        if !meta.rejects_nonce {
            // Packet Too Big (MTU already reduced by our header), unreachable, time
            // exceeded...: the kernel matches the quote to the socket
            self.stats.bump(Outcome::IcmpErrorTranslated);
            out.push(Action::DeliverLocal(translated));
            return;
        }
        // Parameter Problem code 2 at our nonce option: the peer is not ILNPv6-capable
        // (RFC 6744 §6, RFC 6740 §8). Stop using ILNP towards it and fail the
        // application at once with Destination Unreachable / address unreachable
        // (Linux: EHOSTUNREACH) quoting its own identifier-form packet.
        let nid = meta.peer_nid;
        self.ilcc.remove(&nid);
        if let Some(p) = self.peers.get_mut(&nid) {
            p.non_ilnp = true;
        }
        self.stats.bump(Outcome::NonIlnpPeer);
        out.push(Action::IlccRemove(nid));
        out.push(Action::Event(Event::NonIlnpPeer { nid }));
        let quoted = ipv6::Packet::new_checked(&translated[..])
            .ok()
            .and_then(|p| icmpv6::Message::new_checked(p.payload()).ok().map(|m| m.invoking_packet().to_vec()));
        match quoted {
            Some(q) => out.push(Action::DeliverLocal(icmpv6::error_packet(
                ilnp_addr(self.cfg.id_prefix, nid),
                ilnp_addr(self.cfg.id_prefix, self.cfg.local_nid),
                icmpv6::TYPE_DEST_UNREACH,
                icmpv6::UNREACH_ADDRESS,
                0,
                &q,
            ))),
            None => self.drop(out, DropReason::IcmpUntranslatable, packet_summary(pkt)),
        }
    }

    fn handle_lu(&mut self, now: Instant, pkt: &[u8], out: &mut Vec<Action>) {
        let lp = match translate::parse_lu_packet(pkt) {
            Ok(lp) => lp,
            Err(e) => {
                // one drop reason for every malformed LU, and a breakdown by what was
                // wrong (a flood of one kind shows up as that kind)
                self.stats.bump(lu_malformed_kind(&e));
                self.drop(out, DropReason::LuMalformed, format!("{e}: {}", packet_summary(pkt)));
                return;
            }
        };
        let (src_loc, nid) = split_addr(lp.src);
        let (dst_loc, dst_nid) = split_addr(lp.dst);
        if dst_nid != self.cfg.local_nid {
            self.drop(out, DropReason::NotForUs, packet_summary(pkt));
            return;
        }
        let Some(e) = self.ilcc.get_mut(&nid) else {
            self.drop(out, DropReason::LuUnknownPeer, packet_summary(pkt));
            return;
        };
        if lp.nonce.is_none() || lp.nonce != e.nonce_rx {
            self.drop(out, DropReason::LuBadNonce, packet_summary(pkt));
            return;
        }
        if self.local.iter().any(|l| l.loc == dst_loc) {
            self.local_rx.insert(dst_loc, now);
        }
        match lp.lu.operation {
            LuOperation::Advertisement => {
                // replace the whole set (RFC 6743 §4); the preferred one becomes active.
                // A locator listed twice counts once (its best preference); at most
                // max_remote_locators are kept, the best by preference.
                let mut listed: Vec<&LuEntry> = lp.lu.entries.iter().collect();
                listed.sort_by_key(|x| x.preference);
                let mut seen = BTreeSet::new();
                listed.retain(|x| seen.insert(x.locator));
                let ignored = listed.len().saturating_sub(self.cfg.max_remote_locators.max(1));
                listed.truncate(self.cfg.max_remote_locators.max(1));
                let mut remote: Vec<RemoteLocator> = listed
                    .into_iter()
                    .map(|x| RemoteLocator {
                        loc: x.locator,
                        pref: x.preference,
                        lifetime_s: x.lifetime,
                        state: LocatorState::Valid,
                        last_heard: if x.locator == src_loc { Some(now) } else { None },
                        // Lifetime 0: none given; the locator stays until the next LU
                        expires: (x.lifetime > 0).then(|| now + Duration::from_secs(u64::from(x.lifetime))),
                    })
                    .collect();
                remote.sort_by_key(|r| r.pref);
                e.remote_locators = remote;
                let best = e.best_remote().map(|r| r.loc).unwrap_or(src_loc);
                e.activate_remote(best);
                e.last_used = now;
                let ack = lp.lu.ack();
                // ack from our active locator towards this peer (what our data uses), to
                // the preferred advertised one; the locator the LU reached if ours is gone
                let usable = |l: Locator| {
                    self.local
                        .iter()
                        .any(|x| x.loc == l && matches!(x.state, LocatorState::Active | LocatorState::Valid))
                };
                let from = if usable(e.local_locator) { e.local_locator } else { dst_loc };
                let entries = loc_list(&lp.lu.entries);
                if let Ok(a) =
                    translate::lu_packet(ilnp_addr(from, self.cfg.local_nid), ilnp_addr(best, nid), &e.nonce_tx, &ack)
                {
                    out.push(Action::SendWire(a));
                }
                out.extend(e.snapshot().map(Action::IlccUpsert));
                self.stats.bump(Outcome::LuReceived);
                if ignored > 0 {
                    self.stats.add(Outcome::LuLocatorsIgnored, ignored as u64);
                }
                out.push(Action::Event(Event::LuReceived { nid, locators: entries }));
            }
            LuOperation::Acknowledgement => {
                let matches = e.pending_lu.as_ref().is_some_and(|p| p.entries == lp.lu.entries && p.attempts > 0);
                if !matches && e.last_acked_lu.as_ref() == Some(&lp.lu.entries) {
                    // the ack of a retransmission that crossed the first ack
                    self.stats.bump(Outcome::LuDuplicateAck);
                    return;
                }
                if !matches {
                    self.drop(out, DropReason::LuUnexpectedAck, packet_summary(pkt));
                    return;
                }
                let p = e.pending_lu.take().expect("checked");
                let rtt = now.saturating_duration_since(p.first_sent);
                // a sample only when unambiguous (Karn): the first transmission was acked
                if p.attempts == 1 {
                    let sample = rtt.as_micros() as u64;
                    e.srtt_us = Some(e.srtt_us.map_or(sample, |s| (7 * s + sample) / 8));
                }
                e.last_acked_lu = Some(p.entries.clone());
                self.stats.bump(Outcome::LuAcked);
                out.push(Action::Event(Event::LuAcked { nid, rtt_us: rtt.as_micros() as u64, attempts: p.attempts }));
            }
        }
    }

    // ---------------------------------------------------------------- timers

    /// The next instant `handle_timeout` has work: an LU (re)transmission, a remote
    /// locator's lifetime end, an entry's idle deadline, or the end of a soft-handoff
    /// quiet period.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let lu = self.ilcc.iter().filter_map(|e| e.pending_lu.as_ref().map(|p| p.next_at)).min();
        let idle = self.ilcc.iter().map(|e| e.last_used + self.cfg.idle_timeout).min();
        let expiry = self.ilcc.iter().filter_map(|e| e.next_expiry()).min();
        [lu, idle, expiry, self.next_retirement()].into_iter().flatten().min()
    }

    /// Due work at `now`. A shell with a fast path feeds `note_local_activity` first,
    /// so a quiet period ends on what really arrived.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        if self.next_retirement().is_some_and(|t| t <= now) {
            // the same rule as for a change the shell reports; the LU leaves here
            let reported = self.reported.clone();
            out.extend(self.set_local_locators(now, reported));
        }
        out.extend(self.send_due_lus(now));
        let mut aged = Vec::new();
        for e in self.ilcc.iter_mut() {
            if e.next_expiry().is_some_and(|t| t <= now) {
                let before = e.best_remote().map(|r| r.loc);
                let locs = e.age_locators(now);
                if !locs.is_empty() && e.best_remote().map(|r| r.loc) != before {
                    out.extend(e.snapshot().map(Action::IlccUpsert));
                }
                aged.extend(locs.into_iter().map(|l| (e.nid, l)));
            }
        }
        for (nid, locator) in aged {
            self.stats.bump(Outcome::RemoteLocatorAged);
            out.push(Action::Event(Event::RemoteLocatorAged { nid, locator }));
        }
        for nid in self.ilcc.idle(now, self.cfg.idle_timeout) {
            self.ilcc.remove(&nid);
            self.stats.bump(Outcome::IlccIdleExpired);
            out.push(Action::IlccRemove(nid));
            out.push(Action::Event(Event::PeerRemoved { nid, reason: "idle" }));
        }
        out
    }

    /// The fast path saw traffic for `nid`: keep the entry alive.
    pub fn note_activity(&mut self, nid: Nid, now: Instant) {
        if let Some(e) = self.ilcc.get_mut(&nid) {
            e.last_used = now;
        }
    }

    // ---------------------------------------------------------------- inspection

    pub fn ilcc_entries(&self) -> impl Iterator<Item = &IlccEntry> {
        self.ilcc.iter()
    }

    /// ILCC entries with their idle time filled in, for display.
    pub fn ilcc_view(&self, now: Instant) -> Vec<IlccEntry> {
        let mut v: Vec<IlccEntry> = self
            .ilcc
            .iter()
            .map(|e| {
                let mut c = e.clone();
                c.idle_s = now.saturating_duration_since(e.last_used).as_secs_f64();
                c.age_s = now.saturating_duration_since(e.created).as_secs_f64();
                c
            })
            .collect();
        v.sort_by_key(|e| e.nid);
        v
    }

    pub fn flush_ilcc(&mut self) -> Vec<Action> {
        let nids = self.ilcc.clear();
        nids.into_iter()
            .flat_map(|nid| [Action::IlccRemove(nid), Action::Event(Event::PeerRemoved { nid, reason: "flushed" })])
            .collect()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}

/// The breakdown counter of a malformed Locator Update (`lu_malformed` counts them all).
fn lu_malformed_kind(e: &WireError) -> Outcome {
    match e {
        WireError::LuNoLocators => Outcome::LuMalformedNoLocators,
        WireError::LuLengthMismatch { .. } => Outcome::LuMalformedLengthMismatch,
        WireError::Truncated => Outcome::LuMalformedTruncated,
        WireError::BadChecksum => Outcome::LuMalformedBadChecksum,
        WireError::UnknownLuOperation { .. } => Outcome::LuMalformedUnknownOperation,
        _ => Outcome::LuMalformedOther,
    }
}

/// `src -> dst` of a packet, for logs.
fn packet_summary(pkt: &[u8]) -> String {
    match ipv6::Packet::new_checked(pkt) {
        Ok(p) => format!("{} -> {}", p.src(), p.dst()),
        Err(e) => format!("{} bytes ({e})", pkt.len()),
    }
}

/// Fails the application's packet at once: Destination Unreachable, code 3
/// (address unreachable), which Linux reports as EHOSTUNREACH (a connecting TCP
/// socket fails instead of retrying SYNs for minutes). Never in answer to an ICMPv6
/// error (RFC 4443 §2.4 (e)).
fn unreachable_to_app(pkt: &[u8], out: &mut Vec<Action>) {
    if is_icmp_error(pkt) {
        return;
    }
    if let Ok(u) = translate::unreachable_to_app(pkt, icmpv6::UNREACH_ADDRESS) {
        out.push(Action::DeliverLocal(u));
    }
}

/// True if the packet's upper layer is an ICMPv6 error message (types 1-4).
fn is_icmp_error(pkt: &[u8]) -> bool {
    match ipv6::upper_layer(pkt) {
        Ok((ipv6::PROTO_ICMPV6, off)) => pkt
            .get(off..)
            .and_then(|b| icmpv6::Message::new_checked(b).ok())
            .is_some_and(|m| icmpv6::is_error(m.msg_type())),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
