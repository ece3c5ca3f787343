//! The daemon shell: wires the sans-IO core to the TUN, the raw socket, the BPF
//! maps, netlink and the control socket. No protocol decisions here.

use crate::bpf::{self, Datapath, DatapathConfig};
use crate::config::{self, Config};
use crate::control::{self, Pending};
use crate::netlink::{self, Netlink};
use crate::nid::{NidChoice, NidSource};
use crate::tun::Tun;
use anyhow::{bail, Context, Result};
use futures::StreamExt;
use ilnp_core::{Admission, Core, CoreConfig, LuTimers};
use ilnp_wire::{ilnp_addr, Nid};
use rand::SeedableRng;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv6Addr;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{broadcast, mpsc};

mod counters;
mod host_changes;
mod locators;
mod metrics;
mod monitor;
mod privacy;
mod requests;
mod slowpath;
pub mod startup;
mod tcp_hints;
mod v4;

use host_changes::{Change, HostChanges, Undo};
use startup::{FaultPlan, InstanceLock, Step};

use counters::ShellCounter;
use locators::{is_identifier_overlap, solicited_node_member, Uplink};

/// SIGTERM and SIGINT streams (both mean: clean up and exit 0); SIGUSR2: hand over
/// to the next ilnpd (`Daemon::handover`).
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            usr2: signal(SignalKind::user_defined2()).context("installing the SIGUSR2 handler")?,
        })
    }
}

pub struct Daemon {
    cfg: Config,
    nl: Netlink,
    core: Core,
    tun: Tun,
    tun_index: u32,
    raw: Socket,
    /// member of our solicited-node group on every uplink (see `solicited_node_member`)
    _nd_group: Socket,
    dp: Option<Datapath>,
    /// keeps the fast path's next-hop cache valid (ilnp_route_gen); without it the
    /// cache is off and every packet is looked up
    route_watch: Option<bpf::RouteWatch>,
    /// the identifier route carries the lwt xmit program (`set_id_route`)
    route_xmit: bool,
    uplinks: Vec<Uplink>,
    local_nid: Nid,
    /// how `local_nid` was chosen (`status`: nid_source)
    nid_source: NidSource,
    /// L64:NID addresses we added on uplinks (removed on exit: `Change::Addresses`)
    added: BTreeSet<(u32, Ipv6Addr)>,
    events: broadcast::Sender<String>,
    started: Instant,
    /// rate limit for drop logs: reason -> (window start, count in the window)
    drop_log: HashMap<&'static str, (Instant, u32)>,
    counters: BTreeMap<ShellCounter, u64>,
    /// the state file is out of date since (written debounced, `state_due`)
    state_dirty: Option<Instant>,
    /// when the last write started and how long it took (`state::next_write`)
    state_written: Option<(Instant, Duration)>,
    /// the resolver proxy, when `[dns]` is configured
    dns: Option<std::sync::Arc<crate::dns::Proxy>>,
    dns_learn: Option<mpsc::Receiver<crate::dns::Learn>>,
    /// the dynamic update of our L64 records, when `[dns.update]` is configured
    dns_update:
        Option<(std::sync::Arc<crate::dns::update::Updater>, tokio::sync::watch::Sender<crate::dns::update::Wanted>)>,
    /// slow-path time per packet (`stats` → `slow_path_ns`)
    slow_hist: slowpath::SlowPathHist,
    /// what this run (and the earlier one it adopted) changed on the host, each
    /// change with its undo (`host_changes`)
    changes: HostChanges,
    /// the metrics endpoint's histograms and scrapes (`[metrics]`)
    histograms: Option<crate::metrics::Histograms>,
    scrapes: Option<mpsc::Receiver<crate::metrics::Scrape>>,
    /// the v4 path's UDP socket (`[ipv4]`)
    v4: Option<tokio::net::UdpSocket>,
    /// `[privacy]`: the temporary NIDs' times and addresses (`daemon/privacy.rs`)
    privacy: privacy::PrivacyState,
}

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

/// How `run` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// SIGTERM/SIGINT: everything removed
    Stopped,
    /// SIGUSR2: the data path, ilnp0, the pins and the state file left for the next
    /// ilnpd (an upgrade), which adopts them as after a crash
    HandedOver,
}

/// Exit status of a handover (EX_TEMPFAIL): not 0, so systemd's `Restart=on-failure`
/// starts the next ilnpd at once.
pub const HANDOVER_EXIT: u8 = 75;

