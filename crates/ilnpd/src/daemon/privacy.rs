//! `[privacy]` (issue #44 item 2; docs/design/privacy.md): temporary NIDs for
//! outgoing sessions, rotated per period and per network, while the stable NID keeps
//! answering for sessions to it and for names in DNS.
//!
//! Applications need no change: each temporary NID's identifier address is on ilnp0
//! with lifetimes, and the stable one is deprecated there (preferred lifetime 0), so
//! the kernel's source address selection (RFC 6724 rule 3, avoid deprecated
//! addresses) gives new outgoing connections the preferred temporary address. A
//! rotated-out one is deprecated the same way: its sockets go on, new connects take
//! the new one; it is removed once its valid time is over and its sessions ended.
//! (Linux's own preference for temporaries, rule 7, needs IFA_F_TEMPORARY, which
//! netlink does not let an address be given, and `use_tempaddr` ≥ 2.)
//!
//! The core knows which NIDs are ours (`ilnp_core::nids`); here the shell keeps
//! their times, their addresses (ilnp0, `L64:NID` on each uplink for Neighbour
//! Discovery) and the fast path's `ilnp_temp_nids` (the ingress program takes packets
//! to them for the entries that use them: `IlccSnapshot::local_nid`).
//! No log line names a temporary NID together with the stable one.

use super::{Daemon, ShellCounter};
use ilnp_wire::{ilnp_addr, Locator, Nid};
use rand::RngCore;
use std::collections::BTreeSet;
use std::time::Instant;

/// How often a draw is retried after a refusal (a collision) before giving up.
const DRAWS: usize = 8;

/// One temporary NID as the shell keeps it.
#[derive(Debug)]
pub(super) struct Temp {
    pub nid: Nid,
    pub born: Instant,
    /// when it stopped being preferred (None: the current one)
    pub deprecated_at: Option<Instant>,
    /// the local locators when it was drawn (or since, while they overlapped):
    /// a locator outside them is a new network (`per_network`)
    pub networks: BTreeSet<Locator>,
}

#[derive(Debug, Default)]
pub(super) struct PrivacyState {
    /// the stable address deprecated and the core's temporaries adopted (a restart)
    started: bool,
    pub temps: Vec<Temp>,
    /// the last rotation failed: not logged again every second
    failing: bool,
    /// correspondents whose sessions are all on other NIDs of ours than the
    /// preferred temporary one, pinned to one of those by a /128 route with that
    /// source: a correspondent keeps seeing a NID it already knows rather than a
    /// new one beside it, which would join the two up (it could hold both: the ILCC
    /// has an entry per NID of ours it talks to): remote NID -> ours
    pins: std::collections::BTreeMap<Nid, Nid>,
    /// with `rng_seed` (tests and the lab only): the temporary NIDs' own generator,
    /// so that two runs draw the same ones (tests/test_differential.py)
    seeded: Option<rand::rngs::StdRng>,
}

/// A temporary NID from 8 random bytes: the u bit cleared (local scope, RFC 4291
/// App. A, as the stable-privacy NID), the g bit cleared (unicast).
pub(super) fn temp_nid(mut b: [u8; 8]) -> Nid {
    b[0] &= !0x03;
    Nid(u64::from_be_bytes(b))
}

impl Daemon {
    /// The usable local locators the temporary NIDs need `L64:NID` on (ifindex, locator).
    fn privacy_locators(&self) -> Vec<(u32, Locator)> {
        self.core
            .local()
            .all()
            .iter()
            .filter(|l| l.state == ilnp_core::LocatorState::Active && !l.loc.is_v4_path())
            .map(|l| (l.ifindex, l.loc))
            .collect()
    }

