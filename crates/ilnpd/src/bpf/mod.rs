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
//! With a pin directory the maps and the tcx links are pinned there, so the fast
//! path keeps running while ilnpd is down; `layout` beside them names the map layout
//! (`layout_id`): pins of another layout (an upgrade changed the maps) are replaced.

mod maps;
mod pin;
pub use pin::unmount_if_empty;
mod route;
mod route_watch;
mod tc;
mod tcp_hints;
#[cfg(test)]
mod tests;

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, HashMap, MapData, MapError, PerCpuArray};
use aya::programs::{CgroupAttachMode, SchedClassifier, SockOps, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use ilnp_core::{BalanceChange, IlccSnapshot, LocalLocator};
use ilnp_wire::{Locator, Nid};
use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::path::PathBuf;

pub use maps::REASONS;
use maps::{AnswerHintVal, BalanceVal, CfgVal, IlccVal, LocalVal, PlainPeerVal, TcpCfg, TcpKey, TcpRto};
use pin::Pins;
pub use route::{active_features, parses_ipv6_for_csum, PROG_ROUTE};
pub use route_watch::RouteWatch;
use tc::{AttachKind, Attachment};

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

/// Where a partial sweep of the ILCC map goes on (None: from the start).
pub type Cursor = Option<Nid>;

/// Fast-path counters of one correspondent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PeerCounters {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
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

    fn ilcc_mut(&mut self) -> Result<HashMap<&mut MapData, [u8; 8], IlccVal>> {
        Ok(HashMap::try_from(self.bpf.map_mut(MAP_ILCC).ok_or_else(|| map_err(MAP_ILCC))?)?)
    }

    fn ilcc(&self) -> Result<HashMap<&MapData, [u8; 8], IlccVal>> {
        Ok(HashMap::try_from(self.bpf.map(MAP_ILCC).ok_or_else(|| map_err(MAP_ILCC))?)?)
    }

    /// Writes one correspondent's entry. The fast-path counters are kept (a
    /// packet counted between the read and the write is lost from them), and
    /// `ILCC_F_BALANCED` says whether ilnp_balance holds its table.
    pub fn upsert_peer(&mut self, s: &IlccSnapshot) -> Result<()> {
        let key = s.nid.to_bytes();
        let balanced = self.balance_mut()?.get(&key, 0).is_ok();
        let mut m = self.ilcc_mut()?;
        let old = m.get(&key, 0).ok();
        let mut v = IlccVal::from_snapshot(s, old.as_ref());
        if balanced {
            v.flags |= maps::ILCC_F_BALANCED;
        }
        m.insert(key, v, 0).with_context(|| format!("writing the ILCC entry of {} to the fast path", s.nid))
    }

    pub fn remove_peer(&mut self, nid: Nid) -> Result<()> {
        absent_ok(self.ilcc_mut()?.remove(&nid.to_bytes()))
            .with_context(|| format!("removing the ILCC entry of {nid} from the fast path"))
    }

    fn balance_mut(&mut self) -> Result<HashMap<&mut MapData, [u8; 8], BalanceVal>> {
        Ok(HashMap::try_from(self.bpf.map_mut(MAP_BALANCE).ok_or_else(|| map_err(MAP_BALANCE))?)?)
    }

    /// Writes or removes a correspondent's balancing table (ilnp-core `balance`).
    /// The egress programs look a table up only for an ILCC entry with
    /// `ILCC_F_BALANCED`: it is set after the table is written and cleared before
    /// it is removed (between the two, packets take the ILCC's pair, as without).
    pub fn set_balance(&mut self, c: &BalanceChange) -> Result<()> {
        match c {
            BalanceChange::Upsert(t) => {
                let key = t.nid.to_bytes();
                let mut m = self.balance_mut()?;
                let old = m.get(&key, 0).ok();
                let v = BalanceVal::from_table(t, old.as_ref());
                m.insert(key, v, 0)
                    .with_context(|| format!("writing the balancing table of {} to the fast path", t.nid))?;
                self.set_balanced_flag(t.nid, true)
            }
            BalanceChange::Remove(nid) => {
                self.set_balanced_flag(*nid, false)?;
                absent_ok(self.balance_mut()?.remove(&nid.to_bytes()))
                    .with_context(|| format!("removing the balancing table of {nid} from the fast path"))
            }
        }
    }

    /// The correspondents ilnp_balance holds a table for.
    pub fn balanced_peers(&self) -> Result<Vec<Nid>> {
        let m: HashMap<_, [u8; 8], BalanceVal> =
            HashMap::try_from(self.bpf.map(MAP_BALANCE).ok_or_else(|| map_err(MAP_BALANCE))?)?;
        m.keys().map(|k| Ok(Nid::from_bytes(k?))).collect()
    }

    /// Sets or clears `ILCC_F_BALANCED` in `nid`'s ILCC entry, if it has one
    /// (`upsert_peer` sets it for an entry written later).
    fn set_balanced_flag(&mut self, nid: Nid, on: bool) -> Result<()> {
        let mut m = self.ilcc_mut()?;
        let key = nid.to_bytes();
        let Ok(mut v) = m.get(&key, 0) else { return Ok(()) };
        if (v.flags & maps::ILCC_F_BALANCED != 0) == on {
            return Ok(());
        }
        v.flags ^= maps::ILCC_F_BALANCED;
        m.insert(key, v, 0).with_context(|| format!("marking the ILCC entry of {nid} as balanced = {on}"))
    }

    /// A correspondent reached as plain IPv6 (fallback): the ingress program punts
    /// its plain packets from `remote_loc` to ilnpd.
    pub fn upsert_plain_peer(&mut self, nid: Nid, remote_loc: Locator) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], PlainPeerVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_PLAIN_PEERS).ok_or_else(|| map_err(MAP_PLAIN_PEERS))?)?;
        m.insert(nid.to_bytes(), PlainPeerVal { remote_loc: remote_loc.to_bytes() }, 0)
            .with_context(|| format!("writing the plain peer {nid} to the fast path"))
    }

    /// The correspondents whose plain packets the ingress program punts.
    pub fn plain_peers(&self) -> Result<Vec<Nid>> {
        let m: HashMap<_, [u8; 8], PlainPeerVal> =
            HashMap::try_from(self.bpf.map(MAP_PLAIN_PEERS).ok_or_else(|| map_err(MAP_PLAIN_PEERS))?)?;
        m.keys().map(|k| Ok(Nid::from_bytes(k?))).collect()
    }

    pub fn remove_plain_peer(&mut self, nid: Nid) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], PlainPeerVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_PLAIN_PEERS).ok_or_else(|| map_err(MAP_PLAIN_PEERS))?)?;
        absent_ok(m.remove(&nid.to_bytes()))
            .with_context(|| format!("removing the plain peer {nid} from the fast path"))
    }

    /// One of our temporary NIDs ([privacy]): the ingress program punts packets to
    /// it to ilnpd (`present` false: no longer).
    pub fn set_temp_nid(&mut self, nid: Nid, present: bool) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], u8> =
            HashMap::try_from(self.bpf.map_mut(MAP_TEMP_NIDS).ok_or_else(|| map_err(MAP_TEMP_NIDS))?)?;
        if present {
            m.insert(nid.to_bytes(), 1, 0).with_context(|| format!("writing the temporary NID {nid} to the fast path"))
        } else {
            absent_ok(m.remove(&nid.to_bytes()))
                .with_context(|| format!("removing the temporary NID {nid} from the fast path"))
        }
    }

    /// The ingress program's hint for `nid` (admission = socket): where its last
    /// packet that no socket took came from, our locator it arrived on, its nonce,
    /// and when (CLOCK_MONOTONIC ns). None: no hint (never, or evicted).
    /// For a v4 path's packet, also the outer IPv4 source it came from.
    #[allow(clippy::type_complexity)]
    pub fn answer_hint(
        &self,
        nid: Nid,
    ) -> Result<Option<(Locator, Locator, ilnp_wire::Nonce, u64, Option<std::net::SocketAddrV4>)>> {
        let m: HashMap<_, [u8; 8], AnswerHintVal> =
            HashMap::try_from(self.bpf.map(MAP_ANSWER_HINTS).ok_or_else(|| map_err(MAP_ANSWER_HINTS))?)?;
        let v = match m.get(&nid.to_bytes(), 0) {
            Ok(v) => v,
            Err(MapError::KeyNotFound) => return Ok(None),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading the answer hint of {nid}")),
        };
        let Some(nonce) = v.nonce.get(..usize::from(v.nonce_len)).and_then(ilnp_wire::Nonce::from_slice) else {
            return Ok(None);
        };
        let via = (v.remote_v4_port != 0)
            .then(|| std::net::SocketAddrV4::new(v.remote_v4_addr.into(), u16::from_be(v.remote_v4_port)));
        Ok(Some((Locator::from_bytes(v.remote_loc), Locator::from_bytes(v.local_loc), nonce, v.ts_ns, via)))
    }

    /// Replaces the set of local locators the fast path accepts and sends from.
    pub fn set_local_locators(&mut self, locs: &[LocalLocator]) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], LocalVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_LOCALS).ok_or_else(|| map_err(MAP_LOCALS))?)?;
        let stale: Vec<[u8; 8]> =
            m.keys().filter_map(|k| k.ok()).filter(|k| !locs.iter().any(|l| l.loc.to_bytes() == *k)).collect();
        for k in stale {
            absent_ok(m.remove(&k)).context("removing a local locator from the fast path")?;
        }
        for l in locs {
            let old = m.get(&l.loc.to_bytes(), 0).ok();
            let v = LocalVal::from_core(l, self.routers.get(&l.ifindex).copied(), old.as_ref());
            m.insert(l.loc.to_bytes(), v, 0)
                .with_context(|| format!("writing local locator {} to the fast path", l.loc))?;
        }
        Ok(())
    }

    /// When the ingress program last delivered a packet on each local locator
    /// (CLOCK_MONOTONIC ns, to within `ILNP_LOCAL_RX_GRAIN_NS`); locators it never
    /// delivered on are absent.
    pub fn local_last_rx(&self) -> Result<Vec<(Locator, u64)>> {
        let m: HashMap<_, [u8; 8], LocalVal> =
            HashMap::try_from(self.bpf.map(MAP_LOCALS).ok_or_else(|| map_err(MAP_LOCALS))?)?;
        let mut out = Vec::new();
        for r in m.iter() {
            let (k, v) = r?;
            if v.last_rx_ns != 0 {
                out.push((Locator::from_bytes(k), v.last_rx_ns));
            }
        }
        Ok(out)
    }

    /// The default router behind each uplink (uplinks without one are absent):
    /// packets from an uplink's locators leave through it via this router when
    /// the main table would send them out of another uplink. Updates the local
    /// locators already written.
    pub fn set_uplink_routers(&mut self, routers: &BTreeMap<u32, Ipv6Addr>) -> Result<()> {
        if *routers == self.routers {
            return Ok(());
        }
        self.routers = routers.clone();
        let mut m: HashMap<_, [u8; 8], LocalVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_LOCALS).ok_or_else(|| map_err(MAP_LOCALS))?)?;
        let all: Vec<([u8; 8], LocalVal)> = m.iter().filter_map(|e| e.ok()).collect();
        for (k, mut v) in all {
            v.router = routers.get(&v.ifindex).map(|r| r.octets()).unwrap_or_default();
            m.insert(k, v, 0).context("writing a local locator's router to the fast path")?;
        }
        Ok(())
    }

    /// Reason counters summed over CPUs, in `REASONS` order.
    pub fn stats(&self) -> Result<Vec<(&'static str, u64)>> {
        let m: PerCpuArray<_, u64> = PerCpuArray::try_from(self.bpf.map(MAP_STATS).ok_or_else(|| map_err(MAP_STATS))?)?;
        REASONS.iter().enumerate().map(|(i, n)| Ok((*n, m.get(&(i as u32), 0)?.iter().sum()))).collect()
    }

    pub fn peer_counters(&self) -> Result<Vec<(Nid, PeerCounters)>> {
        let m = self.ilcc()?;
        let mut out = Vec::new();
        for r in m.iter() {
            let (k, v) = r?;
            let c = PeerCounters { tx_pkts: v.tx_pkts, tx_bytes: v.tx_bytes, rx_pkts: v.rx_pkts, rx_bytes: v.rx_bytes };
            out.push((Nid::from_bytes(k), c));
        }
        Ok(out)
    }

    /// At most `max` correspondents' fast-path counters, in the map's order, starting
    /// after `cursor` (None: from the beginning), and where to go on next time (None:
    /// the sweep reached the end). Bounds the work per call whatever the ILCC's size
    /// (issue #11 item 4); a cursor whose entry went away restarts the sweep (the
    /// kernel's BPF_MAP_GET_NEXT_KEY returns the first key for a key it lacks).
    pub fn peer_counters_from(&self, cursor: Option<Nid>, max: usize) -> Result<(Vec<(Nid, PeerCounters)>, Cursor)> {
        use std::os::fd::{AsFd, AsRawFd};
        let fd = match self.bpf.map(MAP_ILCC) {
            Some(aya::maps::Map::HashMap(d)) => d.fd().as_fd().as_raw_fd(),
            _ => return Err(map_err(MAP_ILCC)),
        };
        let m = self.ilcc()?;
        let mut key = cursor.map(Nid::to_bytes);
        let mut out = Vec::new();
        while out.len() < max {
            let Some(next) = next_key(fd, key.as_ref())? else { return Ok((out, None)) };
            if let Ok(v) = m.get(&next, 0) {
                let c =
                    PeerCounters { tx_pkts: v.tx_pkts, tx_bytes: v.tx_bytes, rx_pkts: v.rx_pkts, rx_bytes: v.rx_bytes };
                out.push((Nid::from_bytes(next), c));
            }
            key = Some(next);
        }
        Ok((out, key.map(Nid::from_bytes)))
    }

    /// A writer of `ilnp_route_gen`, the generation the egress program's next-hop
    /// cache (`ilnp_nh_cache`) is valid for, usable from another thread. While
    /// nothing writes it, it is 0 and the cache is off.
    pub fn route_gen(&self) -> Result<RouteGen> {
        use std::os::fd::AsFd;
        let fd = match self.bpf.map(MAP_ROUTE_GEN) {
            Some(aya::maps::Map::Array(d)) => d.fd().as_fd().try_clone_to_owned()?,
            _ => return Err(map_err(MAP_ROUTE_GEN)),
        };
        let data = aya::maps::MapData::from_fd(fd).with_context(|| format!("reopening {MAP_ROUTE_GEN}"))?;
        let map = aya::maps::Array::try_from(aya::maps::Map::Array(data)).map_err(|_| map_err(MAP_ROUTE_GEN))?;
        Ok(RouteGen { map, last: 0 })
    }

    /// Loads bpf/ilnp_sockops.c and attaches it to the cgroup v2 root, for the TCP
    /// connections of this network namespace only: from then on, connections to
    /// identifier addresses established record their retransmission timeouts in
    /// ilnp_tcp_rto. Detached when the object is dropped (shutdown, exit, crash).
    pub fn attach_tcp_hints(&mut self) -> Result<()> {
        let cookie = tcp_hints::netns_cookie()?;
        let m = self.bpf.map_mut(MAP_TCP_CFG).ok_or_else(|| map_err(MAP_TCP_CFG))?;
        Array::<_, TcpCfg>::try_from(m)?.set(0, TcpCfg { netns_cookie: cookie }, 0).context("writing ilnp_tcp_cfg")?;
        let root = tcp_hints::cgroup2_root()?;
        let p = self
            .bpf
            .program_mut(PROG_SOCKOPS)
            .ok_or_else(|| anyhow!("the eBPF object has no program {PROG_SOCKOPS}"))?;
        let p: &mut SockOps = p.try_into()?;
        p.load().with_context(|| format!("the verifier rejected {PROG_SOCKOPS}"))?;
        // other namespaces' daemons attach theirs too (each filters by its namespace): aya
        // attaches with a bpf_link (Linux >= 5.7), which always shares the cgroup with
        // other programs and takes no flags (with BPF_F_ALLOW_MULTI the kernel says EINVAL)
        p.attach(root, CgroupAttachMode::Single).context("attaching the sock_ops program to the cgroup v2 root")?;
        self.tcp_hints = true;
        Ok(())
    }

    /// The connections to `remote` whose last retransmission timeout was at or
    /// after `since_ns` (CLOCK_MONOTONIC), at most `max`.
    pub fn tcp_timeouts(&self, remote: Ipv6Addr, since_ns: u64, max: usize) -> Result<Vec<TcpTimeout>> {
        if !self.tcp_hints {
            return Ok(Vec::new());
        }
        let m = self.bpf.map(MAP_TCP_RTO).ok_or_else(|| map_err(MAP_TCP_RTO))?;
        let m: HashMap<_, TcpKey, TcpRto> = HashMap::try_from(m)?;
        let mut out = Vec::new();
        for kv in m.iter() {
            let Ok((k, v)) = kv else { continue }; // an entry evicted while we walk
            if k.remote != remote.octets() || v.ts_ns < since_ns {
                continue;
            }
            out.push(TcpTimeout {
                local: Ipv6Addr::from(k.local),
                remote,
                local_port: k.lport,
                remote_port: k.rport,
                snd_una: v.snd_una,
                retransmits: v.retransmits,
                ts_ns: v.ts_ns,
            });
            if out.len() >= max {
                break;
            }
        }
        Ok(out)
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

/// A TCP connection to an identifier address that timed out (`Datapath::tcp_timeouts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpTimeout {
    pub local: Ipv6Addr,
    pub remote: Ipv6Addr,
    pub local_port: u16,
    pub remote_port: u16,
    /// its oldest unacknowledged sequence number at that timeout
    pub snd_una: u32,
    /// retransmissions before that timeout (its backoff)
    pub retransmits: u32,
    /// when (ns, CLOCK_MONOTONIC)
    pub ts_ns: u64,
}

