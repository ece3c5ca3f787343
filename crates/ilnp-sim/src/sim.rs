//! The discrete-event engine: one `ilnp_core::Core` per simulated host, the real
//! wire bytes between them, a network of access links (delay, jitter, loss, rate)
//! joined by a backbone, and routers as locator → host maps.
//!
//! What is modelled outside the core, and nothing more (every protocol decision is
//! the core's): the network; the hosts' attachment to networks (their locators are
//! handed to `Core::set_local_locators` as ilnpd hands the kernel's); the ingress
//! program's admission check (`admission = socket`: a TCP/UDP packet from a NID
//! without an ILCC entry reaches the core only if the port is listened on — the
//! eBPF `bpf_sk_lookup_*`; otherwise the stack's answer would be dropped by the
//! core as `answer_unadmitted`, so nothing is sent); and the applications (UDP
//! senders, echo servers). Every packet goes through the core, as in ilnpd's
//! slow-path data-path mode: the fast path is a cache of the core's decisions.
//!
//! Time is a `u64` of nanoseconds since the start; the core gets `base + t` as its
//! `Instant`, so nothing depends on the host's clock. Randomness: one ChaCha8
//! stream per host (the core's nonces) and one for the network and workload,
//! all from the scenario seed: a run is a function of (scenario, seed).

