//! `[privacy]` (issue #44 item 2): temporary NIDs for outgoing sessions, RFC 8981's
//! temporary addresses carried over to NIDs (docs/design/privacy.md). The daemon's
//! part is `daemon/privacy.rs`, the core's `ilnp_core::nids`.

use anyhow::{bail, Result};
use serde::Deserialize;
use std::time::Duration;

/// `[privacy]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FilePrivacy {
    /// how long a temporary NID is preferred for new sessions, seconds (RFC 8981
    /// TEMP_PREFERRED_LIFETIME, default 86400): then a new one is drawn
    pub period_s: Option<u64>,
    /// how long a deprecated one still takes new packets for its sessions before it
    /// is removed once none is left, seconds (RFC 8981 TEMP_VALID_LIFETIME, default
    /// 172800; at least `period_s`)
    pub valid_s: Option<u64>,
    /// a new temporary NID when the host joins a network none of its current
    /// locators is on (default true)
    pub per_network: Option<bool>,
    /// at most this many temporary NIDs at once (the preferred one and deprecated
    /// ones with sessions; default 16): beyond it no new one is drawn, reported
    pub max_temporary: Option<usize>,
}

/// The temporary-NID settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivacyConfig {
    pub period: Duration,
    pub valid: Duration,
    pub per_network: bool,
    pub max_temporary: usize,
}

impl FilePrivacy {
    pub fn validate(&self) -> Result<PrivacyConfig> {
        let period_s = self.period_s.unwrap_or(86_400);
        if period_s == 0 {
            bail!("[privacy] period_s: 0; a temporary NID must be preferred for some time");
        }
        let valid_s = self.valid_s.unwrap_or(period_s.max(86_400) * 2);
        if valid_s < period_s {
            bail!("[privacy] valid_s: {valid_s} is less than period_s {period_s}");
        }
        let max_temporary = self.max_temporary.unwrap_or(16);
        if max_temporary == 0 {
            bail!("[privacy] max_temporary: must be at least 1");
        }
        Ok(PrivacyConfig {
            period: Duration::from_secs(period_s),
            valid: Duration::from_secs(valid_s),
            per_network: self.per_network.unwrap_or(true),
            max_temporary,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<PrivacyConfig> {
        toml::from_str::<FilePrivacy>(t)?.validate()
    }

    #[test]
    fn defaults_are_rfc_8981s() {
        let c = parse("").unwrap();
        assert_eq!(c.period, Duration::from_secs(86_400));
        assert_eq!(c.valid, Duration::from_secs(172_800));
        assert!(c.per_network);
        assert_eq!(c.max_temporary, 16);
        let c = parse("period_s = 5").unwrap();
        assert_eq!(c.valid, Duration::from_secs(172_800), "a short period keeps the default valid time");
    }

    #[test]
    fn refusals_name_the_key() {
        for (t, key) in [
            ("period_s = 0", "period_s"),
            ("period_s = 100\nvalid_s = 10", "valid_s"),
            ("max_temporary = 0", "max_temporary"),
        ] {
            let e = format!("{:#}", parse(t).unwrap_err());
            assert!(e.contains(key), "{t}: {e}");
        }
        assert!(parse("bogus = 1").is_err());
    }
}