    /// Every second, after a locator change and at start: rotation per period and
    /// per network, expiry, and each temporary NID's uplink addresses.
    pub(super) async fn privacy_tick(&mut self) {
        let Some(pc) = self.cfg.privacy.clone() else { return };
        let now = Instant::now();
        if !self.privacy.started {
            self.privacy_start(now).await;
        }
        let locs: BTreeSet<Locator> = self.core.local().all().iter().map(|l| l.loc).collect();
        let reason = match self.privacy.temps.iter_mut().find(|t| t.deprecated_at.is_none()) {
            None => Some("first"),
            Some(t) if now.saturating_duration_since(t.born) >= pc.period => Some("period"),
            // a locator it was not drawn on: the host joined another network
            Some(t) if pc.per_network && !t.networks.is_empty() && !locs.is_subset(&t.networks) => Some("network"),
            Some(t) => {
                if t.networks.is_empty() {
                    t.networks = locs.clone();
                }
                None
            }
        };
        if let Some(r) = reason {
            if !locs.is_empty() || r == "first" {
                self.privacy_rotate(now, r, &pc, &locs).await;
            }
        }
        // expiry: past its valid time with no session left
        let gone: Vec<Nid> = self
            .privacy
            .temps
            .iter()
            .filter(|t| t.deprecated_at.is_some() && now.saturating_duration_since(t.born) >= pc.valid)
            .filter(|t| self.core.sessions_on(t.nid) == 0)
            .map(|t| t.nid)
            .collect();
        for n in gone {
            self.privacy_remove(n).await;
        }
        self.privacy_uplink_addresses().await;
        self.privacy_dad(&pc).await;
        self.privacy_pins().await;
    }

    /// A temporary NID's `L64:NID` that Duplicate Address Detection found on
    /// another node of the link: that NID is not ours to use (a collision, 2^-62 per
    /// pair, or a node claiming every address): it is removed with its sessions and,
    /// if it was the preferred one, another drawn. Counted `temp_nid_dad_failed`.
    async fn privacy_dad(&mut self, pc: &crate::config::privacy::PrivacyConfig) {
        let Ok(addrs) = self.nl.addresses().await else { return };
        let nids: Vec<Nid> = self.privacy.temps.iter().map(|t| t.nid).collect();
        let failed: BTreeSet<Nid> = addrs
            .iter()
            .filter(|a| a.dadfailed && self.added.contains(&(a.ifindex, a.addr)))
            .map(|a| ilnp_wire::split_addr(a.addr).1)
            .filter(|n| nids.contains(n))
            .collect();
        for n in failed {
            let was_current = self.privacy.temps.iter().any(|t| t.nid == n && t.deprecated_at.is_none());
            self.bump(ShellCounter::TempNidDadFailed);
            tracing::warn!("privacy: Duplicate Address Detection failed for temporary NID {n}: another drawn");
            self.privacy_remove(n).await;
            if was_current {
                let locs: BTreeSet<Locator> = self.core.local().all().iter().map(|l| l.loc).collect();
                self.privacy_rotate(Instant::now(), "collision", pc, &locs).await;
                self.privacy_uplink_addresses().await;
            }
        }
    }

    /// New connections to a correspondent go from a NID of ours one of its sessions
    /// is on (a route `P::REMOTE/128 src P::OURS` on ilnp0) while none is on the
    /// preferred temporary one: the newest temporary NID among them, else the
    /// stable one; unpinned when its sessions end.
    async fn privacy_pins(&mut self) {
        let current = self.privacy.temps.iter().find(|t| t.deprecated_at.is_none()).map(|t| t.nid);
        let mut used: std::collections::BTreeMap<Nid, Vec<Nid>> = Default::default();
        for e in self.core.ilcc().iter() {
            used.entry(e.nid).or_default().push(self.core.entry_local_nid(e));
        }
        // rank: the temporary NIDs newest first (`temps` is in drawing order), then the stable one
        let rank = |n: &Nid| self.privacy.temps.iter().rev().position(|t| t.nid == *n).unwrap_or(usize::MAX);
        let want: std::collections::BTreeMap<Nid, Nid> = used
            .into_iter()
            .filter(|(_, ours)| current.is_none_or(|c| !ours.contains(&c)))
            .filter_map(|(r, ours)| ours.into_iter().min_by_key(rank).map(|o| (r, o)))
            .collect();
        let p = self.cfg.id_prefix;
        let old: Vec<Nid> = self.privacy.pins.keys().copied().filter(|r| !want.contains_key(r)).collect();
        for r in old {
            match self.nl.unpin_source(ilnp_addr(p, r), self.tun_index).await {
                Ok(()) => {
                    self.privacy.pins.remove(&r);
                }
                Err(e) => tracing::warn!("privacy: {e:#}"),
            }
        }
        for (r, ours) in want {
            if self.privacy.pins.get(&r) != Some(&ours) {
                match self.nl.pin_source(ilnp_addr(p, r), self.tun_index, ilnp_addr(p, ours)).await {
                    Ok(()) => {
                        self.privacy.pins.insert(r, ours);
                    }
                    Err(e) => tracing::warn!("privacy: {e:#}"),
                }
            }
        }
    }

