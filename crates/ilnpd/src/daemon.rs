//! The daemon shell: wires the sans-IO core to the TUN, the raw socket, the BPF
//! maps, netlink and the control socket. No protocol decisions here.

use crate::bpf::{self, Datapath, DatapathConfig};
use crate::config::{self, Config};
use crate::control::{self, Pending};
use crate::netlink::{self, Netlink};
use crate::tun::Tun;
use anyhow::{bail, Context, Result};
use futures::StreamExt;
use ilnp_core::{
    derive_local_locators, Action, Core, CoreConfig, Event, KernelAddress, LuTimers, RouterPreference, UplinkFacts,
};
use ilnp_wire::translate::Csum;
use ilnp_wire::{ilnp_addr, split_addr, Locator, Nid};
use rand::SeedableRng;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{broadcast, mpsc};

mod requests;

/// Drop log lines per reason per second (every drop is counted regardless).
const DROP_LOG_BURST: u32 = 10;

/// An uplink interface the daemon serves, and what the kernel last told us about
/// it (refreshed by `sync_locators`).
#[derive(Debug, Clone)]
struct Uplink {
    name: String,
    index: u32,
    /// locator preference configured for it (`locator_pref`)
    configured_pref: Option<u16>,
    /// the link is up
    up: bool,
    /// best default-router preference behind it; None: no default route
    router: Option<RouterPreference>,
    /// address of that default router, if known
    gateway: Option<Ipv6Addr>,
}

impl Uplink {
    fn facts(&self) -> UplinkFacts {
        UplinkFacts { ifindex: self.index, up: self.up, router: self.router, configured_pref: self.configured_pref }
    }
}

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
    counters: BTreeMap<&'static str, u64>,
}

/// Joins our solicited-node multicast group (ff02::1:ffXX:XXXX, RFC 4291 §2.7.1; the same
/// for every L64:NID, as it depends on the NID's last 24 bits) on every uplink, once, for
/// the daemon's life. The kernel joins it for an address we add only from its deferred
/// DAD work; until then a router's Neighbour Solicitation for the new L64:NID is not
/// received, so an LU Ack that comes back within a millisecond waited a whole NS
/// retransmission (1 s) before reaching us.
fn solicited_node_member(nid: Nid, uplinks: &[Uplink]) -> Result<Socket> {
    let n = nid.0;
    let group = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | ((n >> 16) & 0xff) as u16, (n & 0xffff) as u16);
    let s = Socket::new(Domain::IPV6, Type::DGRAM, None).context("socket for the solicited-node group")?;
    for u in uplinks {
        s.join_multicast_v6(&group, u.index).with_context(|| format!("joining {group} on {}", u.name))?;
    }
    Ok(s)
}

