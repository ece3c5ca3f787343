//! Our own locators in the fast path (ilnp_locals): the set it accepts and sends
//! from, the uplinks' default routers, and when each last received.

use super::maps::LocalVal;
use super::{absent_ok, map_err, Datapath, MAP_LOCALS};
use anyhow::{Context, Result};
use aya::maps::HashMap;
use ilnp_core::LocalLocator;
use ilnp_wire::Locator;
use std::collections::BTreeMap;
use std::net::Ipv6Addr;

impl Datapath {
    /// Replaces the set of local locators the fast path accepts and sends from.
    pub fn set_local_locators(&mut self, locs: &[LocalLocator]) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], LocalVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_LOCALS).ok_or_else(|| map_err(MAP_LOCALS))?)?;
        let stale: Vec<[u8; 8]> =
            m.keys().filter_map(|k| k.ok()).filter(|k| !locs.iter().any(|l| l.loc.to_bytes() == *k)).collect();
        for k in stale {
            absent_ok(m.remove(&k)).context("removing a local locator from the fast path")?;
        }
        for l in locs {
            let old = m.get(&l.loc.to_bytes(), 0).ok();
            let v = LocalVal::from_core(l, self.routers.get(&l.ifindex).copied(), old.as_ref());
            m.insert(l.loc.to_bytes(), v, 0)
                .with_context(|| format!("writing local locator {} to the fast path", l.loc))?;
        }
        Ok(())
    }

    /// When the ingress program last delivered a packet on each local locator
    /// (CLOCK_MONOTONIC ns, to within `ILNP_LOCAL_RX_GRAIN_NS`); locators it never
    /// delivered on are absent.
    pub fn local_last_rx(&self) -> Result<Vec<(Locator, u64)>> {
        let m: HashMap<_, [u8; 8], LocalVal> =
            HashMap::try_from(self.bpf.map(MAP_LOCALS).ok_or_else(|| map_err(MAP_LOCALS))?)?;
        let mut out = Vec::new();
        for r in m.iter() {
            let (k, v) = r?;
            if v.last_rx_ns != 0 {
                out.push((Locator::from_bytes(k), v.last_rx_ns));
            }
        }
        Ok(out)
    }

    /// The default router behind each uplink (uplinks without one are absent):
    /// packets from an uplink's locators leave through it via this router when
    /// the main table would send them out of another uplink. Updates the local
    /// locators already written.
    pub fn set_uplink_routers(&mut self, routers: &BTreeMap<u32, Ipv6Addr>) -> Result<()> {
        if *routers == self.routers {
            return Ok(());
        }
        self.routers = routers.clone();
        let mut m: HashMap<_, [u8; 8], LocalVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_LOCALS).ok_or_else(|| map_err(MAP_LOCALS))?)?;
        let all: Vec<([u8; 8], LocalVal)> = m.iter().filter_map(|e| e.ok()).collect();
        for (k, mut v) in all {
            v.router = routers.get(&v.ifindex).map(|r| r.octets()).unwrap_or_default();
            m.insert(k, v, 0).context("writing a local locator's router to the fast path")?;
        }
        Ok(())
    }
}
