//! Start-up (`Daemon::start`): the checks that change nothing, then the steps of
//! `host_changes::Step` in order, each change pushed on `host_changes`'s list with
//! its undo; a failure pops the list (`Undo::Rollback`). Also what start-up builds
//! from the configuration (the protocol core: `build_core`; this node's NID:
//! `NidChoice::resolve` in `nid.rs`; ilnp0: `Tun::create`, `Tun::configure`) and the
//! data path it attaches (`attach_datapath`, the identifier route, the core restored
//! from the state file and the fast path swept to match).

use super::host_changes::{Change, FaultPlan, HostChanges, InstanceLock, Step, Undo};
use super::locators::{is_identifier_overlap, solicited_node_member, Uplink};
use super::{v4, Daemon};
use crate::bpf::{self, Datapath, DatapathConfig};
use crate::config::{self, Config};
use crate::control::{self, Pending};
use crate::netlink::Netlink;
use crate::nid::NidSource;
use crate::tun::Tun;
use anyhow::{bail, Context, Result};
use ilnp_core::{Admission, Core, IlccKey};
use ilnp_wire::{ilnp_addr, Nid};
use rand::SeedableRng;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv6Addr;
use std::time::Instant;
use tokio::sync::{broadcast, mpsc};

/// What start-up made and found up to Step::TunConfig, before the daemon exists.
struct Early {
    /// the state file was there (an earlier run's)
    state_existed: bool,
    restored: Option<crate::state::StateFile>,
    local_nid: Nid,
    nid_source: NidSource,
    dns: Option<(std::sync::Arc<crate::dns::Proxy>, mpsc::Receiver<crate::dns::Learn>)>,
    scrapes: Option<mpsc::Receiver<crate::metrics::Scrape>>,
    v4_sock: Option<tokio::net::UdpSocket>,
    /// the identifier address
    my_id: Ipv6Addr,
    tun_index: u32,
    core: Core,
    nd_group: Socket,
}