    /// At start: the stable identifier address deprecated on ilnp0 (it still takes
    /// every packet to it, and a socket bound to it); the core's temporary NIDs (from
    /// the state file) put back: their addresses and fast-path entries.
    async fn privacy_start(&mut self, now: Instant) {
        self.privacy.started = true;
        let stable = ilnp_addr(self.cfg.id_prefix, self.local_nid);
        if let Err(e) = self.nl.set_address_lifetimes(self.tun_index, stable, 128, 0, u32::MAX).await {
            tracing::warn!("privacy: deprecating the stable identifier address: {e:#}");
        }
        let restored: Vec<(Nid, bool)> = self.core.temporary_nids().iter().map(|(n, t)| (n, t.preferred)).collect();
        let period = self.cfg.privacy.as_ref().map_or(0, |p| p.period.as_secs());
        for (nid, preferred) in restored {
            let pref = if preferred { period.min(u64::from(u32::MAX - 1)) as u32 } else { 0 };
            self.privacy_addresses(nid, pref).await;
            let deprecated_at = (!preferred).then_some(now);
            self.privacy.temps.push(Temp { nid, born: now, deprecated_at, networks: BTreeSet::new() });
            tracing::info!("privacy: temporary NID {nid} kept from the state file");
        }
    }

    /// The identifier address of `nid` on ilnp0 with `preferred` seconds (0:
    /// deprecated), and its fast-path entry.
    async fn privacy_addresses(&mut self, nid: Nid, preferred: u32) {
        let a = ilnp_addr(self.cfg.id_prefix, nid);
        // valid forever: the shell removes it (its sessions may outlive any lifetime)
        if let Err(e) = self.nl.set_address_lifetimes(self.tun_index, a, 128, preferred, u32::MAX).await {
            tracing::warn!("privacy: {e:#}");
        }
        if let Some(dp) = self.dp.as_mut() {
            if let Err(e) = dp.set_temp_nid(nid, true) {
                tracing::warn!("privacy: {e:#}");
            }
        }
    }

    async fn privacy_rotate(
        &mut self,
        now: Instant,
        reason: &str,
        pc: &crate::config::privacy::PrivacyConfig,
        locs: &BTreeSet<Locator>,
    ) {
        if self.privacy.temps.len() >= pc.max_temporary {
            self.bump(ShellCounter::TempNidExhausted);
            if !std::mem::replace(&mut self.privacy.failing, true) {
                tracing::error!(
                    "privacy: {} temporary NIDs in use (max_temporary): no new one until sessions end; \
                     new connections keep the current one",
                    pc.max_temporary
                );
            }
            return;
        }
        let mut nid = None;
        for _ in 0..DRAWS {
            let mut b = [0u8; 8];
            let drawn = match self.cfg.rng_seed {
                Some(seed) => {
                    use rand::SeedableRng;
                    let g = self.privacy.seeded.get_or_insert_with(|| {
                        rand::rngs::StdRng::seed_from_u64(seed ^ 0x7465_6d70_6e69_6473)
                        // "tempnids"
                    });
                    g.try_fill_bytes(&mut b)
                }
                None => rand::rngs::OsRng.try_fill_bytes(&mut b),
            };
            if let Err(e) = drawn {
                self.bump(ShellCounter::TempNidNoEntropy);
                if !std::mem::replace(&mut self.privacy.failing, true) {
                    tracing::error!("privacy: no randomness for a temporary NID (getrandom: {e}); none drawn");
                }
                return;
            }
            let n = temp_nid(b);
            match self.core.add_temporary_nid(n) {
                Ok(()) => {
                    nid = Some(n);
                    break;
                }
                Err(e) => tracing::debug!("privacy: a drawn NID refused ({e}): drawing another"),
            }
        }
        let Some(nid) = nid else {
            self.bump(ShellCounter::TempNidCollisions);
            if !std::mem::replace(&mut self.privacy.failing, true) {
                tracing::error!("privacy: {DRAWS} temporary NIDs drawn, every one refused; none taken");
            }
            return;
        };
        self.privacy.failing = false;
        self.bump(ShellCounter::TempNidDrawn);
        let preferred = (pc.period.as_secs() + 5).min(u64::from(u32::MAX - 1)) as u32;
        self.privacy_addresses(nid, preferred).await;
        // the one it replaces: deprecated, its sessions go on
        if let Some(old) = self.privacy.temps.iter_mut().find(|t| t.deprecated_at.is_none()) {
            old.deprecated_at = Some(now);
            let o = old.nid;
            self.core.deprecate_temporary_nid(o);
            let a = ilnp_addr(self.cfg.id_prefix, o);
            if let Err(e) = self.nl.set_address_lifetimes(self.tun_index, a, 128, 0, u32::MAX).await {
                tracing::warn!("privacy: {e:#}");
            }
            tracing::info!("privacy: temporary NID {o} deprecated ({} sessions go on)", self.core.sessions_on(o));
        }
        self.privacy.temps.push(Temp { nid, born: now, deprecated_at: None, networks: locs.clone() });
        tracing::info!("privacy: temporary NID {nid} preferred for new sessions ({reason})");
        self.state_dirty.get_or_insert(now);
    }

