//! Human renderings of the daemon's typed replies (`ilnp_control`). Decoding is
//! lenient (a field an older daemon does not send takes its default), so tables
//! stay readable across versions.

use crate::{LocatorVerb, Object, PeerVerb};
use ilnp_control::{BalanceInfo, Data, DnsStatus, IlccEntry, LocatorInfo, PeerAdded, PeerInfo, Stats, Status};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// A JSON value of a monitor event as display text ("-" when null).
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(x) => x.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// An optional field as display text ("-" when absent).
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

/// Left-aligned columns separated by two spaces; the header row first.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let n = cells.len();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 == n {
                out.push_str(c);
            } else {
                let _ = write!(out, "{c:<width$}  ", width = w[i]);
            }
        }
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out.trim_end().to_string()
}

fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m"),
        _ => format!("{d}d{h:02}h"),
    }
}

fn lifetime(secs: u32) -> String {
    if secs == u32::MAX {
        "forever".into()
    } else {
        format!("{secs}s")
    }
}

/// The reply's data for people; `obj` is the command that asked.
pub fn render(obj: &Object, data: &Data) -> String {
    match data {
        Data::Status(d) => status(d),
        Data::Ilcc(d) => ilcc(d),
        Data::Flushed(f) => format!("flushed {} ILCC entr{}", f.flushed, if f.flushed == 1 { "y" } else { "ies" }),
        Data::Locators(d) => locators(d),
        Data::Peers(d) => peers(d),
        Data::PeerAdded(a) => match obj {
            Object::Peer { verb: Some(PeerVerb::Add { name, .. }) } => {
                format!("peer {name} ({}) added{}", a.added, kept(a))
            }
            _ => format!("peer {} added{}", a.added, kept(a)),
        },
        Data::PeerDeleted(d) => format!("peer {} deleted", d.deleted),
        Data::Stats(d) => stats(d),
        Data::Monitoring(_) => String::new(),
        Data::Balance(b) => {
            let set = match obj {
                Object::Policy { args } if !args.is_empty() => Some(("policy", "balance_policy or peer_policy")),
                Object::Locator { verb: Some(LocatorVerb::Set { .. }) } => Some(("weight", "locator_weight")),
                _ => None,
            };
            match set {
                Some((what, keys)) => {
                    format!("{}\n{what} set{RUN_ONLY} (to keep it, set {keys} in the configuration)", balance(b))
                }
                None => balance(b),
            }
        }
        Data::Dns(d) => dns(d),
    }
}

fn status(d: &Status) -> String {
    let mut rows: Vec<(String, String)> = vec![
        ("NID".into(), d.nid_source.map_or_else(|| d.nid.to_string(), |s| format!("{} ({s})", d.nid))),
        ("identifier prefix".into(), d.identifier_prefix.clone()),
        ("identifier address".into(), d.identifier_address.clone()),
        (
            "datapath".into(),
            if d.route_xmit {
                format!("{} (small packets translated at the route)", d.datapath)
            } else {
                d.datapath.to_string()
            },
        ),
        ("handoff".into(), d.handoff.to_string()),
        ("nonce".into(), format!("{} bits", d.nonce_bits)),
        ("tun".into(), d.tun.clone()),
    ];
    let ups: Vec<String> = d.uplinks.iter().map(|x| format!("{} (ifindex {})", x.name, x.ifindex)).collect();
    rows.push(("uplinks".into(), if ups.is_empty() { "-".into() } else { ups.join(", ") }));
    let locs: Vec<String> =
        d.locators.iter().map(|l| format!("{} on {} (pref {}, {})", l.l64, l.interface, l.pref, l.state)).collect();
    rows.push(("locators".into(), if locs.is_empty() { "none".into() } else { locs.join("\n") }));
    rows.push(("balance".into(), balance_summary(&d.balance)));
    if !d.temporary_nids.is_empty() {
        let t: Vec<String> = d
            .temporary_nids
            .iter()
            .map(|t| {
                let state = if t.preferred { "preferred" } else { "deprecated" };
                format!("{} ({state}, {} sessions, {} s)", t.nid, t.sessions, t.age_s)
            })
            .collect();
        rows.push(("temporary NIDs".into(), t.join("\n")));
    }
    rows.push(("ILCC entries".into(), d.ilcc_entries.to_string()));
    if let Some(a) = &d.admission {
        rows.push(("admission".into(), a.policy.to_string()));
        rows.push((
            "ILCC tiers".into(),
            format!(
                "established {}/{}, embryonic {}/{}",
                a.established, a.max_established, a.embryonic, a.max_embryonic
            ),
        ));
        rows.push(("hello budget".into(), format!("{}/s, burst {}", a.hello_rate_pps, a.hello_burst)));
        let c: Vec<String> = a.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
        rows.push(("admission counters".into(), c.join("\n")));
    }
    rows.push(("peers".into(), d.peers.to_string()));
    rows.push(("uptime".into(), duration(d.uptime_s)));
    if !d.version.is_empty() {
        rows.push(("version".into(), d.version.clone()));
    }
    let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in rows {
        for (i, part) in v.split('\n').enumerate() {
            let key = if i == 0 { k.as_str() } else { "" };
            let _ = writeln!(out, "{key:<w$}  {part}");
        }
    }
    out.trim_end().to_string()
}

