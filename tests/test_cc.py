"""TCP Hybla and TCP Veno as BPF struct_ops (bpf/cc/, loaded by ilnp_lab.cc) against their
published behaviour, each next to Reno measured in the same test on the same path.

Paths: two namespaces joined by the lab's delay line (or netem): 50 ms each way (RTT
100 ms = 4 x Hybla's RTT0 of 25 ms, so rho = 4). The sender samples its own TCP_INFO every
2 ms (ilnp_lab.cctrace).

* Hybla (Caini & Firrincieli 2004): the first window is rho segments and slow start adds
  2^rho - 1 per ACK (a round trip multiplies the window by up to 2^rho, Reno's by 2); in
  congestion avoidance the window grows by rho^2/cwnd per ACK, i.e. rho^2 = 16 segments
  per RTT where Reno grows 1 (Linux's Reno counts ACKed
  segments, Hybla counts ACKs: with the receiver ACKing every second segment Hybla's
  growth is rho^2/2 per RTT). Path: 20 Mbit/s, 100-packet queue, so slow start ends in a
  loss and both then grow linearly.
* Veno (Fu & Liew 2003): on a loss with backlog N < beta = 3 (random loss) ssthresh =
  4/5 cwnd, with N >= beta (congestive) 1/2 cwnd; Reno always 1/2. Random loss: 1 %
  per segment on an unlimited line (no queue, N ~ 0; TSO/GSO off so single segments are
  lost); congestive loss: 10 Mbit/s with a 150-packet queue and no random loss. There the
  path holds 83 packets, so after the first loss (ssthresh ~ (83 + 150) / 2) the queue never
  empties, N >= beta throughout, and Veno's window grows one segment every other RTT where
  Reno's grows one per RTT.
"""

import json
import subprocess
import sys

import pytest

from ilnp_lab import cc, cctrace, mobility
from ilnp_lab.topology import load
from ilnp_lab.testbed import run, stop_process, wait_for

DELAY_MS = 50
RHO = 2 * DELAY_MS / 25
PORT = 5300


def struct_ops_maps() -> set[int]:
    return {m["id"] for m in json.loads(run(["bpftool", "-j", "struct_ops", "show"]).stdout or "[]")}


@pytest.fixture
def ccs():
    before, maps = cc.available(), struct_ops_maps()
    with cc.loaded(["hybla", "veno"]) as impl:
        assert {"hybla", "veno"} <= cc.available()
        yield impl
    # what the lab registered is gone again (the flows end with RST, so no orphan socket
    # holds a map); what the kernel had stays
    assert cc.available() == before
    wait_for(lambda: struct_ops_maps() <= maps, timeout=10, what="the lab's struct_ops maps freed")


def path(bed, n: int, loss=0.0, rate=None, queue=None, gso=True):
    s, r = bed.add_node(f"s{n}"), bed.add_node(f"r{n}")
    bed.delay_link(s, "eth0", r, "eth0", DELAY_MS, loss, seed=7 + n, rate_mbit=rate, queue_packets=queue)
    s.add_addr("eth0", f"2001:db8:cc{n}::1/64")
    r.add_addr("eth0", f"2001:db8:cc{n}::2/64")
    if not gso:
        s.run("ethtool", "-K", "eth0", "tso", "off", "gso", "off")
    return s, r, f"2001:db8:cc{n}::2"


def flow(bed, s, r, dst, name: str, seconds: float) -> list[dict]:
    global PORT
    PORT += 1
    sink = r.spawn("python3", "-m", "ilnp_lab.cctrace", "sink", str(PORT))
    wait_for(lambda: f":{PORT} " in r.run("ss", "-ltnH").stdout, timeout=10, what="sink listening")
    out = bed.workdir / f"{name}-{PORT}.json"
    snd = s.spawn("python3", "-m", "ilnp_lab.cctrace", "send", dst, str(PORT), name, str(seconds), str(out))
    assert snd.wait(timeout=seconds + 30) == 0
    stop_process(sink)
    trace = json.loads(out.read_text())
    assert trace["cc"] == name
    return trace["samples"]


