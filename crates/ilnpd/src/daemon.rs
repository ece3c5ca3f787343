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
mod tcp_hints;

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
    /// keeps the fast path's next-hop cache valid (ilnp_route_gen); without it the
    /// cache is off and every packet is looked up
    route_watch: Option<bpf::RouteWatch>,
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
        // an existing ilnp0 is one a crashed ilnpd left (persistent, adopted below:
        // TUNSETIFF attaches to it) or one in use (TUNSETIFF fails with EBUSY)
        let adopting = std::path::Path::new(&format!("/sys/class/net/{}", cfg.tun_name)).exists();
        if adopting && cfg.pin_dir.is_none() && cfg.state_file.is_none() {
            bail!("tun_name: interface {} already exists (another ilnpd?)", cfg.tun_name);
        }
        // the identifier address on an ilnp0 being adopted is ours, not an overlap
        let old_tun = if adopting { nl.link(&cfg.tun_name).await.ok().map(|l| l.index) } else { None };
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
        let raw = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::from(libc::IPPROTO_RAW)))
            .context("opening a raw IPv6 socket (needs CAP_NET_RAW)")?;

        // ---- from here on we change the host; cleanup() undoes it
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
        let tun = tun?;
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
        let tl = nl.link(&cfg.tun_name).await?;
        let mtu = min_mtu.saturating_sub(ilnp_wire::destopts::header_len(cfg.nonce_len) as u32).max(1280);
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
        let my_id = ilnp_addr(cfg.id_prefix, local_nid);
        nl.add_address(tl.index, my_id, 128).await?;
        nl.add_route(cfg.id_prefix.prefix(), 64, tl.index).await?;

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
        for u in &uplinks {
            if let Some(&w) = cfg.locator_weight.get(&u.name) {
                core.set_uplink_weight(u.index, w).map_err(|e| anyhow::anyhow!("locator_weight.{}: {e}", u.name))?;
            }
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
            route_watch: None,
            uplinks,
            local_nid,
            added: BTreeSet::new(),
            events,
            started: Instant::now(),
            drop_log: HashMap::new(),
            saved_sysctls: Vec::new(),
            counters: BTreeMap::new(),
            state_dirty: None,
            state_written: None,
            dns: None,
            dns_learn: None,
            dns_update: None,
            slow_hist: Default::default(),
        };
        let restored = d.cfg.state_file.as_deref().and_then(crate::state::load);
        if let Some(s) = &restored {
            // what the previous run changed is put back on a clean stop, with the
            // values from before that run
            d.added = s.added.iter().copied().collect();
            d.saved_sysctls = s.saved_sysctls.clone();
        }
        d.uplink_sysctls();
        if let Err(e) = d.attach_datapath() {
            d.cleanup().await;
            return Err(e);
        }
        d.restore_core(restored.map(|s| s.core));
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
        if let Some(dc) = d.cfg.dns.clone() {
            match crate::dns::start(&dc, d.cfg.id_prefix) {
                Ok((p, rx)) => {
                    d.dns = Some(p);
                    d.dns_learn = Some(rx);
                }
                Err(e) => {
                    d.cleanup().await;
                    return Err(e);
                }
            }
        }
        if let Some(uc) = d.cfg.dns_update.clone() {
            match crate::dns::update::start(uc) {
                Ok(u) => {
                    d.dns_update = Some(u);
                    let now = d.core.local_locators().to_vec();
                    d.dns_locators_changed(&now);
                }
                Err(e) => {
                    d.cleanup().await;
                    return Err(e);
                }
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
            pin_dir: self.cfg.pin_dir.clone(),
        })?;
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
            match dp.attach_tcp_hints() {
                Ok(()) => {
                    tracing::info!("TCP hints on (RFC 6069): timeouts of connections to identifier addresses recorded")
                }
                Err(e) => tracing::warn!("TCP hints off (a hard handoff's TCP waits for its own timer): {e:#}"),
            }
        }
        self.dp = Some(dp);
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
        let known: BTreeSet<Nid> = self.core.ilcc_entries().map(|e| e.nid).collect();
        let Some(dp) = self.dp.as_mut() else { return };
        let stale: Vec<Nid> =
            dp.peer_counters().unwrap_or_default().into_iter().map(|(n, _)| n).filter(|n| !known.contains(n)).collect();
        for nid in stale {
            tracing::warn!("fast-path ILCC entry {nid} has no state in the core: removed");
            let _ = dp.remove_peer(nid);
        }
        self.state_dirty = Some(now);
    }

    /// When the state file is next due to be written (None: up to date, or no file).
    fn state_due(&self) -> Option<Instant> {
        self.cfg.state_file.as_ref()?;
        Some(crate::state::next_write(self.state_dirty?, self.state_written))
    }

    fn write_state(&mut self) {
        let Some(path) = self.cfg.state_file.clone() else { return };
        let now = Instant::now();
        let s = crate::state::StateFile {
            format: crate::state::STATE_FORMAT,
            core: self.core.snapshot(now),
            added: self.added.iter().copied().collect(),
            saved_sysctls: self.saved_sysctls.clone(),
        };
        if let Err(e) = crate::state::save(&path, &s) {
            tracing::warn!("{e:#}");
        }
        self.state_dirty = None;
        self.state_written = Some((now, now.elapsed()));
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
        // the cache off first: with pinned maps the fast path runs on without us
        self.route_watch = None;
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
        // a clean stop: nothing for a next ilnpd to adopt; closing the (no longer
        // persistent) TUN removes ilnp0 with its address and route
        if let Err(e) = self.tun.set_persist(false) {
            tracing::warn!("{e:#}");
        }
        if let Some(p) = &self.cfg.state_file {
            crate::state::remove(p);
        }
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
        let mut dns_learn = self.dns_learn.take();
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
                _ = state_timer => self.write_state(),
                _ = tick.tick() => {
                    self.refresh_activity(&mut activity, &mut sweep);
                    self.flush_drop_log(Instant::now());
                }
                Some(l) = dns_recv(&mut dns_learn) => {
                    // the proxy answers its client only after this: the first packet
                    // to the identifier address finds the record
                    let now = Instant::now();
                    match l.done {
                        crate::dns::Done::Answer(done) => {
                            let (res, actions) = self.core.peer_from_dns(now, l.peer);
                            self.run_actions(actions);
                            let _ = done.send(res);
                        }
                        crate::dns::Done::Recover(done) => {
                            let (nid, name) = (l.peer.nid, l.peer.name.clone());
                            let (res, actions) = self.core.recover_from_dns(now, l.peer);
                            if res == Some(true) {
                                tracing::info!("dns: session with {nid} ({name}) re-targeted to its re-resolved locators");
                            }
                            self.run_actions(actions);
                            let _ = done.send(res);
                        }
                    }
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

async fn dns_recv(rx: &mut Option<mpsc::Receiver<crate::dns::Learn>>) -> Option<crate::dns::Learn> {
    match rx {
        Some(r) => r.recv().await,
        None => futures::future::pending().await,
    }
}

/// rand 0.8 re-exports rand_core 0.6, the trait the core takes.
mod rand_core_compat {
    pub use rand::RngCore;
}
