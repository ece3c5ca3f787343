//! The core's configuration: handoff policy, Locator Update timers, bounds.

use crate::admission_terms::Admission;
use ilnp_wire::checksum::ChecksumRule;
use ilnp_wire::{Locator, Nid};
use serde::Serialize;
use std::time::Duration;

/// Locator preference (lower preferred, RFC 6742) when neither configuration nor a
/// router says otherwise; peer files default to the same value.
pub const DEFAULT_LOCATOR_PREF: u16 = 10;

/// Handoff policy (RFC 6740 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HandoffMode {
    /// keep accepting on an old locator until it goes quiet (default)
    Soft,
    /// age the old locator at once
    Hard,
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
    /// A correspondent found not to speak ILNPv6 is reached as plain IPv6 through
    /// its identifier address (`fallback.rs`); off: the application fails at once
    /// (EHOSTUNREACH), for users who want ILNP or nothing.
    pub fallback: bool,
    /// No ILNP answer this long after a session began (and the application sends
    /// again): probe the peer's `L64:NID` with a plain Echo Request. Zero: only a
    /// Parameter Problem triggers the fallback.
    pub fallback_probe_after: Duration,
    /// who gets ILCC state (admission.rs)
    pub admission: Admission,
    /// bound of the embryonic tier (unconfirmed responder entries, oldest evicted)
    pub ilcc_embryonic_max: usize,
    /// the nonce-only hellos to unconfirmed sources: tokens per second and burst
    pub hello_rate_pps: f64,
    pub hello_burst: u32,
    /// As responder, use the initiator's nonce for our own packets too (one nonce per
    /// correspondent, as FreeBSD ILNP6 and the Linux 4.9 code do) instead of one of
    /// our own (RFC 6744 §2's per-direction nonces, the default). Either way a
    /// correspondent's packets may carry its nonce or ours reflected
    /// (`IlccEntry::accepts_nonce`); docs/architecture.md § Nonce models.
    pub adopt_initiator_nonce: bool,
    /// Correspondents known to use one nonce for both directions and to reflect ours
    /// in their replies (FreeBSD ILNP6's hosts lines, `[peer_nonce]`): as responder
    /// we adopt their nonce, and our own is accepted from them on replies only
    /// (`IlccEntry::accepts_reply_nonce`). Every other peer must show its own.
    pub peer_shared_nonce: std::collections::HashSet<Nid>,
    /// TCP/UDP checksum rule on the wire towards correspondents without an entry in
    /// `peer_checksum` (default RFC 6741: locators zeroed)
    pub transport_checksum: ChecksumRule,
    /// per correspondent (docs/interop.md: how to tell which rule a peer uses)
    pub peer_checksum: std::collections::HashMap<Nid, ChecksumRule>,
    /// correspondents that are the authors' Linux 4.9 prototype (`[peer_interop]`
    /// "linux49"): their Locator Updates are taken, and ours sent them, in its layout
    /// and checksum (`ilnp_wire::icmpv6::linux49`), still nonce-checked; from any
    /// other peer that layout is refused (`lu_linux49_unmarked`)
    pub peer_linux49: std::collections::HashSet<Nid>,
    /// a session over a v4 path quiet this long sends a nonce-only keepalive (NAT
    /// mappings; `v4path.rs`); zero: none
    pub v4_keepalive: Duration,
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
            fallback: true,
            // off in the core (the initiator's entry then reaches the fast path
            // at once, as before the probe); ilnpd turns it on (2 s)
            fallback_probe_after: Duration::ZERO,
            // the pre-policy behaviour for the core's own tests of other machines;
            // ilnpd's configuration defaults to `socket`
            admission: Admission::Open,
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
        assert_eq!((c.nonce_len, c.handoff, c.max_remote_locators), (4, HandoffMode::Soft, 8));
        assert_eq!(c.soft_quiet_period, Duration::from_secs(3));
        let t = LuTimers::default();
        assert!(t.min_rto <= t.initial_rto && t.initial_rto <= t.max_rto, "{t:?}");
        assert_eq!(t.mode, LuTimerMode::RttBased);
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
