//! Simulated time: a `u64` of nanoseconds since the start of a run (the cores get
//! `base + t` as their `Instant`), and how times are written in the results.

pub const NS: u64 = 1_000_000_000;

/// Seconds → simulated nanoseconds (rounded; negative: 0).
pub fn secs(s: f64) -> u64 {
    (s * NS as f64).round().max(0.0) as u64
}

/// Simulated nanoseconds → seconds, to the microsecond.
pub(crate) fn secs_f(ns: u64) -> f64 {
    round6(ns as f64 / NS as f64)
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

pub(crate) fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
