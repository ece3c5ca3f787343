//! The daemon shell: wires the sans-IO core to the TUN, the raw socket, the BPF
//! maps, netlink and the control socket. No protocol decisions here.

use crate::bpf::{self, Datapath, DatapathConfig};
use crate::config::{self, Config};
use crate::control::{self, Pending};
use crate::netlink::{self, Netlink};
use crate::tun::Tun;
use anyhow::{bail, Context, Result};
use futures::StreamExt;
use ilnp_core::{Admission, Core, CoreConfig, LuTimers};
use ilnp_wire::{ilnp_addr, Nid};
use rand::SeedableRng;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{broadcast, mpsc};

mod locators;
mod requests;
mod slowpath;

use locators::{is_identifier_overlap, solicited_node_member, Uplink};
use slowpath::ShellCounter;

/// SIGTERM and SIGINT streams (both mean: clean up and exit 0).
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
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
    uplinks: Vec<Uplink>,
    local_nid: Nid,
    /// L64:NID addresses we added on uplinks (removed on exit)
    added: BTreeSet<(u32, Ipv6Addr)>,
    events: broadcast::Sender<String>,
    started: Instant,
    /// rate limit for drop logs: reason -> (window start, count in the window)
    drop_log: HashMap<&'static str, (Instant, u32)>,
    /// uplink sysctls we changed, with the value to put back on exit
    saved_sysctls: Vec<(String, String)>,
    counters: BTreeMap<ShellCounter, u64>,
    /// slow-path time per packet (`stats` → `slow_path_ns`)
    slow_hist: slowpath::SlowPathHist,
}

/// Fast-path entries whose counters are read per 1 s tick (`refresh_activity`).
const ACTIVITY_SWEEP_PER_TICK: usize = 20_000;

