//! What the core hands its shell: the actions of one entry point, and the
//! fast-path entry an `IlccUpsert` carries.

use crate::balance_table::BalanceChange;
use crate::event::{DropReason, Event, Stats};
use crate::ilcc_key::IlccKey;
use crate::locator::LocalLocator;
use ilnp_wire::{Locator, Nid, Nonce};

/// What the fast path needs to know about one correspondent; written to the
/// BPF `ilnp_ilcc` map by ilnpd on `Action::IlccUpsert`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IlccSnapshot {
    pub nid: Nid,
    /// source locator to put on packets to this peer
    pub local_loc: Locator,
    /// destination locator to use for this peer
    pub remote_loc: Locator,
    /// every remote locator currently accepted as a source (includes remote_loc)
    pub remote_locs: Vec<Locator>,
    /// nonce we put on packets to the peer
    pub nonce_tx: Nonce,
    /// nonce the peer puts on packets to us; None until learned
    pub nonce_rx: Option<Nonce>,
    /// the peer's TCP/UDP checksums include the locators (`ChecksumRule::FullAddress`):
    /// the fast path leaves its packets to the slow path
    pub full_address_checksum: bool,
    /// `remote_loc` is a v4 path (`v4path.rs`): where its datagrams go (the NAT's
    /// observed address, else the one it names); the fast path sends there, and
    /// takes the peer's datagrams from there only
    pub remote_v4: Option<std::net::SocketAddrV4>,
    /// which of our NIDs the peer talks to (`IlccEntry::local_nid`): None = the
    /// stable one; the fast path sends from it and delivers only packets to it
    pub local_nid: Option<Nid>,
}

impl IlccSnapshot {
    /// The entry's key (the fast path's `ilnp_ilcc` key).
    pub fn key(&self) -> IlccKey {
        IlccKey { remote: self.nid, local: self.local_nid }
    }
}

/// Something the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// complete wire-form IPv6 packet → raw socket, out of `uplink` (the ifindex
    /// carrying its source locator; None: a locator not ours, the main table decides)
    SendWire {
        pkt: Vec<u8>,
        uplink: Option<u32>,
    },
    /// complete wire-form IPv6 packet to a v4-path locator → the payload of a UDP
    /// datagram from the v4 path's port to `to` (`v4path.rs`)
    SendV4 {
        pkt: Vec<u8>,
        to: std::net::SocketAddrV4,
    },
    /// complete identifier-form IPv6 packet → write to ilnp0
    DeliverLocal(Vec<u8>),
    /// write/refresh the fast-path entry of this peer
    IlccUpsert(IlccSnapshot),
    IlccRemove(IlccKey),
    /// the fast path must punt this peer's plain packets (no nonce) from
    /// `remote_loc:nid` to the slow path: it is reached as plain IPv6 (fallback)
    /// or being probed
    PlainPeerUpsert {
        nid: Nid,
        remote_loc: Locator,
    },
    PlainPeerRemove(Nid),
    /// sync the fast path's local locator table
    LocalLocators(Vec<LocalLocator>),
    /// write/remove the fast path's balancing table of a correspondent (`ilnp_balance`)
    Balance(BalanceChange),
    /// the peer came back on another locator (an LU changed its active one): its
    /// transport connections to us may be waiting out a backed-off retransmission
    /// timer (a hard handoff's outage). The shell hands the stack a hint per TCP
    /// connection to the peer's identifier address that timed out (RFC 6069), so it
    /// retransmits now; for connections not in backoff the stack ignores them.
    NudgeTransport(Nid),
    Event(Event),
}

/// Counts a dropped packet and reports it (`Core::drop` for a sub-machine lent
/// the counters).
pub(crate) fn drop_packet(stats: &mut Stats, out: &mut Vec<Action>, reason: DropReason, detail: String) {
    stats.drop(reason);
    out.push(Action::Event(Event::drop(reason, detail)));
}
