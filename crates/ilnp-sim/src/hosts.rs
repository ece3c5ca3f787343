//! The simulated hosts: one `ilnp_core::Core` each (configured as ilnpd would
//! configure it), the networks it is attached to, its applications' state, its LUs
//! in progress; and the fast path's admission check in front of its core.

use crate::apps::{App, ID_PREFIX};
use crate::metrics::Metrics;
use crate::packet;
use crate::rng::SimRng;
use crate::scenario::{CoreOpts, GroupSpec, Scenario};
use ilnp_core::{Admission, Core, CoreConfig, Event, HandoffMode};
use ilnp_wire::Nid;
use std::time::Duration;

/// `repr(C)`: the simulator's own fields first, in declaration order, then the
/// core, so that `prefetch` can ask for the lines a visit touches first (these
/// fields and the start of the core) as one range.
#[repr(C)]
pub(crate) struct Host {
    /// the core's deadline as queued (a `Timer` at another time is stale)
    pub(crate) timer_at: Option<u64>,
    pub(crate) app: App,
    pub(crate) nid: Nid,
    /// (peer NID, when attempt 1 of our current LU to it left)
    pub(crate) lu_pending: Vec<(Nid, u64)>,
    /// networks attached to, in joining order
    pub(crate) nets: NetList,
    pub(crate) group: u16,
    socket_admission: bool,
    pub(crate) core: Core,
}

/// A group of hosts: its spec and the index of its first host (its hosts are
/// `first..first + spec.count`).
pub(crate) struct Group {
    pub(crate) spec: GroupSpec,
    pub(crate) first: u32,
}

impl Group {
    pub(crate) fn hosts(&self) -> std::ops::Range<u32> {
        self.first..self.first + self.spec.count as u32
    }
}

/// NID of host `i`: modified EUI-64 form (universal/local bit set, group bit clear).
pub(crate) fn host_nid(i: u32) -> Nid {
    Nid(0x0200_5100_0000_0000 | (i as u64 + 1))
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

/// The groups and their hosts, not yet attached; each core's stream seeded from
/// `rng` in host order.
pub(crate) fn build(s: &Scenario, rng: &mut SimRng) -> (Vec<Host>, Vec<Group>) {
    let mut groups = Vec::new();
    let mut first = 0u32;
    for g in &s.group {
        groups.push(Group { spec: g.clone(), first });
        first += g.count as u32;
    }
    let mut hosts = Vec::with_capacity(first as usize);
    for (gi, g) in s.group.iter().enumerate() {
        let opts = s.core.merged(&g.core);
        for k in 0..g.count {
            let id = hosts.len() as u32;
            let nid = host_nid(id);
            let cfg = core_config(&opts, nid);
            let socket_admission = cfg.admission == Admission::Socket;
            let core = Core::new(cfg, Box::new(rng.host_stream()));
            let app = App::new(g.traffic.as_ref(), |t| {
                let tg = s.group.iter().position(|x| x.name == t.to).expect("validated");
                groups[tg].first + (k % s.group[tg].count) as u32
            });
            hosts.push(Host {
                group: gi as u16,
                nid,
                core,
                nets: NetList::default(),
                timer_at: None,
                socket_admission,
                app,
                lu_pending: vec![],
            });
        }
    }
    (hosts, groups)
}

impl Host {
    /// The ingress program's admission check (`admission = socket`): TCP/UDP from
    /// a NID without an ILCC entry passes only to a port with a socket
    /// (`listens`), as `bpf_sk_lookup_*` decides. Everything else passes. (Simulated
    /// hosts have no temporary NIDs: the entry is the stable NID's.)
    #[inline]
    pub(crate) fn admits(&self, pkt: &[u8], listens: impl Fn(u16) -> bool) -> bool {
        if !self.socket_admission {
            return true;
        }
        let Some(dport) = packet::transport_dport(pkt) else { return true };
        listens(dport) || self.core.ilcc().get(&ilnp_core::IlccKey::stable(packet::src_nid(pkt))).is_some()
    }

    /// The core's event `e` at `now` (host `h`): LU bookkeeping for the results.
    pub(crate) fn on_core_event(&mut self, h: u32, now: u64, e: &Event, m: &mut Metrics) {
        match *e {
            Event::LuSent { nid, attempt, .. } => {
                m.lu_packets += 1;
                if attempt == 1 {
                    if let Some(p) = self.lu_pending.iter_mut().find(|p| p.0 == nid) {
                        m.lu_superseded += 1;
                        p.1 = now;
                    } else {
                        self.lu_pending.push((nid, now));
                    }
                }
            }
            Event::LuAcked { nid, attempts, .. } | Event::LuFailed { nid, attempts } => {
                let acked = matches!(e, Event::LuAcked { .. });
                if let Some(p) = self.lu_pending.iter().position(|p| p.0 == nid) {
                    let (_, t0) = self.lu_pending.swap_remove(p);
                    m.lu_done(h, self.group, t0, now - t0, attempts, acked);
                }
            }
            Event::LuReceived { .. } => m.lu_received(self.group),
            _ => {}
        }
    }

    /// Starts loading this host's own fields and the start of its core
    /// (`PREFETCH_CORE_BYTES`) into the cache: with 10^5 hosts (~0.4 GB) a host
    /// visited is seldom in any cache, and the first touch of its `Host` and `Core`
    /// was the largest single cost of a run. A hint to the CPU only.
    #[inline]
    pub(crate) fn prefetch(&self) {
        prefetch(self, std::mem::offset_of!(Host, core) + PREFETCH_CORE_BYTES);
    }
}

/// The ILCC of a group's cores, summed: (established, embryonic).
pub(crate) fn tier_totals(hosts: &[Host], g: &Group) -> (usize, usize) {
    let (mut est, mut emb) = (0usize, 0usize);
    for h in g.hosts() {
        let c = hosts[h as usize].core.tier_counts();
        est += c.established;
        emb += c.embryonic;
    }
    (est, emb)
}

/// A host's networks: up to `NetList::INLINE` inside the `Host` (a separate
/// allocation per host was a cache miss per packet sent), more in a `Vec` (then
/// all of them: `more` non-empty is the list).
#[derive(Default)]
pub(crate) struct NetList {
    len: u8,
    inline: [u32; NetList::INLINE],
    more: Vec<u32>,
}

impl NetList {
    const INLINE: usize = 4;

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u32] {
        if self.more.is_empty() {
            &self.inline[..self.len as usize]
        } else {
            &self.more
        }
    }

    #[inline]
    pub(crate) fn contains(&self, n: &u32) -> bool {
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

    pub(crate) fn push(&mut self, n: u32) {
        let mut v = self.as_slice().to_vec();
        v.push(n);
        self.set(v);
    }

    /// Removes `n`; false if it was not in the list.
    pub(crate) fn remove(&mut self, n: u32) -> bool {
        let Some(p) = self.as_slice().iter().position(|&x| x == n) else { return false };
        let mut v = self.as_slice().to_vec();
        v.remove(p);
        self.set(v);
        true
    }
}

/// How much of a host's `Core` (1,616 bytes) `prefetch` asks for, after the
/// `Host`'s own fields (~200 bytes): its first 8 cache lines (in this build the
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