def test_hybla_grows_2_to_the_rho_per_rtt_in_slow_start_and_rho_squared_in_avoidance(bed, ccs):
    s, r, dst = path(bed, 1, rate=20, queue=100)
    slopes, first = {}, {}
    for name in ("reno", "hybla"):
        sm = flow(bed, s, r, dst, name, 5)
        # the window when the connection starts, and after its first round trip's ACKs
        first[name] = (sm[0]["cwnd"], [x["cwnd"] for x in sm if x["t"] <= 1.5 * 2 * DELAY_MS / 1000][-1])
        sl = cctrace.ca_slopes(sm)
        assert sl, f"{name}: no stretch of congestion avoidance"
        slopes[name] = cctrace.median(sl) / (1000 / (2 * DELAY_MS))  # segments per RTT
    print(f"CA growth, segments per RTT: {slopes}; first window, after one RTT: {first}; "
          f"implementation: {ccs['hybla']}")
    # slow start: Hybla starts at rho segments and adds 2^rho - 1 per ACK, so one round trip
    # multiplies the window by 2^rho with an ACK per segment, by 1 + (2^rho - 1)/2 with an ACK
    # per two (measured here: 4 -> 34); Reno (kernel IW 10) doubles (10 -> 20)
    assert first["hybla"][0] == RHO, first
    assert 2**RHO / 2 <= first["hybla"][1] / first["hybla"][0] <= 2**RHO, first
    assert 1.5 <= first["reno"][1] / first["reno"][0] <= 2.0, first
    # Reno: 1 segment per RTT (measured here: 0.97)
    assert 0.7 <= slopes["reno"] <= 1.3
    # Hybla: rho^2 per RTT with an ACK per segment, rho^2/2 with an ACK per two (measured
    # here: 7.0 x Reno, rho^2/2 = 8); at least 0.6 x rho^2/2, at most 1.25 x rho^2
    ratio = slopes["hybla"] / slopes["reno"]
    assert 0.6 * RHO**2 / 2 <= ratio <= 1.25 * RHO**2, ratio


def test_veno_backs_off_a_fifth_on_random_loss_and_half_on_congestion(bed, ccs):
    rnd = path(bed, 2, loss=1.0, gso=False)
    cng = path(bed, 3, rate=10, queue=150, gso=False)
    res, grow = {}, {}
    for name in ("reno", "veno"):
        res[name, "random"] = cctrace.backoffs(flow(bed, *rnd, name, 6))
        sm = flow(bed, *cng, name, 6)
        res[name, "congestive"] = cctrace.backoffs(sm)
        grow[name] = cctrace.ca_slopes(sm)
    print({k: (len(v), round(cctrace.median(v), 3)) for k, v in res.items()}, "implementation:", ccs["veno"])
    print("CA growth on the congestive path, segments per s:", grow)
    for k, v in res.items():
        assert len(v) >= (3 if k[1] == "random" else 1), (k, v)
    # random loss (N < beta): Veno 4/5 (measured here: median 0.79), Reno 1/2 (0.50)
    assert 0.72 <= cctrace.median(res["veno", "random"]) <= 0.85
    assert 0.42 <= cctrace.median(res["reno", "random"]) <= 0.58
    # congestive loss (a full queue, N >= beta): both 1/2 (measured: 0.50, 0.50)
    assert 0.42 <= cctrace.median(res["veno", "congestive"]) <= 0.58
    assert 0.42 <= cctrace.median(res["reno", "congestive"]) <= 0.58
    # with the queue never empty (N >= beta) Veno grows one segment every other RTT, Reno
    # one per RTT (measured here: 3.9 vs 7.4 segments/s, 0.52)
    assert grow["reno"] and grow["veno"], grow
    ratio = cctrace.median(grow["veno"]) / cctrace.median(grow["reno"])
    assert 0.3 <= ratio <= 0.75, ratio


