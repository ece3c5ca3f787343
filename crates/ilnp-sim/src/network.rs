//! The network: one /64 per network behind one router with an access link (one-way
//! delay, uniform jitter, Bernoulli loss, a FIFO per direction at `rate_mbit`),
//! networks joined by a backbone; the routers as locator → host maps, with
//! optional Neighbour Discovery; the packets in flight.
//!
//! It answers: when (and whether) a packet a host sends reaches its destination's
//! router (`send`), which host it then reaches (`arrive`, `nd_resolved`), what a
//! host attached to a set of networks holds as locators (`locals`). It never calls
//! into the hosts: what it schedules goes out through the `out` callback as a
//! `NetEvent` (the simulator puts it in the queue and hands it back when due), what
//! it delivers is returned.

use crate::hash::FastHash;
use crate::metrics::NetCounters;
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::time::{secs, NS};
use ilnp_core::{LocalLocator, LocatorState};
use ilnp_wire::{ipv6, split_addr, Locator, Nid};
use std::collections::{BTreeSet, HashMap};

/// What the network schedules for itself.
#[derive(Debug)]
pub(crate) enum NetEvent {
    /// a wire packet (in flight in `slot`) reaches the router of its destination
    /// locator and, if that `locator:NID` is attached, the host
    Arrive { slot: u32 },
    /// the NA answering a solicitation for `loc:nid` reached the router of `net`
    NdResolved { net: u32, loc: Locator, nid: Nid },
    /// the retransmission time of solicitation `try_` for `loc:nid` ended
    NdTimeout { net: u32, loc: Locator, nid: Nid, try_: u32 },
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

/// A packet on its way: destination `loc:nid`, the host `routes` held for it when
/// it left (`u32::MAX`: none; a prefetch hint only), the bytes.
type InFlight = (Locator, Nid, u32, Vec<u8>);

/// A renumbering's start: the hosts on the network (to hand their new locators)
/// and the old prefixes (`Network::forget` them, or deprecate until `renumber_end`).
pub(crate) struct Renumbering {
    pub(crate) hosts: Vec<u32>,
    pub(crate) old: Vec<Locator>,
}

pub(crate) struct Network {
    nets: Vec<Net>,
    /// the routers: (locator, NID) → attached host
    routes: HashMap<(Locator, Nid), u32, FastHash>,
    loc_net: HashMap<Locator, u32, FastHash>,
    /// packets in flight, by `NetEvent::Arrive`'s slot; `free`: slots to reuse
    flight: Vec<Option<InFlight>>,
    free: Vec<u32>,
    next_loc: u64,
    backbone: u64,
    pub(crate) stats: NetCounters,
    /// `ILNP_SIM_TRACE=1`: every loss on stderr
    trace: bool,
}

fn first_locator(i: u64) -> Locator {
    Locator(0x2001_0db8_0000_0000 | i)
}

impl Network {
    pub(crate) fn new(s: &Scenario, trace: bool) -> Network {
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
        Network {
            nets,
            routes: HashMap::default(),
            loc_net,
            flight: Vec::new(),
            free: Vec::new(),
            next_loc: s.network.len() as u64 + 1,
            backbone: secs(s.backbone_delay_ms / 1e3),
            stats: NetCounters::default(),
            trace,
        }
    }

    /// The network of that name (the scenario is validated: it exists).
    pub(crate) fn index(&self, name: &str) -> u32 {
        self.nets.iter().position(|n| n.name == name).expect("validated") as u32
    }

    /// A network's oldest current prefix.
    pub(crate) fn first_locator(&self, net: u32) -> Locator {
        self.nets[net as usize].locs[0]
    }

    // ------------------------------------------------------------ attachment

    /// Host `h` (`nid`) attaches to `net`: the router routes its addresses there
    /// if it is `reachable`.
    pub(crate) fn attach(&mut self, h: u32, nid: Nid, net: u32, reachable: bool) {
        let n = &mut self.nets[net as usize];
        n.hosts.insert(h);
        if reachable {
            for &loc in &n.locs {
                self.routes.insert((loc, nid), h);
            }
        }
    }

    /// Off `net`'s router: its routes and neighbour entries (packets waiting are lost).
    pub(crate) fn detach(&mut self, h: u32, nid: Nid, net: u32) {
        let n = &mut self.nets[net as usize];
        n.hosts.remove(&h);
        for &loc in &n.locs {
            self.routes.remove(&(loc, nid));
            if let Some(Neigh::Incomplete { queue, .. }) = n.neigh.remove(&(loc, nid)) {
                self.stats.drop_nd += queue.len() as u64;
            }
        }
    }

