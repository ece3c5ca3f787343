//! The eBPF fast path: loads bpf/ilnp_dp.c (compiled by build.rs: ilnp_egress.c
//! on ilnp0, ilnp_ingress.c on each uplink), attaches it with tc, and keeps its
//! maps in step with the core. Layouts: `maps` mirrors bpf/ilnp_maps.h.
//!
//! ```text
//! Datapath::load(cfg)            load + verify both programs, fill ilnp_cfg, attach egress on ilnp0
//! attach_uplink / detach_uplink  tc ingress on an uplink
//! upsert_peer / remove_peer      ilnp_ilcc (counters survive an update)
//! upsert_plain_peer / ...        ilnp_plain_peers: a fallback peer's plain packets punted; plain_peers lists them
//! set_balance                    ilnp_balance: a correspondent's locator-pair table (position kept),
//!                                and its ILCC entry's BALANCED flag; balanced_peers lists the tables
//! set_local_locators             ilnp_locals (replaced as a whole; receive stamps kept)
//! local_last_rx                  per local locator: last packet delivered (ns, CLOCK_MONOTONIC)
//! stats / peer_counters          reason counters (summed over CPUs), per-peer fast-path counters
//! route_gen                      writer of ilnp_route_gen: the next-hop cache's generation
//! load_route_xmit                the lwt xmit program for the identifier prefix's route (bpf/ilnp_route.c)
//! attach_tcp_hints               sock_ops on the cgroup v2 root: TCP timeouts to identifier addresses
//! tcp_timeouts                   ilnp_tcp_rto: the recent timeouts of connections to one address
//! shutdown                       detach all, delete the clsact qdiscs it created, unpin
//! ```
//!
//! Here: loading, attaching, pins, shutdown. By concern beside it: `peers` (ilnp_ilcc,
//! plain peers, temporary NIDs, answer hints, counters), `balance`, `locals`,
//! `route_gen`, `tcp_hints`; `maps` the value layouts.
//!
//! With a pin directory the maps and the tcx links are pinned there, so the fast
//! path keeps running while ilnpd is down; `layout` beside them names the map layout
//! (`layout_id`): pins of another layout (an upgrade changed the maps) are replaced.

mod balance;
mod locals;
mod maps;
mod peers;
mod pin;
pub use pin::unmount_if_empty;
mod route;
mod route_gen;
mod route_watch;
mod tc;
mod tcp_hints;
#[cfg(test)]
mod tests;

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, HashMap, MapError};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use ilnp_wire::{Locator, Nid};
use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::path::PathBuf;

use maps::CfgVal;
pub use maps::REASONS;
pub use peers::{Cursor, PeerCounters};
use pin::Pins;
pub use route::{active_features, parses_ipv6_for_csum, PROG_ROUTE};
pub use route_gen::{monotonic_ns, RouteGen};
pub use route_watch::RouteWatch;
use tc::{AttachKind, Attachment};
pub use tcp_hints::TcpTimeout;

// aya's ELF parser wants the objects 8-byte aligned
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ilnp_dp.o"));
static OBJECT_PINNED: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ilnp_dp_pin.o"));

const MAP_CFG: &str = "ilnp_cfg";
const MAP_ILCC: &str = "ilnp_ilcc";
const MAP_LOCALS: &str = "ilnp_locals";
const MAP_STATS: &str = "ilnp_stats";
const MAP_BALANCE: &str = "ilnp_balance";
const MAP_PLAIN_PEERS: &str = "ilnp_plain_peers";
const MAP_TEMP_NIDS: &str = "ilnp_temp_nids";
const MAP_ANSWER_HINTS: &str = "ilnp_answer_hints";
const MAP_ROUTE_GEN: &str = "ilnp_route_gen";
const MAP_UPLINKS: &str = "ilnp_uplinks";
const MAP_NAMES: &[&str] = &[
    MAP_UPLINKS,
    MAP_CFG,
    MAP_ILCC,
    MAP_LOCALS,
    MAP_STATS,
    MAP_BALANCE,
    MAP_PLAIN_PEERS,
    MAP_TEMP_NIDS,
    MAP_ANSWER_HINTS,
    "ilnp_hint_tat", // the programs' own (the hint writes' budget): pinned, never read here
    "ilnp_nh_cache", // the egress program's own (next hops): pinned, never read here
    MAP_ROUTE_GEN,
];
/// bpf/ilnp_sockops.c's maps: never pinned (hints only; a restart starts them empty)
const MAP_TCP_CFG: &str = "ilnp_tcp_cfg";
const MAP_TCP_RTO: &str = "ilnp_tcp_rto";
const PROG_SOCKOPS: &str = "ilnp_sockops";
const PROG_EGRESS: &str = "ilnp_egress";
const PROG_INGRESS: &str = "ilnp_ingress";