/// ilnp0's sysctls, MTU, link state, identifier address and route (Step::TunConfig).
/// Returns its ifindex.
async fn configure_tun(nl: &Netlink, cfg: &Config, min_mtu: u32, my_id: Ipv6Addr) -> Result<u32> {
    let tl = nl.link(&cfg.tun_name).await?;
    // with [ipv4], room for the v4 path's outer IPv4 and UDP headers too
    let v4 = if cfg.ipv4.is_some() { ilnp_wire::v4path::OVERHEAD } else { 0 };
    let mtu = min_mtu.saturating_sub((ilnp_wire::destopts::header_len(cfg.nonce_len) + v4) as u32).max(1280);
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

/// The protocol core with the configuration's settings, peers and policies.
fn build_core(cfg: &Config, local_nid: Nid, uplinks: &[Uplink]) -> Result<Core> {
    let mut cc = CoreConfig::new(cfg.id_prefix, local_nid);
    cc.nonce_len = cfg.nonce_len;
    cc.ilcc_max_entries = cfg.ilcc_max_entries as usize;
    cc.idle_timeout = cfg.idle_timeout;
    cc.handoff = cfg.handoff;
    cc.soft_quiet_period = cfg.soft_quiet_period;
    cc.fallback = cfg.fallback;
    cc.fallback_probe_after = cfg.fallback_probe_after;
    cc.admission = cfg.admission;
    cc.ilcc_embryonic_max = cfg.ilcc_embryonic_max as usize;
    cc.hello_rate_pps = f64::from(cfg.hello_rate_pps);
    cc.hello_burst = cfg.hello_burst;
    cc.adopt_initiator_nonce = cfg.adopt_initiator_nonce;
    cc.transport_checksum = cfg.transport_checksum;
    cc.peer_checksum = cfg.peer_checksum.iter().map(|(n, r)| (*n, *r)).collect();
    cc.peer_shared_nonce = cfg.peer_shared_nonce.iter().copied().collect();
    cc.peer_linux49 = cfg.peer_linux49.iter().copied().collect();
    if let Some(v4) = &cfg.ipv4 {
        cc.v4_keepalive = v4.keepalive;
    }
    cc.lu = LuTimers {
        initial_rto: cfg.lu_initial_rto,
        max_attempts: cfg.lu_max_attempts,
        mode: cfg.lu_timer,
        ..LuTimers::default()
    };
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

/// Fast-path entries whose counters are read per 1 s tick (`refresh_activity`).
const ACTIVITY_SWEEP_PER_TICK: usize = 20_000;

impl Daemon {
    /// Start-up: first the checks that change nothing (uplinks, identifier prefix,
    /// NID, raw socket), then the host changes of `startup::Step`, in order, each
    /// recorded with how to undo it. A failure at any step (real, or injected with
    /// `ILNPD_FAIL_AT`) undoes the steps before it (`rollback`), so a failed start
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
        let mut changes = HostChanges::default();
        let mut tun_slot: Option<Tun> = None;
        let early: Result<_> = async {
            let lock = InstanceLock::acquire(&cfg.control_socket)?;
            let lock_adopted = lock.adopted();
            changes.push(Change::Lock(lock), lock_adopted);
            fault.after(Step::Lock)?;
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
            fault.after(Step::DnsListen)?;
            let scrapes = cfg.metrics.as_ref().map(crate::metrics::start).transpose()?;
            fault.after(Step::MetricsListen)?;
            // ---- Step::V4Listen: the v4 path's port, likewise
            let v4_sock = cfg.ipv4.as_ref().map(|c| v4::bind(c.port)).transpose()?;
            fault.after(Step::V4Listen)?;
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
            fault.after(Step::Tun)?;
            // ---- Step::TunConfig (undone with ilnp0)
            let my_id = ilnp_addr(cfg.id_prefix, local_nid);
            let tun_index = configure_tun(&nl, &cfg, min_mtu, my_id).await?;
            fault.after(Step::TunConfig)?;
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
        match d.setup(fault, fresh, restored_core, found_added).await {
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
        fault: FaultPlan,
        fresh: bool,
        restored: Option<ilnp_core::CoreSnapshot>,
        found_added: BTreeSet<(u32, Ipv6Addr)>,
    ) -> Result<mpsc::Receiver<Pending>> {
        // write-ahead only when there is no earlier run's state to lose (the core
        // is restored after the data path)
        self.uplink_sysctls(fresh)?;
        fault.after(Step::UplinkSysctls)?;
        self.attach_datapath()?;
        self.set_id_route().await?;
        fault.after(Step::Datapath)?;
        self.restore_core(restored);
        self.changes.push(Change::Addresses { found: found_added }, false);
        self.sync_locators().await?;
        self.sweep_fast_path();
        fault.after(Step::Locators)?;
        self.write_state_now()?;
        fault.after(Step::StateFile)?;
        let (tx, rx) = mpsc::channel(64);
        control::start(&self.cfg.control_socket, tx, self.events.clone())?;
        self.changes.push(Change::ControlSocket(self.cfg.control_socket.clone()), false);
        fault.after(Step::ControlSocket)?;
        if let Some(uc) = self.cfg.dns_update.clone() {
            let u = crate::dns::update::start(uc)?;
            self.dns_update = Some(u);
            self.changes.push(Change::DnsUpdate, false);
            let now = self.core.local_locators().to_vec();
            self.dns_locators_changed(&now);
        }
        fault.after(Step::DnsUpdate)?;
        Ok(rx)
    }

    fn attach_datapath(&mut self) -> Result<()> {
        let mode = if self.cfg.datapath == config::Datapath::Ebpf { bpf::Mode::Ebpf } else { bpf::Mode::Userspace };
        let dp = Datapath::load(&DatapathConfig {
            mode,
            ilnp0_ifindex: self.tun_index,
            id_prefix: self.cfg.id_prefix,
            local_nid: self.local_nid,
            ilcc_max_entries: self.cfg.ilcc_max_entries,
            admit_socket: self.cfg.admission == Admission::Socket,
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
    async fn set_id_route(&mut self) -> Result<()> {
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
    fn restore_core(&mut self, snap: Option<ilnp_core::CoreSnapshot>) {
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
    fn sweep_fast_path(&mut self) {
        let known: BTreeSet<Nid> = self.core.ilcc_entries().map(|e| e.nid).collect();
        let balanced: BTreeSet<Nid> = self.core.balanced_peers().collect();
        let plain: BTreeSet<Nid> = self.core.plain_peers().collect();
        let Some(dp) = self.dp.as_mut() else { return };
        let stale = |what: &str, listed: Result<Vec<Nid>>, keep: &BTreeSet<Nid>| -> Vec<Nid> {
            match listed {
                Ok(v) => v.into_iter().filter(|n| !keep.contains(n)).collect(),
                Err(e) => {
                    tracing::warn!("listing the fast path's {what}: {e:#}");
                    Vec::new()
                }
            }
        };
        let listed = dp.peer_counters().map(|v| v.into_iter().map(|(n, _)| n).collect());
        for nid in stale("ILCC entries", listed, &known) {
            tracing::warn!("fast-path ILCC entry {nid} has no state in the core: removed");
            if let Err(e) = dp.remove_peer(nid) {
                tracing::warn!("{e:#}");
            }
        }
        for nid in stale("balancing tables", dp.balanced_peers(), &balanced) {
            tracing::info!("fast-path balancing table of {nid} has none in the core (failover, or one pair): removed");
            if let Err(e) = dp.set_balance(&ilnp_core::BalanceChange::Remove(nid)) {
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

    /// When the state file is next due to be written (None: up to date, or no file).
    fn state_due(&self) -> Option<Instant> {
        self.cfg.state_file.as_ref()?;
        Some(crate::state::next_write(self.state_dirty?, self.state_written))
    }

    /// The debounced write of the running daemon: a failure is logged (and the
    /// next change tries again).
    fn write_state(&mut self) {
        if let Err(e) = self.write_state_now() {
            tracing::warn!("{e:#}");
        }
    }

    /// Writes the state file now (no file configured: nothing to do).
    fn write_state_now(&mut self) -> Result<()> {
        let Some(path) = self.cfg.state_file.clone() else { return Ok(()) };
        let now = Instant::now();
        let s = crate::state::StateFile {
            format: crate::state::STATE_FORMAT,
            core: self.core.snapshot(now),
            added: self.added.iter().copied().collect(),
            saved_sysctls: self.changes.sysctls(),
            created: self.created(),
        };
        let r = crate::state::save(&path, &s).with_context(|| format!("state_file {}", path.display()));
        self.state_dirty = None;
        self.state_written = Some((now, now.elapsed()));
        r
    }

    /// An LU to `nid` went unacknowledged at every known locator: if the peer has a
    /// name, resolve it again (both ends may have moved, thesis §7.2.2).
    pub(super) fn dns_recover(&mut self, nid: Nid) {
        let (Some(p), Some(name)) = (&self.dns, self.core.dns_name(nid)) else { return };
        p.re_resolve(name.to_string());
    }

    /// Our advertised locator set for the L64 update (sent only when it differs).
    fn dns_locators_changed(&mut self, locs: &[ilnp_core::LocalLocator]) {
        let Some((_, tx)) = &self.dns_update else { return };
        let set: Vec<ilnp_core::PeerLocator> = locs
            .iter()
            .filter(|l| matches!(l.state, ilnp_core::LocatorState::Active | ilnp_core::LocatorState::Valid))
            .map(|l| ilnp_core::PeerLocator { loc: l.loc, pref: l.pref })
            .collect();
        if set.is_empty() {
            return; // no locator: nothing to publish (the old records stay until we have one)
        }
        let same = tx.borrow().as_ref().is_some_and(|(old, _)| *old == set);
        if !same {
            let _ = tx.send(Some((set, Instant::now())));
        }
    }

    /// Keeps entries the fast path is using from ageing out.
    /// Reads at most `ACTIVITY_SWEEP_PER_TICK` entries per call, going on from
    /// `cursor`: the cost per tick stays flat up to 10^6 entries (a full sweep then
    /// takes about a minute, against an idle timeout of minutes).
    fn refresh_activity(&mut self, last: &mut HashMap<Nid, u64>, cursor: &mut Option<Nid>) {
        let Some(dp) = self.dp.as_ref() else { return };
        let (c, next) = match dp.peer_counters_from(*cursor, ACTIVITY_SWEEP_PER_TICK) {
            Ok(r) => r,
            Err(e) => {
                // fast-path-only sessions would idle out: counted, logged (first, then every 60th)
                self.bump(ShellCounter::ActivitySweepError);
                let n = self.counters[&ShellCounter::ActivitySweepError];
                if n == 1 || n.is_multiple_of(60) {
                    tracing::warn!("fast-path activity sweep failed ({n} so far): {e:#}");
                }
                return;
            }
        };
        *cursor = next;
        let now = Instant::now();
        for (nid, pc) in c {
            let total = pc.tx_pkts + pc.rx_pkts;
            if last.insert(nid, total) != Some(total) {
                self.core.note_activity(nid, now);
            }
        }
    }

    /// SIGUSR2: exit for an upgrade. The state file is written; ilnp0 (persistent),
    /// the pinned maps and links (the fast path carries on), the addresses and
    /// sysctls stay for the next ilnpd, which adopts them as after a crash. Needs
    /// pins and a state file: without them this is a clean stop.
    fn handover(&mut self) -> Result<()> {
        if self.cfg.pin_dir.is_none() || self.cfg.state_file.is_none() {
            bail!("a handover needs pin_dir and state_file");
        }
        self.write_state_now()?;
        self.route_watch = None;
        if let Some(dp) = self.dp.take() {
            dp.abandon()?;
        }
        Ok(())
    }

    /// Directories and the bpffs mount an ilnpd made for this instance: this run's
    /// and those of the earlier run it adopted.
    fn created(&self) -> crate::state::Created {
        let mut c = self.changes.adopted_created();
        if let Some(dp) = &self.dp {
            let (dirs, mount) = dp.pins_created();
            c.merge(&dirs, mount.as_ref());
        }
        if let Some(d) = self.changes.lock().and_then(InstanceLock::created_dir) {
            c.merge(std::slice::from_ref(d), None);
        }
        c
    }

    /// `signals` are installed by the caller before `start()`, so a SIGTERM that
    /// arrives while the host is being set up waits here and cleans up instead of
    /// killing the process half-way (default action) and leaving ilnp0 behind.
    pub async fn run(mut self, mut requests: mpsc::Receiver<Pending>, signals: Signals) -> Result<Exit> {
        let Signals { mut term, mut int, mut usr2 } = signals;
        let mut events = match netlink::subscribe(self.cfg.ipv4.is_some()) {
            Ok(e) => e,
            Err(e) => {
                self.undo_changes(Undo::Stop).await;
                return Err(e);
            }
        };
        startup::notify_ready();
        let mut exit = Exit::Stopped;
        let mut buf = vec![0u8; 65536 + crate::tun::VNET_HDR_LEN];
        let mut buf4 = vec![0u8; 65536];
        let mut sweep: Option<Nid> = None;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut activity: HashMap<Nid, u64> = HashMap::new();
        let mut dns_learn = self.dns_learn.take();
        let mut scrapes = self.scrapes.take();
        loop {
            let deadline = self.core.poll_timeout().map(tokio::time::Instant::from_std);
            let timer = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => futures::future::pending().await,
                }
            };
            let state_due = self.state_due().map(tokio::time::Instant::from_std);
            let state_timer = async {
                match state_due {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                r = self.tun.recv(&mut buf) => {
                    match r {
                        Ok((off, n, meta)) => {
                            let t = std::time::Instant::now();
                            let pkt = buf[off..off + n].to_vec();
                            self.on_tun_packet(&pkt, meta);
                            let took = t.elapsed();
                            self.slow_hist.record(took.as_nanos() as u64);
                            if let Some(h) = &self.histograms {
                                h.slow_path.observe(took.as_secs_f64());
                            }
                        }
                        Err(e) => { tracing::error!("reading {}: {e:#}", self.tun.name); break; }
                    }
                }
                r = v4::recv(&self.v4, &mut buf4) => {
                    match r {
                        Ok((n, from)) => {
                            let pkt = buf4[..n].to_vec();
                            self.on_v4_datagram(&pkt, from);
                        }
                        Err(e) => tracing::debug!("v4 path socket: {e}"),
                    }
                }
                Some(()) = events.next() => {
                    // coalesce bursts of address events into one resync
                    while events.try_recv().is_ok() {}
                    if let Err(e) = self.sync_locators().await {
                        tracing::warn!("locator sync: {e:#}");
                    }
                }
                _ = timer => self.on_timer(),
                _ = state_timer => self.write_state(),
                _ = tick.tick() => {
                    self.refresh_activity(&mut activity, &mut sweep);
                    self.privacy_tick().await;
                    self.flush_drop_log(Instant::now());
                }
                Some(l) = dns_recv(&mut dns_learn) => {
                    // the proxy answers its client only after this: the first packet
                    // to the identifier address finds the record
                    let now = Instant::now();
                    match l.done {
                        crate::dns::Done::Answer(done) => {
                            let (res, actions) = self.core.peer_from_dns(now, l.peer);
                            if res.stored() {
                                self.state_dirty.get_or_insert(now);
                            }
                            self.run_actions(actions);
                            let _ = done.send(res);
                        }
                        crate::dns::Done::Recover(done) => {
                            let (nid, name) = (l.peer.nid, l.peer.name.clone());
                            let (res, actions) = self.core.recover_from_dns(now, l.peer);
                            if res == Some(true) {
                                tracing::info!(
                                    "dns: LU sent to the re-resolved locators of {nid} ({name}); \
                                     the session moves when the peer acks it with its nonce"
                                );
                            }
                            self.run_actions(actions);
                            let _ = done.send(res);
                        }
                    }
                }
                Some(scrape) = opt_recv(&mut scrapes) => {
                    let _ = scrape.reply.send(self.metrics_text());
                }
                Some(req) = requests.recv() => {
                    let reply = self.handle_request(req.req, req.uid);
                    let _ = req.reply.send(reply);
                }
                _ = term.recv() => { tracing::info!("SIGTERM: cleaning up"); break; }
                _ = int.recv() => { tracing::info!("SIGINT: cleaning up"); break; }
                _ = usr2.recv() => {
                    startup::notify_stopping();
                    match self.handover() {
                        Ok(()) => {
                            self.undo_changes(Undo::Handover).await;
                            tracing::info!("SIGUSR2: handed over (data path, ilnp0, pins and state file kept for the next ilnpd)");
                            exit = Exit::HandedOver;
                            break;
                        }
                        Err(e) => { tracing::warn!("SIGUSR2: {e:#}: stopping cleanly instead"); break; }
                    }
                }
            }
        }
        if exit == Exit::Stopped {
            startup::notify_stopping();
            self.undo_changes(Undo::Stop).await;
        }
        Ok(exit)
    }
}

async fn dns_recv(rx: &mut Option<mpsc::Receiver<crate::dns::Learn>>) -> Option<crate::dns::Learn> {
    opt_recv(rx).await
}

/// The next message of an optional channel (none: never).
async fn opt_recv<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(r) => r.recv().await,
        None => futures::future::pending().await,
    }
}

/// rand 0.8 re-exports rand_core 0.6, the trait the core takes.
mod rand_core_compat {
    pub use rand::RngCore;
}
