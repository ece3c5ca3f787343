"""ilnp_lab.analysis and ilnp_lab.plots on small hand-built captures.

Every capture is written the way the lab's tcpdump writes them (`-s 160`): frames are
cut to 160 bytes, so lengths must come from the IPv6 header.
"""

import hashlib
import struct

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import HBHOptUnknown, IPv6, IPv6ExtHdrDestOpt
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import RawPcapReader, wrpcap

from ilnp_lab import analysis, pcap, plots

T0 = 1_700_000_000.0
PORT = 5201
CN_NID = "0000:0000:0000:00c1"
MN_NID = "0000:0000:0000:00a1"
CN_ADDR = "2001:db8:c::c1"
MN_A = "2001:db8:2::a1"  # the MN on R2
MN_B = "2001:db8:3::a1"  # the MN on R3 (same NID, new locator)
CTRL, DATA, SUB = 40000, 40001, 40002
ISN = {CTRL: 1000, DATA: 4_294_960_000, SUB: 77, 40003: 9}  # DATA wraps past 2^32 mid-flow
SEG = 1000


def nonce():
    return IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x8B, optdata=b"\x11\x22\x33\x44")])


def ip(src, dst, ilnp=True):
    p = IPv6(src=src, dst=dst)
    return p / nonce() if ilnp else p


def tcp(src, dst, sport, dport, seq, flags="A", payload=b"", options=(), ilnp=True):
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86DD) / ip(src, dst, ilnp) / TCP(sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, flags=flags, options=list(options)) / Raw(payload)


def data(sport, i, dst=MN_A, ln=SEG, ilnp=True):
    """The i-th full-size data segment of a connection, CN -> MN."""
    return tcp(CN_ADDR, dst, sport, PORT, ISN[sport] + 1 + i * SEG, payload=b"d" * ln, ilnp=ilnp)


def write(path, pkts, snaplen=160):
    """pkts: [(t relative to T0, scapy packet)], written like `tcpdump -s 160 -w`."""
    out = []
    for t, p in sorted(pkts, key=lambda x: x[0]):
        raw = bytes(p)
        q = Ether(raw[:snaplen])
        q.time = T0 + t
        q.wirelen = len(raw)
        out.append(q)
    wrpcap(str(path), out, linktype=1, snaplen=snaplen)
    return str(path)


def handshake(sport, t, options_syn=(("MSS", SEG),), options_synack=(("MSS", SEG),), ilnp=True):
    """SYN seen at both ends, SYN-ACK seen at both ends (same times: one capture each)."""
    syn = tcp(CN_ADDR, MN_A, sport, PORT, ISN[sport], "S", options=options_syn, ilnp=ilnp)
    synack = tcp(MN_A, CN_ADDR, PORT, sport, 5555, "SA", options=options_synack, ilnp=ilnp)
    return [(t, syn), (t + 0.001, synack)], [(t + 0.0005, syn), (t + 0.0006, synack)]


def control_conn():
    """iperf3's control connection: first SYN, small payloads both ways for the whole flow."""
    cn, mn = handshake(CTRL, 0.0)
    for k, t in enumerate((0.002, 0.003, 29.9)):
        p = tcp(CN_ADDR, MN_A, CTRL, PORT, ISN[CTRL] + 1 + 100 * k, payload=b"c" * 37)
        cn.append((t, p))
        mn.append((t + 0.0005, p))
    return cn, mn


def start():
    """Control connection, then the data connection's handshake."""
    cn, mn = control_conn()
    h_cn, h_mn = handshake(DATA, 0.05)
    return cn + h_cn, mn + h_mn


@pytest.fixture
def basic(tmp_path):
    """Ten data segments at t = 1.0 .. 1.9 s. Segment 3 is lost and retransmitted at
    2.5 s (received once: lost); segment 5 is retransmitted spuriously at
    2.6 s (received twice: not lost). The MN moves from R2 to R3 after segment 6: its
    locator changes, the later segments are captured on its second uplink."""
    cn, mn = control_conn()
    mn_b = []
    h_cn, h_mn = handshake(DATA, 0.05)
    cn += h_cn
    mn += h_mn
    for i in range(10):
        t = 1.0 + i * 0.1
        dst = MN_A if i <= 6 else MN_B
        cn.append((t, data(DATA, i, dst)))
        if i == 3:
            continue
        (mn if i <= 6 else mn_b).append((t + 0.01, data(DATA, i, dst)))
    cn.append((2.5, data(DATA, 3, MN_B)))
    mn_b.append((2.51, data(DATA, 3, MN_B)))
    cn.append((2.6, data(DATA, 5, MN_B)))
    mn_b.append((2.61, data(DATA, 5, MN_B)))
    # an ack from the MN with no payload, and unrelated traffic on another port
    mn.append((1.5, tcp(MN_A, CN_ADDR, PORT, DATA, 5556, payload=b"")))
    cn.append((1.55, tcp(CN_ADDR, MN_A, 33333, 80, 1, payload=b"x" * 500)))
    return (
        [write(tmp_path / "cn.pcap", cn)],
        [write(tmp_path / "mn-r2.pcap", mn), write(tmp_path / "mn-r3.pcap", mn_b)],
    )


def test_tcp_counts_retransmissions_loss_and_bytes(basic):
    cn, mn = basic
    r = analysis.tcp_flow(cn, mn, PORT, T0, end_s=3.0)
    assert r["connections"] == [[DATA, PORT]]
    assert r["control_connections"] == [[CTRL, PORT]]
    assert r["mss"] == SEG
    assert r["data_packets_sent"] == 12
    assert r["retransmissions"] == 2
    assert r["lost"] == 1, "segment 3 (received once) is lost, segment 5 (received twice) is not"
    assert r["lost_retransmitted"] == 1
    assert r["bytes_received"] == 10 * SEG  # control payloads, duplicates and port 80 not counted
    assert r["data_packets_received"] == 11
    assert r["last_data_at_s"] == pytest.approx(2.61)


def test_locator_change_does_not_split_the_flow(basic):
    cn, mn = basic
    # the MN's second uplink alone sees a part of the same connection
    only_r3 = analysis.tcp_flow(cn, mn[1:], PORT, T0, end_s=3.0)
    assert only_r3["connections"] == [[DATA, PORT]]
    assert only_r3["bytes_received"] == 5 * SEG
    both = analysis.tcp_flow(cn, mn, PORT, T0, end_s=3.0)
    assert both["bytes_received"] == 10 * SEG


def test_merge_order_of_mn_captures_does_not_matter(basic):
    cn, mn = basic
    a = analysis.tcp_flow(cn, mn, PORT, T0, end_s=3.0)
    b = analysis.tcp_flow(cn, list(reversed(mn)), PORT, T0, end_s=3.0)
    assert a == b


def test_retransmission_never_received_is_lost(tmp_path):
    cn, mn = start()
    for i in range(4):
        cn.append((1 + i * 0.1, data(DATA, i)))
        if i != 2:
            mn.append((1.01 + i * 0.1, data(DATA, i)))
    cn.append((2.0, data(DATA, 2)))  # retransmitted, lost again
    cn.append((3.0, data(DATA, 2)))  # retransmitted again, arrives
    mn.append((3.01, data(DATA, 2)))
    r = analysis.tcp_flow(write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn), PORT, T0, end_s=4)
    assert r["retransmissions"] == 2
    assert r["lost"] == 1  # one (connection, seq), counted once
    assert r["bytes_received"] == 4 * SEG
    r2 = analysis.tcp_flow(write(tmp_path / "c2.pcap", cn[:-1]), write(tmp_path / "m2.pcap", mn[:-1]), PORT, T0)
    assert r2["lost"] == 1 and r2["bytes_received"] == 3 * SEG


def test_control_connection_without_syn_and_without_control(tmp_path):
    cn, mn = [], []
    for i in range(3):  # capture started late: no handshakes, control traffic first
        c = tcp(CN_ADDR, MN_A, CTRL, PORT, ISN[CTRL] + 1 + 37 * i, payload=b"c" * 37)
        cn.append((0.1 * i, c))
        mn.append((0.1 * i + 0.001, c))
        cn.append((1 + 0.1 * i, data(DATA, i)))
        mn.append((1.001 + 0.1 * i, data(DATA, i)))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    r = analysis.tcp_flow(c, m, PORT, T0)
    assert r["control_connections"] == [[CTRL, PORT]]
    assert r["bytes_received"] == 3 * SEG
    everything = analysis.tcp_flow(c, m, PORT, T0, control=False)
    assert everything["control_connections"] == []
    assert everything["bytes_received"] == 3 * SEG + 3 * 37
    assert everything["retransmissions"] == 0