def _s(t, cwnd, ssthresh, state=cctrace.CA_OPEN):
    return {"t": t, "cwnd": cwnd, "ssthresh": ssthresh, "ca_state": state}


def test_ca_slopes_fit_each_congestion_avoidance_stretch_apart():
    # slow start (cwnd < ssthresh) is not counted; CA at 10 segments/s, then recovery,
    # then CA at 4 segments/s; a stretch shorter than min_s is dropped
    ss = [_s(i * 0.1, 10 + 10 * i, 100) for i in range(5)]
    ca1 = [_s(1 + i * 0.1, 50 + i, 40) for i in range(11)]
    rec = [_s(2.2, 30, 25, cctrace.CA_RECOVERY)]
    ca2 = [_s(2.3 + i * 0.1, 25 + 0.4 * i, 25) for i in range(11)]
    short = [_s(3.5, 1, 2, cctrace.CA_LOSS)] + [_s(3.6 + i * 0.05, 10 + i, 10) for i in range(5)]
    got = cctrace.ca_slopes(ss + ca1 + rec + ca2 + short)
    assert [round(x, 6) for x in got] == [10.0, 4.0]


def test_backoffs_are_ssthresh_on_entering_recovery_over_the_window_before():
    tr = [_s(0, 50, 40), _s(0.1, 50, 40, cctrace.CA_DISORDER), _s(0.2, 50, 40, cctrace.CA_RECOVERY),
          _s(0.3, 45, 40, cctrace.CA_RECOVERY), _s(0.4, 40, 40), _s(0.5, 30, 40), _s(0.6, 15, 24, cctrace.CA_RECOVERY),
          _s(0.7, 3, 2), _s(0.8, 2, 2, cctrace.CA_RECOVERY)]  # the last: window below 4, not counted
    assert cctrace.backoffs(tr) == [40 / 50, 24 / 30]
    assert cctrace.median([0.5, 0.8, 0.7]) == 0.7 and cctrace.median([0.5, 0.8]) == 0.65


def test_lab_offers_hybla_and_veno_and_runs_seed000_with_the_bpf_version(tmp_path):
    """`ilnp-lab run seed000-tcp --cc veno` (seed 000 Figs. 17-19): the cell is not skipped,
    iperf3's sockets used veno, the report names the implementation, and the lab removes
    what it registered."""
    ex = load("seed000-tcp")
    ex.ccs = ["cubic", "hybla", "veno"]
    todo, notes = mobility.cells(ex, ["lan-lan"], ["ilnp-soft"])
    assert [c.cc for c in todo] == ["cubic", "hybla", "veno"] and not any("skipped" in n for n in notes), notes
    before, maps = cc.available(), struct_ops_maps()
    out = tmp_path / "veno"
    r = subprocess.run([sys.executable, "-m", "ilnp_lab.cli", "run", "seed000-tcp", "--quick", "--scenario", "lan-lan",
                        "--scheme", "ilnp-soft", "--cc", "veno", "--out", str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    [res] = json.loads((out / "results.json").read_text())
    assert res["cc"] == "veno" and res["session_survived"], res
    rdir = next((out / "runs").glob("*veno/run01"))
    end = json.loads((rdir / "iperf-client.json").read_text())["end"]
    assert end["sender_tcp_congestion"] == "veno", end.get("sender_tcp_congestion")
    meta = json.loads((out / "meta.json").read_text())
    impl = meta["cc_impl"]["veno"]
    assert impl.startswith("bpf struct_ops bpf/cc/veno.c") if "veno" not in before else impl.startswith("kernel"), impl
    assert "congestion control veno: " in (out / "report.md").read_text()
    pngs = list((out / "plots").glob("*veno*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert cc.available() == before
    wait_for(lambda: struct_ops_maps() <= maps, timeout=10, what="the lab's struct_ops maps freed")
