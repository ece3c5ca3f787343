//! A correspondent's locator as the ILCC keeps it (`IlccEntry::remote_locators`,
//! `PendingLu::candidates`): below `ilcc.rs`, which re-exports it.

use crate::event::ser_display;
use crate::locator::LocatorState;
use ilnp_wire::Locator;
use serde::Serialize;
use std::net::SocketAddrV4;
use std::time::Instant;

/// A correspondent's locator as this node knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteLocator {
    #[serde(rename = "l64", serialize_with = "ser_display")]
    pub loc: Locator,
    pub pref: u16,
    /// seconds the locator may be treated as valid (from LU or DNS); 0 = unknown
    pub lifetime_s: u16,
    pub state: LocatorState,
    #[serde(skip)]
    pub last_heard: Option<Instant>,
    /// when the slow path last accepted a packet from this locator carrying the
    /// peer's *own* current nonce (not ours reflected): the proof a failover needs
    /// (`failover.rs`). None: never proven (from the peer file, DNS, an LU's other
    /// entries, a restored state file); a new peer nonce starts a new list.
    #[serde(skip)]
    pub proven: Option<Instant>,
    /// when `lifetime_s` (from an LU) runs out; None = no lifetime known (peer file,
    /// learned from a packet). Past it the locator is Aged, not removed (RFC 6741 §5.2).
    #[serde(skip)]
    pub expires: Option<Instant>,
    /// a v4 path: where its packets really come from, when that is not the address
    /// and port the locator names (a NAT, `v4path.rs`); replies go there
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_via")]
    pub via: Option<SocketAddrV4>,
    /// a datagram arrived over this v4 path already (the first one defines `via`;
    /// a later one from elsewhere is a rebinding, validated first)
    #[serde(skip)]
    pub v4_heard: bool,
}

impl RemoteLocator {
    /// A locator from the peer database or learned from a packet: no lifetime.
    pub fn new(loc: Locator, pref: u16, state: LocatorState, last_heard: Option<Instant>) -> RemoteLocator {
        RemoteLocator {
            loc,
            pref,
            lifetime_s: 0,
            state,
            last_heard,
            proven: None,
            expires: None,
            via: None,
            v4_heard: false,
        }
    }

    /// Where packets to this locator go: the observed path, else what it names
    /// (None: an IPv6 locator).
    pub fn v4_destination(&self) -> Option<SocketAddrV4> {
        self.via.or_else(|| self.loc.as_v4_path())
    }
}

fn ser_via<S: serde::Serializer>(v: &Option<SocketAddrV4>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(a) => s.serialize_str(&a.to_string()),
        None => s.serialize_none(),
    }
}