def test_iperf3_cookie_is_not_data(tmp_path):
    cn, mn = start()
    cookie = tcp(CN_ADDR, MN_A, DATA, PORT, ISN[DATA] + 1, payload=b"k" * 37)
    cn.append((0.06, cookie))
    mn.append((0.061, cookie))
    for i in range(3):
        p = tcp(CN_ADDR, MN_A, DATA, PORT, ISN[DATA] + 38 + i * SEG, payload=b"d" * SEG)
        cn.append((1 + 0.1 * i, p))
        mn.append((1.001 + 0.1 * i, p))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    r = analysis.tcp_flow(c, m, PORT, T0)
    assert r["bytes_received"] == 3 * SEG
    assert r["data_packets_sent"] == 3
    assert r["first_data_at_s"] == pytest.approx(1.001)
    assert analysis.tcp_flow(c, m, PORT, T0, control=False)["bytes_received"] == 3 * SEG + 37 + 3 * 37


def mp_capable(key):
    return (30, bytes([0x01, 0x81]) + key)  # subtype 0, version 1, flags; sender's key


def mp_join(token):
    return (30, bytes([0x10, 0x01]) + token + b"rand")  # subtype 1, address id 1, token, nonce


def test_mptcp_subflows_counted_and_control_subflows_ignored(tmp_path):
    ctrl_key, data_key = b"CTRLKEY!", b"DATAKEY!"
    cn, mn = handshake(CTRL, 0.0, options_synack=[("MSS", SEG), mp_capable(ctrl_key)])
    c2, m2 = handshake(DATA, 0.05, options_synack=[("MSS", SEG), mp_capable(data_key)])
    cn += c2
    mn += m2
    # data subflow joins the data connection over the MN's other locator, plain IPv6
    c3, m3 = handshake(SUB, 0.2, options_syn=[("MSS", SEG), mp_join(hashlib.sha256(data_key).digest()[:4])], ilnp=False)
    cn += c3
    mn += m3
    # a subflow of the control connection (token from the control key) carries a byte
    c4, m4 = handshake(40003, 0.3, options_syn=[("MSS", SEG), mp_join(hashlib.sha256(ctrl_key).digest()[:4])])
    cn += c4
    mn += m4
    cn.append((0.4, tcp(CN_ADDR, MN_A, 40003, PORT, 10, payload=b"c")))
    mn.append((0.41, tcp(CN_ADDR, MN_A, 40003, PORT, 10, payload=b"c")))
    for i in range(6):
        cn.append((1 + i * 0.1, data(DATA, i)))
        mn.append((1.01 + i * 0.1, data(DATA, i)))
    for i in range(4):
        cn.append((1.05 + i * 0.1, data(SUB, i, MN_B, ilnp=False)))
        mn.append((1.06 + i * 0.1, data(SUB, i, MN_B, ilnp=False)))
    r = analysis.tcp_flow(write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn), PORT, T0, end_s=2)
    assert r["connections"] == [[DATA, PORT], [SUB, PORT]]
    assert r["control_connections"] == [[CTRL, PORT], [40003, PORT]]
    assert r["bytes_received"] == 10 * SEG
    assert r["data_packets_sent"] == 10
    assert r["retransmissions"] == 0 and r["lost"] == 0


def test_interruption_gap_and_broken_session(tmp_path):
    cn, mn = start()
    times = [1.0, 1.5, 2.0, 3.5, 4.0]  # 1.5 s hole after 2.0
    for i, t in enumerate(times):
        cn.append((t - 0.01, data(DATA, i)))
        mn.append((t, data(DATA, i)))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    r = analysis.tcp_flow(c, m, PORT, T0, end_s=4.5)
    assert r["longest_gap_ms"] == pytest.approx(1500, abs=1e-3)
    assert r["longest_gap_at_s"] == pytest.approx(2.0)
    # no move event: gaps starting within 2 s of the first data are start-up, the rest steady
    assert r["startup_gap_ms"] == pytest.approx(1500, abs=1e-3) and r["steady_gap_ms"] == pytest.approx(500, abs=1e-3)
    assert r["tail_ms"] == pytest.approx(500, abs=1e-3)
    assert r["broken_at_s"] is None and r["lost"] == 0 and r["events"] == []
    # the session breaks: nothing after 4.0 in a flow that should run to 10 s
    r = analysis.tcp_flow(c, m, PORT, T0, end_s=10.0)
    assert r["broken_at_s"] == pytest.approx(4.0)
    assert r["longest_gap_ms"] == pytest.approx(1500, abs=1e-3), "the break is not a gap"
    assert r["tail_ms"] is None and r["lost"] is None
    assert r["undelivered_after_break"] == 0, "everything the CN sent was delivered"
    assert r["last_data_at_s"] == pytest.approx(4.0)
    # no end given: the flow ends with its last arrival
    r = analysis.tcp_flow(c, m, PORT, T0)
    assert r["longest_gap_ms"] == pytest.approx(1500, abs=1e-3) and r["end_s"] == pytest.approx(4.0)
    assert r["broken_at_s"] is None


def test_timeline_bins_include_zeros(tmp_path):
    cn, mn = start()
    arrivals = [0.1, 0.2, 0.3, 1.7, 2.2]  # bins [0, .5) x3, [1.5, 2) x1, [2, 2.5) x1
    for i, t in enumerate(arrivals):
        cn.append((t - 0.01, data(DATA, i)))
        mn.append((t, data(DATA, i)))
    r = analysis.tcp_flow(write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn), PORT, T0, bin_s=0.5, end_s=3.0)
    tl = r["timeline"]
    assert [b[0] for b in tl] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert [b[1] for b in tl] == [3 * SEG / 0.5, 0, 0, SEG / 0.5, SEG / 0.5, 0]
    assert r["bin_s"] == 0.5


def test_truncated_captures_count_the_full_payload(tmp_path):
    cn, mn = control_conn()
    h_cn, h_mn = handshake(DATA, 0.05, options_syn=[("MSS", 1400)], options_synack=[("MSS", 1400)])
    cn += h_cn
    mn += h_mn
    for i in range(5):
        p = tcp(CN_ADDR, MN_A, DATA, PORT, ISN[DATA] + 1 + i * 1400, payload=b"z" * 1400)
        cn.append((1 + i * 0.1, p))
        mn.append((1.01 + i * 0.1, p))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    frames = [f for f, _ in RawPcapReader(m)]
    assert max(len(f) for f in frames) == 160, "the capture really is truncated"
    from pathlib import Path

    r = analysis.tcp_flow(Path(c), [Path(m)], PORT, T0)
    assert r["bytes_received"] == 5 * 1400
    assert r["mss"] == 1400


def test_gso_super_segment_and_resegmented_retransmission(tmp_path):
    """tcpdump on a veth sees TSO super-segments; counts are in MSS units."""
    cn, mn = start()
    big = tcp(CN_ADDR, MN_A, DATA, PORT, ISN[DATA] + 1, payload=b"g" * (3 * SEG))
    cn.append((1.0, big))
    for i in (0, 2):
        mn.append((1.01 + i * 0.001, data(DATA, i)))
    cn.append((1.5, data(DATA, 1)))  # the middle MSS, retransmitted on its own
    mn.append((1.51, data(DATA, 1)))
    r = analysis.tcp_flow(write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn), PORT, T0)
    assert r["data_packets_sent"] == 4
    assert r["data_segments_captured"] == 2
    assert r["retransmissions"] == 1
    assert r["lost"] == 1
    assert r["bytes_received"] == 3 * SEG


def test_udp_flow(tmp_path):
    pkts = []
    for i, t in enumerate([0.5, 0.6, 0.7, 2.7, 2.8]):
        pkts.append((t, Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86DD) / ip(CN_ADDR, MN_A if t < 2 else MN_B) / UDP(sport=999, dport=PORT) / Raw(b"u" * 1300)))
    pkts.append((1.0, Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86DD) / ip(CN_ADDR, MN_A) / UDP(sport=999, dport=53) / Raw(b"n" * 40)))
    m = write(tmp_path / "m.pcap", pkts)
    r = analysis.udp_flow([m], PORT, T0, bin_s=1.0, end_s=4.0)
    assert r["packets_delivered"] == r["packets_captured"] == 5 and r["stale_dropped"] == 0
    assert r["bytes_received"] == 5 * 1300
    assert r["longest_gap_ms"] == pytest.approx(2000, abs=1e-3)
    assert r["longest_gap_at_s"] == pytest.approx(0.7)
    assert [b[1] for b in r["timeline"]] == [3 * 1300, 0, 2 * 1300, 0]
    broken = analysis.udp_flow(m, PORT, T0, end_s=10)
    assert broken["broken_at_s"] == pytest.approx(2.8) and broken["tail_ms"] is None