/// BPF_MAP_GET_NEXT_KEY on an 8-byte-key map: the key after `key` (None: the first),
/// or None at the end. aya only iterates from the start.
fn next_key(fd: std::os::fd::RawFd, key: Option<&[u8; 8]>) -> Result<Option<[u8; 8]>> {
    #[repr(C)]
    struct Attr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        next_key: u64,
        flags: u64,
    }
    const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
    let mut next = [0u8; 8];
    let attr = Attr {
        map_fd: fd as u32,
        _pad: 0,
        key: key.map_or(0, |k| k.as_ptr() as u64),
        next_key: next.as_mut_ptr() as u64,
        flags: 0,
    };
    // SAFETY: attr points at live buffers of the map's key size for the call's duration.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, BPF_MAP_GET_NEXT_KEY, &attr as *const Attr, std::mem::size_of::<Attr>())
    };
    if r == 0 {
        return Ok(Some(next));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOENT) {
        return Ok(None);
    }
    Err(anyhow!("BPF_MAP_GET_NEXT_KEY on ilnp_ilcc: {e}"))
}

/// Writes `ilnp_route_gen[0]` (see `Datapath::route_gen`). Dropping it writes 0:
/// the cache is off whenever no one keeps it valid.
pub struct RouteGen {
    map: aya::maps::Array<aya::maps::MapData, u64>,
    last: u64,
}

impl RouteGen {
    /// Invalidates every cached next hop: a generation never written before
    /// (CLOCK_MONOTONIC ns, or one more than the last; across an ilnpd restart
    /// with pinned maps, too) and never 0.
    pub fn bump(&mut self) {
        let next = monotonic_ns().max(self.last + 1);
        if let Err(e) = self.write(next) {
            tracing::warn!("invalidating the next-hop cache: {e:#}");
        }
    }

    fn write(&mut self, v: u64) -> Result<()> {
        self.map.set(0, v, 0).with_context(|| format!("writing {MAP_ROUTE_GEN}"))?;
        self.last = v;
        Ok(())
    }
}

impl Drop for RouteGen {
    fn drop(&mut self) {
        if let Err(e) = self.write(0) {
            tracing::warn!("turning the next-hop cache off: {e:#}");
        }
    }
}

/// CLOCK_MONOTONIC in ns: what bpf_ktime_get_ns() returns.
pub fn monotonic_ns() -> u64 {
    // SAFETY: a zeroed timespec is valid; clock_gettime only writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
