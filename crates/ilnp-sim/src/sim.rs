//! The discrete-event engine: the world's parts and the loop that dispatches
//! events between them. One `ilnp_core::Core` per simulated host (`hosts`), the
//! real wire bytes between them over the `Network`, the applications (`apps`),
//! mobility and renumbering (`mobility`); what they count goes to `Metrics` and
//! `NetCounters`, and `results` reads those and the hosts at the end.
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

use crate::apps::{self, Apps, Receipt};
use crate::hosts::{self, Group, Host};
use crate::metrics::Metrics;
use crate::mobility::{How, Mobility};
use crate::network::{NetEvent, Network};
use crate::queue::Calendar;
use crate::results::{Results, RunView};
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::time::{secs, NS};
use ilnp_core::{Action, Event, PeerLocator, PeerRecord};
use ilnp_wire::translate::Csum;
use ilnp_wire::Locator;
use std::time::{Duration, Instant};

#[derive(Debug)]
enum Kind {
    /// the network's own (packets arriving, Neighbour Discovery)
    Net(NetEvent),
    /// a host's core timer
    Timer {
        host: u32,
    },
    /// a host's sender sends
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
    Sample,
}

/// The events to come: the queue, and the end of the run.
struct Agenda {
    queue: Calendar<Kind>,
    end: u64,
}

impl Agenda {
    #[inline]
    fn push(&mut self, t: u64, kind: Kind) {
        // past the end it would never run: keep the queue to what can (idle timers
        // of 10^5 cores would otherwise double it)
        if t <= self.end {
            self.queue.push(t, kind);
        }
    }
}

pub struct Sim {
    pub(crate) now: u64,
    pub(crate) end: u64,
    agenda: Agenda,
    base: Instant,
    hosts: Vec<Host>,
    groups: Vec<Group>,
    net: Network,
    apps: Apps,
    mobility: Mobility,
    /// the network's and the workload's stream
    rng: SimRng,
    m: Metrics,
    /// `run_actions`' buffer of one call's wire packets (kept: no allocation per call)
    wire: Vec<Vec<u8>>,
    /// the cores' action buffers, reused (calls nest: an echo is sent while the
    /// request's actions are carried out)
    bufs: Vec<Vec<Action>>,
    sample: u64,
    /// events handled (stale timer wake-ups not counted)
    pub events: u64,
    /// `ILNP_SIM_TRACE=1`: every core event and every loss on stderr
    trace: bool,
}