def lu(src, dst, op, locs, code=0):
    body = b"".join(struct.pack("!QHH", loc, 1, 300) for loc in locs)
    msg = bytes([156, code, 0, 0, len(locs), op, 0, 0]) + body
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86DD) / IPv6(src=src, dst=dst, nh=60) / IPv6ExtHdrDestOpt(nh=58, options=[HBHOptUnknown(otype=0x8B, optdata=b"abcd")]) / Raw(msg)


L_R2, L_R3 = 0x2001_0DB8_0002_0000, 0x2001_0DB8_0003_0000


def test_lu_copies_ack_delay_and_unacked(tmp_path):
    r2 = [
        (5.0, lu(MN_A, CN_ADDR, 1, [L_R2, L_R3])),
        (5.2, lu(MN_A, CN_ADDR, 1, [L_R2, L_R3])),  # retransmission
        (5.25, lu(CN_ADDR, MN_A, 2, [L_R3])),  # ack of something else: ignored
    ]
    r3 = [
        (5.3, lu(CN_ADDR, MN_B, 2, [L_R2, L_R3])),  # the ack, on the other uplink
        (5.35, lu(CN_ADDR, MN_B, 2, [L_R2, L_R3])),  # ack of the retransmission
        (20.0, lu(MN_B, CN_ADDR, 1, [L_R3])),  # after leaving R2: never acked
        (21.0, lu(MN_B, CN_ADDR, 1, [L_R3])),
        (22.0, lu(MN_B, CN_ADDR, 1, [L_R3])),
        (9.0, lu(CN_ADDR, MN_B, 1, [0x2001_0DB8_000C_0000])),  # the CN's own LU
    ]
    m = [write(tmp_path / "r2.pcap", r2), write(tmp_path / "r3.pcap", r3)]
    hs = analysis.lu_handshakes(m, T0, mn_nid=MN_NID)
    assert len(hs) == 2
    a, b = hs
    assert a["copies"] == 2 and a["attempts"] == 2
    assert a["t_sent_s"] == pytest.approx(5.0)
    assert a["t_ack_s"] == pytest.approx(5.3)
    assert a["delay_ms"] == pytest.approx(300.0)
    assert a["acks"] == 2
    assert a["locators"] == ["2001:0db8:0002:0000", "2001:0db8:0003:0000"]
    assert a["src_nid"] == MN_NID and a["dst_nid"] == CN_NID
    assert b["copies"] == 3 and b["t_ack_s"] is None and b["delay_ms"] is None
    assert b["locators"] == ["2001:0db8:0003:0000"]
    # without a NID filter the CN's advertisement is listed too; 16-digit form works
    assert len(analysis.lu_handshakes(m, T0)) == 3
    assert len(analysis.lu_handshakes(m, T0, mn_nid="00000000000000a1")) == 2
    assert analysis.lu_handshakes(m, T0, mn_nid="00000000000000ff") == []


def test_lu_same_locators_again_after_ack_is_a_new_advertisement(tmp_path):
    pkts = [
        (1.0, lu(MN_A, CN_ADDR, 1, [L_R2])),
        (1.007, lu(CN_ADDR, MN_A, 2, [L_R2])),
        (3.0, lu(MN_A, CN_ADDR, 1, [L_R2])),
        (3.2, lu(CN_ADDR, MN_A, 0, [L_R2], code=2)),  # the Code 2 / Operation 0 variant
    ]
    hs = analysis.lu_handshakes(write(tmp_path / "m.pcap", pkts), T0)
    assert [h["copies"] for h in hs] == [1, 1]
    assert [h["delay_ms"] for h in hs] == [pytest.approx(7.0), pytest.approx(200.0)]


def test_summary():
    s = analysis.summary([3, None, 1, 2, 4])
    assert s == {"n": 4, "median": 2.5, "p25": 1.75, "p75": 3.25, "min": 1.0, "max": 4.0}
    assert analysis.summary([])["median"] is None and analysis.summary([None])["n"] == 0
    assert analysis.summary([5])["p25"] == 5.0


def test_ci95_uses_student_t_for_the_sample_size():
    # 12 samples (df 11): t = 2.201, not the normal 1.96 the old table fell back to beyond df 9
    xs = [1.0] * 6 + [3.0] * 6
    m, h = analysis.ci95(xs)
    assert m == 2.0 and h == pytest.approx(2.201 * 1.0445 / 12 ** 0.5, rel=1e-3)
    assert analysis.ci95([1.0, 3.0])[1] == pytest.approx(12.706 * 2 ** 0.5 / 2 ** 0.5, rel=1e-6)
    assert analysis.ci95([4.0]) == (4.0, None)
    assert analysis.ci95(list(map(float, range(500))))[1] == pytest.approx(1.96 * 144.48 / 500 ** 0.5, rel=1e-3)


def test_results_are_json(basic):
    import json

    cn, mn = basic
    r = analysis.tcp_flow(cn, mn, PORT, T0, end_s=3.0)
    assert json.loads(json.dumps(r)) == r


def test_fast_reader_matches_scapy(basic):
    _, mn = basic
    ours = list(pcap.iter_ipv6(mn[0]))
    theirs = [(m.sec + m.usec / 1e6, f[14:]) for f, m in RawPcapReader(mn[0])]
    assert len(ours) == len(theirs) > 5
    for (t1, p1), (t2, p2) in zip(ours, theirs):
        assert t1 == pytest.approx(t2) and p1 == p2


PNG_SIG = b"\x89PNG\r\n\x1a\n"


def check_png(path):
    b = open(path, "rb").read()
    assert b[:8] == PNG_SIG
    assert b[12:16] == b"IHDR"
    w, h = struct.unpack("!II", b[16:24])
    assert w > 0 and h > 0
    assert len(b) > 1000


def test_plots(tmp_path, basic):
    cn, mn = basic
    r = analysis.tcp_flow(cn, mn, PORT, T0, end_s=3.0)
    p = plots.timeline_plot(
        {"ILNP soft": r["timeline"], "IPv6": [[0, 1e6], [0.5, 0]]},
        tmp_path / "figs" / "tl.png", "LAN to LAN", events=[(1.0, "join R3"), (2.0, "leave R2")],
    )
    assert str(p).endswith("figs/tl.png")
    check_png(p)
    check_png(plots.timeline_plot({}, tmp_path / "empty-tl.png", "nothing"))
    check_png(plots.box_plot({"ILNP hard": [234, 240, 228], "ILNP soft": [0], "MPTCP": []}, tmp_path / "b" / "box.png", "Loss", "packets"))
    check_png(plots.box_plot({}, tmp_path / "empty-box.png", "nothing", "packets"))
    check_png(plots.box_plot({"a": [None]}, tmp_path / "none-box.png", "nothing", "ms"))


# --------------------------------------------------------------------------- issue #9: metrics at the event

LOC_R2, LOC_R3 = "2001:0db8:0002:0000", "2001:0db8:0003:0000"
JOIN = {"t_s": 2.05, "label": "join R3", "action": "up"}
LEAVE = {"t_s": 6.1, "label": "leave R2", "action": "down"}
PROBE_PORT = 7100


def eth():
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x86DD)


def flow_at(times, dsts=None, port=DATA):
    """Data segment i captured at the CN 10 ms before, and at the MN at, times[i]."""
    cn, mn = start()
    for i, t in enumerate(times):
        dst = dsts(t) if dsts else MN_A
        cn.append((t - 0.01, data(port, i, dst)))
        mn.append((t, data(port, i, dst)))
    return cn, mn


def steps(a, b, dt=0.05):
    n = round((b - a) / dt)
    return [round(a + k * dt, 6) for k in range(n + 1)]


