//! This host's locators as the kernel reports them, and the validity states
//! (RFC 6741 §5) every locator, local or remote, goes through.

use crate::event::ser_display;
use ilnp_wire::Locator;
use serde::{Deserialize, Serialize};

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
