//! The metrics text of one scrape (`crate::metrics` serves it): the numbers
//! `ilnpctl stats`, `status` and `ilcc show` report, as OpenMetrics series with the
//! names docs/architecture.md § Metrics lists.

use super::counters::ShellCounter;
use super::Daemon;
use ilnp_core::{DropReason, Outcome};
use ilnp_wire::Nid;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;

type Labels = Vec<(String, String)>;

fn label(k: &str, v: impl ToString) -> Labels {
    vec![(k.to_string(), v.to_string())]
}

/// A counter family with one series per (label value, count), zeros included:
/// a series that appears only once non-zero breaks `rate()` at its start.
fn counters<'a>(reg: &mut Registry, name: &str, help: &str, key: &str, it: impl Iterator<Item = (&'a str, u64)>) {
    let f = Family::<Labels, Counter>::default();
    for (k, v) in it {
        f.get_or_create(&label(key, k)).inc_by(v);
    }
    reg.register(name, help, f);
}

fn gauge(reg: &mut Registry, name: &str, help: &str, v: i64) {
    let g = Gauge::<i64>::default();
    g.set(v);
    reg.register(name, help, g);
}

impl Daemon {
    /// Called when the (optional) histograms are on: one LU acked.
    pub(super) fn observe_lu_acked(&self, rtt_us: u64, attempts: u32) {
        let Some(h) = &self.histograms else { return };
        let s = rtt_us as f64 / 1e6;
        h.lu_handshake.observe(s);
        if attempts == 1 {
            h.lu_rtt.observe(s);
        }
    }

    pub(super) fn metrics_text(&mut self) -> String {
        let mut reg = Registry::with_prefix("ilnp");
        let st = self.core.stats();
        counters(
            &mut reg,
            "core_drops",
            "packets the protocol core dropped, by reason (ilnpctl stats: core)",
            "reason",
            DropReason::ALL.iter().map(|r| (r.as_str(), st.dropped(*r))),
        );
        counters(
            &mut reg,
            "core_events",
            "outcomes counted by the protocol core: sessions, Locator Updates, admission (ilnpctl stats: core)",
            "event",
            Outcome::ALL.iter().map(|o| (o.as_str(), st.outcome(*o))),
        );
        counters(
            &mut reg,
            "daemon_events",
            "what the daemon itself counted: send and delivery errors, GSO splits, TCP hints (ilnpctl stats: core)",
            "event",
            ShellCounter::ALL
                .iter()
                .map(|c| (c.as_str(), self.counters.get(c).copied().unwrap_or(0)))
                .chain(crate::control::counters()),
        );
        if let Some(p) = &self.dns {
            counters(
                &mut reg,
                "dns_proxy_events",
                "what the resolver proxy did: queries, answers, failures, TCP clients refused or closed (ilnpctl dns status)",
                "event",
                p.counters.snapshot().into_iter(),
            );
        }
        let fast = self.dp.as_ref().and_then(|d| d.stats().ok()).unwrap_or_default();
        counters(
            &mut reg,
            "datapath_packets",
            "packets the eBPF fast path handled, by outcome or drop reason (ilnpctl stats: datapath)",
            "reason",
            fast.iter().map(|(k, v)| (*k, *v)),
        );
        let t = self.core.tier_counts();
        let tiers = Family::<Labels, Gauge>::default();
        tiers.get_or_create(&label("tier", "established")).set(t.established as i64);
        tiers.get_or_create(&label("tier", "embryonic")).set(t.embryonic as i64);
        reg.register("ilcc_entries", "ILNP Communication Cache entries, by admission tier", tiers);
        let max = Family::<Labels, Gauge>::default();
        max.get_or_create(&label("tier", "established")).set(t.max_established as i64);
        max.get_or_create(&label("tier", "embryonic")).set(t.max_embryonic as i64);
        reg.register("ilcc_max_entries", "the bound of each ILCC tier", max);
        gauge(&mut reg, "uptime_seconds", "seconds since ilnpd started", self.started.elapsed().as_secs() as i64);
        let locs = self.locator_view();
        let lf = Family::<Labels, Gauge>::default();
        let age = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        for l in &locs {
            let labels = vec![("locator".to_string(), l.l64.to_string()), ("uplink".to_string(), l.interface.clone())];
            let mut with_state = labels.clone();
            with_state.push(("state".into(), l.state.as_str().to_string()));
            with_state.push(("pref".into(), l.pref.to_string()));
            lf.get_or_create(&with_state).set(1);
            if let Some(a) = l.last_rx_age_s {
                age.get_or_create(&labels).set(a);
            }
        }
        reg.register("local_locator_info", "this node's locators (1 per locator; state and preference as labels)", lf);
        reg.register("local_locator_last_rx_age_seconds", "seconds since a packet last arrived on the locator", age);
        self.peer_metrics(&mut reg);
        if let Some(h) = &self.histograms {
            reg.register(
                "lu_handshake_seconds",
                "Locator Update first sent -> acked, retransmissions included",
                h.lu_handshake.clone(),
            );
            reg.register(
                "lu_rtt_seconds",
                "round trip of Locator Updates acked at their first transmission",
                h.lu_rtt.clone(),
            );
            reg.register(
                "slow_path_seconds",
                "time per slow-path packet (TUN read -> core -> actions)",
                h.slow_path.clone(),
            );
        }
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &reg) {
            tracing::warn!("metrics: encoding: {e}");
        }
        out
    }

    /// Packets and bytes (fast path + slow path) of the `top_peers` busiest peers.
    fn peer_metrics(&self, reg: &mut Registry) {
        let top = self.cfg.metrics.as_ref().map_or(0, |m| m.top_peers);
        if top == 0 {
            return;
        }
        let fast: HashMap<ilnp_core::IlccKey, crate::bpf::PeerCounters> =
            self.dp.as_ref().and_then(|d| d.peer_counters().ok()).unwrap_or_default().into_iter().collect();
        // per correspondent: its entries (one per NID of ours it talks to) summed,
        // so no series names which of our NIDs it uses
        let mut per_peer: std::collections::BTreeMap<Nid, [u64; 4]> = Default::default();
        for e in self.core.ilcc().iter() {
            let f = fast.get(&e.key()).copied().unwrap_or_default();
            let c = per_peer.entry(e.nid).or_default();
            let add = [
                f.tx_pkts + e.slow_pkts_out,
                f.tx_bytes + e.slow_bytes_out,
                f.rx_pkts + e.slow_pkts_in,
                f.rx_bytes + e.slow_bytes_in,
            ];
            for (x, a) in c.iter_mut().zip(add) {
                *x += a;
            }
        }
        let mut rows: Vec<(Nid, [u64; 4])> = per_peer.into_iter().collect();
        rows.sort_by_key(|(n, c)| (std::cmp::Reverse(c[1] + c[3]), *n));
        rows.truncate(top);
        let names = [
            ("peer_tx_packets", "packets sent to the peer (one of the top_peers busiest)"),
            ("peer_tx_bytes", "bytes sent to the peer"),
            ("peer_rx_packets", "packets received from the peer"),
            ("peer_rx_bytes", "bytes received from the peer"),
        ];
        for (i, (name, help)) in names.iter().enumerate() {
            let f = Family::<Labels, Counter>::default();
            for (nid, c) in &rows {
                f.get_or_create(&label("nid", nid)).inc_by(c[i]);
            }
            reg.register(*name, *help, f);
        }
    }
}