def test_startup_gap_longer_than_the_handoff_gap_is_not_the_interruption(tmp_path):
    # first data at 0.3, then a 300 ms start-up gap (TCP's first round trip); 50 ms
    # spacing; the join at 2.05 falls in a 150 ms gap (2.00 -> 2.15), the leave at
    # 6.10 in an 80 ms one (6.05 -> 6.13); the flow ends at 8.0, last data at 7.93
    times = [0.3] + steps(0.6, 2.0) + steps(2.15, 6.05) + steps(6.13, 7.93)
    cn, mn = flow_at(times)
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    r = analysis.tcp_flow(c, m, PORT, T0, events=[JOIN, LEAVE], end_s=8.0)
    assert r["longest_gap_ms"] == pytest.approx(300, abs=1e-3), "the old headline: the start-up gap"
    assert r["startup_gap_ms"] == pytest.approx(300, abs=1e-3) and r["startup_gap_at_s"] == pytest.approx(0.3)
    assert r["interruption_join_ms"] == pytest.approx(150, abs=1e-3)
    assert r["interruption_join_at_s"] == pytest.approx(2.0)
    assert r["interruption_leave_ms"] == pytest.approx(80, abs=1e-3)
    assert r["interruption_leave_at_s"] == pytest.approx(6.05)
    assert r["tail_ms"] == pytest.approx(70, abs=1e-3)
    assert r["startup_s"] == analysis.STARTUP_S == 2.0
    assert r["event_window"] == {"pre_s": analysis.EVENT_PRE_S, "rtts": analysis.EVENT_RTTS,
                                 "margin_s": analysis.EVENT_MARGIN_S}
    join, leave = r["events"]
    # no rtt_s / usable_s: each window runs from EVENT_PRE_S before the event to EVENT_MARGIN_S after it
    assert join["window_s"] == [pytest.approx(2.05 - analysis.EVENT_PRE_S), pytest.approx(2.05 + analysis.EVENT_MARGIN_S)]
    assert join["key"] == "join" and leave["key"] == "leave" and not leave["broken"]
    assert (join["gap_from_s"], join["gap_to_s"]) == (pytest.approx(2.0), pytest.approx(2.15))
    # the steady state is the 50 ms spacing outside the windows: both gaps stand above it
    assert r["steady_gap_ms"] == pytest.approx(50, abs=1e-3) and r["steady_gap_p99_ms"] == pytest.approx(50, abs=1e-3)
    assert r["interruption_join_is_steady"] is False and r["interruption_leave_is_steady"] is False
    # UDP: the same definition
    u = []
    for t in times:
        u.append((t, eth() / ip(CN_ADDR, MN_A) / UDP(sport=999, dport=PORT) / Raw(struct.pack("!d", t) + b"u" * 100)))
    ru = analysis.udp_flow(write(tmp_path / "u.pcap", u), PORT, T0, events=[JOIN, LEAVE], end_s=8.0)
    assert (ru["startup_gap_ms"], ru["interruption_join_ms"], ru["interruption_leave_ms"]) == (
        pytest.approx(300, abs=1e-3), pytest.approx(150, abs=1e-3), pytest.approx(80, abs=1e-3))


def hard_handoff_capture(tmp_path):
    """Hard handoff: CN sends segments 0-9 every 0.1 s from 1.0 to MN_A; the MN joins R3
    at 1.4 and its LU at 1.45 advertises only L3, so segments 5 and 6 (captured at 1.51,
    1.61 on MN_A) are dropped by ilnpd. The CN retransmits them to MN_B at 2.0 and 2.1;
    7-9 go to MN_B at 2.2-2.4. The UDP probe sends datagrams to MN_A at 1.3 (accepted)
    and 1.5, 1.6, 1.7 (dropped); the CN's LU ack to MN_A at 1.46 is not a drop, nor is a
    packet for another NID. iperf3's control connection still sends to MN_A at 29.9:
    dropped too."""
    cn, mn = start()
    for i in range(10):
        dst = MN_A if i < 7 else MN_B
        t = 1.0 + 0.1 * i if i < 7 else 2.2 + 0.1 * (i - 7)
        cn.append((t, data(DATA, i, dst)))
        mn.append((t + 0.01, data(DATA, i, dst)))
    for k, i in enumerate((5, 6)):
        cn.append((2.0 + 0.1 * k, data(DATA, i, MN_B)))
        mn.append((2.01 + 0.1 * k, data(DATA, i, MN_B)))
    mn.append((1.45, lu(MN_A, CN_ADDR, 1, [L_R3])))
    mn.append((1.46, lu(CN_ADDR, MN_A, 2, [L_R3])))
    for k, t in enumerate((1.3, 1.5, 1.6, 1.7)):
        mn.append((t, eth() / ip(CN_ADDR, MN_A) / UDP(sport=PROBE_PORT, dport=PROBE_PORT) / Raw(bytes([k]) * 20)))
    mn.append((1.8, eth() / ip(CN_ADDR, "2001:db8:2::ff") / UDP(sport=1, dport=PROBE_PORT) / Raw(b"x")))
    return write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)


def test_stale_locator_drops_are_not_arrivals(tmp_path):
    c, m = hard_handoff_capture(tmp_path)
    lus = analysis.lu_handshakes(m, T0, mn_nid=MN_NID)
    assert [(h["t_sent_s"], h["locators"]) for h in lus] == [(pytest.approx(1.45), [LOC_R3])]
    acc = analysis.accepted_locators(lus, "hard")
    assert acc == [(pytest.approx(1.45), frozenset({LOC_R3}))]
    assert analysis.accepted_locators(lus, "soft") == [] and analysis.accepted_locators(lus, None) == []
    # the new locator usable at 1.45 (its RA, then the LU), a 100 ms path: the window ends at 1.70
    join = {"t_s": 1.4, "label": "join R3", "action": "up", "usable_s": 1.45, "rtt_s": 0.1}
    r = analysis.tcp_flow(c, m, PORT, T0, accepted=acc, events=[join], end_s=2.5)
    assert r["stale_dropped"] == 2 and r["stale_dropped_segments"] == 2
    assert r["data_packets_received"] == 10, "8 first transmissions and 2 retransmissions delivered"
    assert r["bytes_received"] == 10 * SEG
    assert r["retransmissions"] == 2
    assert r["lost"] == 2, "5 and 6 were delivered once (their retransmission): lost"
    # the interruption at the join runs from segment 4 (1.41) to the retransmission of 5 (2.01)
    assert r["interruption_join_ms"] == pytest.approx(600, abs=1e-3)
    assert r["interruption_join_at_s"] == pytest.approx(1.41)
    # counted as captured (the old metric), the drops hide the loss and halve the gap
    old = analysis.tcp_flow(c, m, PORT, T0, events=[join], end_s=2.5)
    assert old["lost"] == 0 and old["stale_dropped"] == 0
    assert old["interruption_join_ms"] == pytest.approx(400, abs=1e-3)
    # per 5-tuple: 2 data segments, 1 control segment, 3 probe datagrams; the LU ack and
    # the other NID are not drops
    drops = analysis.stale_drops(m, T0, MN_NID, acc)
    assert drops == [{"proto": 17, "src_port": PROBE_PORT, "dst_port": PROBE_PORT, "packets": 3},
                     {"proto": 6, "src_port": DATA, "dst_port": PORT, "packets": 2},
                     {"proto": 6, "src_port": CTRL, "dst_port": PORT, "packets": 1}]
    by = analysis.attribute_drops(drops, {"flow": PORT, "probe": PROBE_PORT}, daemon_counter=7)
    assert by == {"flow": 3, "probe": 3, "other": 0, "daemon_counter": 7, "unattributed": 1}
    assert analysis.stale_drops(m, T0, MN_NID, []) == []


def test_udp_flow_and_probe_accounted_apart(tmp_path):
    """iperf3 UDP datagrams 0-9 every 0.1 s from 1.0 to MN_A; the LU at 1.45 leaves only L3:
    2 more go to MN_A (dropped) before the CN switches; datagram 9 is lost on the way.
    Probe datagrams to the stale locator are the probe's, never the flow's."""
    cn, mn = [], []
    for i in range(10):
        t = 1.0 + 0.1 * i
        dst = MN_A if t < 1.65 else MN_B
        p = eth() / ip(CN_ADDR, dst) / UDP(sport=999, dport=PORT) / Raw(struct.pack("!III", 0, i, i) + b"u" * 288)
        cn.append((t, p))
        if i != 9:
            mn.append((t + 0.005, p))
    mn.append((1.45, lu(MN_A, CN_ADDR, 1, [L_R3])))
    for t in (1.5, 1.6, 1.7):
        mn.append((t, eth() / ip(CN_ADDR, MN_A) / UDP(sport=PROBE_PORT, dport=PROBE_PORT) / Raw(b"p" * 20)))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    acc = analysis.accepted_locators(analysis.lu_handshakes(m, T0, mn_nid=MN_NID), "hard")
    r = analysis.udp_transfer(c, m, PORT, T0, accepted=acc, end_s=2.5)
    assert r["packets_sent"] == 10 and r["packets_captured"] == 9
    assert r["stale_dropped"] == 2 and r["packets_delivered"] == 7
    assert r["lost"] == 3, "2 dropped by ilnpd + 1 lost on the way; the 3 probe drops are not the flow's"
    assert r["bytes_received"] == 7 * 300
    by = analysis.attribute_drops(analysis.stale_drops(m, T0, MN_NID, acc), {"flow": PORT, "probe": PROBE_PORT}, 5)
    assert by == {"flow": 2, "probe": 3, "other": 0, "daemon_counter": 5, "unattributed": 0}


