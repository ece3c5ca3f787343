//! What a run measures, from simulated time only (never the wall clock), so the
//! same scenario and seed give byte-identical results.

use crate::scenario::Scenario;
use crate::sim::{Sim, NS};
use ilnp_core::{DropReason, Outcome};
use serde::Serialize;
use std::collections::BTreeMap;

/// One Locator Update advertisement of a host to one correspondent: from its
/// first transmission to its ack (or the core giving up).
#[derive(Clone, Debug, Serialize)]
pub struct LuSample {
    pub host: u32,
    pub group: u16,
    pub t_s: f64,
    pub delay_ms: f64,
    pub attempts: u32,
    pub acked: bool,
    /// still unacknowledged when the run ended (`delay_ms`: until the end)
    pub pending: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub ilcc_established: usize,
    pub ilcc_embryonic: usize,
    /// LUs the server group received in the period ending at `t_s`
    pub lus_received: u64,
}

#[derive(Default)]
pub(crate) struct GroupCount {
    sent: u64,
    received: u64,
}

pub(crate) struct Metrics {
    pub(crate) server_group: Option<u16>,
    pub(crate) moves: u64,
    pub(crate) renumbered_hosts: u64,
    pub(crate) renumber_at: Option<u64>,
    pub(crate) lu_packets: u64,
    pub(crate) lu_superseded: u64,
    lus: Vec<LuSample>,
    lu_rx_total: u64,
    lu_rx_bin: u64,
    lu_rx_max_bin: u64,
    timeline: Vec<Sample>,
    pub(crate) pkts_sent: u64,
    pub(crate) pkts_arrived: u64,
    pub(crate) lost: u64,
    pub(crate) drop_no_route: u64,
    pub(crate) drop_no_uplink: u64,
    pub(crate) drop_no_socket: u64,
    pub(crate) drop_bad: u64,
    pub(crate) drop_nd: u64,
    pub(crate) nd_solicits: u64,
    app: Vec<GroupCount>,
}

impl Metrics {
    pub(crate) fn new(s: &Scenario) -> Metrics {
        Metrics {
            server_group: s.server.as_ref().and_then(|n| s.group.iter().position(|g| &g.name == n)).map(|i| i as u16),
            moves: 0,
            renumbered_hosts: 0,
            renumber_at: None,
            lu_packets: 0,
            lu_superseded: 0,
            lus: Vec::new(),
            lu_rx_total: 0,
            lu_rx_bin: 0,
            lu_rx_max_bin: 0,
            timeline: Vec::new(),
            pkts_sent: 0,
            pkts_arrived: 0,
            lost: 0,
            drop_no_route: 0,
            drop_no_uplink: 0,
            drop_no_socket: 0,
            drop_bad: 0,
            drop_nd: 0,
            nd_solicits: 0,
            app: s.group.iter().map(|_| GroupCount::default()).collect(),
        }
    }

    pub(crate) fn lu_done(&mut self, host: u32, group: u16, t0: u64, d: u64, attempts: u32, acked: bool) {
        self.lus.push(LuSample {
            host,
            group,
            t_s: secs_f(t0),
            delay_ms: round3(d as f64 / 1e6),
            attempts,
            acked,
            pending: false,
        });
    }

    pub(crate) fn lu_received(&mut self, group: u16, _now: u64) {
        if Some(group) == self.server_group {
            self.lu_rx_total += 1;
            self.lu_rx_bin += 1;
        }
    }

    pub(crate) fn sample(&mut self, now: u64, est: usize, emb: usize) {
        self.lu_rx_max_bin = self.lu_rx_max_bin.max(self.lu_rx_bin);
        self.timeline.push(Sample {
            t_s: secs_f(now),
            ilcc_established: est,
            ilcc_embryonic: emb,
            lus_received: std::mem::take(&mut self.lu_rx_bin),
        });
    }

    pub(crate) fn app_sent(&mut self, g: u16) {
        self.app[g as usize].sent += 1;
    }
    pub(crate) fn app_received(&mut self, g: u16) {
        self.app[g as usize].received += 1;
    }
}

