//! The named modes and states replies carry: each a serde enum whose JSON text is
//! its name (`ilnp_wire::named_enum!`), so a reply never holds a state as a free
//! string. A name a newer daemon sends and this client does not know decodes as
//! `Other` where the enum has one.

use ilnp_wire::named_enum;
use serde::{Deserialize, Serialize};

named_enum! {
    #[serde_names]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum DatapathMode {
        #[default]
        Ebpf = "ebpf",
        Userspace = "userspace",
    }
}

named_enum! {
    #[serde_names]
    /// Where the daemon's NID came from (`nid` in its configuration; docs/architecture.md
    /// § Addressing).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum NidSource {
        /// `nid = "xxxx:xxxx:xxxx:xxxx"`
        Configured = "configured",
        /// `nid = "auto"`: derived from the host secret
        StablePrivacy = "stable-privacy",
        /// `nid = "auto"` the first time after an upgrade: the previous run's NID, kept
        KeptFromUpgrade = "kept-from-upgrade",
        /// `nid = "eui64"`: the first uplink's MAC
        Eui64 = "eui64",
        /// a source a newer daemon names
        #[serde(other)]
        Other = "other",
    }
}

named_enum! {
    #[serde_names]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Handoff {
        #[default]
        Soft = "soft",
        Hard = "hard",
    }
}

/// A locator's validity and its router's preference: the core's own types (ilnp-wire).
pub use ilnp_wire::{LocatorState, RouterPreference};

named_enum! {
    #[serde_names]
    /// How a peer with a record is reached (`peer_show`; the core's `PeerState`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum PeerState {
        /// ILNPv6 (or not tried yet)
        Ilnp = "ilnp",
        /// not ILNPv6-capable and fallback is off: the application fails at once
        NonIlnp = "non-ilnp",
        /// no ILNP answer yet; a plain Echo Request to its `L64:NID` is out
        Probing = "probing",
        /// not ILNPv6-capable: plain IPv6 for its identifier address
        Fallback = "fallback",
        /// a state a newer daemon names
        #[serde(other)]
        Other = "other",
    }
}

named_enum! {
    #[serde_names]
    /// Where a peer record came from (`peer_show`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum PeerSource {
        /// peer file, `[[peer]]` or `peer add`
        Static = "static",
        /// the resolver proxy (NID + L64 records)
        Dns = "dns",
        /// a source a newer daemon names
        #[serde(other)]
        Other = "other",
    }
}

named_enum! {
    #[serde_names]
    /// Why a peer is reached as plain IPv6 (`peer_show`'s `fallback.reason`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum FallbackReason {
        /// Parameter Problem code 2 at our nonce option
        #[default]
        ParameterProblem = "parameter_problem",
        /// no ILNP answer, but its `L64:NID` answered a plain Echo Request
        NoAnswer = "no_answer",
        /// a reason a newer daemon names
        #[serde(other)]
        Other = "other",
    }
}

named_enum! {
    #[serde_names]
    /// The ILCC admission policy (`status.admission.policy`; config `admission`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum AdmissionPolicy {
        /// state only for packets a local socket takes, two tiers
        #[default]
        Socket = "socket",
        /// state for every new NID, one tier
        Open = "open",
        /// a policy a newer daemon names
        #[serde(other)]
        Other = "other",
    }
}

named_enum! {
    #[serde_names]
    /// Where the dynamic update of our L64 records stands (`dns_status.update.state`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum DnsUpdateState {
        /// nothing sent yet
        #[default]
        Idle = "idle",
        /// sending, or retrying
        Pending = "pending",
        /// the server took the last set
        Ok = "ok",
        /// the last attempt failed; retrying later
        Failed = "failed",
        /// a state a newer daemon names
        #[serde(other)]
        Other = "other",
    }
}
