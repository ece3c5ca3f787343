//! The core's configuration: handoff policy, Locator Update timers, bounds.
//!
//! The configuration file's core keys deserialize straight into `CoreConfig`
//! (`CoreConfig::from_document`): each field names its key (`rename`), takes its
//! default from `Default` and its conversion and range check from a `file`
//! helper, so a new core knob is one field here and one line in dist/ilnpd.toml.

use crate::admission_terms::Admission;
use ilnp_wire::checksum::ChecksumRule;
use ilnp_wire::{named_enum, Locator, Nid};
use serde::{Deserialize, Deserializer, Serialize};
use std::time::Duration;

mod file;
pub use file::{struct_fields, MAX_SOFT_QUIET_PERIOD_MS};

/// Locator preference (lower preferred, RFC 6742) when neither configuration nor a
/// router says otherwise; peer files default to the same value.
pub const DEFAULT_LOCATOR_PREF: u16 = 10;

named_enum! {
    #[serde_names]
    /// Handoff policy (RFC 6740 §6; config `handoff`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
    pub enum HandoffMode {
        /// keep accepting on an old locator until it goes quiet (default)
        Soft = "soft",
        /// age the old locator at once
        Hard = "hard",
    }
}

/// How the retransmission timeout of a Locator Update is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LuTimerMode {
    /// Twice the measured LU round trip to the peer (floor `min_rto`; `initial_rto`
    /// before the first sample), doubled after every attempt, capped at `max_rto`.
    RttBased,
    /// The same interval after every attempt, no backoff and no RTT: the seeds'
    /// prototypes (thesis §3.3 and §6.3: 1 s, `Δ_I`), kept to reproduce their numbers.
    Fixed(Duration),
}

/// Locator Update retransmission policy. The RFCs set none (wire-facts §6.2);
/// the prototypes used fixed 1 s timers (`LuTimerMode::Fixed`). By default we start
/// from an RTT-based value with a floor and back off exponentially.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LuTimers {
    pub initial_rto: Duration,
    pub min_rto: Duration,
    pub max_rto: Duration,
    pub max_attempts: u32,
    pub mode: LuTimerMode,
}

impl LuTimers {
    /// The timeout armed after attempt `attempt` (1 = the first transmission), given the
    /// peer's smoothed LU round trip if one was measured.
    pub fn rto(&self, attempt: u32, srtt: Option<Duration>) -> Duration {
        match self.mode {
            LuTimerMode::Fixed(every) => every,
            LuTimerMode::RttBased => {
                let base = srtt.map(|s| (s * 2).max(self.min_rto)).unwrap_or(self.initial_rto.max(self.min_rto));
                (base * 2u32.saturating_pow(attempt.saturating_sub(1))).min(self.max_rto)
            }
        }
    }
}

impl Default for LuTimers {
    fn default() -> Self {
        LuTimers {
            initial_rto: Duration::from_millis(250),
            min_rto: Duration::from_millis(50),
            max_rto: Duration::from_secs(4),
            max_attempts: 7,
            mode: LuTimerMode::RttBased,
        }
    }
}