impl Daemon {
    /// Everything that can fail on bad configuration is checked before anything
    /// is created, so a failed start leaves the host untouched.
    pub async fn start(cfg: Config) -> Result<(Daemon, mpsc::Receiver<Pending>)> {
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
            });
        }
        for a in nl.addresses().await? {
            if a.global && a.ifindex != 0 && is_identifier_overlap(cfg.id_prefix, a.addr, a.prefix_len) {
                bail!(
                    "identifier_prefix {}/64 overlaps address {}/{} on ifindex {}: choose another identifier prefix",
                    cfg.id_prefix.prefix(),
                    a.addr,
                    a.prefix_len,
                    a.ifindex
                );
            }
        }
        let local_nid = match cfg.nid {
            Some(n) => n,
            None => match macs.first().copied().flatten() {
                Some(mac) => Nid::from_mac(mac),
                None => bail!(
                    "nid = \"auto\" needs a MAC address on the first uplink {:?}; configure `nid`",
                    cfg.uplinks[0]
                ),
            },
        };
        if std::path::Path::new(&format!("/sys/class/net/{}", cfg.tun_name)).exists() {
            bail!("tun_name: interface {} already exists (another ilnpd?)", cfg.tun_name);
        }
        let raw = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::from(libc::IPPROTO_RAW)))
            .context("opening a raw IPv6 socket (needs CAP_NET_RAW)")?;

        // ---- from here on we change the host; cleanup() undoes it
        let ebpf = cfg.datapath == config::Datapath::Ebpf;
        let tun = Tun::create(&cfg.tun_name, ebpf)?;
        let tl = nl.link(&cfg.tun_name).await?;
        let mtu = min_mtu.saturating_sub(ilnp_wire::destopts::header_len(cfg.nonce_len) as u32).max(1280);
        // forwarding on ilnp0 only: bpf_fib_lookup() refuses to route for an
        // interface without it; packets are still never forwarded between
        // interfaces (that needs net.ipv6.conf.all.forwarding).
        for (k, v) in
            [("accept_dad", "0"), ("accept_ra", "0"), ("autoconf", "0"), ("addr_gen_mode", "1"), ("forwarding", "1")]
        {
            let p = format!("/proc/sys/net/ipv6/conf/{}/{k}", cfg.tun_name);
            let _ = std::fs::write(&p, v);
        }
        nl.set_link_up(tl.index, mtu).await?;
        let my_id = ilnp_addr(cfg.id_prefix, local_nid);
        nl.add_address(tl.index, my_id, 128).await?;
        nl.add_route(cfg.id_prefix.prefix(), 64, tl.index).await?;

        let mut cc = CoreConfig::new(cfg.id_prefix, local_nid);
        cc.nonce_len = cfg.nonce_len;
        cc.ilcc_max_entries = cfg.ilcc_max_entries as usize;
        cc.idle_timeout = cfg.idle_timeout;
        cc.handoff = cfg.handoff;
        cc.soft_quiet_period = cfg.soft_quiet_period;
        cc.admission = cfg.admission;
        cc.ilcc_embryonic_max = cfg.ilcc_embryonic_max as usize;
        cc.hello_rate_pps = f64::from(cfg.hello_rate_pps);
        cc.hello_burst = cfg.hello_burst;
        cc.lu = LuTimers { initial_rto: cfg.lu_initial_rto, max_attempts: cfg.lu_max_attempts, ..LuTimers::default() };
        let rng: Box<dyn rand_core_compat::RngCore + Send> = match cfg.rng_seed {
            Some(s) => Box::new(rand::rngs::StdRng::seed_from_u64(s)),
            None => Box::new(rand::rngs::StdRng::from_entropy()),
        };
        let mut core = Core::new(cc, rng);
        for p in &cfg.peers {
            core.add_peer(p.clone());
        }
        let nd_group = solicited_node_member(local_nid, &uplinks)?;
        let (events, _) = broadcast::channel(1024);
        let mut d = Daemon {
            cfg,
            nl,
            core,
            tun,
            tun_index: tl.index,
            raw,
            _nd_group: nd_group,
            dp: None,
            uplinks,
            local_nid,
            added: BTreeSet::new(),
            events,
            started: Instant::now(),
            drop_log: HashMap::new(),
            saved_sysctls: Vec::new(),
            counters: BTreeMap::new(),
            slow_hist: Default::default(),
        };
        d.uplink_sysctls();
        if let Err(e) = d.attach_datapath() {
            d.cleanup().await;
            return Err(e);
        }
        if let Err(e) = d.sync_locators().await {
            d.cleanup().await;
            return Err(e);
        }
        let (tx, rx) = mpsc::channel(64);
        match control::start(&d.cfg.control_socket, tx, d.events.clone()) {
            Ok(()) => {}
            Err(e) => {
                d.cleanup().await;
                return Err(e);
            }
        }
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

    fn attach_datapath(&mut self) -> Result<()> {
        let mode = if self.cfg.datapath == config::Datapath::Ebpf { bpf::Mode::Ebpf } else { bpf::Mode::Userspace };
        let mut dp = Datapath::load(&DatapathConfig {
            mode,
            ilnp0_ifindex: self.tun_index,
            id_prefix: self.cfg.id_prefix,
            local_nid: self.local_nid,
            ilcc_max_entries: self.cfg.ilcc_max_entries,
            admit_socket: self.cfg.admission == Admission::Socket,
            pin_dir: None,
        })?;
        for u in &self.uplinks {
            dp.attach_uplink(u.index)?;
        }
        self.dp = Some(dp);
        Ok(())
    }

    /// Keeps entries the fast path is using from ageing out.
    /// Reads at most `ACTIVITY_SWEEP_PER_TICK` entries per call, going on from
    /// `cursor`: the cost per tick stays flat up to 10^6 entries (a full sweep then
    /// takes about a minute, against an idle timeout of minutes).
    fn refresh_activity(&mut self, last: &mut HashMap<Nid, u64>, cursor: &mut Option<Nid>) {
        let Some(dp) = self.dp.as_ref() else { return };
        let Ok((c, next)) = dp.peer_counters_from(*cursor, ACTIVITY_SWEEP_PER_TICK) else { return };
        *cursor = next;
        let now = Instant::now();
        for (nid, pc) in c {
            let total = pc.tx_pkts + pc.rx_pkts;
            if last.insert(nid, total) != Some(total) {
                self.core.note_activity(nid, now);
            }
        }
    }

    /// Undoes everything start() did.
    async fn cleanup(&mut self) {
        if let Some(mut dp) = self.dp.take() {
            // uplinks first: packets stop being punted to a TUN about to close
            for u in &self.uplinks {
                if let Err(e) = dp.detach_uplink(u.index) {
                    tracing::warn!("detaching from {}: {e:#}", u.name);
                }
            }
            if let Err(e) = dp.shutdown() {
                tracing::warn!("detaching eBPF programs: {e:#}");
            }
        }
        for (idx, a) in std::mem::take(&mut self.added) {
            if let Err(e) = self.nl.del_address(idx, a, 64).await {
                tracing::warn!("{e:#}");
            }
        }
        for (p, v) in std::mem::take(&mut self.saved_sysctls) {
            if let Err(e) = std::fs::write(&p, &v) {
                tracing::warn!("restoring {p} to {v}: {e}");
            }
        }
        // closing the TUN removes ilnp0 with its address and route
        let _ = std::fs::remove_file(&self.cfg.control_socket);
    }

    /// `signals` are installed by the caller before `start()`, so a SIGTERM that
    /// arrives while the host is being set up waits here and cleans up instead of
    /// killing the process half-way (default action) and leaving ilnp0 behind.
    pub async fn run(mut self, mut requests: mpsc::Receiver<Pending>, signals: Signals) -> Result<()> {
        let Signals { mut term, mut int } = signals;
        let mut events = match netlink::subscribe() {
            Ok(e) => e,
            Err(e) => {
                self.cleanup().await;
                return Err(e);
            }
        };
        let mut buf = vec![0u8; 65536 + crate::tun::VNET_HDR_LEN];
        let mut sweep: Option<Nid> = None;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut activity: HashMap<Nid, u64> = HashMap::new();
        loop {
            let deadline = self.core.poll_timeout().map(tokio::time::Instant::from_std);
            let timer = async {
                match deadline {
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
                            self.slow_hist.record(t.elapsed().as_nanos() as u64);
                        }
                        Err(e) => { tracing::error!("reading {}: {e:#}", self.tun.name); break; }
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
                _ = tick.tick() => {
                    self.refresh_activity(&mut activity, &mut sweep);
                    self.flush_drop_log(Instant::now());
                }
                Some(req) = requests.recv() => {
                    let reply = self.handle_request(req.req);
                    let _ = req.reply.send(reply);
                }
                _ = term.recv() => { tracing::info!("SIGTERM: cleaning up"); break; }
                _ = int.recv() => { tracing::info!("SIGINT: cleaning up"); break; }
            }
        }
        self.cleanup().await;
        Ok(())
    }
}

/// rand 0.8 re-exports rand_core 0.6, the trait the core takes.
mod rand_core_compat {
    pub use rand::RngCore;
}
