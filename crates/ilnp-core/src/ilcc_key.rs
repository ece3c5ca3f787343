//! The key of the ILCC and of the fast path's `ilnp_ilcc` / `ilnp_balance` maps:
//! below `balance_table.rs`, `action.rs` and `ilcc.rs`, which all name it.

use ilnp_wire::Nid;

/// What an ILCC entry is found by: the correspondent's NID and which of our NIDs
/// it talks to (None = the stable one). A correspondent holding sessions with two
/// of our NIDs (the stable one and a temporary one, issue #44 item 2) has two
/// entries, each with its own nonces, locators and LU state, so nothing joins our
/// two NIDs up; the fast path's `ilnp_ilcc` map has the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IlccKey {
    pub remote: Nid,
    pub local: Option<Nid>,
}

impl IlccKey {
    /// The key for a correspondent talking to our stable NID.
    pub fn stable(remote: Nid) -> IlccKey {
        IlccKey { remote, local: None }
    }

    /// The key for a packet between `ours` (any of our NIDs) and `remote`, given
    /// the stable NID.
    pub fn new(remote: Nid, ours: Nid, stable: Nid) -> IlccKey {
        IlccKey { remote, local: (ours != stable).then_some(ours) }
    }
}

impl std::fmt::Display for IlccKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.local {
            None => write!(f, "{}", self.remote),
            Some(l) => write!(f, "{} (to {l})", self.remote),
        }
    }
}
