//! The local locators as the kernel shows them: the uplinks and what netlink says
//! about them (link state, default routers, addresses), the L64:NID addresses we
//! keep on them, and the fast path's per-locator receive stamps for the core.
//! The core decides the locator set (`ilnp_core::derive_local_locators`).

use super::Daemon;
use crate::netlink;
use anyhow::{Context, Result};
use ilnp_core::{derive_local_locators, KernelAddress, RouterPreference, UplinkFacts};
use ilnp_wire::{ilnp_addr, split_addr, Locator, Nid};
use socket2::{Domain, Socket, Type};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

/// An uplink interface the daemon serves, and what the kernel last told us about
/// it (refreshed by `sync_locators`).
#[derive(Debug, Clone)]
pub(super) struct Uplink {
    pub(super) name: String,
    pub(super) index: u32,
    /// locator preference configured for it (`locator_pref`)
    pub(super) configured_pref: Option<u16>,
    /// the link is up
    pub(super) up: bool,
    /// best default-router preference behind it; None: no default route
    pub(super) router: Option<RouterPreference>,
    /// address of that default router, if known
    pub(super) gateway: Option<Ipv6Addr>,
    /// it has an IPv4 default route (`[ipv4]`: its v4-path locators)
    pub(super) router4: bool,
}

impl Uplink {
    pub(super) fn facts(&self) -> UplinkFacts {
        UplinkFacts {
            ifindex: self.index,
            up: self.up,
            router: self.router,
            router4: self.router4,
            configured_pref: self.configured_pref,
        }
    }
}

/// Joins our solicited-node multicast group (ff02::1:ffXX:XXXX, RFC 4291 §2.7.1; the same
/// for every L64:NID, as it depends on the NID's last 24 bits) on every uplink, once, for
/// the daemon's life. The kernel joins it for an address we add only from its deferred
/// DAD work; until then a router's Neighbour Solicitation for the new L64:NID is not
/// received, so an LU Ack that comes back within a millisecond waited a whole NS
/// retransmission (1 s) before reaching us.
pub(super) fn solicited_node_member(nid: Nid, uplinks: &[Uplink]) -> Result<Socket> {
    let n = nid.0;
    let group = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | ((n >> 16) & 0xff) as u16, (n & 0xffff) as u16);
    let s = Socket::new(Domain::IPV6, Type::DGRAM, None).context("socket for the solicited-node group")?;
    for u in uplinks {
        s.join_multicast_v6(&group, u.index).with_context(|| format!("joining {group} on {}", u.name))?;
    }
    Ok(s)
}

pub(super) fn is_identifier_overlap(id: Locator, addr: Ipv6Addr, len: u8) -> bool {
    let (l, _) = split_addr(addr);
    let len = len.min(64) as u32;
    let mask = if len == 0 { 0 } else { u64::MAX << (64 - len) };
    (l.0 & mask) == (id.0 & mask)
}

