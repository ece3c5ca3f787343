//! What the fast path holds of one correspondent's balancing (`ilnp_balance`) and
//! the change an `Action::Balance` carries: below `action.rs` and `balance.rs`.

use crate::ilcc_key::IlccKey;
use ilnp_wire::{Locator, Policy};

/// One correspondent's balancing state as the fast path holds it (`ilnp_balance`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BalanceTable {
    /// the ILCC entry it balances (the `ilnp_balance` key)
    pub key: IlccKey,
    pub policy: Policy,
    /// (local, remote) locator pairs, at most `balance::MAX_PAIRS`
    pub pairs: Vec<(Locator, Locator)>,
    /// each pair's weight after reduction (Σ ≤ `balance::SLOTS`)
    pub weights: Vec<u32>,
    /// per-packet: the SWRR schedule (length Σ weights); per-flow: `balance::SLOTS` slots;
    /// entries index `pairs`
    pub slots: Vec<u8>,
    pub flow_seed: u64,
    /// per-packet: where the schedule stands (the fast path's counter starts here
    /// for a new entry and is kept on updates)
    pub seq: u64,
}

impl BalanceTable {
    /// The pair for a packet: per-packet takes the schedule slot `seq`, per-flow the
    /// slot of the flow's hash.
    pub fn pick(&self, seq: u64, flow_hash: u64) -> (Locator, Locator) {
        let slot = match self.policy {
            Policy::PerPacket => self.slots[(seq % self.slots.len() as u64) as usize],
            _ => self.slots[(flow_hash % self.slots.len() as u64) as usize],
        };
        self.pairs[usize::from(slot)]
    }
}

/// What changed in a correspondent's balancing (carried out by the shell).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BalanceChange {
    Upsert(BalanceTable),
    Remove(IlccKey),
}