/// The core's settings. The `serde` attributes are the configuration file's
/// form: the key (`rename`, else the field's name), the conversion and check
/// (`file::*`), the default (`Default`, what ilnpd runs with). Fields without a
/// key (`skip`) are set by the shell: from other keys that name peers or sections
/// (`peer_*`, `v4_keepalive`, `id_prefix`), or not configurable.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct CoreConfig {
    #[serde(skip)]
    pub id_prefix: Locator,
    #[serde(skip)]
    pub local_nid: Nid,
    /// 4 (32-bit) or 12 (96-bit); key `nonce_bits`, 32 or 96
    #[serde(rename = "nonce_bits", deserialize_with = "file::nonce_bits")]
    pub nonce_len: usize,
    /// bound of the established ILCC tier (and of the BPF `ilnp_ilcc` hash,
    /// preallocated at load; docs/benchmarks.md: the memory per entry)
    #[serde(deserialize_with = "file::at_least_one")]
    pub ilcc_max_entries: usize,
    #[serde(rename = "idle_timeout_s", deserialize_with = "file::seconds")]
    pub idle_timeout: Duration,
    #[serde(deserialize_with = "file::handoff")]
    pub handoff: HandoffMode,
    /// Cap on the Lifetime we advertise for our locators in LUs (seconds); each
    /// locator's own valid lifetime (from the kernel) is advertised when shorter.
    #[serde(skip)]
    pub lu_lifetime_s: u16,
    /// keys `lu_timer`, `lu_initial_rto_ms`, `lu_max_attempts` (`file::LuKeys`:
    /// the attempts' default depends on the timer)
    #[serde(skip)]
    pub lu: LuTimers,
    /// Most remote locators kept per correspondent (the fast path's table holds 8).
    /// An LU may list up to 255 (RFC 6743 §2); the best by preference are kept and
    /// the whole body is still acknowledged. Bounds memory per entry.
    #[serde(skip)]
    pub max_remote_locators: usize,
    /// Soft handoff: a local locator that is no longer the preferred one is retired
    /// (no longer advertised) once no packet arrived on it for this long and its RA
    /// stopped (`LocalLocator::ra_stopped`). Zero: never retired, a locator stays
    /// until its address goes away.
    #[serde(rename = "soft_quiet_period_ms", deserialize_with = "file::quiet_period")]
    pub soft_quiet_period: Duration,
    /// A correspondent found not to speak ILNPv6 is reached as plain IPv6 through
    /// its identifier address (`fallback.rs`); off: the application fails at once
    /// (EHOSTUNREACH), for users who want ILNP or nothing.
    pub fallback: bool,
    /// No ILNP answer this long after a session began (and the application sends
    /// again): probe the peer's `L64:NID` with a plain Echo Request. Zero: only a
    /// Parameter Problem triggers the fallback.
    #[serde(rename = "fallback_probe_ms", deserialize_with = "file::millis")]
    pub fallback_probe_after: Duration,
    /// who gets ILCC state (admission.rs)
    #[serde(deserialize_with = "file::admission")]
    pub admission: Admission,
    /// bound of the embryonic tier (unconfirmed responder entries, oldest evicted)
    #[serde(deserialize_with = "file::at_least_one")]
    pub ilcc_embryonic_max: usize,
    /// the nonce-only hellos to unconfirmed sources: tokens per second and burst
    #[serde(deserialize_with = "file::whole_number")]
    pub hello_rate_pps: f64,
    pub hello_burst: u32,
    /// As responder, use the initiator's nonce for our own packets too (one nonce per
    /// correspondent, as FreeBSD ILNP6 and the Linux 4.9 code do) instead of one of
    /// our own (RFC 6744 §2's per-direction nonces, the default). Either way a
    /// correspondent's packets may carry its nonce or ours reflected
    /// (`IlccEntry::accepts_nonce`); docs/architecture.md § Nonce models.
    /// Key `responder_nonce`: "own" or "adopt".
    #[serde(rename = "responder_nonce", deserialize_with = "file::responder_nonce")]
    pub adopt_initiator_nonce: bool,
    /// Correspondents known to use one nonce for both directions and to reflect ours
    /// in their replies (FreeBSD ILNP6's hosts lines, `[peer_nonce]`): as responder
    /// we adopt their nonce, and our own is accepted from them on replies only
    /// (`IlccEntry::accepts_reply_nonce`). Every other peer must show its own.
    #[serde(skip)]
    pub peer_shared_nonce: std::collections::HashSet<Nid>,
    /// TCP/UDP checksum rule on the wire towards correspondents without an entry in
    /// `peer_checksum` (default RFC 6741: locators zeroed)
    #[serde(deserialize_with = "file::checksum_rule")]
    pub transport_checksum: ChecksumRule,
    /// per correspondent (docs/interop.md: how to tell which rule a peer uses)
    #[serde(skip)]
    pub peer_checksum: std::collections::HashMap<Nid, ChecksumRule>,
    /// correspondents that are the authors' Linux 4.9 prototype (`[peer_interop]`
    /// "linux49"): their Locator Updates are taken, and ours sent them, in its layout
    /// and checksum (`ilnp_wire::icmpv6::linux49`), still nonce-checked; from any
    /// other peer that layout is refused (`lu_linux49_unmarked`)
    #[serde(skip)]
    pub peer_linux49: std::collections::HashSet<Nid>,
    /// a session over a v4 path quiet this long sends a nonce-only keepalive (NAT
    /// mappings; `v4path.rs`); zero: none
    #[serde(skip)]
    pub v4_keepalive: Duration,
}

/// What ilnpd runs with when the file does not say (`id_prefix` is the wire
/// crate's default; `local_nid` is set at start, when the NID is known).
impl Default for CoreConfig {
    fn default() -> CoreConfig {
        CoreConfig {
            id_prefix: ilnp_wire::DEFAULT_IDENTIFIER_PREFIX,
            local_nid: Nid(0),
            nonce_len: 4,
            ilcc_max_entries: 65536,
            idle_timeout: Duration::from_secs(600),
            handoff: HandoffMode::Soft,
            lu_lifetime_s: u16::MAX,
            lu: LuTimers::default(),
            max_remote_locators: 8,
            soft_quiet_period: Duration::from_secs(3),
            fallback: true,
            fallback_probe_after: Duration::from_millis(2000),
            admission: Admission::Socket,
            ilcc_embryonic_max: 1024,
            hello_rate_pps: 100.0,
            hello_burst: 100,
            adopt_initiator_nonce: false,
            transport_checksum: ChecksumRule::Rfc6741,
            peer_checksum: Default::default(),
            peer_shared_nonce: Default::default(),
            peer_linux49: Default::default(),
            v4_keepalive: Duration::from_secs(25),
        }
    }
}