    /// The locators of a host attached to `nets` (as the kernel reports them to
    /// ilnpd: one per prefix, deprecated ones marked).
    pub(crate) fn locals(&self, nets: &[u32]) -> Vec<LocalLocator> {
        let mut v = Vec::new();
        for &n in nets {
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

    // ------------------------------------------------------------ renumbering

    /// `net` gets a new prefix; the old ones are deprecated (`graceful`) or gone
    /// at once. `host(h)`: an attached host's NID and whether it is reachable.
    /// The old prefixes still route until `forget` (flash) or `renumber_end`.
    pub(crate) fn renumber(&mut self, net: u32, graceful: bool, host: impl Fn(u32) -> (Nid, bool)) -> Renumbering {
        let loc = first_locator(self.next_loc);
        self.next_loc += 1;
        // (a new prefix: the router has no neighbour entries for it yet)
        self.loc_net.insert(loc, net);
        let n = &mut self.nets[net as usize];
        let old: Vec<Locator> = n.locs.clone();
        if graceful {
            n.deprecated.extend(old.iter().copied());
        } else {
            // a flash renumbering: the old prefixes go in the same change
            n.locs.clear();
            n.neigh.retain(|k, _| !old.contains(&k.0));
        }
        n.locs.push(loc);
        let hosts: Vec<u32> = n.hosts.iter().copied().collect();
        for &h in &hosts {
            let (nid, reachable) = host(h);
            if reachable {
                self.routes.insert((loc, nid), h);
            }
            if !graceful {
                for o in &old {
                    self.routes.remove(&(*o, nid));
                }
            }
        }
        Renumbering { hosts, old }
    }

    /// No network has `loc` any more: packets to it find no route.
    pub(crate) fn forget(&mut self, loc: Locator) {
        self.loc_net.remove(&loc);
    }

    /// The end of a graceful renumbering's overlap: `loc` leaves `net`. Returns the
    /// hosts attached (to hand their locators again).
    pub(crate) fn renumber_end(&mut self, net: u32, loc: Locator, nid: impl Fn(u32) -> Nid) -> Vec<u32> {
        let n = &mut self.nets[net as usize];
        n.locs.retain(|&l| l != loc);
        n.deprecated.remove(&loc);
        n.neigh.retain(|k, _| k.0 != loc);
        self.loc_net.remove(&loc);
        let hosts: Vec<u32> = n.hosts.iter().copied().collect();
        for &h in &hosts {
            self.routes.remove(&(loc, nid(h)));
        }
        hosts
    }

    // ------------------------------------------------------------ packets

    /// A wire packet from a host attached to `src_nets` onto the network at `now`:
    /// out of the access link of its source locator's network (ingress filtering:
    /// no other), over the backbone, down its destination's; `out` gets its
    /// `Arrive` unless it is dropped or lost.
    #[inline]
    pub(crate) fn send(
        &mut self,
        now: u64,
        src_nets: &[u32],
        pkt: Vec<u8>,
        rng: &mut SimRng,
        out: &mut impl FnMut(u64, NetEvent),
    ) {
        self.stats.sent += 1;
        let Ok(ip) = ipv6::Packet::new_checked(&pkt[..]) else {
            self.stats.drop_bad += 1;
            return;
        };
        let (src_loc, _) = split_addr(ip.src());
        let (dst_loc, dst_nid) = split_addr(ip.dst());
        let bytes = pkt.len() as u64;
        let src_net = src_nets.iter().copied().find(|&n| self.nets[n as usize].locs.contains(&src_loc));
        let Some(sn) = src_net else {
            self.stats.drop_no_uplink += 1;
            return;
        };
        let Some(&dn) = self.loc_net.get(&dst_loc) else {
            self.stats.drop_no_route += 1;
            return;
        };
        let mut t = now;
        if !self.cross(now, sn, true, &mut t, bytes, rng) {
            return;
        }
        if sn != dn {
            t += self.backbone;
        }
        if !self.cross(now, dn, false, &mut t, bytes, rng) {
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
        out(t, NetEvent::Arrive { slot });
    }

    /// The host the packet in `slot` was routed to when it left (`u32::MAX`: none):
    /// what to prefetch before its `Arrive`.
    #[inline]
    pub(crate) fn hint(&self, slot: u32) -> Option<u32> {
        match self.flight.get(slot as usize) {
            Some(Some((_, _, hint, _))) => Some(*hint),
            _ => None,
        }
    }

    /// One direction of an access link, from `*t`: loss, queue, delay, jitter.
    /// False: lost.
    #[inline]
    fn cross(&mut self, now: u64, n: u32, up: bool, t: &mut u64, bytes: u64, rng: &mut SimRng) -> bool {
        let (loss, jitter) = (self.nets[n as usize].loss, self.nets[n as usize].jitter);
        if loss > 0.0 && rng.unit() < loss {
            if self.trace {
                eprintln!(
                    "{:.6} lost on {} {}",
                    now as f64 / NS as f64,
                    self.nets[n as usize].name,
                    if up { "up" } else { "down" }
                );
            }
            self.stats.lost += 1;
            return false;
        }
        let j = if jitter > 0 { rng.next_u64() % (jitter + 1) } else { 0 };
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

    /// The packet in `slot` reaches its destination's router at `now`: the host it
    /// is handed to, or None (no route: counted; waiting for Neighbour Discovery).
    #[inline]
    pub(crate) fn arrive(
        &mut self,
        now: u64,
        slot: u32,
        rng: &mut SimRng,
        out: &mut impl FnMut(u64, NetEvent),
    ) -> Option<(u32, Vec<u8>)> {
        let (loc, nid, _, pkt) = std::mem::take(&mut self.flight[slot as usize]).expect("in flight");
        self.free.push(slot);
        let Some(&h) = self.routes.get(&(loc, nid)) else {
            self.stats.drop_no_route += 1;
            return None;
        };
        if let Some(&n) = self.loc_net.get(&loc) {
            if self.nets[n as usize].nd.is_some() {
                match self.nets[n as usize].neigh.get_mut(&(loc, nid)) {
                    Some(Neigh::Reachable) => {}
                    Some(Neigh::Incomplete { queue, .. }) => {
                        queue.push(pkt);
                        return None;
                    }
                    None => {
                        self.nets[n as usize]
                            .neigh
                            .insert((loc, nid), Neigh::Incomplete { tries: 0, queue: vec![pkt] });
                        self.nd_solicit(now, n, loc, nid, rng, out);
                        return None;
                    }
                }
            }
        }
        Some((h, pkt))
    }

    /// One Neighbour Solicitation for `loc:nid` from `net`'s router: NS down, NA up,
    /// each through the access link's loss and delay.
    fn nd_solicit(
        &mut self,
        now: u64,
        net: u32,
        loc: Locator,
        nid: Nid,
        rng: &mut SimRng,
        out: &mut impl FnMut(u64, NetEvent),
    ) {
        let Some(Neigh::Incomplete { tries, .. }) = self.nets[net as usize].neigh.get_mut(&(loc, nid)) else { return };
        *tries += 1;
        let try_ = *tries;
        let nd = self.nets[net as usize].nd.expect("nd on");
        self.stats.nd_solicits += 1;
        let mut t = now;
        if self.cross(now, net, false, &mut t, 72, rng) && self.cross(now, net, true, &mut t, 72, rng) {
            out(t, NetEvent::NdResolved { net, loc, nid });
        }
        out(now + nd.retrans, NetEvent::NdTimeout { net, loc, nid, try_ });
    }

    /// The NA for `loc:nid` reached `net`'s router: the packets that waited, in
    /// order, and the host they go to (none attached any more: counted).
    pub(crate) fn nd_resolved(&mut self, net: u32, loc: Locator, nid: Nid) -> Option<(u32, Vec<Vec<u8>>)> {
        let n = &mut self.nets[net as usize];
        let Some(Neigh::Incomplete { queue, .. }) = n.neigh.get_mut(&(loc, nid)) else { return None };
        let queue = std::mem::take(queue);
        n.neigh.insert((loc, nid), Neigh::Reachable);
        match self.routes.get(&(loc, nid)) {
            Some(&h) => Some((h, queue)),
            None => {
                self.stats.drop_no_route += queue.len() as u64;
                None
            }
        }
    }

    /// Solicitation `try_` for `loc:nid` was not answered in time: another, or
    /// (after `nd_max_solicit`) its packets are dropped.
    pub(crate) fn nd_timeout(
        &mut self,
        now: u64,
        (net, loc, nid): (u32, Locator, Nid),
        try_: u32,
        rng: &mut SimRng,
        out: &mut impl FnMut(u64, NetEvent),
    ) {
        let max = self.nets[net as usize].nd.expect("nd on").max_solicit;
        match self.nets[net as usize].neigh.get(&(loc, nid)) {
            Some(Neigh::Incomplete { tries, .. }) if *tries == try_ => {}
            _ => return, // resolved, or a later solicitation is pending
        }
        if try_ < max {
            return self.nd_solicit(now, net, loc, nid, rng, out);
        }
        if let Some(Neigh::Incomplete { queue, .. }) = self.nets[net as usize].neigh.remove(&(loc, nid)) {
            self.stats.drop_nd += queue.len() as u64;
        }
    }
}