def test_broken_session_reports_what_was_not_delivered(tmp_path):
    """Plain IPv6, TCP: segments 0-39 every 0.1 s from 1.0; the MN leaves at 3.0 and the
    segments from 2.95 on (20-39) are never delivered, nor the CN's retransmission of 20
    at 4.0. The flow should run to 6.0."""
    cn, mn = start()
    for i in range(40):
        t = 1.0 + 0.1 * i
        cn.append((t, data(DATA, i, ilnp=False)))
        if t < 2.95:
            mn.append((t + 0.01, data(DATA, i, ilnp=False)))
    cn.append((4.0, data(DATA, 20, ilnp=False)))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    leave = {"t_s": 3.0, "label": "leave R2", "action": "down"}
    r = analysis.tcp_flow(c, m, PORT, T0, events=[leave], end_s=6.0)
    assert r["broken_at_s"] == pytest.approx(2.91)
    assert r["lost"] is None, "no loss count for a broken session"
    assert r["undelivered_after_break"] == 20 and r["undelivered_bytes_after_break"] == 20 * SEG
    assert r["lost_retransmitted"] == 1, "the raw count is kept apart"
    assert r["interruption_leave_ms"] is None and r["events"][0]["broken"] is True
    assert r["tail_ms"] is None
    # UDP: datagrams 0-39 from 1.0, delivered until 2.9 except 5; 20-39 never
    cn, mn = [], []
    for i in range(40):
        t = 1.0 + 0.1 * i
        p = eth() / ip(CN_ADDR, MN_A, ilnp=False) / UDP(sport=999, dport=PORT) / Raw(struct.pack("!III", 0, i, i) + b"u" * 88)
        cn.append((t, p))
        if t < 2.95 and i != 5:
            mn.append((t + 0.01, p))
    u = analysis.udp_transfer(write(tmp_path / "uc.pcap", cn), write(tmp_path / "um.pcap", mn), PORT, T0,
                              events=[leave], end_s=6.0)
    assert u["broken_at_s"] == pytest.approx(2.91)
    assert u["lost"] is None and u["undelivered_after_break"] == 20 and u["lost_before_break"] == 1
    assert u["packets_sent"] == 40 and u["packets_delivered"] == 19


def test_lu_by_event_and_iperf_receiver(tmp_path):
    lus = [{"t_sent_s": 2.06, "delay_ms": 0.2, "copies": 1}, {"t_sent_s": 6.2, "delay_ms": 201.0, "copies": 2},
           {"t_sent_s": 6.5, "delay_ms": None, "copies": 1}]
    ev = analysis.lu_by_event(lus, [LEAVE, JOIN])
    assert [(e["key"], e["lu_sent_s"], e["handoff_delay_ms"], e["lu_copies"]) for e in ev] == [
        ("join", 2.06, 0.2, 1), ("leave", 6.2, 201.0, 3)]
    import json

    (tmp_path / "t.json").write_text(json.dumps({"end": {"sum_received": {"bytes": 12345}}}))
    (tmp_path / "u.json").write_text(json.dumps({"end": {"sum": {"packets": 801, "lost_packets": 13, "bytes": 1}}}))
    (tmp_path / "broken.json").write_text(json.dumps({"start": {}, "error": "interrupted"}))
    assert analysis.iperf_receiver(tmp_path / "t.json", "tcp") == {"bytes_received": 12345}
    assert analysis.iperf_receiver(tmp_path / "u.json", "udp")["packets_delivered"] == 788
    assert analysis.iperf_receiver(tmp_path / "broken.json", "tcp") is None
    assert analysis.iperf_receiver(tmp_path / "missing.json", "udp") is None


def test_report_columns_follow_the_new_metrics(tmp_path):
    import csv

    from ilnp_lab import mobility_report as report

    c, m = hard_handoff_capture(tmp_path)
    acc = analysis.accepted_locators(analysis.lu_handshakes(m, T0, mn_nid=MN_NID), "hard")
    ev = [{"t_s": 1.4, "label": "join R3", "action": "up", "usable_s": 1.45, "rtt_s": 0.1},
          {"t_s": 2.3, "label": "leave R2", "action": "down"}]
    base = {"experiment": "x-tcp", "move": "lan-lan", "load": "default", "cc": "cubic", "ok": True, "timeline": ev,
            "lu_copies": 1, "ra_to_lu_ms": 0.5, "probe": {"cn_to_mn_lost": 3, "mn_to_cn_lost": 0},
            "lu_by_event": [{"key": "join", "handoff_delay_ms": 0.2}, {"key": "leave", "handoff_delay_ms": None}]}
    hard = base | {"cell": "lan-lan/ilnp-hard/cubic", "scheme": "ilnp-hard", "run": 1, "session_survived": True,
                   "handoff_delay_ms": 0.2, "flow": analysis.tcp_flow(c, m, PORT, T0, accepted=acc, events=ev, end_s=2.5),
                   "stale_drops_by_flow": {"flow": 3, "probe": 3, "other": 0, "daemon_counter": 6, "unattributed": 0},
                   "iperf_receiver": {"bytes_received": 10 * SEG}}
    plain = base | {"cell": "lan-lan/plain/cubic", "scheme": "plain", "run": 1, "session_survived": False,
                    "flow": analysis.tcp_flow(c, m, PORT, T0, events=ev, end_s=6.0)}
    meta = {"experiment": "x-tcp", "command": "test", "started": "now", "runs_done": 2, "runs_failed": 0,
            "runs_per_cell": 1, "duration_s": 2.5, "versions": {"git": "abc"}}
    text = report.write(tmp_path / "out", [hard, plain], meta).read_text()
    assert "interruption at join (ms)" in text and "up to 5.0 s after it" not in text
    assert "from 5 ms before to 2 × RTT + 50 ms after the change can act on the flow" in text
    # the per-cell details table (the summary above it has its own, shorter rows)
    details = text[text.index("## lan-lan, cubic: details"):].splitlines()
    row = next(line for line in details if line.startswith("| ilnp-hard |"))
    # flow lost, broken, interruption at join (1.41 -> 2.01) and at leave (100 ms spacing: the
    # steady level, marked), steady gap max / p99, start-up gap
    assert row.split(" | ")[5:11] == ["2", "—", "600.0", "100.0 (1/1 ≤ steady)", "100.0 / 100.0", "100.0"], row
    prow = next(line for line in details if line.startswith("| plain |"))
    assert "1 run(s): 2.4: 0" in prow, prow  # broken at 2.41 (its last delivered data), all it sent was delivered
    rows = {r["scheme"]: r for r in csv.DictReader(open(tmp_path / "out" / "results.csv"))}
    assert rows["ilnp-hard"]["flow_lost"] == "2" and rows["ilnp-hard"]["interruption_join_ms"] == "600.0"
    assert rows["ilnp-hard"]["interruption_join_is_steady"] == "False" and rows["ilnp-hard"]["interruption_leave_is_steady"] == "True"
    assert rows["ilnp-hard"]["steady_gap_p99_ms"] == "100.0"
    assert rows["ilnp-hard"]["stale_drops_probe"] == "3" and rows["ilnp-hard"]["iperf_received"] == str(10 * SEG)
    assert rows["plain"]["flow_lost"] == "" and rows["plain"]["undelivered_after_break"] == "0"
    assert rows["plain"]["broken_at_s"] == "2.41" and rows["plain"]["interruption_leave_ms"] == ""
    # a folder re-analysed by a later checkout says so, beside the run's own provenance
    assert "re-analysed" not in text
    meta["reanalysed"] = {"at": "2026-11-23T21:00:00+00:00", "commit": "f00d", "clean": False}
    text = report.write(tmp_path / "out", [hard, plain], meta).read_text()
    assert "re-analysed from the run's captures at 2026-11-23T21:00:00+00:00 with the analysis of commit f00d (work tree not clean)" in text