fn is_identifier_overlap(id: Locator, addr: Ipv6Addr, len: u8) -> bool {
    let (l, _) = split_addr(addr);
    let len = len.min(64) as u32;
    let mask = if len == 0 { 0 } else { u64::MAX << (64 - len) };
    (l.0 & mask) == (id.0 & mask)
}

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

    /// An uplink that lost carrier keeps its RA default route (marked linkdown) and,
    /// with a high router preference, the kernel keeps choosing it: the LU of a
    /// failover and the data from the new locator would leave through the dead
    /// link until the route expires (seconds). `ignore_routes_with_linkdown` makes
    /// the kernel (and bpf_fib_lookup) skip such routes. Restored on exit.
    fn uplink_sysctls(&mut self) {
        for u in &self.uplinks {
            let p = format!("/proc/sys/net/ipv6/conf/{}/ignore_routes_with_linkdown", u.name);
            match std::fs::read_to_string(&p) {
                Ok(old) if old.trim() != "1" => {
                    if let Err(e) = std::fs::write(&p, "1") {
                        tracing::warn!("{p}: {e} (a failover over an uplink that lost carrier may be slow)");
                    } else {
                        self.saved_sysctls.push((p, old.trim().to_string()));
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("{p}: {e}"),
            }
        }
    }

    fn attach_datapath(&mut self) -> Result<()> {
        let mode = if self.cfg.datapath == config::Datapath::Ebpf { bpf::Mode::Ebpf } else { bpf::Mode::Userspace };
        let mut dp = Datapath::load(&DatapathConfig {
            mode,
            ilnp0_ifindex: self.tun_index,
            id_prefix: self.cfg.id_prefix,
            local_nid: self.local_nid,
            ilcc_max_entries: self.cfg.ilcc_max_entries,
            pin_dir: None,
        })?;
        for u in &self.uplinks {
            dp.attach_uplink(u.index)?;
        }
        self.dp = Some(dp);
        Ok(())
    }

    /// Re-reads the kernel's links, default routes and addresses; the core derives
    /// the local locator set from them (`ilnp_core::derive_local_locators`).
    async fn sync_locators(&mut self) -> Result<()> {
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
        let facts: Vec<UplinkFacts> = self.uplinks.iter().map(Uplink::facts).collect();
        let locs = derive_local_locators(self.cfg.id_prefix, self.local_nid, &facts, &kernel);
        // L64:NID on each uplink so Neighbour Discovery answers for it
        for l in &locs {
            let a = ilnp_addr(l.loc, self.local_nid);
            if !ours_present.contains(&(l.ifindex, a)) && self.nl.add_address(l.ifindex, a, 64).await? {
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
        Ok(())
    }

    /// Sends a wire packet through `uplink`, the one the core chose (it owns the
    /// packet's source locator; the kernel routes it via that interface's routes
    /// only), so it reaches the network its source address belongs to (BCP 38) over
    /// the path it was advertised for. If that uplink has no route to the
    /// destination (its router is gone), the main table decides, counted as
    /// `send_uplink_fallback`.
    fn send_wire(&mut self, pkt: &[u8], uplink: Option<u32>) {
        let Ok(dst) = ilnp_wire::ipv6::Packet::new_checked(pkt).map(|p| p.dst()) else { return };
        if let Some(ifindex) = uplink {
            match send_via(&self.raw, pkt, dst, ifindex) {
                Ok(()) => return,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENETUNREACH) | Some(libc::EHOSTUNREACH)) => {
                    self.bump("send_uplink_fallback");
                    tracing::debug!("no route to {dst} via ifindex {ifindex}: main table");
                }
                Err(e) => {
                    self.bump("send_error");
                    tracing::debug!("sending {} bytes to {dst} via ifindex {ifindex}: {e}", pkt.len());
                    return;
                }
            }
        }
        let sa = SockAddr::from(SocketAddrV6::new(dst, 0, 0, 0));
        if let Err(e) = self.raw.send_to(pkt, &sa) {
            self.bump("send_error");
            tracing::debug!("sending {} bytes to {dst}: {e}", pkt.len());
        }
    }

    fn bump(&mut self, k: &'static str) {
        *self.counters.entry(k).or_insert(0) += 1;
    }

    fn run_actions(&mut self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::SendWire { pkt, uplink } => self.send_wire(&pkt, uplink),
                Action::DeliverLocal(pkt) => {
                    if let Err(e) = self.tun.send(&pkt) {
                        self.bump("deliver_error");
                        tracing::debug!("{e:#}");
                    }
                }
                Action::IlccUpsert(s) => {
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.upsert_peer(&s) {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                Action::IlccRemove(nid) => {
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.remove_peer(nid) {
                            tracing::warn!("removing {nid} from the fast path: {e:#}");
                        }
                    }
                }
                Action::LocalLocators(l) => {
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.set_local_locators(&l) {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                Action::Event(ev) => self.emit(ev),
            }
        }
    }

    fn emit(&mut self, ev: Event) {
        if let Event::Drop { reason, .. } = &ev {
            // at most DROP_LOG_BURST log lines per reason per second; all are counted,
            // and what was not logged is summed up in one line when the window ends
            let now = Instant::now();
            self.flush_drop_log(now);
            let e = self.drop_log.entry(reason).or_insert((now, 0));
            e.1 += 1;
            if e.1 <= DROP_LOG_BURST {
                tracing::warn!("{ev}");
            }
        } else {
            tracing::info!("{ev}");
        }
        let _ = self.events.send(requests::monitor_event(&ev).to_line());
    }

    /// Ends drop-log windows older than a second, with one line per reason saying
    /// how many drops were not logged (the counters in `ilnpctl stats` have them all).
    fn flush_drop_log(&mut self, now: Instant) {
        self.drop_log.retain(|reason, (start, n)| {
            if now.duration_since(*start) < Duration::from_secs(1) {
                return true;
            }
            if *n > DROP_LOG_BURST {
                let secs = now.duration_since(*start).as_secs_f64();
                tracing::warn!(
                    "drop ({reason}): {} more in the last {secs:.1} s not logged (rate limit)",
                    *n - DROP_LOG_BURST
                );
            }
            false
        });
    }

    fn on_tun_packet(&mut self, pkt: &[u8], meta: crate::tun::PacketMeta) {
        let now = Instant::now();
        let csum = if meta.needs_csum { Csum::Partial } else { Csum::Complete };
        if pkt.len() < 40 {
            self.bump("tun_runt");
            return;
        }
        let Ok(ip) = ilnp_wire::ipv6::Packet::new_checked(pkt) else {
            self.bump("tun_runt");
            return;
        };
        if ip.dst().is_multicast() {
            // MLD and the like that the kernel sends on ilnp0: nothing to carry
            self.bump("tun_multicast_ignored");
            return;
        }
        let (sl, _) = split_addr(ip.src());
        let outbound = sl == self.cfg.id_prefix;
        if meta.gso_type != 0 && outbound {
            // A GSO super-packet missed the fast path (first burst after a flush,
            // an entry just created): the raw socket cannot send it whole, so it
            // is cut into MSS-sized segments with complete checksums.
            match crate::gso::split(pkt, &meta.vnet_hdr) {
                Ok(segs) => {
                    self.bump("slow_path_gso_split");
                    for s in segs {
                        let actions = self.core.handle_outbound(now, &s, Csum::Complete);
                        self.run_actions(actions);
                    }
                }
                Err(e) => {
                    self.bump("slow_path_gso_bad");
                    tracing::debug!("GSO packet from {}: {e}", self.tun.name);
                }
            }
            return;
        }
        let actions =
            if outbound { self.core.handle_outbound(now, pkt, csum) } else { self.core.handle_inbound(now, pkt, csum) };
        self.run_actions(actions);
    }

    fn on_timer(&mut self) {
        // the core's timer may be a soft-handoff quiet period ending: it decides on
        // the fast path's latest receive stamps (read here, not polled)
        self.feed_local_activity();
        let actions = self.core.handle_timeout(Instant::now());
        self.run_actions(actions);
    }

    /// Hands the fast path's per-locator receive stamps (CLOCK_MONOTONIC ns, the
    /// clock behind `Instant` on Linux) to the core as instants.
    fn feed_local_activity(&mut self) {
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

    /// Keeps entries the fast path is using from ageing out.
    fn refresh_activity(&mut self, last: &mut HashMap<Nid, u64>) {
        let Some(dp) = self.dp.as_ref() else { return };
        let Ok(c) = dp.peer_counters() else { return };
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
                            let pkt = buf[off..off + n].to_vec();
                            self.on_tun_packet(&pkt, meta);
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
                    self.refresh_activity(&mut activity);
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

/// Sends `pkt` (a whole IPv6 packet) on the IPPROTO_RAW socket with an
/// IPV6_PKTINFO control message naming `ifindex` and no source address:
/// rawv6_sendmsg() takes the output interface from it even with the header
/// included, and an output interface without a source address makes the route
/// lookup strict (RT6_LOOKUP_F_IFACE: only routes through that interface).
fn send_via(raw: &Socket, pkt: &[u8], dst: Ipv6Addr, ifindex: u32) -> std::io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, SockaddrIn6};
    use std::os::fd::AsRawFd;
    let info = libc::in6_pktinfo { ipi6_addr: libc::in6_addr { s6_addr: [0; 16] }, ipi6_ifindex: ifindex };
    let to = SockaddrIn6::from(SocketAddrV6::new(dst, 0, 0, 0));
    sendmsg(
        raw.as_raw_fd(),
        &[std::io::IoSlice::new(pkt)],
        &[ControlMessage::Ipv6PacketInfo(&info)],
        MsgFlags::empty(),
        Some(&to),
    )
    .map(|_| ())
    .map_err(std::io::Error::from)
}

/// CLOCK_MONOTONIC in ns: what bpf_ktime_get_ns() returns.
fn monotonic_ns() -> u64 {
    // SAFETY: a zeroed timespec is valid; clock_gettime only writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// rand 0.8 re-exports rand_core 0.6, the trait the core takes.
mod rand_core_compat {
    pub use rand::RngCore;
}

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
        let p = Locator(0xfd69_6c6e_7000_0000);
        let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert!(is_identifier_overlap(p, a("fd69:6c6e:7000::1"), 64));
        assert!(is_identifier_overlap(p, a("fd69:6c6e:7000::1"), 128), "an address inside P");
        assert!(is_identifier_overlap(p, a("fd69::1"), 16), "a shorter prefix covering P");
        assert!(is_identifier_overlap(p, a("fd00::1"), 8));
        assert!(!is_identifier_overlap(p, a("fd69:6c6e:7001::1"), 64));
        assert!(!is_identifier_overlap(p, a("2001:db8:a::c"), 64));
    }
}
