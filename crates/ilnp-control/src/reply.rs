//! Replies: `{"ok": true, "data": DATA}` or `{"ok": false, "error": TEXT}`, and the
//! typed DATA of each request.
//!
//! NIDs and locators are typed (`ilnp_wire::Nid`, `Locator`) and travel as their
//! display text (`0200:00ff:fe00:000d`, `2001:0db8:000b:0000`); addresses and nonces
//! as text (`2001:db8:b::1`, hex); modes and states as their names (`states.rs`). Clients
//! decode leniently: every data struct is `#[serde(default)]`, so a field a
//! daemon does not send takes its default (empty, 0, false, null) and unknown
//! fields are ignored. The daemon always sends every field.

use crate::request::Request;
use crate::states::{
    AdmissionPolicy, DatapathMode, DnsUpdateState, FallbackReason, Handoff, LocatorState, NidSource, PeerSource,
    PeerState, RouterPreference,
};
use ilnp_wire::Policy;
use ilnp_wire::{Locator, Nid};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// One reply line.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Ok(Data),
    Err(String),
}

/// The `data` of a successful reply; which one follows from the request.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Data {
    Status(Status),
    Ilcc(Vec<IlccEntry>),
    Flushed(Flushed),
    Locators(Vec<LocatorInfo>),
    Peers(Vec<PeerInfo>),
    PeerAdded(PeerAdded),
    PeerDeleted(PeerDeleted),
    Stats(Stats),
    Monitoring(Monitoring),
    Balance(BalanceInfo),
    // boxed: the largest reply, kept off the other variants' size
    Dns(Box<DnsStatus>),
}

impl Data {
    /// Decodes the `data` of the reply to `req`.
    pub fn decode(req: &Request, v: serde_json::Value) -> Result<Data, serde_json::Error> {
        use serde_json::from_value as f;
        Ok(match req {
            Request::Status => Data::Status(f(v)?),
            Request::IlccShow => Data::Ilcc(f(v)?),
            Request::IlccFlush => Data::Flushed(f(v)?),
            Request::LocatorShow => Data::Locators(f(v)?),
            Request::PeerShow => Data::Peers(f(v)?),
            Request::PeerAdd { .. } => Data::PeerAdded(f(v)?),
            Request::PeerDel { .. } => Data::PeerDeleted(f(v)?),
            Request::Stats => Data::Stats(f(v)?),
            Request::Monitor => Data::Monitoring(f(v)?),
            Request::PolicyShow | Request::PolicySet { .. } | Request::LocatorSet { .. } => Data::Balance(f(v)?),
            Request::DnsStatus => Data::Dns(Box::new(f(v)?)),
        })
    }
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// A reply line that is not a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyError(pub String);

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReplyError {}

impl Reply {
    /// The reply as one line (with its newline). Object keys are sorted, as the
    /// daemon has always sent them.
    pub fn to_line(&self) -> String {
        let env = match self {
            Reply::Ok(d) => Envelope { ok: true, data: Some(serde_json::to_value(d).unwrap_or_default()), error: None },
            Reply::Err(e) => Envelope { ok: false, data: None, error: Some(e.clone()) },
        };
        // through a Value: its maps are sorted (serde_json without preserve_order)
        crate::framing::line(&serde_json::to_value(&env).unwrap_or_default())
    }

    /// Opens the envelope: `Ok(Ok(data))` for `"ok": true` (data as sent; `null`
    /// when absent), `Ok(Err(text))` for `"ok": false`.
    pub fn envelope(line: &str) -> Result<Result<serde_json::Value, String>, ReplyError> {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| ReplyError(format!("ilnpd sent a reply that is not JSON ({e}): {}", line.trim_end())))?;
        if v.get("ok").and_then(serde_json::Value::as_bool).is_none() {
            return Err(ReplyError(format!("ilnpd sent a reply without \"ok\": {}", line.trim_end())));
        }
        let env: Envelope = serde_json::from_value(v)
            .map_err(|e| ReplyError(format!("ilnpd sent a malformed reply ({e}): {}", line.trim_end())))?;
        Ok(if env.ok {
            Ok(env.data.unwrap_or(serde_json::Value::Null))
        } else {
            Err(env.error.unwrap_or_else(|| "unspecified error".into()))
        })
    }

    /// Decodes the reply line to `req`.
    pub fn from_line(req: &Request, line: &str) -> Result<Reply, ReplyError> {
        Ok(match Reply::envelope(line)? {
            Ok(v) => Reply::Ok(
                Data::decode(req, v)
                    .map_err(|e| ReplyError(format!("ilnpd sent {} data ilnpctl cannot read: {e}", req.as_str())))?,
            ),
            Err(e) => Reply::Err(e),
        })
    }
}