    /// The temporary NIDs for `status` (never logged: a log line would join them up).
    pub(super) fn privacy_status(&self) -> Vec<ilnp_control::TempNidInfo> {
        let now = Instant::now();
        let p = &self.privacy.temps;
        p.iter()
            .map(|t| ilnp_control::TempNidInfo {
                nid: t.nid,
                preferred: t.deprecated_at.is_none(),
                sessions: self.core.sessions_on(t.nid) as u64,
                age_s: now.saturating_duration_since(t.born).as_secs(),
            })
            .collect()
    }

    /// `nid` is no longer ours: its addresses, fast-path entry and (none left by
    /// now) sessions go; a packet to it is one to an unknown NID.
    async fn privacy_remove(&mut self, nid: Nid) {
        let mut out = Vec::new();
        let n = self.core.remove_temporary_nid(nid, &mut out).unwrap_or(0);
        self.run_actions(out);
        self.privacy.temps.retain(|t| t.nid != nid);
        let _ = self.nl.del_address(self.tun_index, ilnp_addr(self.cfg.id_prefix, nid), 128).await;
        let mine: Vec<(u32, std::net::Ipv6Addr)> =
            self.added.iter().copied().filter(|(_, a)| ilnp_wire::split_addr(*a).1 == nid).collect();
        for (idx, a) in mine {
            if self.nl.del_address(idx, a, 64).await.is_ok() {
                self.added.remove(&(idx, a));
            }
        }
        if let Some(dp) = self.dp.as_mut() {
            if let Err(e) = dp.set_temp_nid(nid, false) {
                tracing::warn!("privacy: {e:#}");
            }
        }
        tracing::info!("privacy: temporary NID {nid} removed ({n} sessions ended with it)");
        self.state_dirty.get_or_insert_with(Instant::now);
    }

    /// `L64:NID` of each temporary NID on each usable uplink locator (Neighbour
    /// Discovery answers for it: deprecated, no prefix route, as the stable one's,
    /// `Netlink::add_uplink_address`); those of locators that went away removed.
    async fn privacy_uplink_addresses(&mut self) {
        let locs = self.privacy_locators();
        let nids: Vec<Nid> = self.privacy.temps.iter().map(|t| t.nid).collect();
        let want: BTreeSet<(u32, std::net::Ipv6Addr)> =
            nids.iter().flat_map(|&n| locs.iter().map(move |&(i, l)| (i, ilnp_addr(l, n)))).collect();
        for &(idx, a) in &want {
            if !self.added.contains(&(idx, a)) {
                match self.nl.add_uplink_address_dad(idx, a).await {
                    Ok(true) => {
                        self.added.insert((idx, a));
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!("privacy: {e:#}"),
                }
            }
        }
        let stale: Vec<(u32, std::net::Ipv6Addr)> = self
            .added
            .iter()
            .copied()
            .filter(|x| nids.contains(&ilnp_wire::split_addr(x.1).1) && !want.contains(x))
            .collect();
        for (idx, a) in stale {
            if self.nl.del_address(idx, a, 64).await.is_ok() {
                self.added.remove(&(idx, a));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_nid_is_local_scope_unicast() {
        for b in [[0xffu8; 8], [0x03, 0, 0, 0, 0, 0, 0, 1], [0x5a, 1, 2, 3, 4, 5, 6, 7]] {
            let n = temp_nid(b);
            assert_eq!(n.0 >> 56 & 0x03, 0, "u and g bits clear in {n}");
            assert_eq!(n.0 & 0x00ff_ffff_ffff_ffff, u64::from_be_bytes(b) & 0x00ff_ffff_ffff_ffff);
        }
    }
}