fn balance_summary(b: &BalanceInfo) -> String {
    let mut s = format!("policy {}", b.default_policy.unwrap_or_default());
    for (n, p) in &b.peer_policy {
        let _ = write!(s, ", {n}: {p}");
    }
    if !b.weights.is_empty() {
        let w: Vec<String> = b.weights.iter().map(|(d, w)| format!("{d}={w}")).collect();
        let _ = write!(s, "; weights {}", w.join(" "));
    }
    s
}

fn balance(b: &BalanceInfo) -> String {
    let mut out = balance_summary(b);
    let rows: Vec<Vec<String>> = b
        .peers
        .iter()
        .flat_map(|p| {
            p.pairs
                .iter()
                .map(move |(pair, w)| vec![p.nid.to_string(), p.policy.to_string(), pair.clone(), w.to_string()])
        })
        .collect();
    if !rows.is_empty() {
        let _ = write!(out, "\n{}", table(&["PEER", "POLICY", "LOCAL>REMOTE", "WEIGHT"], &rows));
    }
    out
}

fn ilcc(entries: &[IlccEntry]) -> String {
    if entries.is_empty() {
        return "ILCC is empty".into();
    }
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let remote: Vec<String> = e
                .remote_locators
                .iter()
                .map(|r| {
                    let via = r.via.as_ref().map(|v| format!(" via {v} (NAT)")).unwrap_or_default();
                    format!("{}|{}({}){via}", r.l64, r.pref, r.state)
                })
                .collect();
            vec![
                // a peer in an interop mode says so: `0200:...:000d [linux49]`; one
                // talking to a temporary NID of ours: `0200:...:000d -> 1c2e:...`
                format!(
                    "{}{}{}",
                    e.nid,
                    e.local_nid.map(|l| format!(" -> {l}")).unwrap_or_default(),
                    e.interop.as_ref().map(|m| format!(" [{m}]")).unwrap_or_default()
                ),
                e.local_locator.to_string(),
                remote.join(" "),
                if e.nonces_hidden {
                    "(root only)".into()
                } else {
                    format!("{}/{}", opt(e.nonce_tx.as_ref()), opt(e.nonce_rx.as_ref()))
                },
                if e.initiator { "out" } else { "in" }.into(),
                format!("{:.1}s", e.idle_s),
                format!("{}/{}", e.slow_pkts_out, e.slow_pkts_in),
                e.fast.map(|f| format!("{}/{}", f.tx_pkts, f.rx_pkts)).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table(
        &["NID", "LOCAL L64", "REMOTE L64|PREF(STATE)", "NONCE TX/RX", "DIR", "IDLE", "SLOW OUT/IN", "FAST TX/RX"],
        &rows,
    )
}

fn locators(l: &[LocatorInfo]) -> String {
    if l.is_empty() {
        return "no locators (no global IPv6 /64 on any uplink)".into();
    }
    let rows: Vec<Vec<String>> = l
        .iter()
        .map(|x| {
            vec![
                x.l64.to_string(),
                x.address.clone(),
                x.interface.clone(),
                x.pref.to_string(),
                opt(x.router_preference),
                lifetime(x.lifetime_s),
                x.state.to_string(),
            ]
        })
        .collect();
    // ROUTER: the RA's default router preference behind the uplink ("-": no default route)
    table(&["L64", "ADDRESS", "INTERFACE", "PREF", "ROUTER", "LIFETIME", "STATE"], &rows)
}

fn dns(d: &DnsStatus) -> String {
    let mut out = if d.proxy {
        format!(
            "resolver proxy on {} -> upstream {}\n{}",
            d.listen.join(", "),
            d.upstream,
            counters("PROXY", &d.counters)
        )
    } else {
        "resolver proxy: off (no [dns] in the config)".to_string()
    };
    match &d.update {
        None => out.push_str("\nupdate: off (no [dns.update])"),
        Some(u) => {
            out.push_str(&format!(
                "\nupdate: {} L64 in zone {} at {} (TTL {} s): {} [{}]; {} ok, {} failed",
                u.name,
                u.zone,
                u.server,
                u.ttl_s,
                u.state,
                u.locators.join(", "),
                u.updates_ok,
                u.updates_failed
            ));
            if let Some(a) = u.last_ok_age_s {
                out.push_str(&format!("; last ok {a:.1} s ago"));
            }
            if let Some(ms) = u.last_latency_ms {
                out.push_str(&format!(" ({ms:.1} ms after the change)"));
            }
            if let Some(e) = &u.last_error {
                out.push_str(&format!("\nlast error: {e}"));
            }
        }
    }
    out
}

/// What `peer add` tells about keeping the peer.
fn kept(a: &PeerAdded) -> String {
    if a.persistent {
        String::new()
    } else {
        format!("{RUN_ONLY} (to keep it, add it to the configuration: a [[peer]] table, hosts_file or peers_file)")
    }
}

/// What a change made with ilnpctl lasts (the configuration is what a start reads).
const RUN_ONLY: &str = " for this run only: not kept across a restart of ilnpd";

fn peers(p: &[PeerInfo]) -> String {
    if p.is_empty() {
        return "no peers".into();
    }
    let rows: Vec<Vec<String>> = p
        .iter()
        .map(|x| {
            let locs: Vec<String> = x.locators.iter().map(|l| format!("{}|{}", l.l64, l.pref)).collect();
            let source = x.source.map(|s| s.to_string()).unwrap_or_default();
            let src = match (x.ttl_s, x.expires_in_s) {
                (Some(t), Some(e)) if x.expired => {
                    format!("{source} (TTL {t} s, EXPIRED {} s ago: locators may be stale)", -e)
                }
                (Some(t), Some(e)) => format!("{source} (TTL {t} s, expires in {e} s)"),
                (Some(t), None) => format!("{source} (TTL {t} s)"),
                _ => source,
            };
            let state = match (&x.fallback, x.state.map_or("", |s| s.as_str())) {
                (Some(f), _) => format!(
                    "fallback: plain IPv6 to {} ({}, {} out, {} in)",
                    f.address, f.reason, f.pkts_out, f.pkts_in
                ),
                (None, "") if x.non_ilnp => "non-ilnp".into(),
                (None, "") => "ilnp".into(),
                (None, s) => s.into(),
            };
            vec![x.name.clone(), x.nid.to_string(), locs.join(","), state, src]
        })
        .collect();
    table(&["NAME", "NID", "LOCATORS (L64|PREF)", "STATE", "SOURCE"], &rows)
}

fn counters(title: &str, m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return format!("{title}: no counts yet");
    }
    let rows: Vec<Vec<String>> = m.iter().map(|(k, v)| vec![k.clone(), v.to_string()]).collect();
    table(&[title, "COUNT"], &rows)
}

