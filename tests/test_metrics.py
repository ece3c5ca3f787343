"""The metrics endpoint (issue #29 item 2), scraped by a real Prometheus server (Debian's
`prometheus`) in the MN's namespace: after a move, a PromQL query over its HTTP API returns
the same handoff count as `ilnpctl stats`, and the LU handshake histogram counted each one."""

import json
import urllib.parse

from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_ID, CN_NID, Monitor, mobile_pair

METRICS = "127.0.0.1:9469"
PROM = "127.0.0.1:9090"


def promql(node, query: str) -> list[dict]:
    """An instant query over Prometheus's HTTP API, from inside `node`."""
    url = f"http://{PROM}/api/v1/query?query={urllib.parse.quote(query)}"
    r = json.loads(node.run("curl", "-sf", url).stdout)
    assert r["status"] == "success", r
    return r["data"]["result"]


def test_prometheus_scrapes_ilnpd_and_counts_the_handoffs_ilnpctl_counts(bed, tmp_path):
    t, dcn, dmn = mobile_pair(bed, mn_extra={"metrics": {"listen": [METRICS], "top_peers": 5}})
    mn = t["mn"]
    # the text itself: OpenMetrics, every drop reason present from the start (zeros)
    text = mn.run("curl", "-sf", "-D", "-", f"http://{METRICS}/metrics").stdout
    assert "application/openmetrics-text" in text and text.rstrip().endswith("# EOF"), text[:300]
    assert 'ilnp_core_drops_total{reason="bad_nonce"} 0' in text, text[:2000]
    assert mn.run("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://{METRICS}/").stdout == "404"

    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ilnpd\n"
                   f"    static_configs:\n      - targets: ['{METRICS}']\n")
    mn.spawn("prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address={PROM}", stdout=open(tmp_path / "prometheus.log", "w"))
    wait_for(lambda: mn.run("curl", "-sf", f"http://{PROM}/-/ready", check=False).returncode == 0, timeout=30,
             what="prometheus ready")

    mon = Monitor(dmn)
    mn.spawn("ping", "-6", "-i", "0.1", CN_ID)  # a session, through the fast path
    wait_for(lambda: any(e["nid"] == CN_NID for e in dmn.ctl("ilcc", "show")), what="a session with the CN")
    # two moves: join R3 (LU to the CN), then leave R2 (another LU)
    mn.ip("link", "set", "eth-r3", "up")
    wait_for(lambda: len(mon.of("lu_acked")) >= 1, timeout=15, what="the join LU acked")
    mn.ip("link", "set", "eth-r2", "down")
    wait_for(lambda: len(mon.of("lu_acked")) >= 2, timeout=15, what="the leave LU acked")
    mon.stop()
    acked = dmn.stats()["core"]["lu_acked"]
    assert acked >= 2

    def scraped():
        r = promql(mn, 'ilnp_core_events_total{event="lu_acked"}')
        return r and int(float(r[0]["value"][1])) == dmn.stats()["core"]["lu_acked"] and r

    r = wait_for(scraped, timeout=15, what="prometheus to scrape the handoff count ilnpctl shows")
    assert r[0]["metric"]["job"] == "ilnpd"
    n = promql(mn, "ilnp_lu_handshake_seconds_count")
    assert int(float(n[0]["value"][1])) == dmn.stats()["core"]["lu_acked"], n
    up = promql(mn, 'up{job="ilnpd"}')
    assert up[0]["value"][1] == "1", up
    peers = promql(mn, "ilnp_peer_tx_packets_total")
    assert [p["metric"]["nid"] for p in peers] == [CN_NID] and float(peers[0]["value"][1]) > 0, peers
    q = promql(mn, "histogram_quantile(0.5, ilnp_lu_handshake_seconds_bucket)")
    print(f"metrics: {acked} LUs acked, median handshake ≤ {float(q[0]['value'][1]) * 1000:.2f} ms (bucket bound)")
    assert 0 < float(q[0]["value"][1]) < 1.0, q
    assert dmn.stop() == 0 and dcn.stop() == 0