# --------------------------------------------------------------------------- the RTT-based event window


def test_event_window_follows_the_change_and_the_round_trip():
    e = {"t_s": 5.0, "usable_s": 6.0, "rtt_s": 0.2}
    assert analysis.event_window(e) == (pytest.approx(6.0 - analysis.EVENT_PRE_S),
                                        pytest.approx(6.0 + analysis.EVENT_RTTS * 0.2 + analysis.EVENT_MARGIN_S))
    # a leave acts at once; no RA seen (usable_s None): the event itself
    assert analysis.event_window({"t_s": 20.0, "rtt_s": 0.2})[1] == pytest.approx(20.0 + 2 * 0.2 + 0.05)
    assert analysis.event_window({"t_s": 5.0, "usable_s": None, "rtt_s": 0.0})[1] == pytest.approx(5.05)


def test_steady_level_gap_after_the_event_is_not_its_interruption(tmp_path):
    """Window-limited flow on a 200 ms path: a 40 ms gap every 100 ms (bursts of 60 ms at
    10 ms spacing); first data at 0.3 after a 400 ms start-up gap (the first round trip). The
    MN joins at 5.0, its new locator is usable at 6.0 (RA), rtt 0.2 s: the window is
    [5.995, 6.45] (nothing on the joined link can act on the flow before). The handoff's pause straddles the LU: 6.10 -> 6.19 (90 ms); a steady-level gap
    (45 ms) at 8.955, 4 s after the event, is steady state, and so are the 40 ms gaps in the
    window; the old 5 s window took it as the join's interruption."""
    base = [0.3] + [round(0.7 + 0.1 * b + 0.01 * k, 6) for b in range(93) for k in range(7)]  # to 9.96
    base = sorted(set(x for x in base if not 8.955 <= x < 9.0) | {8.955})  # 8.955 -> 9.0: 45 ms
    times = [x for x in base if not 6.1 < x < 6.19] + [6.19]
    cn, mn = flow_at(sorted(times))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    join = {"t_s": 5.0, "label": "join R3", "action": "up", "usable_s": 6.0, "rtt_s": 0.2}
    r = analysis.tcp_flow(c, m, PORT, T0, events=[join], end_s=10.0)
    assert r["startup_gap_ms"] == pytest.approx(400, abs=1e-3), "the start-up gap, reported apart"
    assert r["longest_gap_ms"] == pytest.approx(400, abs=1e-3)
    assert r["interruption_join_ms"] == pytest.approx(90, abs=1e-3) and r["interruption_join_at_s"] == pytest.approx(6.1)
    assert r["interruption_join_is_steady"] is False
    ev = r["events"][0]
    assert ev["window_s"] == [pytest.approx(5.995), pytest.approx(6.45)] and ev["usable_s"] == 6.0 and ev["rtt_s"] == 0.2
    # the 45 ms gap at 8.955 is steady state, not the join's
    assert r["steady_gap_ms"] == pytest.approx(45, abs=1e-3) and r["steady_gap_at_s"] == pytest.approx(8.955)
    assert r["steady_gap_p99_ms"] == pytest.approx(40, abs=1e-3)
    old = analysis.tcp_flow(c, m, PORT, T0, events=[dict(join, usable_s=None, rtt_s=2.475)], end_s=10.0)
    assert old["interruption_join_ms"] == pytest.approx(90, abs=1e-3), "a 5 s window still sees the pause"
    # without the pause (soft handoff to a path of equal delay) the window's longest gap is
    # steady-level: reported, and marked; the old 5 s window took the 45 ms gap at 8.955
    cn, mn = flow_at(base)
    c2, m2 = write(tmp_path / "c2.pcap", cn), write(tmp_path / "m2.pcap", mn)
    r2 = analysis.tcp_flow(c2, m2, PORT, T0, events=[join], end_s=10.0)
    assert r2["interruption_join_ms"] == pytest.approx(40, abs=1e-3)
    assert r2["events"][0]["gap_to_s"] > 5.995 and r2["interruption_join_at_s"] < 6.45
    assert r2["interruption_join_is_steady"] is True and r2["events"][0]["is_steady"] is True
    old2 = analysis.tcp_flow(c2, m2, PORT, T0, events=[dict(join, usable_s=None, rtt_s=2.475)], end_s=10.0)
    assert old2["events"][0]["window_s"][1] == pytest.approx(10.0)
    assert old2["interruption_join_ms"] == pytest.approx(45, abs=1e-3) and old2["interruption_join_at_s"] == pytest.approx(8.955)


def test_pause_straddling_the_event_is_its_interruption(tmp_path):
    """A leave at 6.0: the last packet on the old path at 5.94, the next on the remaining
    path at 6.24 (300 ms, in progress at the window's start); 20 ms spacing otherwise. A
    start-up gap (500 ms) at the flow's start is never an event's."""
    times = [0.2] + steps(0.7, 5.94, 0.02) + steps(6.24, 8.0, 0.02)
    cn, mn = flow_at(times)
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    leave = {"t_s": 6.0, "label": "leave R2", "action": "down", "usable_s": 6.0, "rtt_s": 0.2}
    r = analysis.tcp_flow(c, m, PORT, T0, events=[leave], end_s=8.0)
    assert r["interruption_leave_ms"] == pytest.approx(300, abs=1e-3)
    assert r["interruption_leave_at_s"] == pytest.approx(5.94) and r["interruption_leave_is_steady"] is False
    assert r["startup_gap_ms"] == pytest.approx(500, abs=1e-3) and r["startup_gap_at_s"] == pytest.approx(0.2)
    assert r["steady_gap_ms"] == pytest.approx(20, abs=1e-3)
    # an event after the pause: the pause, which ended before its window opened, is not its
    # interruption but steady state, and the event's 20 ms gap is marked as steady-level
    later = {"t_s": 6.5, "label": "leave R2", "action": "down", "usable_s": 6.5, "rtt_s": 0.0}
    r = analysis.tcp_flow(c, m, PORT, T0, events=[later], end_s=8.0)
    assert r["interruption_leave_ms"] == pytest.approx(20, abs=1e-3) and r["interruption_leave_is_steady"] is True
    assert r["steady_gap_ms"] == pytest.approx(300, abs=1e-3)
    assert r["events"][0]["window_s"] == [pytest.approx(6.495), pytest.approx(6.55)]


def test_event_context_windows_from_the_topology(tmp_path):
    """The runner gives each event the configured RTT of the MN's paths around it and, for a
    join, the first RA with the joined network's prefix (plus DAD when not optimistic)."""
    from scapy.layers.inet6 import ICMPv6ND_RA, ICMPv6NDOptPrefixInfo

    from ilnp_lab.topology import load

    ex = load("seed000-tcp")
    assert [ex.path_rtt_s(m, "mn", "eth-r3") for m in ("lan-lan", "lan-wan", "wan-lan", "wan-wan")] == [0, 0.2, 0, 0.2]
    assert ex.path_rtt_s("wan-lan", "mn", "eth-r2") == 0.2, "hosts do not forward: not via the MN's other link"
    ra = lambda p: eth() / IPv6(src="fe80::1", dst="ff02::1") / ICMPv6ND_RA() / ICMPv6NDOptPrefixInfo(prefix=p, prefixlen=64)  # noqa: E731
    m = write(tmp_path / "ra.pcap", [(1.0, ra("2001:db8:3::")), (5.5, ra("2001:db8:2::")), (6.01, ra("2001:db8:3::"))])
    tl = [{"t_s": 5.0, "node": "mn", "iface": "eth-r3", "action": "up"},
          {"t_s": 20.0, "node": "mn", "iface": "eth-r2", "action": "down"}]
    join, leave = analysis.event_context(ex, "wan-lan", m, T0, tl)
    assert join["usable_s"] == pytest.approx(6.01) and join["rtt_s"] == 0.2, "old path R2 (WAN) drains"
    assert leave["usable_s"] == 20.0 and leave["rtt_s"] == 0.2
    ex.dad, ex.dad_transmits = "standard", 2
    assert analysis.event_context(ex, "lan-lan", m, T0, tl)[0]["usable_s"] == pytest.approx(8.01)
    assert analysis.event_context(ex, "lan-lan", m, T0, tl)[1]["rtt_s"] == 0.0


