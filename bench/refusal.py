#!/usr/bin/env python3
"""Cost of the refusal path (issue #11 item 1): what the answer hint adds to the ingress
program on the no-socket path, and what a closed-port flood gets back. Prints numbers;
asserts nothing.

1. Ingress program time per packet on the no-socket path: T (the CN of three_node) runs
   ilnpd (`admission = "socket"`); its `ilnp_ingress` program is run with
   BPF_PROG_TEST_RUN inside T's namespace, once per call (repeat 1: the program rewrites
   the packet, so each call gets a fresh one), each packet a UDP datagram with a nonce
   from a new random NID to closed port 9: the path that now also writes the LRU hint
   (more NIDs than the map holds, so the LRU evicts). The kernel's own duration per call
   (ns) is averaged. No global sysctl (kernel.bpf_stats_enabled) is touched.
   `--before DIR`: also measure an ilnpd from DIR (e.g. a build without the hint), same
   run, alternating.
2. A random-NID UDP flood to a closed port (`ilnp-flood`, `--pps` for `--seconds`): how
   many refusals T sent (`answer_sent`) against the budget (hello_burst + rate × seconds),
   and that T kept no state.

    sudo .venv/bin/python bench/refusal.py [--calls 20000] [--rounds 3] [--before DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import ipaddress
import json
import os
import random
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab.addr import CN_NID  # noqa: E402
from ilnp_lab.bpfstats import daemon_progs  # noqa: E402
from ilnp_lab.daemon import Ilnpd, binary  # noqa: E402
from ilnp_lab.fixtures import CN_WIRE, three_node  # noqa: E402
from ilnp_lab.testbed import Testbed  # noqa: E402

SYS_BPF = 321  # x86_64
BPF_PROG_TEST_RUN, BPF_PROG_GET_FD_BY_ID = 10, 13


class _GetFd(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("next_id", ctypes.c_uint32), ("open_flags", ctypes.c_uint32)]


class _TestRun(ctypes.Structure):
    _fields_ = [("prog_fd", ctypes.c_uint32), ("retval", ctypes.c_uint32), ("data_size_in", ctypes.c_uint32),
                ("data_size_out", ctypes.c_uint32), ("data_in", ctypes.c_uint64), ("data_out", ctypes.c_uint64),
                ("repeat", ctypes.c_uint32), ("duration", ctypes.c_uint32), ("ctx_size_in", ctypes.c_uint32),
                ("ctx_size_out", ctypes.c_uint32), ("ctx_in", ctypes.c_uint64), ("ctx_out", ctypes.c_uint64),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32), ("batch_size", ctypes.c_uint32),
                ("_pad", ctypes.c_uint32)]


def inner(prog_id: int, dst_hex: str, calls: int) -> dict:
    """Runs in T's namespace: `calls` test runs of the program, one fresh packet each."""
    libc = ctypes.CDLL(None, use_errno=True)
    a = _GetFd(id=prog_id)
    fd = libc.syscall(SYS_BPF, BPF_PROG_GET_FD_BY_ID, ctypes.byref(a), ctypes.sizeof(a))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_PROG_GET_FD_BY_ID")
    dst = bytes.fromhex(dst_hex)
    udp = struct.pack("!HHHH", 4000, 9, 16, 0) + b"x" * 8
    dopt = bytes([17, 0, 0x8B, 4, 1, 2, 3, 4])  # next UDP, nonce option (4 bytes)
    out = ctypes.create_string_buffer(2048)
    durs, rets = [], {}
    for _ in range(calls):
        src = bytes.fromhex("20010db8000f0000") + random.getrandbits(64).to_bytes(8, "big")
        ip = struct.pack("!IHBB", 0x6000_0000, len(dopt) + len(udp), 60, 64) + src + dst
        pkt = b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd" + ip + dopt + udp
        buf = ctypes.create_string_buffer(pkt, len(pkt))
        t = _TestRun(prog_fd=fd, data_size_in=len(pkt), data_in=ctypes.addressof(buf), data_size_out=2048,
                     data_out=ctypes.addressof(out), repeat=1)
        if libc.syscall(SYS_BPF, BPF_PROG_TEST_RUN, ctypes.byref(t), ctypes.sizeof(t)) != 0:
            raise OSError(ctypes.get_errno(), "BPF_PROG_TEST_RUN")
        durs.append(t.duration)
        rets[t.retval] = rets.get(t.retval, 0) + 1
    durs.sort()
    return {"mean_ns": sum(durs) / calls, "median_ns": durs[calls // 2], "p90_ns": durs[int(calls * 0.9)],
            "retvals": rets}


def ingress_cost(bin_dir: str | None, calls: int) -> dict:
    env_old = os.environ.get("ILNP_BIN_DIR")
    if bin_dir:
        os.environ["ILNP_BIN_DIR"] = bin_dir
    try:
        with Testbed() as bed:
            t, _r1, _b = three_node(bed)
            dt = Ilnpd(t, ["eth0"], nid=CN_NID).start()
            prog = daemon_progs(dt.proc.pid)["ilnp_ingress"]
            dst = ipaddress.IPv6Address(CN_WIRE).packed.hex()
            r = t.run(sys.executable, __file__, "--inner", str(prog), dst, str(calls), timeout=600)
            res = json.loads(r.stdout)
            res["ingress_no_socket"] = dt.status()["admission"]["counters"]["ingress_no_socket"]
            return res
    finally:
        if bin_dir:
            if env_old is None:
                os.environ.pop("ILNP_BIN_DIR", None)
            else:
                os.environ["ILNP_BIN_DIR"] = env_old


def flood(pps: int, seconds: float) -> dict:
    cfg = {"hello_rate_pps": 20, "hello_burst": 20}
    with Testbed() as bed:
        t, r1, _b = three_node(bed)
        dt = Ilnpd(t, ["eth0"], nid=CN_NID, extra=cfg).start()
        f = r1.spawn(binary("ilnp-flood"), "--dst", CN_WIRE, "--src-l64", "2001:db8:f::", "--count",
                     str(int(pps * seconds)), "--pps", str(pps), "--dport", "9", stdout=subprocess.PIPE)
        fr = json.loads(f.communicate(timeout=seconds + 60)[0])
        time.sleep(0.2)
        st = dt.status()["admission"]
        c = st["counters"]
        budget = cfg["hello_burst"] + cfg["hello_rate_pps"] * fr["seconds"]
        return {"sent": fr["sent"], "seconds": round(fr["seconds"], 2), "ingress_no_socket": c["ingress_no_socket"],
                "answer_sent": c["answer_sent"], "answer_rate_limited": c["answer_rate_limited"],
                "answer_unadmitted": c["answer_unadmitted"], "budget": round(budget, 1),
                "established": st["established"], "embryonic": st["embryonic"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inner", nargs=3, metavar=("PROG_ID", "DST_HEX", "CALLS"), help=argparse.SUPPRESS)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", help="a bin dir with another ilnpd to compare (e.g. without the hint)")
    ap.add_argument("--pps", type=int, default=50000)
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    if a.inner:
        print(json.dumps(inner(int(a.inner[0]), a.inner[1], int(a.inner[2]))))
        return
    rows = []
    for i in range(a.rounds):
        for name, d in ([("before", a.before)] if a.before else []) + [("this build", None)]:
            r = ingress_cost(d, a.calls)
            rows.append((name, r))
            print(f"round {i + 1} {name}: ingress no-socket path mean {r['mean_ns']:.0f} ns, median "
                  f"{r['median_ns']} ns, p90 {r['p90_ns']} ns over {a.calls} packets (verdicts {r['retvals']})",
                  flush=True)
    for name in dict(rows):
        med = sorted(r["median_ns"] for n, r in rows if n == name)
        mean = sum(r["mean_ns"] for n, r in rows if n == name) / len(med)
        print(f"{name}: median of medians {med[len(med) // 2]} ns, mean {mean:.0f} ns")
    print("closed-port flood:", json.dumps(flood(a.pps, a.seconds)))


if __name__ == "__main__":
    main()
