"""Issue #14: bench/datapath.py's smoke run measures what it says (the numbers themselves
are the bench's, not asserted here): through a router with the hosts' default offloads,
the eBPF path moves TCP (on two cores and on one, with retransmissions and the receiver's
ACKs and zero windows counted) and UDP (64- and 1400-byte) for plain IPv6 and ILNPv6, ilnp-rr
times round trips with no loss, and the per-packet BPF time is read for the sender's
egress (the identifier route's lwt program: one run per 64-byte datagram, ilnp0's tc program
for almost none) and the receiver's ingress programs; the header floor
(plain IPv6 plus a 16-byte Destination Options header) is delivered and carries that header."""

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "datapath.py"
LWT_PROBE = Path(__file__).resolve().parents[1] / "bench" / "lwt_probe.py"


def test_datapath_bench_quick_routed_ebpf(tmp_path):
    out = tmp_path / "dp.json"
    r = subprocess.run([sys.executable, str(BENCH), "--quick", "--topos", "routed", "--modes", "ebpf",
                        "--rr", "500", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert len(rows) == 1 and rows[0]["topo"] == "routed" and rows[0]["mode"] == "ebpf", rows
    tests = rows[0]["tests"]
    for name in ("tcp1", "tcp4", "tcp1_1cpu", "tcp4_1cpu", "udp64_snd", "udp64_rcv", "udp1400_snd", "udp1400_rcv"):
        for k in ("plain", "ilnp"):
            m = tests[name][k][0]
            assert m and m["v"] > 0, (name, k, tests[name])
            if name.startswith("tcp"):
                assert m["retrans"] >= 0, (name, k, m)
                # MN's own counters over the run: it acknowledged what it received, and the run's
                # receive-window state follows from its zero-window advertisements
                assert m["mn_acks"] > 0 and m["mn_zero_win"] >= 0, (name, k, m)
                assert m["window_limited"] == (m["mn_zero_win"] > 0.01 * m["mn_acks"]), (name, k, m)
                # one core: MN's receive buffers started at the kernel's maximum; two: its defaults
                assert m["mn_rmem_default"] == (33554432 if name.endswith("1cpu") else 131072), (name, k, m)
    for k in ("plain", "ilnp"):
        m = tests["rr"][k][0]
        assert m and m["lost"] == 0 and 0 < m["v"] <= m["p99"], (k, tests["rr"])
    probe = tests["udp64_snd"]["probe"][0]
    assert probe["bpf_ns"]["cn.route_xmit"] > 0 and probe["bpf_ns"]["mn.ingress"] > 0, probe
    # one run of the identifier route's lwt program per datagram the sender's UDP layer sent
    # (plus iperf3's control); ilnp0's tc program only for the few it left to ilnp0 (the
    # first of the pair, one per 1 s cache refresh): the datagrams were transmitted once
    sent = tests["udp64_snd"]["ilnp"][0]["sent_pps"]
    runs = probe["bpf_runs"]
    assert runs["cn.route_xmit"] >= 0.5 * sent, (probe, sent)
    assert runs.get("cn.egress", 0) <= 0.01 * runs["cn.route_xmit"], probe
    # the header floor: plain IPv6 plus the 16-byte header, delivered; on the wire ILNPv6 and the
    # floor both carry exactly 16 bytes more per 64-byte datagram than plain IPv6 (14 + 40 + 8 + 64)
    for name in ("udp64_snd", "udp64_rcv", "udp1400_snd", "udp1400_rcv"):
        assert tests[name]["hdr"][0] and tests[name]["hdr"][0]["v"] > 0, (name, tests[name]["hdr"])
    # the floor's own program ran once per datagram CN's UDP layer sent it, at a time of its own
    fp = tests["udp64_snd"]["hdr_probe"][0]
    assert fp["bpf_runs"]["floor"] >= 0.5 * tests["udp64_snd"]["hdr"][0]["sent_pps"] and fp["bpf_ns"]["floor"] > 0, fp
    wire = {k: tests["udp64_snd"][k][0]["wire_bytes"] for k in ("plain", "ilnp", "hdr")}
    assert abs(wire["plain"] - 126) < 1 and abs(wire["ilnp"] - 142) < 1 and abs(wire["hdr"] - 142) < 1, wire
    assert "plain" in r.stdout and "udp64_snd" in r.stdout and "header floor" in r.stdout
    assert "receive window (plain/ILNP)" in r.stdout


def test_nonce_omitted_measurement_build_compiles(tmp_path):
    """docs/benchmarks.md § Without the nonce: the measurement build's sources still compile
    (as crates/ilnpd/build.rs compiles the data path, plus the define) and the define changes
    the object, so the section's commands keep working as the programs change."""
    bpf = Path(__file__).resolve().parents[1] / "bpf"
    triple = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True, check=True).stdout.strip()
    objs = {}
    for name, extra in (("default", []), ("omitted", ["-DILNP_EXP_NONCE_OMITTED"])):
        objs[name] = tmp_path / f"{name}.o"
        r = subprocess.run(["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", *extra,
                            f"-I/usr/include/{triple}", "-c", str(bpf / "ilnp_dp.c"), "-o", str(objs[name])],
                           capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr[-3000:])
    assert objs["default"].read_bytes() != objs["omitted"].read_bytes()


def test_lwt_probe_quick_carries_the_header_in_one_transmit(tmp_path):
    """Issue #27 item 1: bench/lwt_probe.py's LWT xmit prototype loads on a route, and what it
    sends is delivered to MN's UDP socket with the 16-byte header on the wire (142-byte frames on
    CN's uplink for a 64-byte payload, as ILNPv6 and the header floor; plain 126), on both routes
    (the uplink's, and the headroom-only VXLAN device's)."""
    out = tmp_path / "lwt.json"
    r = subprocess.run([sys.executable, str(LWT_PROBE), "--quick", "--json", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    for k, frame in (("plain", 126), ("ilnp", 142), ("floor", 142), ("lwt", 142), ("lwt_hr", 142)):
        m = res["udp64"][k][0]
        assert m and m["v"] > 0 and abs(m["wire_bytes"] - frame) < 1, (k, m)
    assert "LWT probe" in r.stdout
