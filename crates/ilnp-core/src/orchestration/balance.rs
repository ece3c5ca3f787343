//! The core's entry into `balance.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::balance::{BalanceCx, BalanceError, Balancer};
use crate::ilcc::IlccKey;
use crate::machine::Core;
use ilnp_wire::Nid;
use ilnp_wire::Policy;

/// The core's entry points into balancing: each lends the balancer the state it
/// needs.
impl Core {
    /// The balancer and the rest of the core's state it reads.
    pub(crate) fn balance_parts(&mut self) -> (&mut Balancer, BalanceCx<'_>) {
        let cx = BalanceCx { cfg: &self.cfg, ilcc: &self.ilcc, local: &self.local };
        (&mut self.balance, cx)
    }

    /// Sets the policy of one correspondent (a peer or an ILCC entry), or the
    /// default (`None`). Returns the fast path's changes.
    pub fn set_policy(&mut self, peer: Option<Nid>, policy: Policy) -> Result<Vec<Action>, BalanceError> {
        let listed = peer.is_some_and(|n| self.peers.contains_key(&n));
        let (balance, cx) = self.balance_parts();
        balance.set_policy(&cx, peer, listed, policy)
    }

    /// Sets the balancing weight of the uplink `ifindex` (0 = backup only). Refused
    /// if every uplink carrying a locator would then weigh 0.
    pub fn set_uplink_weight(&mut self, ifindex: u32, weight: u32) -> Result<Vec<Action>, BalanceError> {
        let (balance, cx) = self.balance_parts();
        balance.set_uplink_weight(&cx, ifindex, weight)
    }

    /// The per-flow hash seed (configuration; the default derives from the NID).
    pub fn set_flow_seed(&mut self, seed: u64) -> Vec<Action> {
        let (balance, cx) = self.balance_parts();
        balance.set_flow_seed(&cx, seed)
    }

    /// The ILCC entries with a balancing table (policy not failover, and pairs).
    pub fn balanced_entries(&self) -> impl Iterator<Item = IlccKey> + '_ {
        self.balance.tables.keys().copied()
    }
}