/// The headers that define the maps (types, sizes, value layouts).
const LAYOUT_SOURCES: [&[u8]; 2] =
    [include_bytes!("../../../../bpf/ilnp_maps.h"), include_bytes!("../../../../bpf/ilnp_common.h")];

/// Names the layout of the maps a pin directory holds: FNV-1a over the headers
/// that define them and the ILCC bound (BPF hash maps are sized at creation).
/// A header change in an upgrade changes it; pins with another id are replaced.
pub(crate) fn layout_id(ilcc_max_entries: u32) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let max = ilcc_max_entries.to_le_bytes();
    for b in LAYOUT_SOURCES.iter().flat_map(|s| s.iter()).chain(max.iter()) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// the programs translate established sessions themselves
    Ebpf,
    /// the programs only steer: every ILNP packet goes through ilnpd (reference)
    Userspace,
}

#[derive(Clone, Debug)]
pub struct DatapathConfig {
    pub mode: Mode,
    /// the TUN; the egress program goes on it and ingress punts are sent to it
    pub ilnp0_ifindex: u32,
    /// identifier prefix P (upper 64 bits of identifier addresses)
    pub id_prefix: Locator,
    pub local_nid: Nid,
    /// bound of ilnp_ilcc (BPF hash maps preallocate: memory is fixed at load)
    pub ilcc_max_entries: u32,
    /// admission = socket: unknown NIDs are punted only if a socket takes the packet
    pub admit_socket: bool,
    /// pin the maps here (on bpffs; /sys/fs/bpf is mounted if it is not) and
    /// reuse maps already pinned there, so a restart keeps the ILCC
    pub pin_dir: Option<PathBuf>,
    /// `[ipv4]` port: the ingress program takes ILNPv6 in UDP/IPv4 to it (a v4
    /// path); None = IPv4 is not looked at
    pub v4_port: Option<u16>,
}

pub struct Datapath {
    bpf: Ebpf,
    kind: AttachKind,
    egress: Option<Attachment>,
    uplinks: Vec<Attachment>,
    pins: Option<Pins>,
    /// default router per uplink ifindex (see `set_uplink_routers`)
    routers: BTreeMap<u32, Ipv6Addr>,
    /// the sock_ops program is attached (`attach_tcp_hints`)
    tcp_hints: bool,
    /// the lwt xmit program for the identifier route (`load_route_xmit`)
    route: Option<route::RouteProg>,
}

/// aya reports a missing key on delete as the syscall's ENOENT, not KeyNotFound.
fn absent_ok(r: Result<(), MapError>) -> Result<(), MapError> {
    match r {
        Err(MapError::KeyNotFound) => Ok(()),
        Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r,
    }
}

fn map_err(name: &str) -> anyhow::Error {
    anyhow!("the eBPF object has no map {name}")
}

impl Datapath {
    /// Loads and verifies both programs, fills `ilnp_cfg`, attaches the egress
    /// program to ilnp0.
    pub fn load(cfg: &DatapathConfig) -> Result<Datapath> {
        Datapath::load_with(cfg, AttachKind::detect())
    }

