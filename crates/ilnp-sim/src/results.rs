//! What a run reports, from simulated time only (never the wall clock), so the
//! same scenario and seed give byte-identical results: built at the end from what
//! was counted (`metrics`) and a view of the hosts (`RunView`), never from the
//! simulator itself.

use crate::hosts::{Group, Host};
use crate::metrics::{Metrics, NetCounters};
use crate::time::{round3, round6, secs_f, NS};
use ilnp_core::{DropReason, Outcome};
use serde::Serialize;
use std::collections::BTreeMap;

pub use crate::metrics::{LuSample, Sample};

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

/// What the end of a run leaves to report: the counters, the hosts and groups
/// (their applications' counts, LUs still pending, the server group's cores).
pub(crate) struct RunView<'a> {
    pub(crate) m: &'a mut Metrics,
    pub(crate) net: &'a NetCounters,
    pub(crate) hosts: &'a [Host],
    pub(crate) groups: &'a [Group],
    /// the run's end (ns)
    pub(crate) end: u64,
    pub(crate) events: u64,
}

impl Results {
    pub(crate) fn collect(run: RunView<'_>) -> Results {
        let RunView { m, net, hosts, groups: sim_groups, end, events } = run;
        let mut lus = std::mem::take(&mut m.lus);
        for (h, host) in hosts.iter().enumerate() {
            for &(_, t0) in &host.lu_pending {
                lus.push(LuSample::new(h as u32, host.group, t0, end.saturating_sub(t0), 0, false, true));
            }
        }
        let timeline = std::mem::take(&mut m.timeline);
        let m: &Metrics = m;
        let mut groups = Vec::new();
        for (gi, g) in sim_groups.iter().enumerate() {
            let answered: Vec<f64> = g
                .hosts()
                .filter_map(|h| {
                    let app = &hosts[h as usize].app;
                    Some(round3((app.first_reply? - app.first_sent?) as f64 / 1e6))
                })
                .collect();
            groups.push(GroupResult {
                name: g.spec.name.clone(),
                hosts: g.spec.count,
                datagrams_sent: m.app[gi].sent,
                datagrams_received: m.app[gi].received,
                replies_received: g.hosts().map(|h| hosts[h as usize].app.replies).sum(),
                hosts_answered: answered.len(),
                first_reply_ms: Dist::of(answered),
                handoff: LuSummary::of(lus.iter().filter(|l| l.group as usize == gi)),
            });
        }
        let server = m.server_group.map(|sg| {
            let g = &sim_groups[sg as usize];
            let mut counters = BTreeMap::new();
            let (mut est, mut emb) = (0, 0);
            for h in g.hosts() {
                let c = &hosts[h as usize].core;
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
            let dur = end as f64 / NS as f64;
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
            duration_s: end as f64 / NS as f64,
            hosts: hosts.len(),
            events,
            moves: m.moves,
            lu_packets_sent: m.lu_packets,
            lu_superseded: m.lu_superseded,
            network: NetResult {
                packets_sent: net.sent,
                packets_arrived: m.pkts_arrived,
                lost: net.lost,
                drop_no_route: net.drop_no_route,
                drop_no_uplink: net.drop_no_uplink + net.drop_bad,
                drop_no_socket: m.drop_no_socket,
                nd_solicits: net.nd_solicits,
                drop_nd: net.drop_nd,
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