impl Sim {
    /// Builds the networks and hosts of a scenario for run seed `seed`.
    pub fn new(s: &Scenario, seed: u64) -> Sim {
        let trace = std::env::var_os("ILNP_SIM_TRACE").is_some_and(|v| v == "1");
        let mut rng = SimRng::new(seed);
        let net = Network::new(s, trace);
        let (hosts, groups) = hosts::build(s, &mut rng);
        let mobility = Mobility::new(s, &net);
        let end = secs(s.duration_s);
        let mut sim = Sim {
            now: 0,
            end,
            agenda: Agenda { queue: Calendar::default(), end },
            base: Instant::now(),
            hosts,
            groups,
            net,
            apps: Apps::new(&s.group),
            mobility,
            rng,
            m: Metrics::new(s),
            wire: Vec::new(),
            bufs: Vec::new(),
            sample: secs(s.sample_s).max(1),
            events: 0,
            trace,
        };
        // peers: each sender knows its target's first locator (a peer file / DNS)
        for h in 0..sim.hosts.len() {
            if let Some(t) = sim.hosts[h].app.target() {
                let g = &sim.groups[sim.hosts[t as usize].group as usize].spec;
                let loc = sim.net.first_locator(sim.net.index(&g.network));
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
            let net = sim.net.index(&g.network);
            for h in sim.groups[gi].hosts() {
                sim.join(h, net, g.reachable);
                if let Some(t) = &g.traffic {
                    let at = apps::first_send(t, &mut sim.rng);
                    sim.agenda.push(at, Kind::Send { host: h });
                }
                let agenda = &mut sim.agenda;
                sim.mobility.first_moves(gi as u16, &mut sim.rng, |t| agenda.push(t, Kind::Move { host: h }));
            }
        }
        for &(t, net) in sim.mobility.renumberings() {
            sim.agenda.push(t, Kind::Renumber { net });
        }
        sim.agenda.push(sim.sample, Kind::Sample);
        sim
    }

    /// Starts loading the host the next event will touch while this one is handled
    /// (`Host::prefetch`). A hint to the CPU only: nothing observable depends on it.
    fn prefetch_next(&self) {
        let h = match self.agenda.queue.peek_now() {
            Some(Kind::Timer { host } | Kind::Send { host } | Kind::Move { host }) => *host,
            Some(Kind::Net(NetEvent::Arrive { slot })) => match self.net.hint(*slot) {
                Some(h) => h,
                None => return,
            },
            _ => return,
        };
        if let Some(host) = self.hosts.get(h as usize) {
            host.prefetch();
        }
    }

    #[inline]
    fn push(&mut self, t: u64, kind: Kind) {
        self.agenda.push(t, kind);
    }

    fn instant(&self) -> Instant {
        self.base + Duration::from_nanos(self.now)
    }

    /// Runs to the end; `progress(now)` every 2^16 events.
    pub fn run(&mut self, progress: &mut dyn FnMut(u64)) -> Results {
        while let Some((t, kind)) = self.agenda.queue.pop() {
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
                Kind::Net(e) => self.network_event(e),
                Kind::Send { host } => self.app_send(host),
                Kind::Move { host } => self.do_move(host),
                Kind::Join { host, net } => {
                    let reachable = self.reachable(host);
                    self.join(host, net, reachable)
                }
                Kind::Leave { host, net } => self.leave(host, net),
                Kind::Renumber { net } => self.renumber(net),
                Kind::RenumberEnd { net, loc } => {
                    let hosts = &self.hosts;
                    for h in self.net.renumber_end(net, loc, |h| hosts[h as usize].nid) {
                        self.refresh_locators(h);
                    }
                }
                Kind::Sample => {
                    if let Some(sg) = self.m.server_group {
                        let (est, emb) = hosts::tier_totals(&self.hosts, &self.groups[sg as usize]);
                        self.m.sample(self.now, est, emb);
                    }
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
        Results::collect(RunView {
            m: &mut self.m,
            net: &self.net.stats,
            hosts: &self.hosts,
            groups: &self.groups,
            end: self.end,
            events: self.events,
        })
    }

    fn reachable(&self, h: u32) -> bool {
        self.groups[self.hosts[h as usize].group as usize].spec.reachable
    }

    // ------------------------------------------------------------ the network

    fn network_event(&mut self, e: NetEvent) {
        let agenda = &mut self.agenda;
        let out = &mut |t, e| agenda.push(t, Kind::Net(e));
        match e {
            NetEvent::Arrive { slot } => {
                if let Some((h, pkt)) = self.net.arrive(self.now, slot, &mut self.rng, out) {
                    self.deliver(h, pkt);
                }
            }
            NetEvent::NdResolved { net, loc, nid } => {
                if let Some((h, queue)) = self.net.nd_resolved(net, loc, nid) {
                    for pkt in queue {
                        self.deliver(h, pkt);
                    }
                }
            }
            NetEvent::NdTimeout { net, loc, nid, try_ } => {
                self.net.nd_timeout(self.now, (net, loc, nid), try_, &mut self.rng, out)
            }
        }
    }

    /// A wire packet from host `h` onto the network.
    fn send_wire(&mut self, h: u32, pkt: Vec<u8>) {
        let agenda = &mut self.agenda;
        let nets = self.hosts[h as usize].nets.as_slice();
        self.net.send(self.now, nets, pkt, &mut self.rng, &mut |t, e| agenda.push(t, Kind::Net(e)));
    }

    /// A packet reaches host `h` (its uplink's tc ingress, then the core).
    fn deliver(&mut self, h: u32, pkt: Vec<u8>) {
        self.m.pkts_arrived += 1;
        let host = &self.hosts[h as usize];
        if !host.admits(&pkt, |port| self.apps.listens(host.group, port)) {
            self.m.drop_no_socket += 1;
            return;
        }
        let now = self.instant();
        let mut out = self.bufs.pop().unwrap_or_default();
        self.hosts[h as usize].core.handle_inbound_into(now, &pkt, Csum::Complete, &mut out);
        self.run_actions(h, out);
    }

    // ------------------------------------------------------------ the cores

    /// Carries out one core call's actions; `out` goes back to the pool of buffers.
    fn run_actions(&mut self, h: u32, mut out: Vec<Action>) {
        let mut wire = std::mem::take(&mut self.wire);
        for a in out.drain(..) {
            match a {
                Action::SendWire { pkt, .. } => wire.push(pkt),
                Action::DeliverLocal(pkt) => self.stack(h, &pkt),
                Action::Event(e) => self.core_event(h, e),
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

    fn core_event(&mut self, h: u32, e: Event) {
        if self.trace {
            eprintln!("{:.6} h{h} {e:?}", self.now as f64 / NS as f64);
        }
        self.hosts[h as usize].on_core_event(h, self.now, &e, &mut self.m);
    }

    // ------------------------------------------------------------ applications

    fn app_send(&mut self, h: u32) {
        let Some(target) = self.hosts[h as usize].app.target() else { return };
        let dst = self.hosts[target as usize].nid;
        let now = self.instant();
        let host = &mut self.hosts[h as usize];
        let (pkt, again) = self.apps.send(h, &mut host.app, host.nid, dst, self.now);
        self.m.app_sent(host.group);
        let mut out = self.bufs.pop().unwrap_or_default();
        host.core.handle_outbound_into(now, pkt, Csum::Complete, &mut |_| None, &mut out);
        self.run_actions(h, out);
        if let Some(t) = again {
            self.push(t, Kind::Send { host: h });
        }
    }

    /// The host's stack: identifier-form packets the core delivered.
    fn stack(&mut self, h: u32, pkt: &[u8]) {
        let now = self.instant();
        let host = &mut self.hosts[h as usize];
        let reply = match self.apps.receive(&mut host.app, host.group, host.nid, pkt, self.now) {
            Receipt::None => return,
            Receipt::Received => None,
            Receipt::Echo(reply) => Some(reply),
        };
        self.m.app_received(host.group);
        if let Some(reply) = reply {
            let mut out = self.bufs.pop().unwrap_or_default();
            host.core.handle_outbound_into(now, reply, Csum::Complete, &mut |_| None, &mut out);
            self.run_actions(h, out);
        }
    }

    // ------------------------------------------------------------ attachment

    fn refresh_locators(&mut self, h: u32) {
        let locs = self.net.locals(self.hosts[h as usize].nets.as_slice());
        let now = self.instant();
        let out = self.hosts[h as usize].core.set_local_locators(now, locs);
        self.run_actions(h, out);
    }

    fn join(&mut self, h: u32, net: u32, reachable: bool) {
        let host = &mut self.hosts[h as usize];
        if host.nets.contains(&net) {
            return;
        }
        host.nets.push(net);
        self.net.attach(h, host.nid, net, reachable);
        self.refresh_locators(h);
    }

    fn leave(&mut self, h: u32, net: u32) {
        let host = &mut self.hosts[h as usize];
        if !host.nets.remove(net) {
            return;
        }
        self.net.detach(h, host.nid, net);
        self.refresh_locators(h);
    }

    fn do_move(&mut self, h: u32) {
        let g = self.hosts[h as usize].group;
        if !self.mobility.moves(g) {
            return;
        }
        if let Some((to, how)) = self.mobility.step(h, g, self.hosts[h as usize].nets.as_slice()) {
            self.m.moves += 1;
            let old: Vec<u32> = self.hosts[h as usize].nets.as_slice().to_vec();
            let reachable = self.groups[g as usize].spec.reachable;
            match how {
                How::Make { overlap } => {
                    self.join(h, to, reachable);
                    for n in old {
                        self.push(self.now + overlap, Kind::Leave { host: h, net: n });
                    }
                }
                How::Break { gap: 0 } => {
                    // one change of the locator set: leave and join at once
                    let host = &mut self.hosts[h as usize];
                    for n in old {
                        host.nets.remove(n);
                        self.net.detach(h, host.nid, n);
                    }
                    self.join(h, to, reachable);
                }
                How::Break { gap } => {
                    for n in old {
                        self.leave(h, n);
                    }
                    self.push(self.now + gap, Kind::Join { host: h, net: to });
                }
            }
        }
        if let Some(d) = self.mobility.next_move(g, &mut self.rng) {
            self.push(self.now + d, Kind::Move { host: h });
        }
    }

    fn renumber(&mut self, net: u32) {
        let overlap = self.mobility.renumber_overlap(net);
        let (hosts, groups) = (&self.hosts, &self.groups);
        let r = self.net.renumber(net, overlap > 0.0, |h| {
            let host = &hosts[h as usize];
            (host.nid, groups[host.group as usize].spec.reachable)
        });
        self.m.renumbered_hosts += r.hosts.len() as u64;
        self.m.renumber_at.get_or_insert(self.now);
        for &h in &r.hosts {
            self.refresh_locators(h);
        }
        for o in r.old {
            if overlap > 0.0 {
                self.push(self.now + secs(overlap), Kind::RenumberEnd { net, loc: o });
            } else {
                self.net.forget(o);
            }
        }
    }

    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_items_stay_small() {
        // the calendar's sifting is the hot loop: an event is at most 4 words
        assert!(std::mem::size_of::<Kind>() <= 32, "{}", std::mem::size_of::<Kind>());
    }
}
