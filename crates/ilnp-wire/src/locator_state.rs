//! The locator vocabulary the core (which keeps it) and the control protocol (which
//! reports it) share: a locator's validity state and the router preference behind
//! it. Here, in the lowest crate, as `Policy`, so neither keeps a copy of the other's.

named_enum! {
    /// Validity state of a locator (RFC 6741 §5).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub enum LocatorState {
        #[default]
        Valid = "valid",
        Active = "active",
        Aged = "aged",
        Expired = "expired",
    }
}

named_enum! {
    /// Default Router Preference of the router(s) behind an uplink, from the Router
    /// Advertisement (RFC 4191 §2.1; the kernel keeps it on the RA's default route).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum RouterPreference {
        Low = "low",
        Medium = "medium",
        High = "high",
    }
}

serde_by_name!(LocatorState);
serde_by_name!(RouterPreference);