impl Daemon {
    /// Start-up: first the checks that change nothing (uplinks, identifier prefix,
    /// NID, raw socket), then the steps of `host_changes::Step`, in order, each change
    /// recorded with how to undo it. A failure at any step (real, or injected with
    /// `ILNPD_FAIL_AT`) undoes the steps before it (`Undo::Rollback`), so a failed start
    /// leaves the host as it found it.
    pub async fn start(cfg: Config) -> Result<(Daemon, mpsc::Receiver<Pending>)> {
        let fault = FaultPlan::from_env()?;
        let nl = Netlink::connect()?;
        let mut uplinks = Vec::new();
        let mut first_mac = None;
        let mut min_mtu = u32::MAX;
        for name in &cfg.uplinks {
            let l = nl.link(name).await.with_context(|| format!("uplinks: {name:?}"))?;
            min_mtu = min_mtu.min(l.mtu);
            if uplinks.is_empty() {
                first_mac = l.mac;
            }
            uplinks.push(Uplink {
                name: name.clone(),
                index: l.index,
                configured_pref: cfg.locator_pref.get(name).copied(),
                up: l.up,
                router: None,
                gateway: None,
                router4: false,
            });
        }
        // an existing ilnp0 is one a crashed (or handed-over) ilnpd left, persistent,
        // adopted below (TUNSETIFF attaches to it), or one in use (TUNSETIFF: EBUSY).
        // Asked of netlink, not /sys: in the host's mount namespace with another
        // network namespace (nsenter --net, a unit with NetworkNamespacePath=) /sys
        // shows the host's devices
        let old_tun = nl.link(&cfg.tun_name).await.ok().map(|l| l.index);
        let adopting = old_tun.is_some();
        if adopting && cfg.pin_dir.is_none() && cfg.state_file.is_none() {
            bail!("tun_name: interface {} already exists (another ilnpd?)", cfg.tun_name);
        }
        // the identifier address on an ilnp0 being adopted is ours, not an overlap
        for a in nl.addresses().await? {
            if a.global
                && a.ifindex != 0
                && Some(a.ifindex) != old_tun
                && is_identifier_overlap(cfg.id_prefix, a.addr, a.prefix_len)
            {
                bail!(
                    "identifier_prefix {}/64 overlaps address {}/{} on ifindex {}: choose another identifier prefix",
                    cfg.id_prefix.prefix(),
                    a.addr,
                    a.prefix_len,
                    a.ifindex
                );
            }
        }
        let raw = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::from(libc::IPPROTO_RAW)))
            .context("opening a raw IPv6 socket (needs CAP_NET_RAW)")?;

        // ---- Step::Lock: from here on every host change goes on one list with its
        // undo (`host_changes`); a failure pops it. ilnp0 is held here until the
        // daemon exists
        let mut changes = HostChanges::new(fault);
        let mut tun_slot: Option<Tun> = None;
        let early: Result<_> = async {
            let lock = InstanceLock::acquire(&cfg.control_socket)?;
            let lock_adopted = lock.adopted();
            changes.push(Change::Lock(lock), lock_adopted);
            changes.done(Step::Lock)?;
            // the previous run's state file (a crash or a handover), ours now that we
            // hold the lock: its sessions, and the NID "auto" keeps on an upgrade
            let state_existed = cfg.state_file.as_deref().is_some_and(|p| p.exists());
            let restored = cfg.state_file.as_deref().and_then(crate::state::load);
            let (local_nid, nid_source) = cfg.nid.resolve(
                &cfg.uplinks[0],
                first_mac,
                &cfg.state_dir,
                cfg.state_file.as_deref(),
                restored.as_ref().map(|s| Nid(s.core.local_nid)),
            )?;
            // the peer files' rules that need the NID ("auto" is known only now)
            for p in &cfg.peers {
                p.check(local_nid, cfg.id_prefix).map_err(|e| anyhow::anyhow!("peer {}: {e}", p.name))?;
            }
            // ---- Step::DnsListen: the proxy's ports, before anything changes (a busy
            // port 53); these sockets close with the function on a failure
            let dns = cfg.dns.as_ref().map(|dc| crate::dns::start(dc, cfg.id_prefix)).transpose()?;
            changes.done(Step::DnsListen)?;
            let scrapes = cfg.metrics.as_ref().map(crate::metrics::start).transpose()?;
            changes.done(Step::MetricsListen)?;
            // ---- Step::V4Listen: the v4 path's port, likewise
            let v4_sock = cfg.ipv4.as_ref().map(|c| v4::bind(c.port)).transpose()?;
            changes.done(Step::V4Listen)?;
            // ---- Step::Tun
            let ebpf = cfg.datapath == config::Datapath::Ebpf;
            // ilnp0 needs forwarding=1 (`Tun::configure`), but writing 1 to any interface's
            // `forwarding` makes the kernel purge every RA-learned default route of the
            // namespace (rt6_purge_dflt_routers, for interfaces without accept_ra=2):
            // plain IPv6 and our uplinks' routers would be gone until each router's next
            // RA (seconds here, minutes on real networks). A device takes its initial
            // settings from `default`, whose `forwarding` purges nothing: set it for the
            // moment ilnp0 is created, then put the old value back.
            let dflt_fwd = "/proc/sys/net/ipv6/conf/default/forwarding";
            let old_dflt = if adopting { None } else { std::fs::read_to_string(dflt_fwd).ok() };
            if old_dflt.as_deref().is_some_and(|v| v.trim() != "1") {
                let _ = std::fs::write(dflt_fwd, "1");
            }
            let tun = Tun::create(&cfg.tun_name, ebpf);
            if let Some(v) = old_dflt.as_deref().filter(|v| v.trim() != "1") {
                let _ = std::fs::write(dflt_fwd, v.trim());
            }
            let tun = tun_slot.insert(tun?);
            changes.push(Change::Tun, adopting);
            if adopting {
                tracing::warn!("{} left by an ilnpd that did not stop cleanly: adopting it", cfg.tun_name);
            }
            // with pins the sessions outlive a crash: so must ilnp0 (sockets bound to
            // identifier addresses, the egress program on it)
            if cfg.pin_dir.is_some() {
                if let Err(e) = tun.set_persist(true) {
                    tracing::warn!("{e:#}: a crash will remove {} and break sessions", cfg.tun_name);
                }
            }
            changes.done(Step::Tun)?;
            // ---- Step::TunConfig (undone with ilnp0)
            let my_id = ilnp_addr(cfg.id_prefix, local_nid);
            // with [ipv4], room for the v4 path's outer IPv4 and UDP headers too
            let v4 = if cfg.ipv4.is_some() { ilnp_wire::v4path::OVERHEAD } else { 0 };
            let mtu =
                min_mtu.saturating_sub((ilnp_wire::destopts::header_len(cfg.core.nonce_len) + v4) as u32).max(1280);
            let tun_index = tun.configure(&nl, mtu, my_id, cfg.id_prefix.prefix()).await?;
            changes.done(Step::TunConfig)?;
            let core = build_core(&cfg, local_nid, &uplinks)?;
            let nd_group = solicited_node_member(local_nid, &uplinks)?;
            Ok(Early {
                state_existed,
                restored,
                local_nid,
                nid_source,
                dns,
                scrapes,
                v4_sock,
                my_id,
                tun_index,
                core,
                nd_group,
            })
        }
        .await;
        let early = match early {
            Ok(v) => v,
            Err(e) => {
                changes.rollback_early(&mut tun_slot);
                return Err(e);
            }
        };
        let tun = tun_slot.take().expect("ilnp0 is made before the early phase ends");
        let (events, _) = broadcast::channel(1024);
        let (dns, dns_learn) = match early.dns {
            Some((p, rx)) => (Some(p), Some(rx)),
            None => (None, None),
        };
        let mut d = Daemon {
            cfg,
            nl,
            core: early.core,
            tun,
            tun_index: early.tun_index,
            raw,
            _nd_group: early.nd_group,
            dp: None,
            route_watch: None,
            route_xmit: false,
            uplinks,
            local_nid: early.local_nid,
            nid_source: early.nid_source,
            added: BTreeSet::new(),
            events,
            started: Instant::now(),
            drop_log: HashMap::new(),
            counters: BTreeMap::new(),
            state_dirty: None,
            state_written: None,
            dns,
            dns_learn,
            dns_update: None,
            slow_hist: Default::default(),
            changes,
            histograms: early.scrapes.as_ref().map(|_| crate::metrics::Histograms::default()),
            scrapes: early.scrapes,
            v4: early.v4_sock,
            privacy: Default::default(),
        };
        // what the previous run changed is put back on a clean stop, with the values
        // from before that run: adopted entries
        let mut found_added = BTreeSet::new();
        if let Some(s) = &early.restored {
            d.added = s.added.iter().copied().collect();
            found_added = d.added.clone();
            for (path, old) in &s.saved_sysctls {
                d.changes.push(Change::Sysctl { path: path.clone(), old: old.clone() }, true);
            }
            d.changes.push_under(Change::Created(s.created.clone()));
        }
        // the state file is written ahead from Step::UplinkSysctls on (fresh starts)
        if let Some(p) = &d.cfg.state_file {
            d.changes.push(Change::StateFile(p.clone()), early.state_existed);
        }
        let restored_core = early.restored.map(|s| s.core);
        let fresh = restored_core.is_none();
        match d.setup(fresh, restored_core, found_added).await {
            Ok(rx) => {
                tracing::info!(
                    "ilnpd up: NID {} identifier address {} on {} ({:?} data path), uplinks {:?}",
                    d.local_nid,
                    early.my_id,
                    d.tun.name,
                    d.cfg.datapath,
                    d.cfg.uplinks
                );
                Ok((d, rx))
            }
            Err(e) => {
                tracing::info!("start-up failed: undoing what it changed");
                d.undo_changes(Undo::Rollback).await;
                Err(e)
            }
        }
    }

    /// The steps from Step::UplinkSysctls on, each change pushed on `changes` as it
    /// is made (`found_added`: the earlier run's addresses).
    async fn setup(
        &mut self,
        fresh: bool,
        restored: Option<ilnp_core::CoreSnapshot>,
        found_added: BTreeSet<(u32, Ipv6Addr)>,
    ) -> Result<mpsc::Receiver<Pending>> {
        // write-ahead only when there is no earlier run's state to lose (the core
        // is restored after the data path)
        self.uplink_sysctls(fresh)?;
        self.changes.done(Step::UplinkSysctls)?;
        self.attach_datapath()?;
        self.set_id_route().await?;
        self.changes.done(Step::Datapath)?;
        self.restore_core(restored);
        self.changes.push(Change::Addresses { found: found_added }, false);
        self.sync_locators().await?;
        self.sweep_fast_path();
        self.changes.done(Step::Locators)?;
        self.write_state_now()?;
        self.changes.done(Step::StateFile)?;
        let (tx, rx) = mpsc::channel(64);
        control::start(&self.cfg.control_socket, tx, self.events.clone())?;
        self.changes.push(Change::ControlSocket(self.cfg.control_socket.clone()), false);
        self.changes.done(Step::ControlSocket)?;
        if let Some(uc) = self.cfg.dns_update.clone() {
            let u = crate::dns::update::start(uc)?;
            self.dns_update = Some(u);
            self.changes.push(Change::DnsUpdate, false);
            let now = self.core.local().all().to_vec();
            self.dns_locators_changed(&now);
        }
        self.changes.done(Step::DnsUpdate)?;
        Ok(rx)
    }
}

