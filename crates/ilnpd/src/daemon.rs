//! The daemon shell: wires the sans-IO core to the TUN, the raw socket, the BPF
//! maps, netlink and the control socket. No protocol decisions here. This file:
//! the daemon's state and its main loop (`run`, telling systemd when it is ready and
//! when it stops), the state file's writes and the handover. Start-up is `start.rs`
//! (the core from the configuration, the data path attached and swept); its steps and
//! what they changed on the host, each with its undo, are `host_changes.rs` (popped
//! by a failed start, a stop and a handover).

use crate::bpf::{self, Datapath};
use crate::config::Config;
use crate::control::Pending;
use crate::netlink::{self, Netlink};
use crate::nid::NidSource;
use crate::tun::Tun;
use anyhow::{bail, Context, Result};
use futures::StreamExt;
use ilnp_core::Core;
use ilnp_wire::Nid;
use socket2::Socket;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv6Addr;
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
mod start;
mod tcp_hints;
mod v4;

use host_changes::{HostChanges, InstanceLock, Undo};

use counters::ShellCounter;
use locators::Uplink;

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

/// Fast-path entries whose counters are read per 1 s tick (`refresh_activity`).
const ACTIVITY_SWEEP_PER_TICK: usize = 20_000;

impl Daemon {
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
    fn refresh_activity(&mut self, last: &mut HashMap<ilnp_core::IlccKey, u64>, cursor: &mut crate::bpf::Cursor) {
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
        for (key, pc) in c {
            let total = pc.tx_pkts + pc.rx_pkts;
            if last.insert(key, total) != Some(total) {
                self.core.note_activity(key, now);
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
        notify_ready();
        let mut exit = Exit::Stopped;
        let mut buf = vec![0u8; 65536 + crate::tun::VNET_HDR_LEN];
        let mut buf4 = vec![0u8; 65536];
        let mut sweep: crate::bpf::Cursor = None;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut activity: HashMap<ilnp_core::IlccKey, u64> = HashMap::new();
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
                    notify_stopping();
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
            notify_stopping();
            self.undo_changes(Undo::Stop).await;
        }
        Ok(exit)
    }
}

/// Tells systemd (`Type=notify`, $NOTIFY_SOCKET) that start-up is complete: the data
/// path is attached and the control socket answers, so units ordered after ilnpd
/// find it working. Without a service manager, nothing.
fn notify_ready() {
    if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]) {
        tracing::warn!("telling systemd we are ready: {e}");
    }
}

/// Tells systemd the daemon is stopping (a clean stop or a handover).
fn notify_stopping() {
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
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
