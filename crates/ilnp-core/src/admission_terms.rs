//! The terms of admission that the configuration, the derived nonces and the shells
//! share with `admission.rs`: the policy knob and the fast path's answer hint.

use ilnp_wire::named_enum;
use ilnp_wire::{Locator, Nonce};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What the fast path remembered about the last packet from a NID it passed up
/// without state (`ilnp_answer_hints` in `bpf/ilnp_maps.h`): the locator it came
/// from, the one of ours it arrived on, the peer's nonce, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerHint {
    pub remote_loc: Locator,
    pub local_loc: Locator,
    pub peer_nonce: Nonce,
    pub at: Instant,
    /// the packet came over a v4 path: the outer IPv4 source and port it came from,
    /// where the answer goes (as a plain IPv4 stack answers the source address)
    pub via: Option<std::net::SocketAddrV4>,
}

/// A hint older than this is not used: the stack answers at once, so an older one
/// belongs to another packet.
pub const ANSWER_HINT_MAX_AGE: Duration = Duration::from_secs(2);

named_enum! {
    #[serde_names]
    /// The admission policy (config `admission`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Admission {
        /// state only for packets a local socket takes, two tiers (default)
        #[default]
        Socket = "socket",
        /// state for every new NID, one tier (the pre-policy baseline)
        Open = "open",
    }
}