// The data path at start-up (Step::Datapath, Step::Locators): loaded (or adopted)
// and attached, the identifier route, the core restored from the state file and the
// fast path swept to match.
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

/// The protocol core with the configuration's settings, peers and policies.
fn build_core(cfg: &Config, local_nid: Nid, uplinks: &[Uplink]) -> Result<Core> {
    // the file's core settings as config.rs filled them; the NID is known only now
    let mut cc = cfg.core.clone();
    cc.local_nid = local_nid;
    let rng: Box<dyn rand_core_compat::RngCore + Send> = match cfg.rng_seed {
        Some(s) => Box::new(rand::rngs::StdRng::seed_from_u64(s)),
        None => Box::new(rand::rngs::StdRng::from_entropy()),
    };
    let mut core = Core::new(cc, rng);
    for p in &cfg.peers {
        core.add_peer(p.clone());
    }
    // load balancing (ilnp-core `balance`); no entries yet, so no actions
    if let Some(seed) = cfg.flow_hash_seed {
        core.set_flow_seed(seed);
    }
    core.set_policy(None, cfg.balance_policy).map_err(|e| anyhow::anyhow!("balance_policy: {e}"))?;
    for (nid, p) in &cfg.peer_policy {
        core.set_policy(Some(*nid), *p).map_err(|e| anyhow::anyhow!("peer_policy: {e}"))?;
    }
    for u in uplinks {
        if let Some(&w) = cfg.locator_weight.get(&u.name) {
            core.set_uplink_weight(u.index, w).map_err(|e| anyhow::anyhow!("locator_weight.{}: {e}", u.name))?;
        }
    }
    Ok(core)
}

/// rand 0.8 re-exports rand_core 0.6, the trait the core takes.
mod rand_core_compat {
    pub use rand::RngCore;
}
