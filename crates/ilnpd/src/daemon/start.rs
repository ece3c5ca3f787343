//! Start-up (`Daemon::start`): the checks that change nothing, then the steps of
//! `host_changes::Step` in order, each change pushed on `host_changes`'s list with
//! its undo; a failure pops the list (`Undo::Rollback`). Also what start-up builds
//! from the configuration: the protocol core (`build_core`) and this node's NID
//! (`local_nid`).

use super::host_changes::{Change, FaultPlan, HostChanges, InstanceLock, Step, Undo};
use super::locators::{is_identifier_overlap, solicited_node_member, Uplink};
use super::{v4, Daemon};
use crate::config::{self, Config};
use crate::control::{self, Pending};
use crate::netlink::Netlink;
use crate::nid::{NidChoice, NidSource};
use crate::tun::Tun;
use anyhow::{bail, Context, Result};
use ilnp_core::Core;
use ilnp_wire::{ilnp_addr, Nid};
use rand::SeedableRng;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv6Addr;
use std::path::Path;
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

/// ilnp0's sysctls, MTU, link state, identifier address and route (Step::TunConfig).
/// Returns its ifindex.
async fn configure_tun(nl: &Netlink, cfg: &Config, min_mtu: u32, my_id: Ipv6Addr) -> Result<u32> {
    let tl = nl.link(&cfg.tun_name).await?;
    // with [ipv4], room for the v4 path's outer IPv4 and UDP headers too
    let v4 = if cfg.ipv4.is_some() { ilnp_wire::v4path::OVERHEAD } else { 0 };
    let mtu = min_mtu.saturating_sub((ilnp_wire::destopts::header_len(cfg.core.nonce_len) + v4) as u32).max(1280);
    // forwarding on ilnp0 only: bpf_fib_lookup() refuses to route for an
    // interface without it; packets are still never forwarded between
    // interfaces (that needs net.ipv6.conf.all.forwarding).
    for (k, v) in
        [("accept_dad", "0"), ("accept_ra", "0"), ("autoconf", "0"), ("addr_gen_mode", "1"), ("forwarding", "1")]
    {
        let p = format!("/proc/sys/net/ipv6/conf/{}/{k}", cfg.tun_name);
        // forwarding: only if ilnp0 did not get it from `default` (writing it purges, above)
        if k == "forwarding" && std::fs::read_to_string(&p).is_ok_and(|x| x.trim() == v) {
            continue;
        }
        let _ = std::fs::write(&p, v);
    }
    nl.set_link_up(tl.index, mtu).await?;
    nl.add_address(tl.index, my_id, 128).await?;
    nl.add_route(cfg.id_prefix.prefix(), 64, tl.index).await?;
    Ok(tl.index)
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
        let mut macs = Vec::new();
        let mut min_mtu = u32::MAX;
        for name in &cfg.uplinks {
            let l = nl.link(name).await.with_context(|| format!("uplinks: {name:?}"))?;
            min_mtu = min_mtu.min(l.mtu);
            macs.push(l.mac);
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
            let (local_nid, nid_source) = local_nid(&cfg, &macs, restored.as_ref().map(|s| Nid(s.core.local_nid)))?;
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
            // ilnp0 needs forwarding=1 (below), but writing 1 to any interface's
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
            let tun_index = configure_tun(&nl, &cfg, min_mtu, my_id).await?;
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
        let Early {
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
        } = match early {
            Ok(v) => v,
            Err(e) => {
                changes.rollback_early(&mut tun_slot);
                return Err(e);
            }
        };
        let tun = tun_slot.take().expect("ilnp0 is made before the early phase ends");
        let (events, _) = broadcast::channel(1024);
        let (dns, dns_learn) = match dns {
            Some((p, rx)) => (Some(p), Some(rx)),
            None => (None, None),
        };
        let mut d = Daemon {
            cfg,
            nl,
            core,
            tun,
            tun_index,
            raw,
            _nd_group: nd_group,
            dp: None,
            route_watch: None,
            route_xmit: false,
            uplinks,
            local_nid,
            nid_source,
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
            histograms: scrapes.as_ref().map(|_| crate::metrics::Histograms::default()),
            scrapes,
            v4: v4_sock,
            privacy: Default::default(),
        };
        // what the previous run changed is put back on a clean stop, with the values
        // from before that run: adopted entries
        let mut found_added = BTreeSet::new();
        if let Some(s) = &restored {
            d.added = s.added.iter().copied().collect();
            found_added = d.added.clone();
            for (path, old) in &s.saved_sysctls {
                d.changes.push(Change::Sysctl { path: path.clone(), old: old.clone() }, true);
            }
            d.changes.push_under(Change::Created(s.created.clone()));
        }
        // the state file is written ahead from Step::UplinkSysctls on (fresh starts)
        if let Some(p) = &d.cfg.state_file {
            d.changes.push(Change::StateFile(p.clone()), state_existed);
        }
        let restored_core = restored.map(|s| s.core);
        let fresh = restored_core.is_none();
        match d.setup(fresh, restored_core, found_added).await {
            Ok(rx) => {
                tracing::info!(
                    "ilnpd up: NID {} identifier address {} on {} ({:?} data path), uplinks {:?}",
                    d.local_nid,
                    my_id,
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

/// This node's NID and where it came from (`nid`: crate::nid), logged once. `macs`:
/// the uplinks' MACs in configuration order; `previous`: the local NID of the previous
/// run's state file.
fn local_nid(cfg: &Config, macs: &[Option<[u8; 6]>], previous: Option<Nid>) -> Result<(Nid, NidSource)> {
    let eui64 = || macs.first().copied().flatten().map(Nid::from_mac);
    match cfg.nid {
        NidChoice::Configured(n) => {
            tracing::info!("NID {n}: configured");
            Ok((n, NidSource::Configured))
        }
        NidChoice::Eui64 => match eui64() {
            Some(n) => {
                tracing::info!(
                    "NID {n}: the modified EUI-64 of {}'s MAC (nid = \"eui64\"): it identifies this host's hardware \
                     on every network",
                    cfg.uplinks[0]
                );
                Ok((n, NidSource::Eui64))
            }
            None => bail!(
                "nid = \"eui64\" needs a MAC address on the first uplink {:?}; configure `nid` or use \"auto\"",
                cfg.uplinks[0]
            ),
        },
        NidChoice::Auto => {
            let dir = &cfg.state_dir;
            let r = crate::nid::resolve_auto(dir, previous).context("nid = \"auto\"")?;
            let record = dir.join(crate::nid::NID_FILE);
            match (r.source, r.new) {
                (NidSource::KeptFromUpgrade, true) => {
                    let mac = if Some(r.nid) == eui64() {
                        format!(" (the modified EUI-64 of {}'s MAC, the \"auto\" of earlier versions)", cfg.uplinks[0])
                    } else {
                        String::new()
                    };
                    tracing::info!(
                        "NID {}{mac}: kept from the previous run's state file {} and recorded in {}, so sessions \
                         and DNS records stay valid. For a stable-privacy NID instead (not derived from the \
                         hardware; the host's NID and DNS records change): stop ilnpd, delete {}, start it",
                        r.nid,
                        cfg.state_file.as_deref().unwrap_or(Path::new("")).display(),
                        record.display(),
                        record.display()
                    );
                }
                (NidSource::StablePrivacy, true) => tracing::info!(
                    "NID {}: stable-privacy, derived from the host secret {} and recorded in {}",
                    r.nid,
                    dir.join(crate::nid::SECRET_FILE).display(),
                    record.display()
                ),
                (source, _) => tracing::info!("NID {} ({}): recorded in {}", r.nid, source.as_str(), record.display()),
            }
            Ok((r.nid, r.source))
        }
    }
}

/// rand 0.8 re-exports rand_core 0.6, the trait the core takes.
mod rand_core_compat {
    pub use rand::RngCore;
}