    pub(crate) fn load_with(cfg: &DatapathConfig, kind: AttachKind) -> Result<Datapath> {
        let defines = env!("ILNP_BPF_DEFINES");
        if !defines.is_empty() {
            tracing::warn!(
                "measurement build: the eBPF data path was compiled with {defines} \
                 (docs/benchmarks.md § Without the nonce); not for use"
            );
        }
        if kind == AttachKind::Netlink {
            let why = match std::env::var(tc::ATTACH_ENV) {
                Ok(v) => format!("{}={v}", tc::ATTACH_ENV),
                Err(_) => "no tcx before Linux 6.6".to_string(),
            };
            tracing::info!(
                "tc programs attached as clsact filters ({why}; prio {:#x} handle {:#x}): a restart after a crash \
                 replaces their programs in place{}",
                tc::FILTER_PRIORITY,
                tc::FILTER_HANDLE,
                if cfg.pin_dir.is_none() { "; without pin_dir the sessions are not kept" } else { "" }
            );
        }
        let mut pins = cfg.pin_dir.as_deref().map(Pins::prepare).transpose()?;
        if let Some(p) = pins.as_mut() {
            p.use_layout(&layout_id(cfg.ilcc_max_entries.max(1)))?;
        }
        let mut loader = EbpfLoader::new();
        loader.set_max_entries(MAP_ILCC, cfg.ilcc_max_entries.max(1));
        loader.set_max_entries(MAP_BALANCE, cfg.ilcc_max_entries.max(1));
        let object = match &pins {
            Some(p) => {
                loader.map_pin_path(&p.maps);
                OBJECT_PINNED
            }
            None => OBJECT,
        };
        let bpf = match loader.load(object) {
            Ok(b) => b,
            Err(e) => {
                if let Some(p) = pins {
                    let _ = p.remove(&[]);
                }
                return Err(e).context("loading the eBPF object (needs CAP_BPF/CAP_NET_ADMIN and a kernel with BTF)");
            }
        };
        let mut dp = Datapath {
            bpf,
            kind,
            egress: None,
            uplinks: Vec::new(),
            pins,
            routers: BTreeMap::new(),
            tcp_hints: false,
            route: None,
        };
        match dp.init(cfg) {
            Ok(()) => Ok(dp),
            Err(e) => {
                let _ = dp.shutdown();
                Err(e)
            }
        }
    }

    fn init(&mut self, cfg: &DatapathConfig) -> Result<()> {
        let v = CfgVal {
            id_prefix: cfg.id_prefix.to_bytes(),
            local_nid: cfg.local_nid.to_bytes(),
            ilnp0_ifindex: cfg.ilnp0_ifindex,
            mode: if cfg.mode == Mode::Ebpf { maps::MODE_EBPF } else { maps::MODE_USERSPACE },
            flags: if cfg.admit_socket { maps::CFG_F_ADMIT_SOCKET } else { 0 },
            v4_port: cfg.v4_port.unwrap_or(0).to_be(),
            ..Default::default()
        };
        let mut m: Array<_, CfgVal> = Array::try_from(self.bpf.map_mut(MAP_CFG).ok_or_else(|| map_err(MAP_CFG))?)?;
        m.set(0, v, 0).context("writing ilnp_cfg")?;
        for name in [PROG_EGRESS, PROG_INGRESS] {
            self.prog(name)?.load().with_context(|| format!("the verifier rejected {name}"))?;
        }
        let kind = self.kind;
        let pin = self.pins.as_ref().map(|p| p.dir.clone());
        let a = tc::attach(self.prog(PROG_EGRESS)?, kind, cfg.ilnp0_ifindex, TcAttachType::Egress, pin.as_deref())?;
        self.egress = Some(a);
        Ok(())
    }

    fn prog(&mut self, name: &str) -> Result<&mut SchedClassifier> {
        let p = self.bpf.program_mut(name).ok_or_else(|| anyhow!("the eBPF object has no program {name}"))?;
        Ok(p.try_into()?)
    }

