//! Sans-IO ILNPv6 protocol core: ILCC, peers, slow-path decisions, Locator Updates.
//! No sockets, no threads, no clock reads: time (`now`) and randomness are injected.

pub mod ilcc;
pub mod peers;

pub use ilcc::{IlccEntry, RemoteLocator};
pub use ilnp_wire::{Locator, Nid, Nonce};
pub use peers::{PeerLocator, PeerRecord};
/// The randomness the core takes (re-exported so shells and fuzzers use the same trait).
pub use rand_core::{Error as RngError, RngCore};

use ilnp_wire::icmpv6::{self, LocatorUpdate, LuEntry, LuOperation};
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{ilnp_addr, ipv6, split_addr, Error as WireError};
use peers::ser_display;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
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
    /// Lifetime we advertise for our locators in LUs (seconds)
    pub lu_lifetime_s: u16,
    pub lu: LuTimers,
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
            lu_lifetime_s: 30,
            lu: LuTimers::default(),
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

/// What happened, for logs and `ilnpctl monitor`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    PeerCreated {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        initiator: bool,
        #[serde(serialize_with = "ser_display")]
        local_locator: Locator,
        #[serde(serialize_with = "ser_display")]
        remote_locator: Locator,
    },
    PeerRemoved {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        reason: &'static str,
    },
    NonIlnpPeer {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
    },
    RemoteLocatorLearned {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        #[serde(serialize_with = "ser_display")]
        locator: Locator,
    },
    LocalLocatorsChanged {
        locators: Vec<String>,
    },
    LuReceived {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        locators: Vec<String>,
    },
    LuSent {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        attempt: u32,
        locators: Vec<String>,
    },
    LuAcked {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        rtt_us: u64,
        attempts: u32,
    },
    LuFailed {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        attempts: u32,
    },
    Drop {
        reason: &'static str,
        detail: String,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::PeerCreated { nid, initiator, local_locator, remote_locator } => write!(
                f,
                "ILNP session with {nid} ({}) via {local_locator} -> {remote_locator}",
                if *initiator { "initiated" } else { "accepted" }
            ),
            Event::PeerRemoved { nid, reason } => write!(f, "ILCC entry {nid} removed: {reason}"),
            Event::NonIlnpPeer { nid } => {
                write!(f, "peer {nid} is not ILNPv6-capable (Parameter Problem on the nonce option)")
            }
            Event::RemoteLocatorLearned { nid, locator } => {
                write!(f, "learned locator {locator} of {nid} (correct nonce)")
            }
            Event::LocalLocatorsChanged { locators } => write!(f, "local locators: [{}]", locators.join(", ")),
            Event::LuReceived { nid, locators } => write!(f, "LU from {nid}: [{}]", locators.join(", ")),
            Event::LuSent { nid, attempt, locators } => {
                write!(f, "LU to {nid} (attempt {attempt}): [{}]", locators.join(", "))
            }
            Event::LuAcked { nid, rtt_us, attempts } => {
                write!(f, "LU to {nid} acked in {:.2} ms after {attempts} attempt(s)", *rtt_us as f64 / 1e3)
            }
            Event::LuFailed { nid, attempts } => write!(f, "LU to {nid} not acked after {attempts} attempts"),
            Event::Drop { reason, detail } => write!(f, "drop ({reason}): {detail}"),
        }
    }
}

/// Counters, one per reason (drops and notable outcomes).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub counters: BTreeMap<&'static str, u64>,
}

