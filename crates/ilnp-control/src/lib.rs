//! ilnpd's control protocol (docs/control-protocol.md): a Unix stream socket, one
//! JSON object per line each way. The client sends a [`Request`]; the daemon
//! answers with one [`Reply`] line; after `monitor`'s reply it streams
//! [`Event`] lines until the client closes.
//!
//! The server (ilnpd) parses with [`Request::from_line`] and writes
//! [`Reply::to_line`] / [`Event::to_line`]; the client (ilnpctl) writes
//! [`Request::to_line`] and reads with [`Reply::from_line`] (or
//! [`Reply::envelope`] to pass the data through unchanged).

mod event;
mod framing;
mod reply;
mod request;
mod states;

pub use event::Event;

/// the balancing policy a `policy_set` names
pub use ilnp_wire::Policy;
pub use reply::{
    AdmissionStatus, BalanceInfo, BalancePeer, Data, DnsStatus, DnsUpdateStatus, FastCounters, Flushed, IlccEntry,
    LocatorInfo, Monitoring, PeerAdded, PeerDeleted, PeerFallback, PeerInfo, PeerLocator, RemoteLocator, Reply,
    ReplyError, Stats, Status, TempNidInfo, Uplink,
};
pub use request::{Field, PeerLocatorArg, Request, RequestError, Spelled, CONTROL_GROUP, DEFAULT_PREF};
pub use states::{
    AdmissionPolicy, DatapathMode, DnsUpdateState, FallbackReason, Handoff, LocatorState, NidSource, PeerSource,
    PeerState, RouterPreference,
};

#[cfg(test)]
mod tests;
