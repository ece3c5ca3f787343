//! This host's locators as the kernel reports them, and the validity states
//! (RFC 6741 §5) every locator, local or remote, goes through.

use crate::event::ser_display;
use ilnp_wire::Locator;
use serde::Serialize;

/// The validity states and router preferences (ilnp-wire: the control protocol reports them too).
pub use ilnp_wire::{LocatorState, RouterPreference};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the state file, the control socket and the metrics have always
    /// shown; serde says the same as `as_str` (one list each: `named_enum!`).
    #[test]
    fn locator_states_and_router_preferences_keep_their_names() {
        for s in LocatorState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(serde_json::from_value::<LocatorState>(s.as_str().into()).unwrap(), *s);
        }
        assert_eq!(LocatorState::NAMES, ["valid", "active", "aged", "expired"]);
        for p in RouterPreference::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        assert_eq!(RouterPreference::NAMES, ["low", "medium", "high"]);
        assert!(RouterPreference::Low < RouterPreference::Medium && RouterPreference::Medium < RouterPreference::High);
    }
}
