//! Sans-IO ILNPv6 protocol core: ILCC, peers, slow-path decisions, Locator Updates.
//! No sockets, no threads, no clock reads: time (`now`) and randomness are injected.

pub mod admission;
pub mod balance;
mod challenge;
pub mod config;
pub mod dns;
pub mod event;
mod failover;
pub mod fallback;
mod icmp;
pub mod ilcc;
mod inbound;
pub mod local;
mod lu;
pub mod nids;
mod nonce_key;
mod outbound;
pub mod peers;
pub mod snapshot;
pub mod timers;
mod v4path;

pub use admission::{Admission, AnswerHint, TierCounts, TokenBucket, ANSWER_HINT_MAX_AGE};
pub use balance::{BalanceChange, BalanceError, BalanceTable, Policy};
pub use config::{CoreConfig, HandoffMode, LuTimerMode, LuTimers, DEFAULT_LOCATOR_PREF};
pub use dns::{DnsPeer, DnsPeerResult, PeerSource};
pub use event::{DropReason, Event, Outcome, Stats};
pub use fallback::{FallbackReason, FallbackView, PeerState};
pub use ilcc::{IlccEntry, IlccView, RemoteLocator, Tier};
pub use ilnp_wire::checksum::ChecksumRule;
pub use ilnp_wire::{Locator, Nid, Nonce};
pub use local::{
    derive_local_locators, locator_preference, v4_path_preference, KernelAddress, LocalLocators, UplinkFacts,
};
pub use nids::{LocalNids, NidRefused, TempNid};
pub use peers::{PeerError, PeerLocator, PeerRecord};
/// The randomness the core takes (re-exported so shells and fuzzers use the same trait).
pub use rand_core::{Error as RngError, RngCore};
pub use snapshot::{CoreSnapshot, RestoreError, SNAPSHOT_VERSION};

use event::ser_display;
use ilnp_wire::ipv6;
use ilnp_wire::translate::Csum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// Validity state of a locator (RFC 6741 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// the peer's TCP/UDP checksums include the locators (`ChecksumRule::FullAddress`):
    /// the fast path leaves its packets to the slow path
    pub full_address_checksum: bool,
    /// `remote_loc` is a v4 path (`v4path.rs`): where its datagrams go (the NAT's
    /// observed address, else the one it names); the fast path sends there, and
    /// takes the peer's datagrams from there only
    pub remote_v4: Option<std::net::SocketAddrV4>,
}

/// Something the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// complete wire-form IPv6 packet → raw socket, out of `uplink` (the ifindex
    /// carrying its source locator; None: a locator not ours, the main table decides)
    SendWire {
        pkt: Vec<u8>,
        uplink: Option<u32>,
    },
    /// complete wire-form IPv6 packet to a v4-path locator → the payload of a UDP
    /// datagram from the v4 path's port to `to` (`v4path.rs`)
    SendV4 {
        pkt: Vec<u8>,
        to: std::net::SocketAddrV4,
    },
    /// complete identifier-form IPv6 packet → write to ilnp0
    DeliverLocal(Vec<u8>),
    /// write/refresh the fast-path entry of this peer
    IlccUpsert(IlccSnapshot),
    IlccRemove(Nid),
    /// the fast path must punt this peer's plain packets (no nonce) from
    /// `remote_loc:nid` to the slow path: it is reached as plain IPv6 (fallback)
    /// or being probed
    PlainPeerUpsert {
        nid: Nid,
        remote_loc: Locator,
    },
    PlainPeerRemove(Nid),
    /// sync the fast path's local locator table
    LocalLocators(Vec<LocalLocator>),
    /// write/remove the fast path's balancing table of a correspondent (`ilnp_balance`)
    Balance(BalanceChange),
    /// the peer came back on another locator (an LU changed its active one): its
    /// transport connections to us may be waiting out a backed-off retransmission
    /// timer (a hard handoff's outage). The shell hands the stack a hint per TCP
    /// connection to the peer's identifier address that timed out (RFC 6069), so it
    /// retransmits now; for connections not in backoff the stack ignores them.
    NudgeTransport(Nid),
    Event(Event),
}