impl CoreConfig {
    /// The settings for the core's own tests and the simulator: the defaults, but
    /// no fallback probe (the initiator's entry reaches the fast path at once, as
    /// before the probe) and `Admission::Open` (the pre-policy behaviour the tests
    /// of the other machines assume).
    pub fn new(id_prefix: Locator, local_nid: Nid) -> CoreConfig {
        CoreConfig {
            id_prefix,
            local_nid,
            fallback_probe_after: Duration::ZERO,
            admission: Admission::Open,
            ..CoreConfig::default()
        }
    }

    /// The configuration file's core settings: `doc()` gives a deserializer of the
    /// whole document (called twice: the keys of `CoreConfig`, then those of the LU
    /// timers); keys that are not the core's are ignored here (the shell refuses
    /// the ones nobody reads, `file_keys`).
    pub fn from_document<'de, D: Deserializer<'de>>(doc: impl Fn() -> D) -> Result<CoreConfig, D::Error> {
        let mut c = CoreConfig::deserialize(doc())?;
        c.lu = file::LuKeys::deserialize(doc())?.timers();
        Ok(c)
    }

    /// Every key `from_document` reads.
    pub fn file_keys() -> Vec<&'static str> {
        let mut keys = struct_fields::<CoreConfig>().to_vec();
        keys.extend(struct_fields::<file::LuKeys>());
        keys
    }

    /// The TCP/UDP checksum rule towards `nid`: its own setting, else the default.
    pub(crate) fn checksum_rule(&self, nid: Nid) -> ChecksumRule {
        self.peer_checksum.get(&nid).copied().unwrap_or(self.transport_checksum)
    }

    /// Whether `nid` uses one nonce both ways (`peer_shared_nonce`, or every peer
    /// under `adopt_initiator_nonce`).
    pub(crate) fn shared_nonce(&self, nid: Nid) -> bool {
        self.adopt_initiator_nonce || self.peer_shared_nonce.contains(&nid)
    }

    /// What the configuration says of one correspondent's entry (not in the state
    /// file: set at creation and at restore, `Core::restore`).
    pub(crate) fn apply_peer_settings(&self, e: &mut crate::ilcc::IlccEntry) {
        e.checksum_rule = self.checksum_rule(e.nid);
        e.shared_nonce = self.shared_nonce(e.nid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = CoreConfig::new(Locator(1), Nid(2));
        assert_eq!((c.admission, c.fallback_probe_after), (Admission::Open, Duration::ZERO), "the tests' core");
        let d = CoreConfig::default();
        assert_eq!((d.admission, d.fallback_probe_after), (Admission::Socket, Duration::from_secs(2)), "ilnpd's");
        assert_eq!((c.nonce_len, c.handoff, c.max_remote_locators), (4, HandoffMode::Soft, 8));
        assert_eq!(c.soft_quiet_period, Duration::from_secs(3));
        let t = LuTimers::default();
        assert!(t.min_rto <= t.initial_rto && t.initial_rto <= t.max_rto, "{t:?}");
        assert_eq!(t.mode, LuTimerMode::RttBased);
    }

    #[test]
    fn the_files_keys_fill_the_fields_with_the_defaults_beside_them() {
        let doc = serde_json::json!({"nonce_bits": 96, "idle_timeout_s": 5, "handoff": "hard",
            "lu_timer": "fixed-1s", "uplinks": ["not the core's"]});
        let c = CoreConfig::from_document(|| doc.clone()).unwrap();
        assert_eq!((c.nonce_len, c.idle_timeout, c.handoff), (12, Duration::from_secs(5), HandoffMode::Hard));
        assert_eq!((c.lu.mode, c.lu.max_attempts), (LuTimerMode::Fixed(Duration::from_secs(1)), 5));
        assert_eq!(c.admission, Admission::Socket, "the rest from Default");
        let e = CoreConfig::from_document(|| serde_json::json!({"handoff": "sometimes"})).unwrap_err();
        assert_eq!(e.to_string(), "\"sometimes\" is not \"soft\" or \"hard\"");
        let keys = CoreConfig::file_keys();
        for k in ["nonce_bits", "ilcc_max_entries", "responder_nonce", "lu_timer", "lu_max_attempts"] {
            assert!(keys.contains(&k), "{k}: {keys:?}");
        }
        assert!(!keys.iter().any(|k| ["nonce_len", "lu", "peer_checksum", "local_nid"].contains(k)), "{keys:?}");
    }

    #[test]
    fn rto_rtt_based_backs_off_fixed_does_not() {
        let ms = Duration::from_millis;
        let t = LuTimers::default();
        assert_eq!([1, 2, 3].map(|a| t.rto(a, None)), [ms(250), ms(500), ms(1000)]);
        assert_eq!([1, 2].map(|a| t.rto(a, Some(ms(40)))), [ms(80), ms(160)]);
        assert_eq!(t.rto(1, Some(ms(1))), ms(50), "floor");
        assert_eq!(t.rto(7, Some(ms(400))), ms(4000), "cap");
        let f = LuTimers { mode: LuTimerMode::Fixed(ms(1000)), ..t };
        assert_eq!([1, 2, 5].map(|a| f.rto(a, Some(ms(40)))), [ms(1000); 3]);
        assert_eq!(f.rto(1, None), ms(1000));
    }
}
