//! Human renderings of the daemon's replies. Every field is looked up leniently:
//! a daemon that adds fields, or lacks one, still gets a readable table.

use crate::{IlccVerb, Object, PeerVerb};
use serde_json::Value;
use std::fmt::Write;

/// A field as display text ("-" when absent or null).
fn s(v: &Value, key: &str) -> String {
    text(v.get(key).unwrap_or(&Value::Null))
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(x) => x.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
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

fn lifetime(v: &Value) -> String {
    match u(v, "lifetime_s") {
        Some(x) if x >= u32::MAX as u64 => "forever".into(),
        Some(x) => format!("{x}s"),
        None => "-".into(),
    }
}

fn array(data: &Value) -> &[Value] {
    data.as_array().map(Vec::as_slice).unwrap_or(&[])
}

pub fn render(obj: &Object, data: &Value) -> String {
    match obj {
        Object::Status => status(data),
        Object::Ilcc { verb: None | Some(IlccVerb::Show) } => ilcc(data),
        Object::Ilcc { verb: Some(IlccVerb::Flush) } => {
            format!(
                "flushed {} ILCC entr{}",
                s(data, "flushed"),
                if u(data, "flushed") == Some(1) { "y" } else { "ies" }
            )
        }
        Object::Locator { .. } => locators(data),
        Object::Peer { verb: None | Some(PeerVerb::Show) } => peers(data),
        Object::Peer { verb: Some(PeerVerb::Add { name, .. }) } => format!("peer {name} ({}) added", s(data, "added")),
        Object::Peer { verb: Some(PeerVerb::Del { .. }) } => format!("peer {} deleted", s(data, "deleted")),
        Object::Stats => stats(data),
        Object::Monitor => String::new(),
    }
}

fn status(d: &Value) -> String {
    let mut rows: Vec<(String, String)> = vec![
        ("NID".into(), s(d, "nid")),
        ("identifier prefix".into(), s(d, "identifier_prefix")),
        ("identifier address".into(), s(d, "identifier_address")),
        ("datapath".into(), s(d, "datapath")),
        ("handoff".into(), s(d, "handoff")),
        ("nonce".into(), format!("{} bits", s(d, "nonce_bits"))),
        ("tun".into(), s(d, "tun")),
    ];
    let ups: Vec<String> = array(d.get("uplinks").unwrap_or(&Value::Null))
        .iter()
        .map(|x| match x {
            Value::String(n) => n.clone(),
            _ => format!("{} (ifindex {})", s(x, "name"), s(x, "ifindex")),
        })
        .collect();
    rows.push(("uplinks".into(), if ups.is_empty() { "-".into() } else { ups.join(", ") }));
    let locs: Vec<String> = array(d.get("locators").unwrap_or(&Value::Null))
        .iter()
        .map(|l| format!("{} on {} (pref {}, {})", s(l, "l64"), s(l, "interface"), s(l, "pref"), s(l, "state")))
        .collect();
    rows.push(("locators".into(), if locs.is_empty() { "none".into() } else { locs.join("\n") }));
    rows.push(("ILCC entries".into(), s(d, "ilcc_entries")));
    rows.push(("peers".into(), s(d, "peers")));
    rows.push(("uptime".into(), u(d, "uptime_s").map(duration).unwrap_or_else(|| "-".into())));
    if d.get("version").is_some() {
        rows.push(("version".into(), s(d, "version")));
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

fn ilcc(d: &Value) -> String {
    let entries = array(d);
    if entries.is_empty() {
        return "ILCC is empty".into();
    }
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let remote: Vec<String> = array(e.get("remote_locators").unwrap_or(&Value::Null))
                .iter()
                .map(|r| format!("{}|{}({})", s(r, "l64"), s(r, "pref"), s(r, "state")))
                .collect();
            let fast = e.get("fast");
            let fast_txt = match fast {
                Some(f) if f.is_object() => format!("{}/{}", s(f, "tx_pkts"), s(f, "rx_pkts")),
                _ => "-".into(),
            };
            vec![
                s(e, "nid"),
                s(e, "local_locator"),
                remote.join(" "),
                format!("{}/{}", s(e, "nonce_tx"), s(e, "nonce_rx")),
                if e.get("initiator").and_then(Value::as_bool) == Some(true) { "out" } else { "in" }.into(),
                e.get("idle_s").and_then(Value::as_f64).map(|x| format!("{x:.1}s")).unwrap_or_else(|| "-".into()),
                format!("{}/{}", s(e, "slow_pkts_out"), s(e, "slow_pkts_in")),
                fast_txt,
            ]
        })
        .collect();
    table(
        &["NID", "LOCAL L64", "REMOTE L64|PREF(STATE)", "NONCE TX/RX", "DIR", "IDLE", "SLOW OUT/IN", "FAST TX/RX"],
        &rows,
    )
}

fn locators(d: &Value) -> String {
    let l = array(d);
    if l.is_empty() {
        return "no locators (no global IPv6 /64 on any uplink)".into();
    }
    let rows: Vec<Vec<String>> = l
        .iter()
        .map(|x| {
            vec![
                s(x, "l64"),
                s(x, "address"),
                s(x, "interface"),
                s(x, "pref"),
                s(x, "router_preference"),
                lifetime(x),
                s(x, "state"),
            ]
        })
        .collect();
    // ROUTER: the RA's default router preference behind the uplink ("-": no default route)
    table(&["L64", "ADDRESS", "INTERFACE", "PREF", "ROUTER", "LIFETIME", "STATE"], &rows)
}

fn peers(d: &Value) -> String {
    let p = array(d);
    if p.is_empty() {
        return "no peers".into();
    }
    let rows: Vec<Vec<String>> = p
        .iter()
        .map(|x| {
            let locs: Vec<String> = array(x.get("locators").unwrap_or(&Value::Null))
                .iter()
                .map(|l| format!("{}|{}", s(l, "l64"), s(l, "pref")))
                .collect();
            let ilnp = if x.get("non_ilnp").and_then(Value::as_bool) == Some(true) { "no (fallback)" } else { "yes" };
            vec![s(x, "name"), s(x, "nid"), locs.join(","), ilnp.into()]
        })
        .collect();
    table(&["NAME", "NID", "LOCATORS (L64|PREF)", "ILNP"], &rows)
}

fn counters(title: &str, v: Option<&Value>) -> String {
    let Some(m) = v.and_then(Value::as_object) else { return format!("{title}: -") };
    if m.is_empty() {
        return format!("{title}: no counts yet");
    }
    let rows: Vec<Vec<String>> = m.iter().map(|(k, v)| vec![k.clone(), text(v)]).collect();
    table(&[title, "COUNT"], &rows)
}

fn stats(d: &Value) -> String {
    let mut parts = vec![counters("CORE", d.get("core")), counters("DATAPATH", d.get("datapath"))];
    // any further sections the daemon adds
    if let Some(o) = d.as_object() {
        for (k, v) in o {
            if k != "core" && k != "datapath" && v.is_object() {
                parts.push(counters(&k.to_uppercase(), Some(v)));
            }
        }
    }
    parts.join("\n\n")
}

/// One monitor line: `event key=value ...` (the daemon sends JSON objects).
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
    use serde_json::json;

    #[test]
    fn tables_align() {
        let t = table(&["A", "LONGER"], &[vec!["xxxx".into(), "1".into()], vec!["y".into(), "22".into()]]);
        assert_eq!(t, "A     LONGER\nxxxx  1\ny     22");
    }

    #[test]
    fn renders_tolerate_missing_fields() {
        let st = render(
            &Object::Status,
            &json!({"nid": "0200:00ff:fe00:000c", "uplinks": [{"name": "eth0", "ifindex": 2}]}),
        );
        assert!(st.contains("0200:00ff:fe00:000c") && st.contains("eth0 (ifindex 2)"), "{st}");
        let il = render(
            &Object::Ilcc { verb: None },
            &json!([{"nid": "0200:00ff:fe00:000d", "remote_locators": [{"l64": "2001:0db8:000b:0000", "pref": 10, "state": "active"}]}]),
        );
        assert!(il.contains("2001:0db8:000b:0000|10(active)"), "{il}");
        assert_eq!(render(&Object::Ilcc { verb: None }, &json!([])), "ILCC is empty");
        let stt = render(&Object::Stats, &json!({"core": {"bad_nonce": 3}, "datapath": {}}));
        assert!(stt.contains("bad_nonce") && stt.contains('3'), "{stt}");
    }

    #[test]
    fn locator_table_shows_preference_and_router_preference() {
        let t = locators(&json!([
            {"l64": "2001:0db8:0002:0000", "interface": "eth-r2", "pref": 5, "router_preference": "high", "state": "active"},
            {"l64": "2001:0db8:0003:0000", "interface": "eth-r3", "pref": 20, "router_preference": null, "state": "active"}
        ]));
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
