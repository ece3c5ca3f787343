//! The data path at start-up: loaded (or adopted) and attached, the identifier
//! route, the core restored from the state file and the fast path swept to match.

use super::host_changes::Change;
use super::Daemon;
use crate::bpf::{self, Datapath, DatapathConfig};
use crate::config;
use anyhow::Result;
use ilnp_core::{Admission, IlccKey};
use ilnp_wire::Nid;
use std::collections::BTreeSet;
use std::time::Instant;

impl Daemon {
    pub(super) fn attach_datapath(&mut self) -> Result<()> {
        let mode = if self.cfg.datapath == config::Datapath::Ebpf { bpf::Mode::Ebpf } else { bpf::Mode::Userspace };
        let dp = Datapath::load(&DatapathConfig {
            mode,
            ilnp0_ifindex: self.tun_index,
            id_prefix: self.cfg.id_prefix,
            local_nid: self.local_nid,
            ilcc_max_entries: self.cfg.core.ilcc_max_entries as u32,
            admit_socket: self.cfg.core.admission == Admission::Socket,
            pin_dir: self.cfg.pin_dir.clone(),
            v4_port: self.cfg.ipv4.as_ref().map(|v| v.port),
        })?;
        // from here on `dp` is ours to undo: kept in `self` before anything else can fail
        self.changes.push(Change::Datapath, dp.adopted());
        let dp = self.dp.insert(dp);
        for u in &self.uplinks {
            dp.attach_uplink(u.index)?;
        }
        if mode == bpf::Mode::Ebpf {
            let watch = dp.route_gen().and_then(|mut g| bpf::RouteWatch::spawn(move || g.bump()));
            match watch {
                Ok(w) => self.route_watch = Some(w),
                Err(e) => tracing::warn!("next-hop cache off (every packet looked up): {e:#}"),
            }
        }
        if self.cfg.tcp_hints {
            match self.dp.as_mut().expect("just set").attach_tcp_hints() {
                Ok(()) => {
                    tracing::info!("TCP hints on (RFC 6069): timeouts of connections to identifier addresses recorded")
                }
                Err(e) => tracing::warn!("TCP hints off (a hard handoff's TCP waits for its own timer): {e:#}"),
            }
        }
        Ok(())
    }

    /// The identifier prefix's route on ilnp0: through the lwt xmit program with
    /// the eBPF data path and `route_xmit` (small packets translated at the route,
    /// one transmit), else plain (and so also when an adopted ilnp0's route had
    /// the program and this configuration does not want it). A program that does
    /// not load, or an uplink whose checksum offload it could mislead
    /// (`bpf::parses_ipv6_for_csum`), leaves the route plain: ilnp0's tc program
    /// then translates everything, as before.
    pub(super) async fn set_id_route(&mut self) -> Result<()> {
        let mut want = self.cfg.datapath == config::Datapath::Ebpf && self.cfg.route_xmit;
        if want {
            let unsafe_csum: Vec<&str> = self
                .uplinks
                .iter()
                .filter(|u| bpf::active_features(&u.name).is_ok_and(bpf::parses_ipv6_for_csum))
                .map(|u| u.name.as_str())
                .collect();
            if !unsafe_csum.is_empty() {
                tracing::info!(
                    "translation at the route off: {} offload IPv6 checksums by parsing headers                      (tx-checksum-ipv6 without tx-checksum-ip-generic); every packet through {}",
                    unsafe_csum.join(", "),
                    self.cfg.tun_name
                );
                want = false;
            }
        }
        let prog = match self.dp.as_mut() {
            Some(dp) if want => match dp.load_route_xmit() {
                Ok(fd) => Some((fd, bpf::PROG_ROUTE)),
                Err(e) => {
                    tracing::warn!("translation at the route off (every packet through {}): {e:#}", self.cfg.tun_name);
                    None
                }
            },
            _ => None,
        };
        let on = prog.is_some();
        self.nl.set_id_route(self.cfg.id_prefix.prefix(), 64, self.tun_index, prog).await?;
        self.route_xmit = on;
        if on {
            tracing::info!(
                "translation at the route on: {}/64 dev {} encap bpf xmit",
                self.cfg.id_prefix.prefix(),
                self.cfg.tun_name
            );
        }
        Ok(())
    }

    /// The core's state from the state file, and a fast path that matches it: an
    /// ILCC entry the pinned maps hold but the core does not know (state file lost
    /// or corrupt) is removed, so every fast-path entry has its owner.
    pub(super) fn restore_core(&mut self, snap: Option<ilnp_core::CoreSnapshot>) {
        let now = Instant::now();
        if let Some(snap) = snap {
            let path = self.cfg.state_file.clone().unwrap_or_default();
            match self.core.restore(now, &snap) {
                Ok(actions) => {
                    tracing::info!("restored {} ILCC entries from {}", snap.entries.len(), path.display());
                    self.run_actions(actions);
                }
                Err(e) => tracing::warn!("state file {}: {e}: ignored", path.display()),
            }
        }
        self.state_dirty = Some(now);
    }

    /// After the core is restored and has our locators (so it has rebuilt its
    /// balancing tables): what an earlier run left pinned that the core does not
    /// hold goes, so every fast-path entry has an owner.
    /// * An ILCC entry without state in the core (state file lost or corrupt).
    /// * A balancing table the core has none for: the state file has no policies,
    ///   so one set with `ilnpctl policy`, or one the configuration no longer
    ///   gives, ended with the run; kept, the fast path would go on balancing a
    ///   correspondent that `ilnpctl policy` shows on failover.
    /// * A punt of a plain peer the core has no fallback or probe for (a probe's,
    ///   or fallback configured off): its plain packets go to the host as without.
    pub(super) fn sweep_fast_path(&mut self) {
        let known: BTreeSet<IlccKey> = self.core.ilcc().iter().map(|e| e.key()).collect();
        let balanced: BTreeSet<IlccKey> = self.core.balanced_entries().collect();
        let plain: BTreeSet<Nid> = self.core.fallback().punted().collect();
        let Some(dp) = self.dp.as_mut() else { return };
        fn stale<K: Ord>(what: &str, listed: Result<Vec<K>>, keep: &BTreeSet<K>) -> Vec<K> {
            match listed {
                Ok(v) => v.into_iter().filter(|n| !keep.contains(n)).collect(),
                Err(e) => {
                    tracing::warn!("listing the fast path's {what}: {e:#}");
                    Vec::new()
                }
            }
        }
        let listed = dp.peer_counters().map(|v| v.into_iter().map(|(n, _)| n).collect());
        for key in stale("ILCC entries", listed, &known) {
            tracing::warn!("fast-path ILCC entry {key} has no state in the core: removed");
            if let Err(e) = dp.remove_peer(key) {
                tracing::warn!("{e:#}");
            }
        }
        for key in stale("balancing tables", dp.balanced_entries(), &balanced) {
            tracing::info!("fast-path balancing table of {key} has none in the core (failover, or one pair): removed");
            if let Err(e) = dp.set_balance(&ilnp_core::BalanceChange::Remove(key)) {
                tracing::warn!("{e:#}");
            }
        }
        for nid in stale("plain peers", dp.plain_peers(), &plain) {
            tracing::info!("fast-path punt of plain peer {nid}: no fallback in the core: removed");
            if let Err(e) = dp.remove_plain_peer(nid) {
                tracing::warn!("{e:#}");
            }
        }
    }
}