impl Stats {
    fn bump(&mut self, reason: &'static str) {
        *self.counters.entry(reason).or_insert(0) += 1;
    }
    pub fn get(&self, reason: &str) -> u64 {
        self.counters.get(reason).copied().unwrap_or(0)
    }
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
            stats: Stats::default(),
        }
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    fn drop(&mut self, out: &mut Vec<Action>, reason: &'static str, detail: String) {
        self.stats.bump(reason);
        out.push(Action::Event(Event::Drop { reason, detail }));
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
        for l in &locs {
            self.first_seen.entry(l.loc).or_insert(now);
        }
        self.first_seen.retain(|k, _| locs.iter().any(|l| l.loc == *k));
        let seen = &self.first_seen;
        locs.sort_by_key(|l| (l.pref, std::cmp::Reverse(seen.get(&l.loc).copied()), l.loc));
        let old: BTreeSet<Locator> = self.usable_local().map(|l| l.loc).collect();
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
        out.push(Action::LocalLocators(self.local.clone()));
        if old == new {
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

    fn lu_entries(&self) -> Vec<LuEntry> {
        self.usable_local()
            .map(|l| LuEntry { locator: l.loc, preference: l.pref, lifetime: self.cfg.lu_lifetime_s })
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
            self.stats.bump("lu_failed");
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
                self.drop(&mut out, "out_malformed", e.to_string());
                return out;
            }
        };
        let (dl, dn) = split_addr(p.dst());
        let (sl, _) = split_addr(p.src());
        if dl != self.cfg.id_prefix || sl != self.cfg.id_prefix {
            // e.g. MLD reports the kernel sends on ilnp0: not ours to carry
            self.stats.bump("out_not_identifier");
            return out;
        }
        if self.ilcc.get(&dn).is_none() {
            if let Err(reason) = self.create_initiator_entry(now, dn, &mut out) {
                self.stats.bump(reason);
                out.push(Action::Event(Event::Drop { reason, detail: format!("packet to {}", p.dst()) }));
                let code = icmpv6::UNREACH_ADDRESS;
                if let Ok(u) = translate::unreachable_to_app(pkt, code) {
                    out.push(Action::DeliverLocal(u));
                }
                return out;
            }
        }
        let Some(e) = self.ilcc.get_mut(&dn) else { return out };
        e.last_used = now;
        e.slow_pkts_out += 1;
        let Some(remote) = e.best_remote().map(|r| r.loc) else {
            self.drop(&mut out, "no_remote_locator", format!("{dn}"));
            return out;
        };
        match translate::to_wire(pkt, self.cfg.id_prefix, e.local_locator, remote, &e.nonce_tx, csum) {
            Ok(w) => out.push(Action::SendWire(w)),
            Err(err) => self.drop(&mut out, "out_malformed", err.to_string()),
        }
        out
    }

    fn create_initiator_entry(&mut self, now: Instant, nid: Nid, out: &mut Vec<Action>) -> Result<(), &'static str> {
        let peer = match self.peers.get(&nid) {
            None => return Err("unknown_peer"),
            Some(p) if p.non_ilnp => return Err("non_ilnp_peer_blocked"),
            Some(p) => p.record.clone(),
        };
        let local = self.best_local().ok_or("no_local_locator")?;
        if self.ilcc.is_full() {
            return Err("ilcc_full");
        }
        let nonce_tx = self.new_nonce();
        let mut remote: Vec<RemoteLocator> = peer
            .locators
            .iter()
            .map(|l| RemoteLocator {
                loc: l.loc,
                pref: l.pref,
                lifetime_s: 0,
                state: LocatorState::Valid,
                last_heard: None,
            })
            .collect();
        remote.sort_by_key(|r| r.pref);
        let mut e = IlccEntry::new(nid, remote, local, nonce_tx, None, true, now);
        let best = e.best_remote().map(|r| r.loc).ok_or("no_remote_locator")?;
        e.activate_remote(best);
        let snap = e.snapshot();
        self.ilcc.insert(e).map_err(|_| "ilcc_full")?;
        self.stats.bump("peer_created");
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
                self.drop(&mut out, "drop_multi_nonce", packet_summary(pkt));
                return out;
            }
            Err(e) => {
                self.drop(&mut out, "malformed", format!("{e}: {}", packet_summary(pkt)));
                return out;
            }
            Ok(None) => {
                // no nonce on the outer packet: an ICMPv6 error quoting one of ours
                self.handle_icmp_error(now, pkt, &mut out);
                return out;
            }
            Ok(Some(_)) => {}
        }
        if translate::is_lu(pkt) {
            self.handle_lu(now, pkt, &mut out);
            return out;
        }
        let (ident, meta) = match translate::to_identifier(pkt, self.cfg.id_prefix, csum) {
            Ok(x) => x,
            Err(e) => {
                self.drop(&mut out, "malformed", format!("{e}: {}", packet_summary(pkt)));
                return out;
            }
        };
        if meta.dst_nid != self.cfg.local_nid {
            self.drop(&mut out, "not_for_us", packet_summary(pkt));
            return out;
        }
        match self.local.iter().find(|l| l.loc == meta.dst_loc) {
            None => {
                self.drop(&mut out, "unknown_local_locator", packet_summary(pkt));
                return out;
            }
            Some(l) if matches!(l.state, LocatorState::Aged | LocatorState::Expired) => {
                self.drop(&mut out, "aged_local_locator", packet_summary(pkt));
                return out;
            }
            Some(_) => {}
        }
        let nid = meta.src_nid;
        if self.ilcc.get(&nid).is_none() {
            if self.ilcc.is_full() {
                self.drop(&mut out, "ilcc_full", packet_summary(pkt));
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
                vec![RemoteLocator {
                    loc: meta.src_loc,
                    pref,
                    lifetime_s: 0,
                    state: LocatorState::Active,
                    last_heard: Some(now),
                }],
                meta.dst_loc,
                nonce_tx,
                Some(meta.nonce),
                false,
                now,
            );
            let snap = e.snapshot();
            if self.ilcc.insert(e).is_err() {
                self.drop(&mut out, "ilcc_full", packet_summary(pkt));
                return out;
            }
            if let Some(p) = self.peers.get_mut(&nid) {
                p.non_ilnp = false;
            }
            self.stats.bump("peer_created");
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
                    self.drop(&mut out, "bad_nonce", d);
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
            if !e.has_remote(meta.src_loc) {
                // unknown source locator with the correct nonce: learn it (RFC 6744 §4)
                e.remote_locators.push(RemoteLocator {
                    loc: meta.src_loc,
                    pref: e.remote_locators.iter().map(|r| r.pref).max().unwrap_or(10),
                    lifetime_s: 0,
                    state: LocatorState::Valid,
                    last_heard: Some(now),
                });
                self.stats.bump("remote_locator_learned");
                out.push(Action::Event(Event::RemoteLocatorLearned { nid, locator: meta.src_loc }));
                out.extend(e.snapshot().map(Action::IlccUpsert));
            }
        }
        let e = self.ilcc.get_mut(&nid).expect("present");
        e.last_used = now;
        e.slow_pkts_in += 1;
        if let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == meta.src_loc) {
            r.last_heard = Some(now);
        }
        if meta.proto == ipv6::PROTO_NONE {
            // a nonce-only packet: nothing for the stack
            self.stats.bump("nonce_only_received");
            return out;
        }
        out.push(Action::DeliverLocal(ident));
        out
    }

    fn handle_icmp_error(&mut self, _now: Instant, pkt: &[u8], out: &mut Vec<Action>) {
        let meta = match translate::icmp_error_meta(pkt) {
            Ok(m) => m,
            Err(e) => {
                self.drop(out, "icmp_unrelated", format!("{e}: {}", packet_summary(pkt)));
                return;
            }
        };
        // Only errors that quote our own nonce for a current correspondent are
        // believed: an off-path forger does not know it (RFC 6741 §11.1).
        let ours = meta.local_nid == self.cfg.local_nid
            && self.ilcc.get(&meta.peer_nid).is_some_and(|e| e.nonce_tx == meta.nonce);
        if !ours {
            self.drop(out, "icmp_error_unverified", packet_summary(pkt));
            return;
        }
        if meta.rejects_nonce {
            let nid = meta.peer_nid;
            self.ilcc.remove(&nid);
            if let Some(p) = self.peers.get_mut(&nid) {
                p.non_ilnp = true;
            }
            self.stats.bump("non_ilnp_peer");
            out.push(Action::IlccRemove(nid));
            out.push(Action::Event(Event::NonIlnpPeer { nid }));
            // tell the application at once: the quoted packet as Destination Unreachable
            match translate::icmp_error_to_identifier(pkt, self.cfg.id_prefix) {
                Ok((t, _)) => {
                    if let Some(quoted) = t.get(ipv6::HEADER_LEN + 8..) {
                        let mut body = Vec::new();
                        icmpv6::emit_error(icmpv6::TYPE_DEST_UNREACH, icmpv6::UNREACH_ADDRESS, 0, quoted, &mut body);
                        let (src, dst) =
                            (ilnp_addr(self.cfg.id_prefix, nid), ilnp_addr(self.cfg.id_prefix, self.cfg.local_nid));
                        let c = ilnp_wire::checksum::icmpv6_checksum(&src, &dst, &body);
                        body[2..4].copy_from_slice(&c.to_be_bytes());
                        let mut v = Vec::new();
                        ipv6::Repr {
                            src,
                            dst,
                            next_header: ipv6::PROTO_ICMPV6,
                            payload_len: body.len() as u16,
                            hop_limit: 64,
                        }
                        .emit(&mut v);
                        v.extend_from_slice(&body);
                        out.push(Action::DeliverLocal(v));
                    }
                }
                Err(e) => self.drop(out, "icmp_untranslatable", e.to_string()),
            }
            return;
        }
        match translate::icmp_error_to_identifier(pkt, self.cfg.id_prefix) {
            Ok((t, _)) => {
                self.stats.bump("icmp_error_translated");
                out.push(Action::DeliverLocal(t));
            }
            Err(e) => self.drop(out, "icmp_untranslatable", e.to_string()),
        }
    }

    fn handle_lu(&mut self, now: Instant, pkt: &[u8], out: &mut Vec<Action>) {
        let lp = match translate::parse_lu_packet(pkt) {
            Ok(lp) => lp,
            Err(e) => {
                self.drop(out, "lu_malformed", format!("{e}: {}", packet_summary(pkt)));
                return;
            }
        };
        let (src_loc, nid) = split_addr(lp.src);
        let (dst_loc, dst_nid) = split_addr(lp.dst);
        if dst_nid != self.cfg.local_nid {
            self.drop(out, "not_for_us", packet_summary(pkt));
            return;
        }
        let Some(e) = self.ilcc.get_mut(&nid) else {
            self.drop(out, "lu_unknown_peer", packet_summary(pkt));
            return;
        };
        if lp.nonce.is_none() || lp.nonce != e.nonce_rx {
            self.drop(out, "lu_bad_nonce", packet_summary(pkt));
            return;
        }
        match lp.lu.operation {
            LuOperation::Advertisement => {
                // replace the whole set (RFC 6743 §4); the preferred one becomes active
                let mut remote: Vec<RemoteLocator> = lp
                    .lu
                    .entries
                    .iter()
                    .map(|x| RemoteLocator {
                        loc: x.locator,
                        pref: x.preference,
                        lifetime_s: x.lifetime,
                        state: LocatorState::Valid,
                        last_heard: if x.locator == src_loc { Some(now) } else { None },
                    })
                    .collect();
                remote.sort_by_key(|r| r.pref);
                e.remote_locators = remote;
                let best = e.best_remote().map(|r| r.loc).unwrap_or(src_loc);
                e.activate_remote(best);
                e.last_used = now;
                let ack = lp.lu.ack();
                // ack from the locator the LU reached us on (if still ours), to the preferred new one
                let from = if self
                    .local
                    .iter()
                    .any(|l| l.loc == dst_loc && matches!(l.state, LocatorState::Active | LocatorState::Valid))
                {
                    dst_loc
                } else {
                    e.local_locator
                };
                let entries = loc_list(&lp.lu.entries);
                if let Ok(a) =
                    translate::lu_packet(ilnp_addr(from, self.cfg.local_nid), ilnp_addr(best, nid), &e.nonce_tx, &ack)
                {
                    out.push(Action::SendWire(a));
                }
                out.extend(e.snapshot().map(Action::IlccUpsert));
                self.stats.bump("lu_received");
                out.push(Action::Event(Event::LuReceived { nid, locators: entries }));
            }
            LuOperation::Acknowledgement => {
                let matches = e.pending_lu.as_ref().is_some_and(|p| p.entries == lp.lu.entries && p.attempts > 0);
                if !matches && e.last_acked_lu.as_ref() == Some(&lp.lu.entries) {
                    // the ack of a retransmission that crossed the first ack
                    self.stats.bump("lu_duplicate_ack");
                    return;
                }
                if !matches {
                    self.drop(out, "lu_unexpected_ack", packet_summary(pkt));
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
                self.stats.bump("lu_acked");
                out.push(Action::Event(Event::LuAcked { nid, rtt_us: rtt.as_micros() as u64, attempts: p.attempts }));
            }
        }
    }

    // ---------------------------------------------------------------- timers

    pub fn poll_timeout(&self) -> Option<Instant> {
        let lu = self.ilcc.iter().filter_map(|e| e.pending_lu.as_ref().map(|p| p.next_at)).min();
        let idle = self.ilcc.iter().map(|e| e.last_used + self.cfg.idle_timeout).min();
        match (lu, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        let mut out = self.send_due_lus(now);
        for nid in self.ilcc.idle(now, self.cfg.idle_timeout) {
            self.ilcc.remove(&nid);
            self.stats.bump("ilcc_idle_expired");
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

/// `src -> dst` of a packet, for logs.
fn packet_summary(pkt: &[u8]) -> String {
    match ipv6::Packet::new_checked(pkt) {
        Ok(p) => format!("{} -> {}", p.src(), p.dst()),
        Err(_) if pkt.len() >= 40 => {
            let s: [u8; 16] = pkt[8..24].try_into().unwrap_or([0; 16]);
            let d: [u8; 16] = pkt[24..40].try_into().unwrap_or([0; 16]);
            format!("{} -> {} (truncated)", std::net::Ipv6Addr::from(s), std::net::Ipv6Addr::from(d))
        }
        Err(_) => format!("{} bytes", pkt.len()),
    }
}

#[cfg(test)]
mod tests;
