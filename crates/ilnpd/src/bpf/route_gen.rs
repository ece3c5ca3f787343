//! The next-hop cache's generation (ilnp_route_gen) and the clock it is taken from.

use super::{map_err, Datapath, MAP_ROUTE_GEN};
use anyhow::{Context, Result};

impl Datapath {
    /// A writer of `ilnp_route_gen`, the generation the egress program's next-hop
    /// cache (`ilnp_nh_cache`) is valid for, usable from another thread. While
    /// nothing writes it, it is 0 and the cache is off.
    pub fn route_gen(&self) -> Result<RouteGen> {
        use std::os::fd::AsFd;
        let fd = match self.bpf.map(MAP_ROUTE_GEN) {
            Some(aya::maps::Map::Array(d)) => d.fd().as_fd().try_clone_to_owned()?,
            _ => return Err(map_err(MAP_ROUTE_GEN)),
        };
        let data = aya::maps::MapData::from_fd(fd).with_context(|| format!("reopening {MAP_ROUTE_GEN}"))?;
        let map = aya::maps::Array::try_from(aya::maps::Map::Array(data)).map_err(|_| map_err(MAP_ROUTE_GEN))?;
        Ok(RouteGen { map, last: 0 })
    }
}

/// Writes `ilnp_route_gen[0]` (see `Datapath::route_gen`). Dropping it writes 0:
/// the cache is off whenever no one keeps it valid.
pub struct RouteGen {
    map: aya::maps::Array<aya::maps::MapData, u64>,
    last: u64,
}

impl RouteGen {
    /// Invalidates every cached next hop: a generation never written before
    /// (CLOCK_MONOTONIC ns, or one more than the last; across an ilnpd restart
    /// with pinned maps, too) and never 0.
    pub fn bump(&mut self) {
        let next = monotonic_ns().max(self.last + 1);
        if let Err(e) = self.write(next) {
            tracing::warn!("invalidating the next-hop cache: {e:#}");
        }
    }

    fn write(&mut self, v: u64) -> Result<()> {
        self.map.set(0, v, 0).with_context(|| format!("writing {MAP_ROUTE_GEN}"))?;
        self.last = v;
        Ok(())
    }
}

impl Drop for RouteGen {
    fn drop(&mut self) {
        if let Err(e) = self.write(0) {
            tracing::warn!("turning the next-hop cache off: {e:#}");
        }
    }
}

/// CLOCK_MONOTONIC in ns: what bpf_ktime_get_ns() returns.
pub fn monotonic_ns() -> u64 {
    // SAFETY: a zeroed timespec is valid; clock_gettime only writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