/// Static peer plus what we learned about it.
#[derive(Clone, Debug, Serialize)]
pub struct PeerInfo {
    #[serde(flatten)]
    pub record: PeerRecord,
    /// the peer answered our nonce with a Parameter Problem (RFC 6744 §6)
    pub non_ilnp: bool,
    pub source: PeerSource,
    /// DNS records: when the record stops feeding new sessions (`dns.rs`)
    #[serde(skip)]
    pub expires: Option<Instant>,
    /// DNS records: the TTL of the answer
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u32>,
    /// our last Locator Update to this peer was never acknowledged and nothing
    /// nonce-verified came back since: DNS may re-target the session (`dns.rs`)
    #[serde(skip)]
    pub lu_failed: bool,
}

pub struct Core {
    cfg: CoreConfig,
    rng: Box<dyn rand_core::RngCore + Send>,
    ilcc: ilcc::Ilcc,
    peers: BTreeMap<Nid, PeerInfo>,
    local: LocalLocators,
    stats: Stats,
    challenges: challenge::Challenges,
    balance: balance::Balancer,
    fallback: fallback::Fallback,
    admission: admission::AdmissionState,
    v4: v4path::V4Paths,
    /// the temporary NIDs (`nids.rs`)
    nids: nids::LocalNids,
}

impl Core {
    pub fn new(cfg: CoreConfig, rng: Box<dyn rand_core::RngCore + Send>) -> Core {
        let (max, idle) = (cfg.ilcc_max_entries, cfg.idle_timeout);
        let local = LocalLocators::new(cfg.handoff, cfg.soft_quiet_period);
        let balance = balance::Balancer::new(cfg.local_nid);
        let fallback = fallback::Fallback::default();
        let ilcc = ilcc::Ilcc::new(max, cfg.ilcc_embryonic_max, idle);
        let admission = admission::AdmissionState::new(cfg.hello_rate_pps, cfg.hello_burst);
        Core {
            cfg,
            rng,
            ilcc,
            peers: BTreeMap::new(),
            local,
            stats: Stats::default(),
            challenges: challenge::Challenges::default(),
            balance,
            fallback,
            admission,
            v4: v4path::V4Paths::default(),
            nids: nids::LocalNids::default(),
        }
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// The preferred usable local locator.
    pub fn best_local(&self) -> Option<Locator> {
        self.local.best()
    }

    /// The TCP/UDP checksum rule towards `nid`: its own setting, else the default.
    pub(crate) fn checksum_rule(&self, nid: Nid) -> ChecksumRule {
        self.cfg.checksum_rule(nid)
    }

    fn drop(&mut self, out: &mut Vec<Action>, reason: DropReason, detail: String) {
        drop_packet(&mut self.stats, out, reason, detail);
    }

    fn new_nonce(&mut self) -> Nonce {
        random_nonce(&mut *self.rng, self.cfg.nonce_len)
    }

    // ---------------------------------------------------------------- peers

    pub fn add_peer(&mut self, peer: PeerRecord) {
        let info = PeerInfo {
            record: peer,
            non_ilnp: false,
            source: PeerSource::Static,
            expires: None,
            ttl_s: None,
            lu_failed: false,
        };
        self.peers.insert(info.record.nid, info);
    }

    pub fn del_peer(&mut self, nid: Nid) -> bool {
        self.forget_fallback(nid);
        self.peers.remove(&nid).is_some()
    }

    pub fn peers(&self) -> impl Iterator<Item = &PeerInfo> {
        self.peers.values()
    }

    // ---------------------------------------------------------------- packets
    // Every entry point that may change an ILCC entry ends with `ilcc.tidy()`, so
    // `poll_timeout` stays a peek.

    /// A wire-form packet an uplink punted to the daemon.
    pub fn handle_inbound(&mut self, now: Instant, pkt: &[u8], csum: Csum) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_inbound_into(now, pkt, csum, &mut out);
        out
    }

    /// `handle_inbound` into a buffer of the caller's (cleared first): a shell
    /// handling packet after packet keeps one allocation instead of one per call.
    pub fn handle_inbound_into(&mut self, now: Instant, pkt: &[u8], csum: Csum, out: &mut Vec<Action>) {
        out.clear();
        self.inbound(now, pkt, csum, out);
        self.ilcc.tidy();
        self.finish(out);
    }

    /// An identifier-form packet the kernel routed to ilnp0.
    pub fn handle_outbound(&mut self, now: Instant, pkt: &[u8], csum: Csum) -> Vec<Action> {
        self.handle_outbound_hinted(now, pkt, csum, &mut |_| None)
    }