/// `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    /// this node's NID
    pub nid: Nid,
    /// where it came from; absent from daemons before issue #44
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nid_source: Option<NidSource>,
    /// `P::/64`
    pub identifier_prefix: String,
    /// `P::NID`, the address applications use
    pub identifier_address: String,
    /// the TUN device (`ilnp0`)
    pub tun: String,
    pub datapath: DatapathMode,
    /// eBPF data path: small packets are translated at the identifier route and
    /// transmitted once (issue #27); absent when false (and from older daemons)
    #[serde(default, skip_serializing_if = "is_false")]
    pub route_xmit: bool,
    pub handoff: Handoff,
    /// 32 or 96
    pub nonce_bits: u32,
    pub uplinks: Vec<Uplink>,
    pub locators: Vec<LocatorInfo>,
    pub ilcc_entries: u64,
    /// the ILCC admission policy, entries per tier, counters per outcome (absent
    /// from daemons before the policy: then not serialised again)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission: Option<Box<AdmissionStatus>>,
    pub peers: u64,
    pub uptime_s: u64,
    /// ilnpd's version
    pub version: String,
    /// load balancing over locator pairs (issue #12); absent from older daemons' replies
    #[serde(default, skip_serializing_if = "balance_absent")]
    pub balance: Box<BalanceInfo>,
    /// `[privacy]`: the temporary NIDs (issue #44 item 2); absent when there are none
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temporary_nids: Vec<TempNidInfo>,
}

/// One temporary NID (`[privacy]`, docs/design/privacy.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TempNidInfo {
    pub nid: Nid,
    /// new outgoing connections take it (false: deprecated, its sessions go on)
    pub preferred: bool,
    /// ILCC entries on it
    pub sessions: u64,
    pub age_s: u64,
}

/// Load balancing: the policies, the uplinks' weights and each balancing
/// correspondent's locator pairs (ilnp-core `balance`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceInfo {
    /// for correspondents without their own (None: a daemon from before balancing)
    pub default_policy: Option<Policy>,
    /// NID → policy, for correspondents with their own
    pub peer_policy: BTreeMap<Nid, Policy>,
    /// uplink name → weight (uplinks not listed weigh 1)
    pub weights: BTreeMap<String, u32>,
    /// per-flow hash seed (configured, or derived from the NID: stable across restarts)
    pub flow_seed: u64,
    pub peers: Vec<BalancePeer>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn balance_absent(b: &BalanceInfo) -> bool {
    b.is_absent()
}

impl BalanceInfo {
    /// Not reported (a daemon before issue #12): every daemon that has balancing
    /// names its default policy.
    pub fn is_absent(&self) -> bool {
        *self == BalanceInfo::default()
    }
}

/// One correspondent's current balancing table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalancePeer {
    pub nid: Nid,
    pub policy: Policy,
    /// `local>remote` locator pairs with their reduced weights
    pub pairs: Vec<(String, u32)>,
    /// per-packet: the slow path's position in the schedule
    pub seq: u64,
}

/// `status.admission` (docs/architecture.md § ILCC admission).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdmissionStatus {
    pub policy: AdmissionPolicy,
    pub established: u64,
    pub embryonic: u64,
    /// `ilcc_max_entries`
    pub max_established: u64,
    /// `ilcc_embryonic_max`
    pub max_embryonic: u64,
    /// the hello budget towards unconfirmed sources
    pub hello_rate_pps: u32,
    pub hello_burst: u32,
    /// every admission outcome, zeros included: the core's (`admit_*`,
    /// `hello_*`, `tx_to_embryonic`, `lu_embryonic`, `answer_sent`, `answer_rate_limited`, `answer_unadmitted`,
    /// `ilcc_full`) and the fast path's (`ingress_admit_socket`, `ingress_no_socket`)
    pub counters: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Uplink {
    pub name: String,
    pub ifindex: u32,
}

/// One local locator (`locator_show`, and `locators` of `status`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocatorInfo {
    pub l64: Locator,
    /// `L64:NID`, the address on the uplink
    pub address: String,
    /// the uplink's name ("" if unknown)
    pub interface: String,
    /// lower preferred (RFC 6742)
    pub pref: u16,
    /// null: no default route on the uplink
    pub router_preference: Option<RouterPreference>,
    /// seconds; 4294967295 = forever
    pub lifetime_s: u32,
    pub state: LocatorState,
    pub has_router: bool,
    pub deprecated: bool,
    /// seconds since a packet last arrived on it; null: none yet
    pub last_rx_age_s: Option<f64>,
}

/// One ILCC entry (`ilcc_show`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IlccEntry {
    pub nid: Nid,
    /// which of our NIDs the peer talks to: a temporary one (`[privacy]`); absent
    /// for the stable one. A peer talking to both has two entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_nid: Option<Nid>,
    /// best first
    pub remote_locators: Vec<RemoteLocator>,
    /// our source locator towards the peer
    pub local_locator: Locator,
    /// hex; null when `nonces_hidden`
    pub nonce_tx: Option<String>,
    /// hex; null until learned, and when `nonces_hidden`
    pub nonce_rx: Option<String>,
    /// true: the client is not root, so the daemon sent neither nonce (RFC 6744:
    /// they are as secret as the session); absent when false (root's replies keep
    /// their shape)
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub nonces_hidden: bool,
    /// we sent the first packet
    pub initiator: bool,
    /// seconds since the last packet either way
    pub idle_s: f64,
    pub slow_pkts_in: u64,
    pub slow_pkts_out: u64,
    pub slow_bytes_in: u64,
    pub slow_bytes_out: u64,
    /// seconds since the entry was created
    pub age_s: f64,
    /// smoothed LU round trip, µs; null: no sample yet
    pub srtt_us: Option<u64>,
    /// the peer's interop mode when not RFC: "linux49" (`[peer_interop]`: Locator
    /// Updates in the Linux 4.9 prototype's layout); absent otherwise
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interop: Option<String>,
    /// the eBPF fast path's counters; absent when it has none for this peer
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast: Option<FastCounters>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoteLocator {
    pub l64: Locator,
    pub pref: u16,
    /// seconds (from an LU); 0 = unknown
    pub lifetime_s: u16,
    pub state: LocatorState,
    /// a v4 path behind a NAT: where its packets come from and replies go
    /// (`ADDR:PORT`); absent otherwise
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// Per-peer counters of the eBPF fast path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FastCounters {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
}