def test_reverse_flow_mn_is_the_client(tmp_path):
    """iperf3 -R (mptcp-client): the MN opens the control and the data connections to the
    CN's port 5201 and sends the 37-byte cookie on each; the data flows from the CN's port
    (its ISN in the SYN-ACK) to the MN. Segment 2 is lost and retransmitted."""
    srv_isn = 900_000
    cn, mn = [], []

    def both(t, p):
        cn.append((t, p))
        mn.append((t + 0.0005, p))

    for sport, t in ((CTRL, 0.0), (DATA, 0.05)):
        both(t, tcp(MN_A, CN_ADDR, sport, PORT, ISN[sport], "S", options=[("MSS", SEG)]))
        both(t + 0.001, tcp(CN_ADDR, MN_A, PORT, sport, srv_isn, "SA", options=[("MSS", SEG)]))
        both(t + 0.002, tcp(MN_A, CN_ADDR, sport, PORT, ISN[sport] + 1, payload=b"k" * 37))  # the cookie
    for i in range(6):
        p = tcp(CN_ADDR, MN_A, PORT, DATA, srv_isn + 1 + i * SEG, payload=b"d" * SEG)
        cn.append((1.0 + 0.1 * i, p))
        if i != 2:
            mn.append((1.01 + 0.1 * i, p))
    p = tcp(CN_ADDR, MN_A, PORT, DATA, srv_isn + 1 + 2 * SEG, payload=b"d" * SEG)
    cn.append((1.8, p))
    mn.append((1.81, p))
    c, m = write(tmp_path / "c.pcap", cn), write(tmp_path / "m.pcap", mn)
    r = analysis.tcp_flow(c, m, PORT, T0, end_s=2.0, reverse=True)
    assert r["connections"] == [[DATA, PORT]] and r["control_connections"] == [[CTRL, PORT]]
    assert r["bytes_received"] == 6 * SEG and r["bytes_sent"] == 6 * SEG, "the MN's cookies are not data"
    assert r["retransmissions"] == 1 and r["lost"] == 1 and r["mss"] == SEG
    assert r["last_data_at_s"] == pytest.approx(1.81)
    # read as a forward flow, only the MN's cookie bytes past the first 37 would be "data": none
    assert analysis.tcp_flow(c, m, PORT, T0, end_s=2.0)["bytes_received"] == 0


def test_control_messages_and_handoff_latencies(tmp_path):
    """issue #15 item 3/4: what counts as a handoff's control message (ILNP LU/ack; MPTCP ADD_ADDR and
    its echo, the MP_JOIN handshake with the responder's fourth ACK, REMOVE_ADDR; never data, DSS or
    MP_CAPABLE), and seed 003's control / data-plane latency per event."""
    mn_b_id = f"2001:db8:3::{MN_NID.split(':')[-1]}"
    pkts = [(0.5, data(DATA, 0)),  # data on the old path: not a control message
            (0.6, tcp(CN_ADDR, MN_A, DATA, PORT, 1, options=[mp_capable(b"DATAKEY!")])),
            # join at 1.0, address usable at 1.2 (its RA): the MN announces it, the CN joins
            (1.25, tcp(MN_B, CN_ADDR, PORT, DATA, 5, options=[(30, bytes([0x30, 0x02]) + b"\x00" * 16)], ilnp=False)),
            (1.30, tcp(CN_ADDR, MN_B, DATA, PORT, 5, options=[(30, bytes([0x31, 0x02]) + b"\x00" * 16)], ilnp=False)),
            (1.31, tcp(CN_ADDR, MN_B, SUB, PORT, ISN[SUB], "S", options=[mp_join(b"tokn")], ilnp=False)),
            (1.36, tcp(MN_B, CN_ADDR, PORT, SUB, 9, "SA", options=[(30, bytes([0x10, 0x02]) + b"h" * 12)], ilnp=False)),
            (1.41, tcp(CN_ADDR, MN_B, SUB, PORT, ISN[SUB] + 1, options=[(30, bytes([0x10, 0x00]) + b"h" * 20)],
                       ilnp=False)),
            (1.4101, tcp(MN_B, CN_ADDR, PORT, SUB, 10, ilnp=False)),  # the fourth ACK
            (1.4102, tcp(MN_B, CN_ADDR, PORT, SUB, 10, ilnp=False)),  # a later ACK: not control
            (1.50, data(SUB, 0, MN_B, ilnp=False)),
            # an LU and its ack (ILNP), then REMOVE_ADDR at the leave (3.0)
            (2.0, lu(mn_b_id, CN_ADDR, 1, [L_R3])), (2.1, lu(CN_ADDR, mn_b_id, 2, [L_R3])),
            (3.02, tcp(MN_B, CN_ADDR, PORT, SUB, 10, options=[(30, bytes([0x40, 0x01]))], ilnp=False)),
            (3.5, data(SUB, 1, MN_B, ilnp=False))]
    path = write(tmp_path / "m.pcap", pkts)
    msgs = analysis.control_messages(path, T0)
    assert [m["kind"] for m in msgs] == ["add_addr", "add_addr_echo", "mp_join_syn", "mp_join_synack", "mp_join_ack",
                                         "mp_join_ack4", "lu", "lu_ack", "remove_addr"]
    assert msgs[0]["t_s"] == pytest.approx(1.25) and msgs[0]["src"] == MN_B
    assert msgs[6]["bytes"] == 40 + 8 + 8 + 12  # IPv6 header, nonce option, LU header, one locator
    tot = analysis.control_totals(msgs, 1.0, 3.0)
    assert tot["messages"] == 8 and tot["by_kind"]["mp_join_syn"] == {"messages": 1, "bytes": msgs[2]["bytes"]}
    events = [{"t_s": 1.0, "action": "up", "label": "join", "usable_s": 1.2, "new_prefixes": ["2001:db8:3::/64"]},
              {"t_s": 3.0, "action": "down", "label": "leave", "new_prefixes": ["2001:db8:3::/64"]}]
    join, leave = analysis.handoff_latencies(path, T0, events, PORT, end_s=10)
    assert join["first_control"]["kind"] == "add_addr"
    assert join["control_latency_ms"] == pytest.approx(50, abs=0.01)  # from the address usable, not the link
    assert join["event_to_control_ms"] == pytest.approx(250, abs=0.01)
    assert join["dataplane_latency_ms"] == pytest.approx(250, abs=0.01)  # 1.25 -> first data to the new locator
    assert join["event_to_new_path_ms"] == pytest.approx(500, abs=0.01)
    assert leave["first_control"]["kind"] == "remove_addr" and leave["control_latency_ms"] == pytest.approx(20, abs=0.01)
    assert leave["dataplane_latency_ms"] == pytest.approx(480, abs=0.01)
    # nothing after the flow's end counts; no new path, no data-plane latency
    late = analysis.handoff_latencies(path, T0, [dict(events[1], new_prefixes=[])], PORT, end_s=3.01)[0]
    assert late["first_control"] is None and late["dataplane_latency_ms"] is None
def udp_to(dst, t):
    return (t, eth() / ip(CN_ADDR, dst) / UDP(sport=999, dport=PORT) / Raw(b"v" * 300))


