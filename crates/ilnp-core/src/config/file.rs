//! The configuration file's form of the core's settings: the conversions and
//! range checks `CoreConfig`'s `deserialize_with` attributes name, the LU timers'
//! keys, and `struct_fields` (the keys a serde struct reads). The messages leave
//! out the key: the shell puts the key of the offending line in front.

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
pub(super) fn nonce_bits<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match u32::deserialize(d)? {
        32 => Ok(4),
        96 => Ok(12),
        o => Err(fail(format_args!("{o} is not 32 or 96 (RFC 6744 §2)"))),
    }
}

/// A bound: a whole number, at least 1.
pub(super) fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match u32::deserialize(d)? {
        0 => Err(fail("must be at least 1")),
        n => Ok(n as usize),
    }
}

/// A rate written as a whole number.
pub(super) fn whole_number<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    u32::deserialize(d).map(f64::from)
}

pub(super) fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_secs)
}

pub(super) fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_millis)
}

/// `soft_quiet_period_ms`: 0 (off) to one hour.
pub(super) fn quiet_period<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
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

pub(super) fn handoff<'de, D: Deserializer<'de>>(d: D) -> Result<HandoffMode, D::Error> {
    by_name(d, HandoffMode::from_name, HandoffMode::NAMES)
}

pub(super) fn admission<'de, D: Deserializer<'de>>(d: D) -> Result<Admission, D::Error> {
    by_name(d, Admission::from_name, Admission::NAMES)
}

/// `responder_nonce`: "own" (false) or "adopt" (true).
pub(super) fn responder_nonce<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    by_name(
        d,
        |s| [("own", false), ("adopt", true)].into_iter().find(|(n, _)| *n == s).map(|(_, v)| v),
        &["own", "adopt"],
    )
}

pub(super) fn checksum_rule<'de, D: Deserializer<'de>>(d: D) -> Result<ChecksumRule, D::Error> {
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
pub(super) struct LuKeys {
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
    pub(super) fn timers(self) -> LuTimers {
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