use crate::queue::Calendar;
use crate::results::{Metrics, Results};
use crate::scenario::{CoreOpts, GroupSpec, Scenario};
use ilnp_core::{
    Action, Admission, Core, CoreConfig, Event, HandoffMode, LocalLocator, LocatorState, PeerLocator, PeerRecord,
};
use ilnp_wire::translate::Csum;
use ilnp_wire::{checksum, ilnp_addr, ipv6, split_addr, Locator, Nid};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The identifier prefix every simulated host uses (ilnpd's default).
pub const ID_PREFIX: Locator = Locator(0xfd69_6c6e_7000_0000);
const PROTO_UDP: u8 = 17;
const PROTO_TCP: u8 = 6;
/// First client source port (`CLIENT_PORT + host index % 20000`).
const CLIENT_PORT: u16 = 40000;

pub const NS: u64 = 1_000_000_000;

/// The routers' maps are keyed by locators and NIDs the scenario made (no
/// adversary chooses them): a multiply-xorshift hash instead of SipHash.
#[derive(Clone, Copy, Default)]
pub struct FastHash;
impl std::hash::BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}
pub struct FastHasher(u64);
impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        let x = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^ (x >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

pub fn secs(s: f64) -> u64 {
    (s * NS as f64).round().max(0.0) as u64
}

#[derive(Debug)]
enum Kind {
    /// a wire packet (`Sim::flight[slot]`) reaches the router of its destination
    /// locator and, if that `locator:NID` is attached, the host
    Arrive {
        slot: u32,
    },
    Timer {
        host: u32,
    },
    Send {
        host: u32,
    },
    Move {
        host: u32,
    },
    Join {
        host: u32,
        net: u32,
    },
    Leave {
        host: u32,
        net: u32,
    },
    Renumber {
        net: u32,
    },
    RenumberEnd {
        net: u32,
        loc: Locator,
    },
    /// the NA answering a solicitation for `loc:nid` reached the router of `net`
    NdResolved {
        net: u32,
        loc: Locator,
        nid: Nid,
    },
    /// the retransmission time of solicitation `try_` for `loc:nid` ended
    NdTimeout {
        net: u32,
        loc: Locator,
        nid: Nid,
        try_: u32,
    },
    Sample,
}

struct Net {
    name: String,
    /// current prefixes, oldest first (renumbering adds one, then removes the old)
    locs: Vec<Locator>,
    deprecated: BTreeSet<Locator>,
    hosts: BTreeSet<u32>,
    delay: u64,
    jitter: u64,
    loss: f64,
    /// nanoseconds per byte (0: unlimited)
    ns_per_byte: f64,
    up_busy: u64,
    down_busy: u64,
    /// Neighbour Discovery at the router: None = off
    nd: Option<NdConfig>,
    neigh: HashMap<(Locator, Nid), Neigh, FastHash>,
}

#[derive(Clone, Copy)]
struct NdConfig {
    retrans: u64,
    max_solicit: u32,
}

enum Neigh {
    Reachable,
    /// solicitations sent, packets waiting
    Incomplete {
        tries: u32,
        queue: Vec<Vec<u8>>,
    },
}

struct Traffic {
    target: u32,
    interval: u64,
    size: usize,
    port: u16,
    count: u64,
}

/// `repr(C)`: the simulator's own fields first, in declaration order, then the
/// core, so that `prefetch_next` can ask for the lines a visit touches first
/// (these fields and the start of the core) as one range.
#[repr(C)]
pub(crate) struct Host {
    timer_at: Option<u64>,
    traffic: Option<Traffic>,
    pub(crate) nid: Nid,
    pub(crate) sent: u64,
    pub(crate) first_sent: Option<u64>,
    pub(crate) replies: u64,
    pub(crate) first_reply: Option<u64>,
    pub(crate) received: u64,
    mob_next: usize,
    /// (peer NID, when attempt 1 of our current LU to it left)
    pub(crate) lu_pending: Vec<(Nid, u64)>,
    /// networks attached to, in joining order
    nets: NetList,
    pub(crate) group: u16,
    socket_admission: bool,
    core: Core,
}

/// A host's networks: up to `NetList::INLINE` inside the `Host` (a separate
/// allocation per host was a cache miss per packet sent, in `send_wire`), more in a
/// `Vec` (then all of them: `more` non-empty is the list).
#[derive(Default)]
struct NetList {
    len: u8,
    inline: [u32; NetList::INLINE],
    more: Vec<u32>,
}

impl NetList {
    const INLINE: usize = 4;

    fn as_slice(&self) -> &[u32] {
        if self.more.is_empty() {
            &self.inline[..self.len as usize]
        } else {
            &self.more
        }
    }

    fn contains(&self, n: &u32) -> bool {
        self.as_slice().contains(n)
    }

    fn set(&mut self, v: Vec<u32>) {
        if v.len() <= Self::INLINE {
            self.inline[..v.len()].copy_from_slice(&v);
            self.len = v.len() as u8;
            self.more = Vec::new();
        } else {
            self.more = v;
        }
    }

    fn push(&mut self, n: u32) {
        let mut v = self.as_slice().to_vec();
        v.push(n);
        self.set(v);
    }

    fn remove(&mut self, p: usize) {
        let mut v = self.as_slice().to_vec();
        v.remove(p);
        self.set(v);
    }

    fn retain(&mut self, f: impl FnMut(&u32) -> bool) {
        let mut v = self.as_slice().to_vec();
        v.retain(f);
        self.set(v);
    }
}

pub(crate) struct Group {
    pub(crate) spec: GroupSpec,
    pub(crate) first: u32,
    listen: Vec<u16>,
}

/// A packet on its way: destination `loc:nid`, the host `routes` held for it when
/// it left (`u32::MAX`: none), the bytes.
type InFlight = (Locator, Nid, u32, Vec<u8>);

pub struct Sim {
    pub(crate) now: u64,
    pub(crate) end: u64,
    queue: Calendar<Kind>,
    base: Instant,
    pub(crate) hosts: Vec<Host>,
    pub(crate) groups: Vec<Group>,
    nets: Vec<Net>,
    /// the routers: (locator, NID) → attached host
    routes: HashMap<(Locator, Nid), u32, FastHash>,
    loc_net: HashMap<Locator, u32, FastHash>,
    /// packets in flight, by `Kind::Arrive`'s slot (with the host the route pointed
    /// to when it left: a prefetch hint only); `free`: slots to reuse
    flight: Vec<Option<InFlight>>,
    free: Vec<u32>,
    /// `run_actions`' buffer of one call's wire packets (kept: no allocation per call)
    wire: Vec<Vec<u8>>,
    /// the cores' action buffers, reused (calls nest: an echo is sent while the
    /// request's actions are carried out)
    bufs: Vec<Vec<Action>>,
    /// scratch for the applications' datagrams
    payload_buf: Vec<u8>,
    pkt_buf: Vec<u8>,
    next_loc: u64,
    backbone: u64,
    sample: u64,
    rng: ChaCha8Rng,
    pub(crate) m: Metrics,
    /// events handled (stale timer wake-ups not counted)
    pub events: u64,
    scenario: Scenario,
    /// `ILNP_SIM_TRACE=1`: every core event and every loss on stderr
    trace: bool,
}

fn core_config(o: &CoreOpts, nid: Nid) -> CoreConfig {
    let mut c = CoreConfig::new(ID_PREFIX, nid);
    c.admission = match o.admission.as_deref() {
        Some("open") => Admission::Open,
        _ => Admission::Socket,
    };
    if o.handoff.as_deref() == Some("hard") {
        c.handoff = HandoffMode::Hard;
    }
    if o.nonce_bits == Some(96) {
        c.nonce_len = 12;
    }
    let ms = Duration::from_millis;
    if let Some(v) = o.lu_initial_rto_ms {
        c.lu.initial_rto = ms(v);
    }
    if let Some(v) = o.lu_min_rto_ms {
        c.lu.min_rto = ms(v);
    }
    if let Some(v) = o.lu_max_rto_ms {
        c.lu.max_rto = ms(v);
    }
    if let Some(v) = o.lu_max_attempts {
        c.lu.max_attempts = v;
    }
    if let Some(v) = o.ilcc_max_entries {
        c.ilcc_max_entries = v;
    }
    if let Some(v) = o.ilcc_embryonic_max {
        c.ilcc_embryonic_max = v;
    }
    if let Some(v) = o.hello_rate_pps {
        c.hello_rate_pps = v;
    }
    if let Some(v) = o.hello_burst {
        c.hello_burst = v;
    }
    if let Some(v) = o.idle_timeout_s {
        c.idle_timeout = Duration::from_secs(v);
    }
    if let Some(v) = o.soft_quiet_period_ms {
        c.soft_quiet_period = ms(v);
    }
    c
}

/// NID of host `i`: modified EUI-64 form (universal/local bit set, group bit clear).
pub fn host_nid(i: u32) -> Nid {
    Nid(0x0200_5100_0000_0000 | (i as u64 + 1))
}

fn first_locator(i: u64) -> Locator {
    Locator(0x2001_0db8_0000_0000 | i)
}

impl Sim {
    /// Builds the networks and hosts of a scenario for run seed `seed`.
    pub fn new(s: &Scenario, seed: u64) -> Sim {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut nets = Vec::new();
        let mut loc_net = HashMap::default();
        for (i, n) in s.network.iter().enumerate() {
            let loc = first_locator(i as u64 + 1);
            loc_net.insert(loc, i as u32);
            nets.push(Net {
                name: n.name.clone(),
                locs: vec![loc],
                deprecated: BTreeSet::new(),
                hosts: BTreeSet::new(),
                delay: secs(n.delay_ms / 1e3),
                jitter: secs(n.jitter_ms / 1e3),
                loss: n.loss_pct / 100.0,
                ns_per_byte: if n.rate_mbit > 0.0 { 8e3 / n.rate_mbit } else { 0.0 },
                up_busy: 0,
                down_busy: 0,
                nd: n.nd.then(|| NdConfig {
                    retrans: secs(n.nd_retrans_ms / 1e3).max(1),
                    max_solicit: n.nd_max_solicit.max(1),
                }),
                neigh: HashMap::default(),
            });
        }
        let net_of = |name: &str| s.network.iter().position(|n| n.name == name).expect("validated") as u32;
        let mut groups = Vec::new();
        let mut first = 0u32;
        for g in &s.group {
            let mut listen = g.listen.clone();
            listen.sort_unstable();
            groups.push(Group { spec: g.clone(), first, listen });
            first += g.count as u32;
        }
        let base = Instant::now();
        let mut hosts = Vec::with_capacity(first as usize);
        for (gi, g) in s.group.iter().enumerate() {
            let opts = s.core.merged(&g.core);
            for k in 0..g.count {
                let id = hosts.len() as u32;
                let nid = host_nid(id);
                let cfg = core_config(&opts, nid);
                let socket_admission = cfg.admission == Admission::Socket;
                let host_rng = ChaCha8Rng::seed_from_u64(rng.next_u64());
                let core = Core::new(cfg, Box::new(host_rng));
                let traffic = g.traffic.as_ref().map(|t| {
                    let tg = s.group.iter().position(|x| x.name == t.to).expect("validated");
                    let target = groups[tg].first + (k % s.group[tg].count) as u32;
                    Traffic { target, interval: secs(1.0 / t.pps).max(1), size: t.size, port: t.port, count: t.count }
                });
                let mob_next = g.mobility.as_ref().map_or(0, |m| {
                    m.networks.iter().position(|n| *n == g.network).map_or(0, |p| (p + 1) % m.networks.len())
                });
                hosts.push(Host {
                    group: gi as u16,
                    nid,
                    core,
                    nets: NetList::default(),
                    timer_at: None,
                    socket_admission,
                    traffic,
                    mob_next,
                    lu_pending: vec![],
                    sent: 0,
                    first_sent: None,
                    replies: 0,
                    first_reply: None,
                    received: 0,
                });
            }
        }
        let mut sim = Sim {
            now: 0,
            end: secs(s.duration_s),
            queue: Calendar::default(),
            base,
            hosts,
            groups,
            nets,
            routes: HashMap::default(),
            loc_net,
            flight: Vec::new(),
            free: Vec::new(),
            wire: Vec::new(),
            bufs: Vec::new(),
            payload_buf: Vec::new(),
            pkt_buf: Vec::new(),
            next_loc: s.network.len() as u64 + 1,
            backbone: secs(s.backbone_delay_ms / 1e3),
            sample: secs(s.sample_s).max(1),
            rng,
            m: Metrics::new(s),
            events: 0,
            scenario: s.clone(),
            trace: std::env::var_os("ILNP_SIM_TRACE").is_some_and(|v| v == "1"),
        };
        // peers: each sender knows its target's first locator (a peer file / DNS)
        for h in 0..sim.hosts.len() {
            if let Some(t) = sim.hosts[h].traffic.as_ref().map(|t| t.target) {
                let g = &sim.groups[sim.hosts[t as usize].group as usize].spec;
                let loc = sim.nets[net_of(&g.network) as usize].locs[0];
                let rec = PeerRecord {
                    name: format!("h{t}"),
                    nid: sim.hosts[t as usize].nid,
                    locators: vec![PeerLocator { loc, pref: 10 }],
                };
                sim.hosts[h].core.add_peer(rec);
            }
        }
        // attach every host, then schedule the workload
        for gi in 0..sim.groups.len() {
            let g = sim.groups[gi].spec.clone();
            let net = net_of(&g.network);
            let first = sim.groups[gi].first;
            for h in first..first + g.count as u32 {
                sim.join(h, net, g.reachable);
                if let Some(t) = &g.traffic {
                    let spread = sim.uniform(0.0, t.start_spread_s);
                    sim.push(secs(t.start_s + spread), Kind::Send { host: h });
                }
                if let Some(m) = &g.mobility {
                    for &at in &m.at_s {
                        sim.push(secs(at), Kind::Move { host: h });
                    }
                    if let Some([lo, hi]) = m.interval_s {
                        let d = sim.uniform(lo, hi);
                        sim.push(secs(d), Kind::Move { host: h });
                    }
                }
            }
        }
        for r in &s.renumber {
            sim.push(secs(r.at_s), Kind::Renumber { net: net_of(&r.network) });
        }
        sim.push(sim.sample, Kind::Sample);
        sim
    }

    /// Starts loading the host the next event will touch while this one is handled
    /// (its own fields and the start of its core: `PREFETCH_CORE_BYTES`):
    /// with 10^5 hosts (~0.4 GB) a host visited is seldom in any cache, and the
    /// first touch of its `Host` and `Core` was the largest single cost of a run.
    /// A hint to the CPU only: nothing observable depends on it.
    fn prefetch_next(&self) {
        let h = match self.queue.peek_now() {
            Some(Kind::Timer { host } | Kind::Send { host } | Kind::Move { host }) => *host,
            Some(Kind::Arrive { slot }) => match self.flight.get(*slot as usize) {
                Some(Some((_, _, hint, _))) => *hint,
                _ => return,
            },
            _ => return,
        };
        if let Some(host) = self.hosts.get(h as usize) {
            prefetch(host, std::mem::offset_of!(Host, core) + PREFETCH_CORE_BYTES);
        }
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            return lo;
        }
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn push(&mut self, t: u64, kind: Kind) {
        // past the end it would never run: keep the queue to what can (idle timers
        // of 10^5 cores would otherwise double it)
        if t <= self.end {
            self.queue.push(t, kind);
        }
    }

    fn instant(&self) -> Instant {
        self.base + Duration::from_nanos(self.now)
    }

    /// Runs to the end; `progress(now)` every 2^16 events.
    pub fn run(&mut self, progress: &mut dyn FnMut(u64)) -> Results {
        while let Some((t, kind)) = self.queue.pop() {
            if t > self.end {
                break;
            }
            self.now = t;
            self.prefetch_next();
            match kind {
                Kind::Timer { host } => {
                    if self.hosts[host as usize].timer_at != Some(t) {
                        continue; // superseded by an earlier deadline
                    }
                    self.hosts[host as usize].timer_at = None;
                    let now = self.instant();
                    let mut out = self.bufs.pop().unwrap_or_default();
                    self.hosts[host as usize].core.handle_timeout_into(now, &mut out);
                    self.run_actions(host, out);
                }
                Kind::Arrive { slot } => {
                    let (loc, nid, _, pkt) = std::mem::take(&mut self.flight[slot as usize]).expect("in flight");
                    self.free.push(slot);
                    self.arrive(loc, nid, pkt)
                }
                Kind::Send { host } => self.app_send(host),
                Kind::Move { host } => self.do_move(host),
                Kind::Join { host, net } => {
                    let reachable = self.reachable(host);
                    self.join(host, net, reachable)
                }
                Kind::Leave { host, net } => self.leave(host, net),
                Kind::Renumber { net } => self.renumber(net),
                Kind::RenumberEnd { net, loc } => self.renumber_end(net, loc),
                Kind::NdResolved { net, loc, nid } => self.nd_resolved(net, loc, nid),
                Kind::NdTimeout { net, loc, nid, try_ } => self.nd_timeout(net, loc, nid, try_),
                Kind::Sample => {
                    self.take_sample();
                    self.push(self.now + self.sample, Kind::Sample);
                }
            }
            self.events += 1;
            if self.events & 0xffff == 0 {
                progress(self.now);
            }
        }
        self.now = self.end;
        progress(self.end);
        Results::collect(self)
    }

    fn reachable(&self, h: u32) -> bool {
        self.groups[self.hosts[h as usize].group as usize].spec.reachable
    }

    // ------------------------------------------------------------ attachment

    fn locals_of(&self, h: u32) -> Vec<LocalLocator> {
        let mut v = Vec::new();
        for &n in self.hosts[h as usize].nets.as_slice() {
            let net = &self.nets[n as usize];
            for &loc in &net.locs {
                v.push(LocalLocator {
                    loc,
                    ifindex: n + 1,
                    pref: 10,
                    lifetime_s: u32::MAX,
                    state: LocatorState::Active,
                    has_router: true,
                    deprecated: net.deprecated.contains(&loc),
                });
            }
        }
        v
    }

    fn refresh_locators(&mut self, h: u32) {
        let locs = self.locals_of(h);
        let now = self.instant();
        let out = self.hosts[h as usize].core.set_local_locators(now, locs);
        self.run_actions(h, out);
    }

    fn join(&mut self, h: u32, net: u32, reachable: bool) {
        let nid = self.hosts[h as usize].nid;
        if self.hosts[h as usize].nets.contains(&net) {
            return;
        }
        self.hosts[h as usize].nets.push(net);
        self.nets[net as usize].hosts.insert(h);
        if reachable {
            for &loc in &self.nets[net as usize].locs {
                self.routes.insert((loc, nid), h);
            }
        }
        self.refresh_locators(h);
    }

    fn leave(&mut self, h: u32, net: u32) {
        let nid = self.hosts[h as usize].nid;
        let Some(p) = self.hosts[h as usize].nets.as_slice().iter().position(|&n| n == net) else { return };
        self.hosts[h as usize].nets.remove(p);
        self.detach(h, net, nid);
        self.refresh_locators(h);
    }

    /// Off `net`'s router: its routes and neighbour entries (packets waiting are lost).
    fn detach(&mut self, h: u32, net: u32, nid: Nid) {
        let n = &mut self.nets[net as usize];
        n.hosts.remove(&h);
        for &loc in &n.locs {
            self.routes.remove(&(loc, nid));
            if let Some(Neigh::Incomplete { queue, .. }) = n.neigh.remove(&(loc, nid)) {
                self.m.drop_nd += queue.len() as u64;
            }
        }
    }

    fn do_move(&mut self, h: u32) {
        let g = self.groups[self.hosts[h as usize].group as usize].spec.clone();
        let Some(m) = g.mobility else { return };
        let names = &m.networks;
        let net_of = |name: &str| self.nets.iter().position(|n| n.name == name).expect("validated") as u32;
        // the next network of the list that we are not on
        let mut target = None;
        for _ in 0..names.len() {
            let i = self.hosts[h as usize].mob_next;
            self.hosts[h as usize].mob_next = (i + 1) % names.len();
            let n = net_of(&names[i]);
            if !self.hosts[h as usize].nets.contains(&n) {
                target = Some(n);
                break;
            }
        }
        if let Some(to) = target {
            self.m.moves += 1;
            let old: Vec<u32> = self.hosts[h as usize].nets.as_slice().to_vec();
            let reachable = g.reachable;
            if m.kind == "make" {
                self.join(h, to, reachable);
                for n in old {
                    self.push(self.now + secs(m.overlap_s), Kind::Leave { host: h, net: n });
                }
            } else {
                let gap = secs(m.gap_ms / 1e3);
                if gap == 0 {
                    // one change of the locator set: leave and join at once
                    let nid = self.hosts[h as usize].nid;
                    for n in old {
                        self.hosts[h as usize].nets.retain(|&x| x != n);
                        self.detach(h, n, nid);
                    }
                    self.join(h, to, reachable);
                } else {
                    for n in old {
                        self.leave(h, n);
                    }
                    self.push(self.now + gap, Kind::Join { host: h, net: to });
                }
            }
        }
        if let Some([lo, hi]) = m.interval_s {
            let d = self.uniform(lo, hi);
            self.push(self.now + secs(d), Kind::Move { host: h });
        }
    }

    fn renumber(&mut self, net: u32) {
        let loc = first_locator(self.next_loc);
        self.next_loc += 1;
        // (a new prefix: the router has no neighbour entries for it yet)
        self.loc_net.insert(loc, net);
        let name = &self.nets[net as usize].name;
        let overlap = self.scenario.renumber.iter().find(|r| &r.network == name).map_or(0.0, |r| r.overlap_s);
        let n = &mut self.nets[net as usize];
        let old: Vec<Locator> = n.locs.clone();
        if overlap > 0.0 {
            n.deprecated.extend(old.iter().copied());
        } else {
            // a flash renumbering: the old prefixes go in the same change
            n.locs.clear();
            n.neigh.retain(|k, _| !old.contains(&k.0));
        }
        n.locs.push(loc);
        let hosts: Vec<u32> = n.hosts.iter().copied().collect();
        self.m.renumbered_hosts += hosts.len() as u64;
        self.m.renumber_at.get_or_insert(self.now);
        for &h in &hosts {
            let nid = self.hosts[h as usize].nid;
            if self.reachable(h) {
                self.routes.insert((loc, nid), h);
            }
            if overlap <= 0.0 {
                for o in &old {
                    self.routes.remove(&(*o, nid));
                }
            }
            self.refresh_locators(h);
        }
        for o in old {
            if overlap > 0.0 {
                self.push(self.now + secs(overlap), Kind::RenumberEnd { net, loc: o });
            } else {
                self.loc_net.remove(&o);
            }
        }
    }

    fn renumber_end(&mut self, net: u32, loc: Locator) {
        let n = &mut self.nets[net as usize];
        n.locs.retain(|&l| l != loc);
        n.deprecated.remove(&loc);
        n.neigh.retain(|k, _| k.0 != loc);
        self.loc_net.remove(&loc);
        let hosts: Vec<u32> = n.hosts.iter().copied().collect();
        for &h in &hosts {
            self.routes.remove(&(loc, self.hosts[h as usize].nid));
            self.refresh_locators(h);
        }
    }

    // ------------------------------------------------------------ packets

    /// Carries out one core call's actions; `out` goes back to the pool of buffers.
    fn run_actions(&mut self, h: u32, mut out: Vec<Action>) {
        let mut wire = std::mem::take(&mut self.wire);
        for a in out.drain(..) {
            match a {
                Action::SendWire { pkt, .. } => wire.push(pkt),
                Action::DeliverLocal(pkt) => self.stack(h, &pkt),
                Action::Event(e) => self.event(h, e),
                _ => {}
            }
        }
        // the core walks its ILCC in hash order: one call's packets leave in byte
        // order so a run does not depend on the hasher's seed
        if wire.len() > 1 {
            wire.sort_unstable();
        }
        for pkt in wire.drain(..) {
            self.send_wire(h, pkt);
        }
        self.wire = wire;
        // (bounded: calls nest a few deep; setup's `set_local_locators` brings its own)
        if self.bufs.len() < 8 {
            self.bufs.push(out);
        }
        self.schedule_timer(h);
    }

    fn schedule_timer(&mut self, h: u32) {
        let Some(at) = self.hosts[h as usize].core.poll_timeout() else { return };
        let t = at.saturating_duration_since(self.base).as_nanos() as u64;
        let t = t.max(self.now);
        let host = &mut self.hosts[h as usize];
        if host.timer_at.is_some_and(|x| x <= t) {
            return;
        }
        host.timer_at = Some(t);
        self.push(t, Kind::Timer { host: h });
    }

    fn event(&mut self, h: u32, e: Event) {
        let now = self.now;
        if self.trace {
            eprintln!("{:.6} h{h} {e:?}", now as f64 / NS as f64);
        }
        let host = &mut self.hosts[h as usize];
        match e {
            Event::LuSent { nid, attempt, .. } => {
                self.m.lu_packets += 1;
                if attempt == 1 {
                    if let Some(p) = host.lu_pending.iter_mut().find(|p| p.0 == nid) {
                        self.m.lu_superseded += 1;
                        p.1 = now;
                    } else {
                        host.lu_pending.push((nid, now));
                    }
                }
            }
            Event::LuAcked { nid, attempts, .. } | Event::LuFailed { nid, attempts } => {
                let acked = matches!(e, Event::LuAcked { .. });
                if let Some(p) = host.lu_pending.iter().position(|p| p.0 == nid) {
                    let (_, t0) = host.lu_pending.swap_remove(p);
                    self.m.lu_done(h, host.group, t0, now - t0, attempts, acked);
                }
            }
            Event::LuReceived { .. } => self.m.lu_received(host.group, now),
            _ => {}
        }
    }

    /// A wire packet from host `h` onto the network.
    fn send_wire(&mut self, h: u32, pkt: Vec<u8>) {
        self.m.pkts_sent += 1;
        let Ok(ip) = ipv6::Packet::new_checked(&pkt[..]) else {
            self.m.drop_bad += 1;
            return;
        };
        let (src_loc, _) = split_addr(ip.src());
        let (dst_loc, dst_nid) = split_addr(ip.dst());
        let bytes = pkt.len() as u64;
        // the uplink of the source locator (ingress filtering: no other)
        let src_net = self.hosts[h as usize]
            .nets
            .as_slice()
            .iter()
            .copied()
            .find(|&n| self.nets[n as usize].locs.contains(&src_loc));
        let Some(sn) = src_net else {
            self.m.drop_no_uplink += 1;
            return;
        };
        let Some(&dn) = self.loc_net.get(&dst_loc) else {
            self.m.drop_no_route += 1;
            return;
        };
        let mut t = self.now;
        if !self.cross(sn, true, &mut t, bytes) {
            return;
        }
        if sn != dn {
            t += self.backbone;
        }
        if !self.cross(dn, false, &mut t, bytes) {
            return;
        }
        // packets wait in a slab: the queue's items stay small (sifting is the hot loop)
        let hint = self.routes.get(&(dst_loc, dst_nid)).copied().unwrap_or(u32::MAX);
        let item = Some((dst_loc, dst_nid, hint, pkt));
        let slot = match self.free.pop() {
            Some(i) => {
                self.flight[i as usize] = item;
                i
            }
            None => {
                self.flight.push(item);
                self.flight.len() as u32 - 1
            }
        };
        self.push(t, Kind::Arrive { slot });
    }

    /// One direction of an access link: loss, queue, delay, jitter. False: lost.
    fn cross(&mut self, n: u32, up: bool, t: &mut u64, bytes: u64) -> bool {
        let (loss, jitter) = (self.nets[n as usize].loss, self.nets[n as usize].jitter);
        if loss > 0.0 && self.unit() < loss {
            if self.trace {
                eprintln!(
                    "{:.6} lost on {} {}",
                    self.now as f64 / NS as f64,
                    self.nets[n as usize].name,
                    if up { "up" } else { "down" }
                );
            }
            self.m.lost += 1;
            return false;
        }
        let j = if jitter > 0 { self.rng.next_u64() % (jitter + 1) } else { 0 };
        let net = &mut self.nets[n as usize];
        if net.ns_per_byte > 0.0 {
            let busy = if up { &mut net.up_busy } else { &mut net.down_busy };
            let start = (*t).max(*busy);
            *busy = start + (bytes as f64 * net.ns_per_byte) as u64;
            *t = *busy;
        }
        *t += net.delay + j;
        true
    }

    fn arrive(&mut self, loc: Locator, nid: Nid, pkt: Vec<u8>) {
        let Some(&h) = self.routes.get(&(loc, nid)) else {
            self.m.drop_no_route += 1;
            return;
        };
        if let Some(&n) = self.loc_net.get(&loc) {
            if self.nets[n as usize].nd.is_some() {
                match self.nets[n as usize].neigh.get_mut(&(loc, nid)) {
                    Some(Neigh::Reachable) => {}
                    Some(Neigh::Incomplete { queue, .. }) => return queue.push(pkt),
                    None => {
                        self.nets[n as usize]
                            .neigh
                            .insert((loc, nid), Neigh::Incomplete { tries: 0, queue: vec![pkt] });
                        return self.nd_solicit(n, loc, nid);
                    }
                }
            }
        }
        self.deliver(h, pkt);
    }

    /// One Neighbour Solicitation for `loc:nid` from `net`'s router: NS down, NA up,
    /// each through the access link's loss and delay.
    fn nd_solicit(&mut self, net: u32, loc: Locator, nid: Nid) {
        let Some(Neigh::Incomplete { tries, .. }) = self.nets[net as usize].neigh.get_mut(&(loc, nid)) else { return };
        *tries += 1;
        let try_ = *tries;
        let nd = self.nets[net as usize].nd.expect("nd on");
        self.m.nd_solicits += 1;
        let mut t = self.now;
        if self.cross(net, false, &mut t, 72) && self.cross(net, true, &mut t, 72) {
            self.push(t, Kind::NdResolved { net, loc, nid });
        }
        self.push(self.now + nd.retrans, Kind::NdTimeout { net, loc, nid, try_ });
    }

    fn nd_resolved(&mut self, net: u32, loc: Locator, nid: Nid) {
        let n = &mut self.nets[net as usize];
        let Some(Neigh::Incomplete { queue, .. }) = n.neigh.get_mut(&(loc, nid)) else { return };
        let queue = std::mem::take(queue);
        n.neigh.insert((loc, nid), Neigh::Reachable);
        for pkt in queue {
            match self.routes.get(&(loc, nid)) {
                Some(&h) => self.deliver(h, pkt),
                None => self.m.drop_no_route += 1,
            }
        }
    }

    fn nd_timeout(&mut self, net: u32, loc: Locator, nid: Nid, try_: u32) {
        let max = self.nets[net as usize].nd.expect("nd on").max_solicit;
        match self.nets[net as usize].neigh.get(&(loc, nid)) {
            Some(Neigh::Incomplete { tries, .. }) if *tries == try_ => {}
            _ => return, // resolved, or a later solicitation is pending
        }
        if try_ < max {
            return self.nd_solicit(net, loc, nid);
        }
        if let Some(Neigh::Incomplete { queue, .. }) = self.nets[net as usize].neigh.remove(&(loc, nid)) {
            self.m.drop_nd += queue.len() as u64;
        }
    }

    /// A packet reaches host `h` (its uplink's tc ingress, then the core).
    fn deliver(&mut self, h: u32, pkt: Vec<u8>) {
        self.m.pkts_arrived += 1;
        if self.hosts[h as usize].socket_admission && !self.admitted_by_fast_path(h, &pkt) {
            self.m.drop_no_socket += 1;
            return;
        }
        let now = self.instant();
        let mut out = self.bufs.pop().unwrap_or_default();
        self.hosts[h as usize].core.handle_inbound_into(now, &pkt, Csum::Complete, &mut out);
        self.run_actions(h, out);
    }

    /// The ingress program's admission check: TCP/UDP from a NID without an ILCC
    /// entry passes only to a port with a socket.
    fn admitted_by_fast_path(&self, h: u32, pkt: &[u8]) -> bool {
        let Ok(u) = ipv6::upper_layer_info(pkt) else { return true };
        if (u.proto != PROTO_UDP && u.proto != PROTO_TCP) || !u.has_header() || pkt.len() < u.offset + 4 {
            return true;
        }
        let dport = u16::from_be_bytes([pkt[u.offset + 2], pkt[u.offset + 3]]);
        if self.groups[self.hosts[h as usize].group as usize].listen.binary_search(&dport).is_ok() {
            return true;
        }
        let (_, src_nid) =
            split_addr(ipv6::Packet::new_checked(pkt).map_or(std::net::Ipv6Addr::UNSPECIFIED, |p| p.src()));
        self.hosts[h as usize].core.ilcc_entry(src_nid).is_some()
    }

    // ------------------------------------------------------------ applications

    fn app_send(&mut self, h: u32) {
        let Some(t) = &self.hosts[h as usize].traffic else { return };
        let (target, size, port, interval, count) = (t.target, t.size, t.port, t.interval, t.count);
        let host = &mut self.hosts[h as usize];
        let seq = host.sent;
        host.sent += 1;
        host.first_sent.get_or_insert(self.now);
        let sport = CLIENT_PORT + (h % 20000) as u16;
        // scratch buffers kept in `self`: no allocation per datagram
        let mut payload = std::mem::take(&mut self.payload_buf);
        payload.clear();
        payload.resize(size, 0);
        payload[..8].copy_from_slice(&seq.to_be_bytes());
        payload[8..16].copy_from_slice(&self.now.to_be_bytes());
        let (src, dst) = (self.hosts[h as usize].nid, self.hosts[target as usize].nid);
        let mut pkt = std::mem::take(&mut self.pkt_buf);
        udp_packet_into(&mut pkt, src, dst, sport, port, &payload);
        self.payload_buf = payload;
        self.m.app_sent(self.hosts[h as usize].group);
        let now = self.instant();
        let mut out = self.bufs.pop().unwrap_or_default();
        self.hosts[h as usize].core.handle_outbound_into(now, &pkt, Csum::Complete, &mut |_| None, &mut out);
        self.pkt_buf = pkt;
        self.run_actions(h, out);
        if count == 0 || self.hosts[h as usize].sent < count {
            self.push(self.now + interval, Kind::Send { host: h });
        }
    }

    /// The host's stack: identifier-form packets the core delivered.
    fn stack(&mut self, h: u32, pkt: &[u8]) {
        let Ok(ip) = ipv6::Packet::new_checked(pkt) else { return };
        if ip.next_header() != PROTO_UDP || pkt.len() < 48 {
            return; // the core's Destination Unreachable for the application, etc.
        }
        let (_, src_nid) = split_addr(ip.src());
        let sport = u16::from_be_bytes([pkt[40], pkt[41]]);
        let dport = u16::from_be_bytes([pkt[42], pkt[43]]);
        let g = self.hosts[h as usize].group as usize;
        if self.groups[g].listen.binary_search(&dport).is_ok() {
            self.hosts[h as usize].received += 1;
            self.m.app_received(g as u16);
            if self.groups[g].spec.echo {
                let mut reply = std::mem::take(&mut self.pkt_buf);
                udp_packet_into(&mut reply, self.hosts[h as usize].nid, src_nid, dport, sport, &pkt[48..]);
                let now = self.instant();
                let mut out = self.bufs.pop().unwrap_or_default();
                self.hosts[h as usize].core.handle_outbound_into(now, &reply, Csum::Complete, &mut |_| None, &mut out);
                self.pkt_buf = reply;
                self.run_actions(h, out);
            }
        } else if dport >= CLIENT_PORT {
            let host = &mut self.hosts[h as usize];
            host.replies += 1;
            if host.first_reply.is_none() {
                host.first_reply = Some(self.now);
            }
        }
    }

    fn take_sample(&mut self) {
        let Some(sg) = self.m.server_group else { return };
        let g = &self.groups[sg as usize];
        let (mut est, mut emb) = (0usize, 0usize);
        for h in g.first..g.first + g.spec.count as u32 {
            let c = self.hosts[h as usize].core.tier_counts();
            est += c.established;
            emb += c.embryonic;
        }
        self.m.sample(self.now, est, emb);
    }

    pub(crate) fn core(&self, h: u32) -> &Core {
        &self.hosts[h as usize].core
    }

    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }
}