fn stats(d: &Stats) -> String {
    let mut parts = vec![counters("CORE", &d.core), counters("DATAPATH", &d.datapath)];
    if !d.slow_path_ns.is_empty() {
        parts.push(counters("SLOW PATH TIME PER PACKET", &d.slow_path_ns));
    }
    parts.join("\n\n")
}

/// One monitor line: `event key=value ...`. Rendered from the JSON object as sent,
/// so an event kind this ilnpctl does not know (a newer daemon) still shows in full.
pub fn event_line(line: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(line) else { return line.to_string() };
    let Some(o) = v.as_object() else { return line.to_string() };
    let mut out = o.get("event").map(text).unwrap_or_else(|| "event".into());
    for (k, val) in o {
        if k == "event" {
            continue;
        }
        let t = match val {
            Value::Array(a) => format!("[{}]", a.iter().map(text).collect::<Vec<_>>().join(",")),
            other => text(other),
        };
        let _ = write!(out, " {k}={t}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_control::Request;
    use serde_json::json;

    /// The typed data of a reply to `req`, as ilnpctl decodes it.
    fn data(req: Request, v: Value) -> Data {
        Data::decode(&req, v).unwrap()
    }

    #[test]
    fn status_shows_the_admission_policy_tiers_and_counters() {
        let d = data(
            Request::Status,
            json!({"nid": "0200:00ff:fe00:000c", "admission": {"policy": "socket", "established": 2,
                   "embryonic": 64, "max_established": 8, "max_embryonic": 64, "hello_rate_pps": 20,
                   "hello_burst": 20, "counters": {"admit_embryonic": 5, "ingress_no_socket": 150000}}}),
        );
        let Data::Status(st) = &d else { panic!() };
        let out = status(st);
        assert!(out.contains("admission           socket"), "{out}");
        assert!(out.contains("established 2/8, embryonic 64/64"), "{out}");
        assert!(out.contains("ingress_no_socket 150000") && out.contains("admit_embryonic 5"), "{out}");
        // a daemon from before the policy: no admission rows
        let Data::Status(old) = data(Request::Status, json!({"nid": "0200:00ff:fe00:000c"})) else { panic!() };
        assert!(!status(&old).contains("admission"));
    }

    #[test]
    fn a_policy_or_weight_set_says_it_is_for_this_run_only() {
        let b = || {
            let v =
                json!({"default_policy": "per-flow", "peer_policy": {}, "weights": {}, "flow_seed": 1, "peers": []});
            data(Request::PolicyShow, v)
        };
        let shown = render(&Object::Policy { args: vec![] }, &b());
        assert!(!shown.contains("this run only"), "{shown}");
        let set = render(&Object::Policy { args: vec!["per-flow".into()] }, &b());
        assert!(set.starts_with(&shown) && set.contains("policy set for this run only"), "{set}");
        assert!(set.contains("balance_policy or peer_policy in the configuration"), "{set}");
        let verb = LocatorVerb::Set { dev: "eth1".into(), key: "weight".into(), value: "80".into() };
        let w = render(&Object::Locator { verb: Some(verb) }, &b());
        assert!(w.contains("weight set for this run only") && w.contains("locator_weight"), "{w}");
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "LONGER"], &[vec!["xxxx".into(), "1".into()], vec!["y".into(), "22".into()]]);
        assert_eq!(t, "A     LONGER\nxxxx  1\ny     22");
    }

    #[test]
    fn renders_tolerate_missing_fields() {
        let st = render(
            &Object::Status,
            &data(Request::Status, json!({"nid": "0200:00ff:fe00:000c", "uplinks": [{"name": "eth0", "ifindex": 2}]})),
        );
        assert!(st.contains("0200:00ff:fe00:000c") && st.contains("eth0 (ifindex 2)"), "{st}");
        let il = render(
            &Object::Ilcc { verb: None },
            &data(
                Request::IlccShow,
                json!([{"nid": "0200:00ff:fe00:000d", "remote_locators": [{"l64": "2001:0db8:000b:0000", "pref": 10, "state": "active"}]}]),
            ),
        );
        assert!(il.contains("2001:0db8:000b:0000|10(active)"), "{il}");
        assert_eq!(render(&Object::Ilcc { verb: None }, &data(Request::IlccShow, json!([]))), "ILCC is empty");
        let stt = render(&Object::Stats, &data(Request::Stats, json!({"core": {"bad_nonce": 3}, "datapath": {}})));
        assert!(stt.contains("bad_nonce") && stt.contains('3'), "{stt}");
    }

    #[test]
    fn locator_table_shows_preference_and_router_preference() {
        let Data::Locators(l) = data(
            Request::LocatorShow,
            json!([
                {"l64": "2001:0db8:0002:0000", "interface": "eth-r2", "pref": 5, "router_preference": "high", "state": "active"},
                {"l64": "2001:0db8:0003:0000", "interface": "eth-r3", "pref": 20, "router_preference": null, "state": "active"}
            ]),
        ) else {
            panic!("not locators")
        };
        let t = locators(&l);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("PREF") && lines[0].contains("ROUTER"), "{t}");
        assert!(lines[1].contains("eth-r2") && lines[1].contains(" 5 ") && lines[1].contains("high"), "{t}");
        assert!(lines[2].contains("eth-r3") && lines[2].contains(" 20 ") && lines[2].contains(" - "), "{t}");
    }

    #[test]
    fn monitor_lines() {
        assert_eq!(
            event_line(r#"{"event":"lu_acked","nid":"0200:00ff:fe00:000d","rtt_us":812}"#),
            "lu_acked nid=0200:00ff:fe00:000d rtt_us=812"
        );
        assert_eq!(event_line("not json"), "not json");
    }
}