    /// `handle_outbound` for a shell whose fast path keeps answer hints: `hints` is
    /// asked (at most once, only for a NID with no entry under admission = socket:
    /// our stack's answer to it, or the entry we open to it, which takes the nonce a
    /// stateless answer carried) where that NID's last unadmitted packet came from.
    pub fn handle_outbound_hinted(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        hints: &mut dyn FnMut(Nid) -> Option<AnswerHint>,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_outbound_into(now, pkt, csum, hints, &mut out);
        out
    }

    /// `handle_outbound_hinted` into a buffer of the caller's (cleared first), as
    /// `handle_inbound_into`.
    pub fn handle_outbound_into(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        hints: &mut dyn FnMut(Nid) -> Option<AnswerHint>,
        out: &mut Vec<Action>,
    ) {
        out.clear();
        self.outbound(now, pkt, csum, hints, out);
        self.ilcc.tidy();
        self.finish(out);
    }

    /// The fast path saw traffic for `nid`: keep the entry alive.
    pub fn note_activity(&mut self, nid: Nid, now: Instant) {
        if let Some(e) = self.ilcc.get_mut(&nid) {
            e.last_used = now;
        }
        self.ilcc.tidy();
    }

    // ---------------------------------------------------------------- inspection

    pub fn ilcc_entries(&self) -> impl Iterator<Item = &IlccEntry> {
        self.ilcc.iter()
    }

    /// The ILCC entry of one correspondent (O(1)): what the fast path's
    /// `ilnp_ilcc` lookup answers, for shells that model it (the simulator's
    /// admission check, like the ingress program's, applies only without an entry).
    pub fn ilcc_entry(&self, nid: Nid) -> Option<&IlccEntry> {
        self.ilcc.get(&nid)
    }

    /// ILCC entries with their idle time and age at `now`, for display.
    pub fn ilcc_view(&self, now: Instant) -> Vec<IlccView> {
        let mut v: Vec<IlccView> = self.ilcc.iter().map(|e| IlccView::new(e, now)).collect();
        v.sort_by_key(|e| e.nid);
        v
    }

    pub fn flush_ilcc(&mut self) -> Vec<Action> {
        let nids = self.ilcc.clear();
        let mut out = nids
            .into_iter()
            .flat_map(|nid| [Action::IlccRemove(nid), Action::Event(Event::PeerRemoved { nid, reason: "flushed" })])
            .collect();
        self.finish(&mut out);
        out
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The exit pass of every entry point over what it produced: challenged peers'
    /// fast-path entries masked, balancing tables followed, packets to v4 paths
    /// turned into datagrams.
    fn finish(&mut self, out: &mut Vec<Action>) {
        self.challenges.mask(out);
        self.balance_follow(out);
        self.v4_route(out);
    }
}

/// Counts a dropped packet and reports it (`Core::drop` for a sub-machine lent
/// the counters).
pub(crate) fn drop_packet(stats: &mut Stats, out: &mut Vec<Action>, reason: DropReason, detail: String) {
    stats.drop(reason);
    out.push(Action::Event(Event::drop(reason, detail)));
}

/// A fresh random nonce from `rng`: 96 bits if `nonce_len` is 12, else 32.
pub(crate) fn random_nonce(rng: &mut dyn RngCore, nonce_len: usize) -> Nonce {
    let mut b = [0u8; 12];
    rng.fill_bytes(&mut b);
    if nonce_len == 12 {
        nonce96(b)
    } else {
        Nonce::N32([b[0], b[1], b[2], b[3]])
    }
}

/// `src -> dst` of a packet, for logs.
fn packet_summary(pkt: &[u8]) -> String {
    match ipv6::Packet::new_checked(pkt) {
        Ok(p) => format!("{} -> {}", p.src(), p.dst()),
        Err(e) => format!("{} bytes ({e})", pkt.len()),
    }
}

#[cfg(test)]
mod tests;

/// Every 96-bit nonce we use (random or derived) goes through here: 95 bits, not 96.
/// Nonce byte 8 is DestOpts header byte 12, which Linux routers read as the TCP data
/// offset of a forwarded GSO packet (ilnp_wire::destopts::GSO_DOFF_BYTE); with its top
/// bit set they answer every GSO packet of the session with Packet Too Big.
pub(crate) fn nonce96(mut b: [u8; 12]) -> Nonce {
    b[8] &= 0x7f;
    Nonce::N96(b)
}
