//! The CI checks of the simulator: a small scenario against numbers worked out by
//! hand, and byte-identical results for the same seed.

use ilnp_sim::scenario::ScenarioFile;
use ilnp_sim::{run_file, run_file_jobs, Report};

fn run(text: &str, seed: Option<u64>) -> Report {
    let f = ScenarioFile::parse(text).unwrap();
    run_file(&f, false, seed, None, &mut |_, _, _| {}).unwrap().0
}

/// `scenarios/small.toml`: CN on a 1 ms access link, the MN on `a` (2 ms) then,
/// from t = 1 s, on `b` (3 ms); backbone 5 ms. So MN→CN is 8 ms one way (RTT 16)
/// before the move and 9 ms (RTT 18) after.
///
/// * The MN sends at t = 0, 0.1, …, 2.0: 21 datagrams. The one sent at 2.0 arrives
///   after the end: the CN receives 20 and echoes 20, each back 16 or 18 ms later
///   (all before 2.0): 20 replies; the first at 16 ms (one RTT: the core sends the
///   first packet at once, no handshake).
/// * The move at t = 1 s (it precedes that instant's datagram): one LU, sent at
///   once from `b`, acked one new-path RTT later, 18 ms, first attempt (its timer is
///   2 × the 16 ms RTT the MN sampled from the CN's first answer: 32 ms > 18).
/// * Packets: the MN sends 21 datagrams + 1 LU, the CN 20 echoes + 1 nonce-only
///   hello (responder) + 1 LU ack = 44; all arrive but the last datagram: 43.
///   Nothing is lost: the datagram of t = 1 s follows the LU on the same path, so
///   its echo already goes to `b`.
#[test]
fn small_scenario_matches_the_hand_computed_numbers() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/small.toml")).unwrap();
    let rep = run(&text, None);
    assert_eq!(rep.runs.len(), 1);
    let r = &rep.runs[0];
    let (cn, mn) = (&r.groups[0], &r.groups[1]);
    assert_eq!((mn.datagrams_sent, cn.datagrams_received, mn.replies_received), (21, 20, 20));
    assert_eq!(mn.first_reply_ms.p50, Some(16.0));
    assert_eq!(r.moves, 1);
    let h = &mn.handoff;
    assert_eq!((h.lus, h.acked, h.failed), (1, 1, 0));
    assert_eq!(h.delay_ms.max, Some(18.0));
    assert_eq!(h.attempts.get(&1), Some(&1));
    assert_eq!(r.lu_packets_sent, 1);
    let n = &r.network;
    assert_eq!((n.packets_sent, n.packets_arrived, n.lost, n.drop_no_route), (44, 43, 0, 0));
    let s = r.server.as_ref().unwrap();
    assert_eq!(s.lus_received, 1);
    assert_eq!(s.counters.get("hello_sent"), Some(&1));
    assert_eq!(s.counters.get("peer_created"), Some(&1));
    assert_eq!((s.ilcc_established_end, s.ilcc_embryonic_end), (1, 0));
}

/// The same with Neighbour Discovery on `b`: the LU ack is the first packet to the
/// MN's new address, so `b`'s router resolves it first (NS down 3 ms, NA up 3 ms):
/// the LU takes 18 + 6 = 24 ms; one solicitation; nothing lost.
#[test]
fn neighbour_discovery_delays_the_first_packet_to_a_new_address() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/small.toml")).unwrap();
    let text = text.replace("name = \"b\"\ndelay_ms = 3", "name = \"b\"\ndelay_ms = 3\nnd = true");
    let rep = run(&text, None);
    let r = &rep.runs[0];
    assert_eq!(r.handoff.delay_ms.max, Some(24.0));
    assert_eq!((r.network.nd_solicits, r.network.drop_nd, r.network.lost), (1, 0, 0));
    assert_eq!(r.groups[1].replies_received, 20);
}

const LOSSY: &str = r#"
name = "lossy"
duration_s = 60
backbone_delay_ms = 10
server = "cn"
[[network]]
name = "cn-net"
delay_ms = 1
[[network]]
name = "a"
delay_ms = 2
jitter_ms = 3
loss_pct = 15
rate_mbit = 10
[[network]]
name = "b"
delay_ms = 20
loss_pct = 25
nd = true
[[group]]
name = "cn"
network = "cn-net"
listen = [9000]
echo = true
[[group]]
name = "mn"
count = 30
network = "a"
traffic = { to = "cn", pps = 20, size = 200, start_spread_s = 1 }
mobility = { networks = ["a", "b"], interval_s = [2, 8], kind = "make", overlap_s = 0.5 }
"#;

#[test]
fn same_seed_gives_byte_identical_results() {
    let a = run(LOSSY, Some(11));
    let b = run(LOSSY, Some(11));
    assert_eq!(a.json(), b.json());
    assert_eq!(a.lu_csv(), b.lu_csv());
    let r = &a.runs[0];
    // the scenario exercises what could diverge: losses, retransmitted and failed LUs
    assert!(r.network.lost > 1000, "{:?}", r.network);
    assert!(r.handoff.attempts.keys().any(|&k| k > 1), "{:?}", r.handoff);
    assert!(r.moves > 200, "{}", r.moves);
    let c = run(LOSSY, Some(12));
    assert_ne!(a.json(), c.json(), "another seed, another run");
}

/// Runs spread over threads (`ilnp-sim run -j N`) give the report of one thread,
/// byte for byte, in the same order.
#[test]
fn parallel_runs_give_the_same_report() {
    let f = ScenarioFile::parse(LOSSY).unwrap();
    let (one, p1) = run_file(&f, false, Some(5), Some(3), &mut |_, _, _| {}).unwrap();
    let (par, p3) = run_file_jobs(&f, false, Some(5), Some(3), 3, &|_, _, _| {}).unwrap();
    assert_eq!(one.runs.len(), 3);
    assert_eq!(one.json(), par.json());
    assert_eq!(one.lu_csv(), par.lu_csv());
    assert_eq!(one.timeline_csv(), par.timeline_csv());
    let events = |p: &[ilnp_sim::Perf]| p.iter().map(|p| (p.run, p.events)).collect::<Vec<_>>();
    assert_eq!(events(&p1), events(&p3));
    assert!(p3.iter().all(|p| p.cpu_s > 0.0 && p.events_per_cpu_s > 0.0), "{p3:?}");
}

/// `ilnp-sim run scenarios/small.toml` writes results that parse and say what the
/// library says.
#[test]
fn cli_run_writes_json_and_csv() {
    let out = std::env::temp_dir().join(format!("ilnp-sim-cli-{}", std::process::id()));
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_ilnp-sim"))
        .args(["run", concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/small.toml"), "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["summary"][0]["handoff"]["delay_ms"]["max"], 18.0);
    assert_eq!(v["runs"][0]["network"]["packets_arrived"], 43);
    let csv = std::fs::read_to_string(out.join("lu.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
    let perf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("perf.json")).unwrap()).unwrap();
    assert_eq!(perf[0]["hosts"], 2);
    std::fs::remove_dir_all(&out).unwrap();
}

/// Every shipped scenario, with and without `--quick`, reads and validates (every
/// variant's overrides land on existing networks, groups and renumberings).
#[test]
fn shipped_scenarios_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let f = ScenarioFile::load(&p).unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
            for quick in [false, true] {
                let v = f.variants(quick).unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
                assert!(!v.is_empty());
            }
            n += 1;
        }
    }
    assert!(n >= 5, "{n} scenarios");
}
