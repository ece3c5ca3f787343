//! The correspondents' balancing tables (ilnp_balance) and their ILCC entries'
//! BALANCED flag, kept in step.

use super::maps::{self, ilcc_key_of, ilcc_map_key, BalanceVal, IlccMapKey};
use super::{absent_ok, map_err, Datapath, MAP_BALANCE};
use anyhow::{Context, Result};
use aya::maps::{HashMap, MapData};
use ilnp_core::{BalanceChange, IlccKey};

impl Datapath {
    pub(super) fn balance_mut(&mut self) -> Result<HashMap<&mut MapData, IlccMapKey, BalanceVal>> {
        Ok(HashMap::try_from(self.bpf.map_mut(MAP_BALANCE).ok_or_else(|| map_err(MAP_BALANCE))?)?)
    }

    /// Writes or removes an ILCC entry's balancing table (ilnp-core `balance`).
    /// The egress programs look a table up only for an ILCC entry with
    /// `ILCC_F_BALANCED`: it is set after the table is written and cleared before
    /// it is removed (between the two, packets take the ILCC's pair, as without).
    pub fn set_balance(&mut self, c: &BalanceChange) -> Result<()> {
        match c {
            BalanceChange::Upsert(t) => {
                let key = ilcc_map_key(t.key);
                let mut m = self.balance_mut()?;
                let old = m.get(&key, 0).ok();
                let v = BalanceVal::from_table(t, old.as_ref());
                m.insert(key, v, 0)
                    .with_context(|| format!("writing the balancing table of {} to the fast path", t.key))?;
                self.set_balanced_flag(t.key, true)
            }
            BalanceChange::Remove(k) => {
                self.set_balanced_flag(*k, false)?;
                absent_ok(self.balance_mut()?.remove(&ilcc_map_key(*k)))
                    .with_context(|| format!("removing the balancing table of {k} from the fast path"))
            }
        }
    }

    /// The ILCC entries ilnp_balance holds a table for.
    pub fn balanced_entries(&self) -> Result<Vec<IlccKey>> {
        let m: HashMap<_, IlccMapKey, BalanceVal> =
            HashMap::try_from(self.bpf.map(MAP_BALANCE).ok_or_else(|| map_err(MAP_BALANCE))?)?;
        m.keys().map(|k| Ok(ilcc_key_of(k?))).collect()
    }

    /// Sets or clears `ILCC_F_BALANCED` in the ILCC entry `k`, if it is there
    /// (`upsert_peer` sets it for an entry written later).
    pub(super) fn set_balanced_flag(&mut self, k: IlccKey, on: bool) -> Result<()> {
        let mut m = self.ilcc_mut()?;
        let key = ilcc_map_key(k);
        let Ok(mut v) = m.get(&key, 0) else { return Ok(()) };
        if (v.flags & maps::ILCC_F_BALANCED != 0) == on {
            return Ok(());
        }
        v.flags ^= maps::ILCC_F_BALANCED;
        m.insert(key, v, 0).with_context(|| format!("marking the ILCC entry of {k} as balanced = {on}"))
    }
}