    /// Loads the lwt xmit program (translation at the route, bpf/ilnp_route.c)
    /// with this object's maps, once; its fd is for the identifier route's encap
    /// (`Netlink::set_id_route`), which keeps the program from then on.
    pub fn load_route_xmit(&mut self) -> Result<std::os::fd::BorrowedFd<'_>> {
        if self.route.is_none() {
            self.route = Some(route::RouteProg::load(&self.bpf)?);
        }
        Ok(self.route.as_ref().expect("just set").fd())
    }

    /// Attaches the ingress program to an uplink (idempotent), and tells it whether
    /// the uplink has IPv6 disabled (`ilnp_uplinks`): a v4-path packet decapsulated
    /// there is then delivered through ilnp0, as the kernel would drop it on the
    /// uplink (read at attach: a later `sysctl` change is seen at the next attach).
    pub fn attach_uplink(&mut self, ifindex: u32) -> Result<()> {
        self.note_uplink_ipv6(ifindex)?;
        if self.uplinks.iter().any(|a| a.ifindex == ifindex) {
            return Ok(());
        }
        let kind = self.kind;
        let pin = self.pins.as_ref().map(|p| p.dir.clone());
        let a = tc::attach(self.prog(PROG_INGRESS)?, kind, ifindex, TcAttachType::Ingress, pin.as_deref())?;
        self.uplinks.push(a);
        Ok(())
    }

    /// `net.ipv6.conf.<uplink>.disable_ipv6` into `ilnp_uplinks` (absent: IPv6 on).
    fn note_uplink_ipv6(&mut self, ifindex: u32) -> Result<()> {
        let name = tc::ifname(ifindex)?;
        let off = std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"))
            .map_or(true, |v| v.trim() != "0"); // no such file: IPv6 is off (or absent)
        let mut m: HashMap<_, u32, u32> =
            HashMap::try_from(self.bpf.map_mut(MAP_UPLINKS).ok_or_else(|| map_err(MAP_UPLINKS))?)?;
        if off {
            tracing::info!(
                "uplink {name} has IPv6 disabled (net.ipv6.conf.{name}.disable_ipv6): v4-path packets arriving \
                 there are delivered through ilnp0"
            );
            m.insert(ifindex, maps::UPLINK_F_NO_IPV6, 0).with_context(|| format!("marking uplink {name} IPv6-off"))
        } else {
            absent_ok(m.remove(&ifindex)).with_context(|| format!("unmarking uplink {name}"))
        }
    }

    /// Detaches the ingress program from an uplink; unknown or vanished: no error.
    pub fn detach_uplink(&mut self, ifindex: u32) -> Result<()> {
        let Some(i) = self.uplinks.iter().position(|a| a.ifindex == ifindex) else { return Ok(()) };
        let a = self.uplinks.remove(i);
        tc::detach(self.prog(PROG_INGRESS)?, a)
    }

    /// Directories and the bpffs mount the pin directory needed (`pin::created`).
    pub fn pins_created(&self) -> (Vec<std::path::PathBuf>, Option<std::path::PathBuf>) {
        self.pins.as_ref().map(pin::created).unwrap_or_default()
    }

    /// The maps were pinned by an earlier ilnpd, whose sessions this one adopts.
    pub fn adopted(&self) -> bool {
        self.pins.as_ref().is_some_and(|p| p.adopted)
    }

    /// Lets go of the data path without detaching anything: the pinned maps and
    /// links keep the fast path running for the next ilnpd (a handover for an
    /// upgrade, or a failed start that found them and leaves them as they were).
    /// Without pins, this is a shutdown.
    pub fn abandon(mut self) -> Result<()> {
        if self.pins.is_none() {
            return self.shutdown();
        }
        self.pins = None;
        self.uplinks.clear(); // pinned tcx links: the pins hold them
        self.egress = None;
        Ok(())
    }

    /// Detaches every program, deletes the clsact qdiscs it created, removes
    /// the pinned maps. Goes on after an error and reports the first one.
    pub fn shutdown(mut self) -> Result<()> {
        let mut first_err: Option<anyhow::Error> = None;
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        };
        for a in std::mem::take(&mut self.uplinks) {
            let r = self.prog(PROG_INGRESS).and_then(|p| tc::detach(p, a));
            note(r);
        }
        if let Some(a) = self.egress.take() {
            let r = self.prog(PROG_EGRESS).and_then(|p| tc::detach(p, a));
            note(r);
        }
        let pins = self.pins.take();
        drop(self.bpf); // closes the program and map fds (tcx links go with them)
        if let Some(p) = pins {
            note(p.remove(MAP_NAMES));
        }
        first_err.map_or(Ok(()), Err)
    }
}
