//! What a run counts while it runs (simulated time only, never the wall clock):
//! the hosts' side here (`Metrics`), the network's in `NetCounters` (which the
//! `Network` keeps). `results` turns both into the report at the end.

use crate::scenario::Scenario;
use crate::time::{round3, secs_f};
use serde::Serialize;

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

impl LuSample {
    /// An advertisement first sent at `t0` (ns), `d` ns before it ended.
    pub(crate) fn new(host: u32, group: u16, t0: u64, d: u64, attempts: u32, acked: bool, pending: bool) -> LuSample {
        LuSample { host, group, t_s: secs_f(t0), delay_ms: round3(d as f64 / 1e6), attempts, acked, pending }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub ilcc_established: usize,
    pub ilcc_embryonic: usize,
    /// LUs the server group received in the period ending at `t_s`
    pub lus_received: u64,
}

/// Datagrams of one group's applications.
#[derive(Default)]
pub(crate) struct GroupCount {
    pub(crate) sent: u64,
    pub(crate) received: u64,
}

pub(crate) struct Metrics {
    pub(crate) server_group: Option<u16>,
    pub(crate) moves: u64,
    pub(crate) renumbered_hosts: u64,
    pub(crate) renumber_at: Option<u64>,
    pub(crate) lu_packets: u64,
    pub(crate) lu_superseded: u64,
    pub(crate) lus: Vec<LuSample>,
    pub(crate) lu_rx_total: u64,
    pub(crate) lu_rx_bin: u64,
    pub(crate) lu_rx_max_bin: u64,
    pub(crate) timeline: Vec<Sample>,
    /// packets that reached a host (before its admission check)
    pub(crate) pkts_arrived: u64,
    pub(crate) drop_no_socket: u64,
    pub(crate) app: Vec<GroupCount>,
}

/// The network's counters.
#[derive(Default)]
pub(crate) struct NetCounters {
    pub(crate) sent: u64,
    pub(crate) lost: u64,
    pub(crate) drop_no_route: u64,
    pub(crate) drop_no_uplink: u64,
    pub(crate) drop_bad: u64,
    pub(crate) drop_nd: u64,
    pub(crate) nd_solicits: u64,
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
            pkts_arrived: 0,
            drop_no_socket: 0,
            app: s.group.iter().map(|_| GroupCount::default()).collect(),
        }
    }

    pub(crate) fn lu_done(&mut self, host: u32, group: u16, t0: u64, d: u64, attempts: u32, acked: bool) {
        self.lus.push(LuSample::new(host, group, t0, d, attempts, acked, false));
    }

    pub(crate) fn lu_received(&mut self, group: u16) {
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