impl Daemon {
    /// An uplink that lost carrier keeps its RA default route (marked linkdown) and,
    /// with a high router preference, the kernel keeps choosing it: the LU of a
    /// failover and the data from the new locator would leave through the dead
    /// link until the route expires (seconds). `ignore_routes_with_linkdown` makes
    /// the kernel (and bpf_fib_lookup) skip such routes. Restored on exit.
    /// `write_ahead`: the old values reach the state file before the change, so a
    /// crash right after it still lets the next ilnpd's clean stop put them back.
    pub(super) fn uplink_sysctls(&mut self, write_ahead: bool) -> Result<()> {
        let mut todo = Vec::new();
        for u in &self.uplinks {
            let p = format!("/proc/sys/net/ipv6/conf/{}/ignore_routes_with_linkdown", u.name);
            match std::fs::read_to_string(&p) {
                Ok(old) if old.trim() != "1" => todo.push((p, old.trim().to_string())),
                Ok(_) => {}
                Err(e) => tracing::warn!("{p}: {e}"),
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        for (path, old) in &todo {
            self.changes.push(super::host_changes::Change::Sysctl { path: path.clone(), old: old.clone() }, false);
        }
        if write_ahead {
            self.write_state_now()?;
        }
        for (p, old) in todo {
            if let Err(e) = std::fs::write(&p, "1") {
                tracing::warn!("{p}: {e} (a failover over an uplink that lost carrier may be slow)");
                self.changes.forget_sysctl(&p, &old);
            }
        }
        Ok(())
    }

    /// Re-reads the kernel's links, default routes and addresses; the core derives
    /// the local locator set from them (`ilnp_core::derive_local_locators`).
    pub(super) async fn sync_locators(&mut self) -> Result<()> {
        let addrs = self.nl.addresses().await?;
        let dr = self.nl.default_routers().await?;
        for u in &mut self.uplinks {
            u.up = self.nl.link_by_index(u.index).await.map(|l| l.up).unwrap_or(false);
            u.router = dr.get(&u.index).map(|(p, _)| *p);
            u.gateway = dr.get(&u.index).and_then(|(_, g)| *g);
        }
        if let Some(dp) = self.dp.as_mut() {
            let gateways: BTreeMap<u32, Ipv6Addr> =
                self.uplinks.iter().filter_map(|u| u.gateway.map(|g| (u.index, g))).collect();
            if let Err(e) = dp.set_uplink_routers(&gateways) {
                tracing::warn!("{e:#}");
            }
        }
        let on_uplink = |a: &&netlink::Addr6| self.uplinks.iter().any(|u| u.index == a.ifindex);
        // our own L64:NID addresses on the uplinks (added by us or made by the kernel)
        let ours_present: BTreeSet<(u32, Ipv6Addr)> = addrs
            .iter()
            .filter(on_uplink)
            .filter(|a| a.global && a.prefix_len == 64 && split_addr(a.addr).1 == self.local_nid)
            .map(|a| (a.ifindex, a.addr))
            .collect();
        let kernel: Vec<KernelAddress> = addrs
            .iter()
            .filter(on_uplink)
            // a temporary NID's L64:NID ([privacy]) is no evidence of a locator
            .filter(|a| !self.added.contains(&(a.ifindex, a.addr)) || split_addr(a.addr).1 == self.local_nid)
            .map(|a| KernelAddress {
                ifindex: a.ifindex,
                addr: a.addr,
                prefix_len: a.prefix_len,
                global: a.global,
                valid_lft: a.valid_lft,
                deprecated: a.deprecated,
                added_by_us: self.added.contains(&(a.ifindex, a.addr)),
            })
            .collect();
        let mut kernel = kernel;
        if let Some(v4) = &self.cfg.ipv4 {
            // each IPv4 address on an uplink is a v4 path (`ilnp_wire::v4path`): a
            // locator of 0004:ADDR:PORT that the core treats like any other
            let routers4 = self.nl.default_routes4().await?;
            for u in &mut self.uplinks {
                u.router4 = routers4.contains(&u.index);
            }
            for (ifindex, a, valid_lft) in self.nl.addresses4().await? {
                if !self.uplinks.iter().any(|u| u.index == ifindex) {
                    continue;
                }
                kernel.push(KernelAddress {
                    ifindex,
                    addr: ilnp_addr(Locator::v4_path(a, v4.port), self.local_nid),
                    prefix_len: 64,
                    global: true,
                    valid_lft,
                    deprecated: false,
                    added_by_us: false,
                });
            }
        }
        let facts: Vec<UplinkFacts> = self.uplinks.iter().map(Uplink::facts).collect();
        let locs = derive_local_locators(self.cfg.id_prefix, self.local_nid, &facts, &kernel);
        // L64:NID on each uplink so Neighbour Discovery answers for it (not for a
        // v4 path: its packets arrive on the UDP port)
        for l in locs.iter().filter(|l| !l.loc.is_v4_path()) {
            let a = ilnp_addr(l.loc, self.local_nid);
            if !ours_present.contains(&(l.ifindex, a)) && self.nl.add_uplink_address(l.ifindex, a).await? {
                self.added.insert((l.ifindex, a));
            }
        }
        // the core first: a failover's LU leaves before the housekeeping below;
        // with what the fast path received so far, so a quiet period is judged right
        self.feed_local_activity();
        let now = Instant::now();
        let current: BTreeSet<Locator> = locs.iter().map(|l| l.loc).collect();
        let actions = self.core.set_local_locators(now, locs);
        self.run_actions(actions);
        // locators that went away: remove our address for them
        for (idx, a) in ours_present {
            let (l, _) = split_addr(a);
            if !current.contains(&l) && self.added.contains(&(idx, a)) {
                self.nl.del_address(idx, a, 64).await?;
                self.added.remove(&(idx, a));
            }
        }
        // [privacy]: a new network, a new temporary NID; their L64:NID follow the locators
        self.privacy_tick().await;
        Ok(())
    }

    /// Hands the fast path's per-locator receive stamps (CLOCK_MONOTONIC ns, the
    /// clock behind `Instant` on Linux) to the core as instants.
    pub(super) fn feed_local_activity(&mut self) {
        let Some(dp) = self.dp.as_ref() else { return };
        let stamps = match dp.local_last_rx() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("reading the local locators' receive stamps: {e:#}");
                return;
            }
        };
        let (now, now_ns) = (Instant::now(), monotonic_ns());
        for (loc, ns) in stamps {
            let t = now.checked_sub(Duration::from_nanos(now_ns.saturating_sub(ns))).unwrap_or(now);
            self.core.note_local_activity(loc, t);
        }
    }
}

pub(super) use crate::bpf::monotonic_ns;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_stamps_and_instant_share_a_clock() {
        // bpf_ktime_get_ns() is CLOCK_MONOTONIC; so is std's Instant on Linux
        let (i0, n0) = (Instant::now(), monotonic_ns());
        std::thread::sleep(Duration::from_millis(20));
        let (i1, n1) = (Instant::now(), monotonic_ns());
        let d = (n1 - n0) as i128 - i1.duration_since(i0).as_nanos() as i128;
        assert!(d.abs() < 2_000_000, "clocks drift by {d} ns over 20 ms");
        let uptime: f64 = std::fs::read_to_string("/proc/uptime").unwrap().split(' ').next().unwrap().parse().unwrap();
        // CLOCK_MONOTONIC is not CLOCK_BOOTTIME: never ahead of the uptime
        assert!(n1 as f64 / 1e9 <= uptime + 1.0, "{n1} ns vs uptime {uptime} s");
    }

    #[test]
    fn identifier_prefix_overlap() {
        let p = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;
        let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert!(is_identifier_overlap(p, a("fd69:6c6e:7000::1"), 64));
        assert!(is_identifier_overlap(p, a("fd69:6c6e:7000::1"), 128), "an address inside P");
        assert!(is_identifier_overlap(p, a("fd69::1"), 16), "a shorter prefix covering P");
        assert!(is_identifier_overlap(p, a("fd00::1"), 8));
        assert!(!is_identifier_overlap(p, a("fd69:6c6e:7001::1"), 64));
        assert!(!is_identifier_overlap(p, a("2001:db8:a::c"), 64));
    }
}
