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

/// The configuration file's form of the core's settings: the conversions and range
/// checks `CoreConfig`'s `deserialize_with` attributes name, the LU timers' keys,
/// and `struct_fields` (the keys a serde struct reads). The messages leave out the
/// key: the shell puts the key of the offending line in front.
mod file {
    use super::{HandoffMode, LuTimerMode, LuTimers};
    use crate::admission_terms::Admission;
    use ilnp_wire::checksum::ChecksumRule;
    use serde::de::{self, Visitor};
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    /// Longest soft-handoff quiet period accepted (one hour): longer, and a host that
    /// left a network would advertise the dead locator for the better part of a day.
    pub const MAX_SOFT_QUIET_PERIOD_MS: u64 = 3_600_000;

    fn fail<E: de::Error>(msg: impl std::fmt::Display) -> E {
        E::custom(msg)
    }

    /// `nonce_bits`: 32 or 96, as the option's length in bytes.
    pub(crate) fn nonce_bits<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        match u32::deserialize(d)? {
            32 => Ok(4),
            96 => Ok(12),
            o => Err(fail(format_args!("{o} is not 32 or 96 (RFC 6744 §2)"))),
        }
    }

    /// A bound: a whole number, at least 1.
    pub(crate) fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        match u32::deserialize(d)? {
            0 => Err(fail("must be at least 1")),
            n => Ok(n as usize),
        }
    }

    /// A rate written as a whole number.
    pub(crate) fn whole_number<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        u32::deserialize(d).map(f64::from)
    }

    pub(crate) fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }

    pub(crate) fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }

    /// `soft_quiet_period_ms`: 0 (off) to one hour.
    pub(crate) fn quiet_period<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = u64::deserialize(d)?;
        if ms > MAX_SOFT_QUIET_PERIOD_MS {
            return Err(fail(format_args!("{ms} is more than {MAX_SOFT_QUIET_PERIOD_MS} (one hour); 0 turns it off")));
        }
        Ok(Duration::from_millis(ms))
    }

    /// One of a named enum's names (`named_enum!`): `"x" is not "a" or "b"`.
    fn by_name<'de, D: Deserializer<'de>, T>(
        d: D,
        from_name: fn(&str) -> Option<T>,
        names: &[&str],
    ) -> Result<T, D::Error> {
        let s = String::deserialize(d)?;
        from_name(&s).ok_or_else(|| {
            let names: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
            fail(format_args!("{s:?} is not {}", names.join(" or ")))
        })
    }

    pub(crate) fn handoff<'de, D: Deserializer<'de>>(d: D) -> Result<HandoffMode, D::Error> {
        by_name(d, HandoffMode::from_name, HandoffMode::NAMES)
    }

    pub(crate) fn admission<'de, D: Deserializer<'de>>(d: D) -> Result<Admission, D::Error> {
        by_name(d, Admission::from_name, Admission::NAMES)
    }

    /// `responder_nonce`: "own" (false) or "adopt" (true).
    pub(crate) fn responder_nonce<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        by_name(
            d,
            |s| [("own", false), ("adopt", true)].into_iter().find(|(n, _)| *n == s).map(|(_, v)| v),
            &["own", "adopt"],
        )
    }

    pub(crate) fn checksum_rule<'de, D: Deserializer<'de>>(d: D) -> Result<ChecksumRule, D::Error> {
        ChecksumRule::parse(&String::deserialize(d)?).map_err(fail)
    }

    /// `lu_timer`: "rtt" or "fixed-<N>s" / "fixed-<N>ms" (10 ms to 60 s).
    pub fn parse_lu_timer(v: &str) -> Result<LuTimerMode, String> {
        if v == "rtt" {
            return Ok(LuTimerMode::RttBased);
        }
        let bad = || format!("{v:?} is not \"rtt\" or \"fixed-<N>s\" / \"fixed-<N>ms\" (e.g. \"fixed-1s\")");
        let n = v.strip_prefix("fixed-").ok_or_else(bad)?;
        let ms = if let Some(x) = n.strip_suffix("ms") {
            x.parse::<u64>().map_err(|_| bad())?
        } else if let Some(x) = n.strip_suffix('s') {
            x.parse::<u64>().map_err(|_| bad())?.checked_mul(1000).ok_or_else(bad)?
        } else {
            return Err(bad());
        };
        if !(10..=60_000).contains(&ms) {
            return Err(format!("{v:?}: the interval must be between 10 ms and 60 s"));
        }
        Ok(LuTimerMode::Fixed(Duration::from_millis(ms)))
    }

    fn lu_timer<'de, D: Deserializer<'de>>(d: D) -> Result<LuTimerMode, D::Error> {
        parse_lu_timer(&String::deserialize(d)?).map_err(fail)
    }

    fn some_at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        at_least_one(d).map(|n| Some(n as u32))
    }

    /// The LU timers' keys. Apart from `CoreConfig`'s because the attempts' default
    /// depends on the timer: the thesis's prototype gave up after 5 (§3.3), ours
    /// after 7. (A new LU knob: its field here and its line in `timers`.)
    #[derive(Deserialize)]
    #[serde(default)]
    pub(crate) struct LuKeys {
        #[serde(rename = "lu_timer", deserialize_with = "lu_timer")]
        mode: LuTimerMode,
        #[serde(rename = "lu_initial_rto_ms", deserialize_with = "millis")]
        initial_rto: Duration,
        #[serde(rename = "lu_max_attempts", deserialize_with = "some_at_least_one")]
        max_attempts: Option<u32>,
    }

    impl Default for LuKeys {
        fn default() -> LuKeys {
            let d = LuTimers::default();
            LuKeys { mode: d.mode, initial_rto: d.initial_rto, max_attempts: None }
        }
    }

    impl LuKeys {
        pub(crate) fn timers(self) -> LuTimers {
            let fixed_attempts = if self.mode == LuTimerMode::RttBased { LuTimers::default().max_attempts } else { 5 };
            LuTimers {
                mode: self.mode,
                initial_rto: self.initial_rto,
                max_attempts: self.max_attempts.unwrap_or(fixed_attempts),
                ..LuTimers::default()
            }
        }
    }

    /// The keys a struct with a derived `Deserialize` reads (its `#[serde(rename)]`
    /// names; skipped fields left out): what it asks a deserializer for.
    pub fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
        let mut fields: &'static [&'static str] = &[];
        let _ = T::deserialize(FieldNames(&mut fields));
        fields
    }

    /// A deserializer that only notes the field names a struct asks for.
    struct FieldNames<'a>(&'a mut &'static [&'static str]);

    #[derive(Debug)]
    struct Noted;

    impl std::fmt::Display for Noted {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("field names noted")
        }
    }

    impl std::error::Error for Noted {}

    impl de::Error for Noted {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Noted
        }
    }

    impl<'de> Deserializer<'de> for FieldNames<'_> {
        type Error = Noted;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Noted> {
            Err(Noted)
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Noted> {
            *self.0 = fields;
            Err(Noted)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
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