/// How much of a host's `Core` (1,616 bytes) `prefetch_next` asks for, after the
/// `Host`'s own fields (~210 bytes): its first 8 cache lines (in this build the
/// admission state, the ILCC's tables and the local locators). The whole `Host` at
/// once (29 lines) fills the CPU's line-fill buffers and the prefetches themselves
/// stall the event being handled; of the sets tried (flash crowd, 10^5 hosts: the
/// first 2, 4, 8, 10, 12, 16 lines or all of them; the host's fields plus 6, 8, 9
/// or 16 lines of the core), this was the fastest, ~10 % less CPU than all.
const PREFETCH_CORE_BYTES: usize = 512;

/// Asks the CPU to bring the cache lines of `*v`'s first `len` bytes in (no effect
/// but speed).
#[inline]
fn prefetch<T>(v: &T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = v as *const T as *const i8;
        // from the line `*v` starts in
        let mut off = -((p as usize % 64) as isize);
        while off < len.min(std::mem::size_of::<T>()) as isize {
            // SAFETY: a prefetch never faults, whatever the address (wrapping_offset: no
            // in-bounds claim for the part of the first line before `*v`)
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_offset(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, len);
}

/// An identifier-form UDP datagram `P::src → P::dst`, checksum complete.
pub fn udp_packet(src: Nid, dst: Nid, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(48 + payload.len());
    udp_packet_into(&mut v, src, dst, sport, dport, payload);
    v
}

/// `udp_packet` into `v` (cleared first), reusing its allocation.
pub fn udp_packet_into(v: &mut Vec<u8>, src: Nid, dst: Nid, sport: u16, dport: u16, payload: &[u8]) {
    v.clear();
    let (s, d) = (ilnp_addr(ID_PREFIX, src), ilnp_addr(ID_PREFIX, dst));
    let len = 8 + payload.len();
    ipv6::Repr { src: s, dst: d, next_header: PROTO_UDP, payload_len: len as u16, hop_limit: 64 }.emit(v);
    v.extend_from_slice(&sport.to_be_bytes());
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&(len as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(payload);
    let c = match checksum::compute(&s, &d, PROTO_UDP, &v[40..]) {
        0 => 0xffff,
        c => c,
    };
    v[46..48].copy_from_slice(&c.to_be_bytes());
}