def test_handoffs_success_retries_and_first_lu_at_the_cn(tmp_path):
    """Three joins, from raw captures at both ends: (1) the first LU is lost (only the
    retransmission reaches the CN); (2) the first LU reaches the CN but its ack is lost;
    (3) one LU, acked, but the CN never sends to the joined locator: not a success."""
    mn = [
        (3.5, lu(MN_B, CN_ADDR, 1, [L_R3, L_R2])), (3.6, lu(MN_B, CN_ADDR, 1, [L_R3, L_R2])),
        (3.62, lu(CN_ADDR, MN_B, 2, [L_R3, L_R2])),
        (9.5, lu(MN_A, CN_ADDR, 1, [L_R2, L_R3])), (9.7, lu(MN_A, CN_ADDR, 1, [L_R2, L_R3])),
        (9.72, lu(CN_ADDR, MN_A, 2, [L_R2, L_R3])),
        (12.5, lu(MN_B, CN_ADDR, 1, [L_R3, L_R2])), (12.52, lu(CN_ADDR, MN_B, 2, [L_R3, L_R2])),
    ]
    cn = [
        (3.61, lu(MN_B, CN_ADDR, 1, [L_R3, L_R2])), (3.61, lu(CN_ADDR, MN_B, 2, [L_R3, L_R2])),
        udp_to(MN_A, 3.0), udp_to(MN_B, 3.615), udp_to(MN_B, 4.0),
        (9.51, lu(MN_A, CN_ADDR, 1, [L_R2, L_R3])), (9.51, lu(CN_ADDR, MN_A, 2, [L_R2, L_R3])),
        (9.71, lu(MN_A, CN_ADDR, 1, [L_R2, L_R3])), (9.71, lu(CN_ADDR, MN_A, 2, [L_R2, L_R3])),
        udp_to(MN_A, 9.512), udp_to(MN_A, 12.6), udp_to(MN_A, 14.0),
        (12.51, lu(MN_B, CN_ADDR, 1, [L_R3, L_R2])), (12.51, lu(CN_ADDR, MN_B, 2, [L_R3, L_R2])),
    ]
    m, c = write(tmp_path / "mn.pcap", mn), write(tmp_path / "cn.pcap", cn)
    lus = analysis.lu_handshakes(m, T0, mn_nid=MN_NID)
    assert [(x["attempts"], x["t_retry_s"]) for x in lus] == [(2, 3.6), (2, 9.7), (1, None)]
    events = [{"t_s": 3.0, "label": "join R3", "action": "up", "prefix": "2001:db8:3::/64"},
              {"t_s": 6.0, "label": "leave R2", "action": "down"},
              {"t_s": 9.0, "label": "join R2", "action": "up", "prefix": "2001:db8:2::/64"},
              {"t_s": 12.0, "label": "join R3", "action": "up", "prefix": "2001:db8:3::/64"}]
    hs = analysis.handoffs(lus, events, [c], T0, MN_NID, end_s=15.0)
    assert [h["label"] for h in hs] == ["join R3", "join R2", "join R3"]
    assert [h["success"] for h in hs] == [True, True, False]
    assert hs[0]["cn_switch_s"] == pytest.approx(3.615) and hs[2]["cn_switch_s"] is None
    assert [h["attempts"] for h in hs] == [2, 2, 1]
    assert [h["no_retransmission"] for h in hs] == [False, False, True]
    assert [h["lu_reached_cn"] for h in hs] == [False, True, True]
    assert [h["delay_ms"] for h in hs] == [pytest.approx(120), pytest.approx(220), pytest.approx(20)]
    s = analysis.handoff_summary(hs)
    assert s["n"] == 3 and s["success"] == pytest.approx(2 / 3) and s["no_retransmission"] == pytest.approx(1 / 3)
    assert s["lu_reached_cn"] == pytest.approx(2 / 3) and s["lus_per_handoff"] == pytest.approx(5 / 3)
    assert s["delay_retried_ms"]["n"] == 2 and s["delay_single_ms"]["median"] == pytest.approx(20)


def test_udp_transfer_one_way_delay_and_reverse_half(tmp_path):
    """One-way delay = CN capture -> first MN capture of the same datagram; the MN -> CN half
    of a --bidir flow is the datagrams from the port, sent at the MN, delivered at the CN."""
    def dg(t, i, src, dst, sport, dport):
        return (t, eth() / ip(src, dst) / UDP(sport=sport, dport=dport) / Raw(i.to_bytes(16, "big") + b"x" * 100))
    cn = [dg(1.0 + i, i, CN_ADDR, MN_A, 999, PORT) for i in range(4)]
    mn = [dg(1.0 + i + 0.01 * (i + 1), i, CN_ADDR, MN_A, 999, PORT) for i in (0, 2, 3)]  # the second one lost
    mn += [dg(1.5 + i, 100 + i, MN_A, CN_ADDR, PORT, 999) for i in range(3)]
    cn += [dg(1.55 + i, 100 + i, MN_A, CN_ADDR, PORT, 999) for i in range(2)]
    c, m = write(tmp_path / "cn.pcap", cn), write(tmp_path / "mn.pcap", mn)
    f = analysis.udp_transfer([c], [m], PORT, T0, end_s=4.5)
    assert f["packets_sent"] == 4 and f["lost"] == 1 and f["lost_pct"] == pytest.approx(25.0)
    assert f["one_way_delay_ms"]["n"] == 3 and f["one_way_delay_ms"]["mean"] == pytest.approx(80 / 3, abs=0.01)
    assert f["one_way_delay_ms"]["max"] == pytest.approx(40.0, abs=0.01)
    assert analysis.udp_reverse([c], [m], PORT, T0) == {"packets_sent": 3, "packets_delivered": 2, "lost": 1}


def test_between_events_gives_each_event_what_came_before_the_next():
    evs = [{"t": 1.0}, {"t": 5.0}]
    items = [{"at": 0.5}, {"at": 1.0}, {"at": 4.9}, {"at": 5.0}, {"at": 9.0}]
    got = analysis.between_events(evs, items, "t", "at")
    assert [[x["at"] for x in g] for g in got] == [[1.0, 4.9], [5.0, 9.0]]
    # the v4 experiment's per-event handshake reads the first of them
    from ilnp_lab.v4v6 import lu_per_event
    lus = [{"t_s": 1.2, "rtt_ms": 3.0}, {"t_s": 6.0, "rtt_ms": 4.0}]
    rows = lu_per_event([{"label": "a", "applied_s": 1.0}, {"label": "b", "applied_s": 1.1}, {"label": "c", "applied_s": 5.5}],
                        lus)
    assert [(r["label"], r["event_to_ack_ms"], r["lu_rtt_ms"]) for r in rows] == \
        [("a", None, None), ("b", 100.0, 3.0), ("c", 500.0, 4.0)]


def test_mipv6_control_messages_and_tunnelled_data_on_the_new_path(tmp_path):
    """issue #43: Mobile IPv6's messages (lab/ilnp_lab/mipv6/mh.py's bytes: BU with the HAO, BA
    with the RH2, HoTI/HoT inside the ip6ip6 tunnel, CoTI/CoT direct) are a handoff's control
    messages, and a data segment tunnelled by the home agent to the care-of address is data on
    the new path (seed 003's control and data-plane latency for its MIPv6 row). Before: none
    seen, both latencies None."""
    from ilnp_lab.mipv6 import mh
    hoa, coa, ha, cn = "2001:db8:1::100", "2001:db8:2::100", "2001:db8:1::1", CN_ADDR
    ck, tok = bytes(8), bytes(8)

    def raw(p: bytes):
        return eth() / Raw(p)

    seg = bytes(IPv6(src=cn, dst=hoa) / TCP(sport=DATA, dport=PORT, seq=1, flags="A") / Raw(b"d" * 100))
    tunnelled = bytes(IPv6(src=ha, dst=coa, nh=41, hlim=64))[:40]
    tunnelled = tunnelled[:4] + struct.pack("!H", len(seg)) + tunnelled[6:] + seg
    pkts = [(3.1, raw(mh.Packet(mh.bu(1, 60, mh.BU_A | mh.BU_H, [mh.alt_coa(coa)]), coa, ha, hao=hoa).bytes())),
            (4.1, raw(mh.Packet(mh.ba(0, 1, 60), ha, coa, rh2=hoa).bytes())),
            (4.2, raw(mh.Packet(mh.hoti(ck), hoa, cn, tunnel=(coa, ha)).bytes())),
            (4.2, raw(mh.Packet(mh.coti(ck), coa, cn).bytes())),
            (4.3, raw(mh.Packet(mh.hot(7, ck, tok), cn, hoa, tunnel=(ha, coa)).bytes())),
            (4.3, raw(mh.Packet(mh.cot(7, ck, tok), cn, coa).bytes())),
            (4.31, raw(mh.Packet(mh.hot(7, ck, tok), cn, hoa).bytes())),  # HoT as the tunnel device shows it
            (4.15, raw(tunnelled))]
    path = write(tmp_path / "m.pcap", pkts, snaplen=400)
    msgs = analysis.control_messages(path, T0)
    assert [m["kind"] for m in msgs] == ["bu", "ba", "hoti", "coti", "hot", "cot"]
    # the IPv6 packets; + 14 (Ethernet) the thesis's tcpdump table (seed 001 §6.4)
    assert [m["bytes"] + 14 for m in msgs] == [110, 94, 110, 70, 118, 78]
    leave = {"t_s": 3.0, "action": "down", "label": "leave r1", "new_prefixes": ["2001:db8:2::/64"]}
    (lat,) = analysis.handoff_latencies(path, T0, [leave], PORT, end_s=10)
    assert lat["first_control"]["kind"] == "bu" and lat["control_latency_ms"] == pytest.approx(100, abs=0.01)
    assert lat["dataplane_latency_ms"] == pytest.approx(1050, abs=0.01)  # BU -> the first tunnelled segment