fn secs_f(ns: u64) -> f64 {
    round6(ns as f64 / NS as f64)
}
fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Distribution summary (nearest-rank percentiles).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Dist {
    pub n: usize,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Dist {
    pub fn of(mut v: Vec<f64>) -> Dist {
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let rank = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Dist {
            n,
            mean: Some(round3(v.iter().sum::<f64>() / n as f64)),
            min: Some(v[0]),
            p50: Some(rank(0.5)),
            p90: Some(rank(0.9)),
            p99: Some(rank(0.99)),
            max: Some(v[n - 1]),
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LuSummary {
    /// advertisements finished (acked or given up)
    pub lus: usize,
    pub acked: usize,
    /// the core gave up (`lu_max_attempts` sent, none acked)
    pub failed: usize,
    /// still unacknowledged at the end of the run (counted as not successful)
    pub unfinished: usize,
    pub success_pct: Option<f64>,
    /// first transmission → ack, acked ones
    pub delay_ms: Dist,
    /// attempts → advertisements (acked ones)
    pub attempts: BTreeMap<u32, usize>,
}

impl LuSummary {
    pub fn of<'a>(lus: impl Iterator<Item = &'a LuSample>) -> LuSummary {
        let (mut acked, mut failed, mut unfinished, mut delays, mut attempts) = (0, 0, 0, Vec::new(), BTreeMap::new());
        for l in lus {
            if l.pending {
                unfinished += 1;
            } else if l.acked {
                acked += 1;
                delays.push(l.delay_ms);
                *attempts.entry(l.attempts).or_insert(0) += 1;
            } else {
                failed += 1;
            }
        }
        let lus = acked + failed + unfinished;
        LuSummary {
            lus,
            acked,
            failed,
            unfinished,
            success_pct: (lus > 0).then(|| round3(100.0 * acked as f64 / lus as f64)),
            delay_ms: Dist::of(delays),
            attempts,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct NetResult {
    pub packets_sent: u64,
    pub packets_arrived: u64,
    pub lost: u64,
    /// no host at the destination locator (it moved away) or no such locator
    pub drop_no_route: u64,
    /// the source locator is on no attached network (ingress filtering)
    pub drop_no_uplink: u64,
    /// admission = socket: dropped by the modelled fast path (no entry, no socket)
    pub drop_no_socket: u64,
    /// Neighbour Discovery (networks with `nd`): solicitations sent, packets lost
    /// waiting for a resolution that failed (or a host that left)
    pub nd_solicits: u64,
    pub drop_nd: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct GroupResult {
    pub name: String,
    pub hosts: usize,
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// echoes received back by the group's senders
    pub replies_received: u64,
    /// senders that got at least one echo back
    pub hosts_answered: usize,
    /// first datagram sent → first echo, answered senders
    pub first_reply_ms: Dist,
    pub handoff: LuSummary,
}

#[derive(Clone, Debug, Serialize)]
pub struct ServerResult {
    pub group: String,
    pub hosts: usize,
    pub lus_received: u64,
    pub lus_per_s_mean: f64,
    /// the busiest sample period's LUs, per second
    pub lus_per_s_max: f64,
    pub ilcc_max: usize,
    pub ilcc_established_end: usize,
    pub ilcc_embryonic_end: usize,
    /// the core's non-zero counters, summed over the group
    pub counters: BTreeMap<&'static str, u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RenumberResult {
    pub hosts: u64,
    /// renumbering → the last host's first LU after it acked (every correspondent
    /// knows the new prefix)
    pub first_lu_converged_s: Option<f64>,
    /// renumbering → the last of its LUs acked (all correspondents updated)
    pub converged_s: Option<f64>,
    pub lus: LuSummary,
}

#[derive(Clone, Debug, Serialize)]
pub struct Results {
    pub scenario: String,
    pub variant: String,
    pub run: u32,
    pub seed: u64,
    pub duration_s: f64,
    pub hosts: usize,
    /// events handled (packets arriving, timers, application sends, moves, samples)
    pub events: u64,
    pub moves: u64,
    pub lu_packets_sent: u64,
    /// a new LU to a peer replaced one still unacknowledged
    pub lu_superseded: u64,
    pub network: NetResult,
    pub handoff: LuSummary,
    pub renumber: Option<RenumberResult>,
    pub groups: Vec<GroupResult>,
    pub server: Option<ServerResult>,
    pub timeline: Vec<Sample>,
    #[serde(skip)]
    pub lu_samples: Vec<LuSample>,
}

impl Results {
    pub(crate) fn collect(sim: &mut Sim) -> Results {
        let mut lus = std::mem::take(&mut sim.m.lus);
        for (h, host) in sim.hosts.iter().enumerate() {
            for &(_, t0) in &host.lu_pending {
                let d = sim.end.saturating_sub(t0);
                lus.push(LuSample {
                    host: h as u32,
                    group: host.group,
                    t_s: secs_f(t0),
                    delay_ms: round3(d as f64 / 1e6),
                    attempts: 0,
                    acked: false,
                    pending: true,
                });
            }
        }
        let timeline = std::mem::take(&mut sim.m.timeline);
        let sim: &Sim = sim;
        let m = &sim.m;
        let mut groups = Vec::new();
        for (gi, g) in sim.groups.iter().enumerate() {
            let range = g.first..g.first + g.spec.count as u32;
            let answered: Vec<f64> = range
                .clone()
                .filter_map(|h| {
                    let host = &sim.hosts[h as usize];
                    Some(round3((host.first_reply? - host.first_sent?) as f64 / 1e6))
                })
                .collect();
            groups.push(GroupResult {
                name: g.spec.name.clone(),
                hosts: g.spec.count,
                datagrams_sent: m.app[gi].sent,
                datagrams_received: m.app[gi].received,
                replies_received: range.clone().map(|h| sim.hosts[h as usize].replies).sum(),
                hosts_answered: answered.len(),
                first_reply_ms: Dist::of(answered),
                handoff: LuSummary::of(lus.iter().filter(|l| l.group as usize == gi)),
            });
        }
        let server = m.server_group.map(|sg| {
            let g = &sim.groups[sg as usize];
            let mut counters = BTreeMap::new();
            let (mut est, mut emb) = (0, 0);
            for h in g.first..g.first + g.spec.count as u32 {
                let c = sim.core(h);
                for r in DropReason::ALL {
                    *counters.entry(r.as_str()).or_insert(0) += c.stats().dropped(*r);
                }
                for o in Outcome::ALL {
                    *counters.entry(o.as_str()).or_insert(0) += c.stats().outcome(*o);
                }
                let t = c.tier_counts();
                est += t.established;
                emb += t.embryonic;
            }
            counters.retain(|_, v| *v > 0);
            let dur = sim.end as f64 / NS as f64;
            let period = timeline.get(1).map_or(1.0, |s| s.t_s - timeline[0].t_s).max(1e-9);
            ServerResult {
                group: g.spec.name.clone(),
                hosts: g.spec.count,
                lus_received: m.lu_rx_total,
                lus_per_s_mean: round3(m.lu_rx_total as f64 / dur),
                lus_per_s_max: round3(m.lu_rx_max_bin as f64 / period),
                ilcc_max: timeline.iter().map(|s| s.ilcc_established + s.ilcc_embryonic).max().unwrap_or(0),
                ilcc_established_end: est,
                ilcc_embryonic_end: emb,
                counters,
            }
        });
        let renumber = m.renumber_at.map(|t0| {
            let t0s = secs_f(t0);
            let mine: Vec<&LuSample> = lus.iter().filter(|l| l.t_s >= t0s).collect();
            let last = mine
                .iter()
                .filter(|l| l.acked)
                .map(|l| l.t_s + l.delay_ms / 1e3)
                .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
            let mut first: BTreeMap<u32, &LuSample> = BTreeMap::new();
            for l in &mine {
                let e = first.entry(l.host).or_insert(l);
                if l.t_s < e.t_s {
                    *e = l;
                }
            }
            let first_done = if first.values().all(|l| l.acked) {
                first
                    .values()
                    .map(|l| l.t_s + l.delay_ms / 1e3)
                    .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
            } else {
                None
            };
            RenumberResult {
                hosts: m.renumbered_hosts,
                first_lu_converged_s: first_done.map(|l| round6(l - t0s)),
                converged_s: last.map(|l| round6(l - t0s)),
                lus: LuSummary::of(mine.into_iter()),
            }
        });
        Results {
            scenario: String::new(),
            variant: String::new(),
            run: 0,
            seed: 0,
            duration_s: sim.end as f64 / NS as f64,
            hosts: sim.hosts.len(),
            events: sim.events,
            moves: m.moves,
            lu_packets_sent: m.lu_packets,
            lu_superseded: m.lu_superseded,
            network: NetResult {
                packets_sent: m.pkts_sent,
                packets_arrived: m.pkts_arrived,
                lost: m.lost,
                drop_no_route: m.drop_no_route,
                drop_no_uplink: m.drop_no_uplink + m.drop_bad,
                drop_no_socket: m.drop_no_socket,
                nd_solicits: m.nd_solicits,
                drop_nd: m.drop_nd,
            },
            handoff: LuSummary::of(lus.iter()),
            renumber,
            groups,
            server,
            timeline,
            lu_samples: lus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let d = Dist::of((1..=100).rev().map(f64::from).collect());
        assert_eq!((d.min, d.p50, d.p90, d.p99, d.max), (Some(1.0), Some(50.0), Some(90.0), Some(99.0), Some(100.0)));
        assert_eq!(d.mean, Some(50.5));
        assert_eq!(Dist::of(vec![]).n, 0);
    }
}