/// `ilcc_flush`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Flushed {
    /// entries removed
    pub flushed: u64,
}

/// `dns_status`: the resolver proxy (if configured) and the dynamic update of this
/// host's L64 records (if configured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DnsStatus {
    /// the proxy runs (`[dns]` configured)
    pub proxy: bool,
    pub listen: Vec<String>,
    pub upstream: String,
    /// queries, ilnp_answers, passed_through, bad_ilnp_records, upstream_failures, dropped_overload
    pub counters: BTreeMap<String, u64>,
    pub update: Option<DnsUpdateStatus>,
}

/// The RFC 2136 update of our L64 records (`[dns.update]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DnsUpdateStatus {
    pub zone: String,
    /// the name whose L64 records are replaced
    pub name: String,
    pub server: String,
    pub ttl_s: u32,
    pub state: DnsUpdateState,
    /// `L64|PREF` each: the set last sent (or being sent)
    pub locators: Vec<String>,
    pub updates_ok: u64,
    pub updates_failed: u64,
    pub last_error: Option<String>,
    /// seconds since the last successful update
    pub last_ok_age_s: Option<f64>,
    /// the last successful update's time from the locator change to the server's answer
    pub last_latency_ms: Option<f64>,
}

/// One peer record (`peer_show`): static, or learned from DNS.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerInfo {
    pub name: String,
    pub nid: Nid,
    pub locators: Vec<PeerLocator>,
    /// the peer answered our nonce with a Parameter Problem (RFC 6744 §6), or
    /// answered only plain IPv6
    pub non_ilnp: bool,
    /// `static` (peer file, `peer add`) or `dns` (the resolver proxy); absent from
    /// daemons older than the proxy
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<PeerSource>,
    /// DNS records: the answer's TTL in seconds
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u32>,
    /// DNS records: seconds until the record stops being used for new sessions
    /// (negative: that long ago; a session already open keeps its locators, which
    /// its Locator Updates keep current)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_s: Option<i64>,
    /// DNS records: the TTL has run out (the locators shown may be stale)
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expired: bool,
    /// how it is reached: `ilnp`, `probing` (no ILNP answer yet, a plain Echo
    /// Request is out), `fallback` (plain IPv6), `non-ilnp` (fallback off: fails)
    /// (absent from daemons before the fallback)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<PeerState>,
    /// present in state `fallback`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<PeerFallback>,
}

/// A peer reached as plain IPv6 (the transparent fallback).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerFallback {
    pub reason: FallbackReason,
    /// its L64:NID, where the packets for its identifier address go
    pub address: String,
    pub since_s: u64,
    pub pkts_out: u64,
    pub pkts_in: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerLocator {
    pub l64: Locator,
    pub pref: u16,
}

/// `peer_add`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerAdded {
    /// the NID added
    pub added: Nid,
    /// whether the peer outlives a restart of ilnpd: a peer added at run time is kept
    /// in memory only (false); peers that persist live in the configuration
    /// (`[[peer]]`, `hosts_file`, `peers_file`); absent = false
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub persistent: bool,
}

/// `peer_del`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerDeleted {
    /// the NID deleted
    pub deleted: Nid,
}

/// `stats`: counter name → count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// the core's drop and outcome counters plus ilnpd's own
    pub core: BTreeMap<String, u64>,
    /// the eBPF fast path's (all of `ILNP_REASONS`; empty without the fast path)
    pub datapath: BTreeMap<String, u64>,
    /// slow-path time per packet (TUN read → core → actions carried out), a log2
    /// histogram: `lt_<N>ns` → packets that took less than N ns (and at least the
    /// bucket below), `ge_<N>ns` the last. Absent from daemons before issue #11.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub slow_path_ns: BTreeMap<String, u64>,
}

/// `monitor`'s first reply: the string `"monitoring"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Monitoring;

impl Serialize for Monitoring {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("monitoring")
    }
}

impl<'de> Deserialize<'de> for Monitoring {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Monitoring, D::Error> {
        let s = String::deserialize(d)?;
        if s == "monitoring" {
            Ok(Monitoring)
        } else {
            Err(serde::de::Error::custom(format!("expected \"monitoring\", got {s:?}")))
        }
    }
}
