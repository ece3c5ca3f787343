//! Sans-IO ILNPv6 protocol core: ILCC, peers, slow-path decisions.
//! No sockets, no threads, no clock reads: time and randomness are injected.

pub use ilnp_wire::{Locator, Nid, Nonce};

/// Validity state of a locator (RFC 6741 §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocatorState {
    Valid,
    Active,
    Aged,
    Expired,
}

/// One of this host's locators, as learned from the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalLocator {
    pub loc: Locator,
    /// uplink carrying this locator
    pub ifindex: u32,
    /// lower is preferred (RFC 6742)
    pub pref: u16,
    /// seconds; u32::MAX = infinite
    pub lifetime_s: u32,
    pub state: LocatorState,
}

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
}
