//! Round trips, and the shapes the daemon sent before the protocol was typed
//! (`testdata/replies-before-typing.json`, captured from ilnpd 0.1.0 on a
//! namespaced testbed): the typed serialisation must reproduce them exactly.

use super::*;
use serde_json::{json, Value};

fn captured() -> Value {
    serde_json::from_str(include_str!("../testdata/replies-before-typing.json")).unwrap()
}

fn cap(key: &str) -> String {
    captured()[key].as_str().unwrap_or_else(|| panic!("no capture {key}")).to_string()
}

fn nid(s: &str) -> Spelled<ilnp_wire::Nid> {
    Spelled::parse(s).unwrap()
}

fn l64(s: &str, pref: u16) -> PeerLocatorArg {
    PeerLocatorArg { l64: Spelled::parse(s).unwrap(), pref }
}

fn every_request() -> Vec<Request> {
    vec![
        Request::Status,
        Request::IlccShow,
        Request::IlccFlush,
        Request::LocatorShow,
        Request::PeerAdd {
            name: "mn".into(),
            nid: nid("0200:00ff:fe00:000d"),
            locators: vec![l64("2001:0db8:000b:0000", 20), l64("2001:db8:c::/64", 10)],
        },
        Request::PeerDel { nid: nid("0200:00ff:fe00:000d") },
        Request::PeerShow,
        Request::Stats,
        Request::Monitor,
        Request::PolicyShow,
        Request::PolicySet { peer: Some("cn".into()), policy: crate::Policy::PerFlow },
        Request::LocatorSet { dev: "eth1".into(), weight: 80 },
        Request::DnsStatus,
    ]
}

#[test]
fn balancing_requests_name_a_bad_policy() {
    let e = Request::from_line(r#"{"cmd":"policy_set","policy":"round-robin"}"#).unwrap_err().to_string();
    // the value and the choices (serde's words for the typed policy)
    assert!(e.contains("`round-robin`") && e.contains("`per-flow`"), "{e}");
    let r = Request::from_line(r#"{"cmd":"policy_set","policy":"per-packet"}"#).unwrap();
    assert_eq!(r, Request::PolicySet { peer: None, policy: crate::Policy::PerPacket });
}

#[test]
fn requests_round_trip_and_name_their_cmd() {
    let all = every_request();
    assert_eq!(all.iter().map(Request::as_str).collect::<Vec<_>>(), Request::NAMES);
    // the names on the wire before they were written beside the variants (#45 item 5)
    let before = "status ilcc_show ilcc_flush locator_show peer_add peer_del peer_show stats monitor \
                  policy_show policy_set locator_set dns_status";
    assert_eq!(Request::NAMES, before.split_whitespace().collect::<Vec<_>>());
    for r in all {
        let line = r.to_line();
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'), "{line:?}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["cmd"], r.as_str(), "{line}");
        assert_eq!(Request::from_line(&line).unwrap(), r);
    }
}

#[test]
fn request_shapes_are_the_documented_ones() {
    let v = |r: &Request| serde_json::to_value(r).unwrap();
    assert_eq!(v(&Request::Status), json!({"cmd": "status"}));
    assert_eq!(v(&Request::Monitor), json!({"cmd": "monitor"}));
    assert_eq!(v(&every_request()[5]), json!({"cmd": "peer_del", "nid": "0200:00ff:fe00:000d"}));
    // locators go out as the user spelled them (the daemon parses either form)
    assert_eq!(
        v(&every_request()[4]),
        json!({"cmd": "peer_add", "name": "mn", "nid": "0200:00ff:fe00:000d", "locators": [
            {"l64": "2001:0db8:000b:0000", "pref": 20}, {"l64": "2001:db8:c::/64", "pref": 10}]})
    );
}

#[test]
fn peer_add_defaults_and_parsed_values() {
    let r =
        Request::from_line(r#"{"cmd":"peer_add","nid":"0200:00ff:fe00:00ee","locators":[{"l64":"2001:db8:e::/64"}]}"#)
            .unwrap();
    let Request::PeerAdd { name, nid, locators } = r else { panic!("{r:?}") };
    assert_eq!(name, "");
    assert_eq!(nid.value, ilnp_wire::Nid(0x0200_00ff_fe00_00ee));
    assert_eq!(locators.len(), 1);
    assert_eq!(locators[0].l64.value, ilnp_wire::Locator(0x2001_0db8_000e_0000));
    assert_eq!(locators[0].pref, DEFAULT_PREF);
}

#[test]
fn bad_requests_say_what_was_wrong() {
    let e = |line: &str| Request::from_line(line).unwrap_err().to_string();
    assert!(e("{nope").starts_with("bad JSON: "), "{}", e("{nope"));
    assert_eq!(e(r#"{"x":1}"#), "missing field \"cmd\"");
    assert!(e(r#"{"cmd":7}"#).contains("cmd 7 is not a string"));
    let u = e(r#"{"cmd":"frob"}"#);
    assert!(u.starts_with("unknown command \"frob\"") && u.contains("peer_add"), "{u}");
    let m = e(r#"{"cmd":"peer_add","locators":[{"l64":"2001:db8:e::"}]}"#);
    assert!(m.starts_with("peer_add: ") && m.contains("missing field `nid`"), "{m}");
    let m = e(r#"{"cmd":"peer_del"}"#);
    assert!(m.starts_with("peer_del: ") && m.contains("missing field `nid`"), "{m}");
    let b = e(r#"{"cmd":"peer_del","nid":"zz"}"#);
    assert!(b.starts_with("peer_del: nid \"zz\""), "{b}");
    let b = e(r#"{"cmd":"peer_add","nid":"0200:00ff:fe00:00ee","locators":[{"l64":"2001:db8:e::1"}]}"#);
    assert!(b.starts_with("peer_add: l64 \"2001:db8:e::1\""), "{b}");
    let b = e(r#"{"cmd":"peer_add","nid":"0200:00ff:fe00:00ee","locators":[{"l64":"2001:db8:e::","pref":70000}]}"#);
    assert!(b.starts_with("peer_add: pref 70000 > 65535"), "{b}");
    assert_eq!(e(r#"{"cmd":"peer_add","nid":"0200:00ff:fe00:00ee"}"#), "peer_add: at least one locator is needed");
    assert_eq!(Spelled::<ilnp_wire::Nid>::parse("1:2").unwrap_err().split(' ').next(), Some("nid"));
}

/// Decodes a captured reply line to `req` and serialises it again: the same JSON.
fn same_again(req: &Request, key: &str) -> Reply {
    let line = cap(key);
    let reply = Reply::from_line(req, &line).unwrap_or_else(|e| panic!("{key}: {e}"));
    let again = reply.to_line();
    let (a, b): (Value, Value) = (serde_json::from_str(&line).unwrap(), serde_json::from_str(&again).unwrap());
    assert_eq!(a, b, "{key}: shape changed");
    assert_eq!(again.trim_end(), line, "{key}: bytes changed (keys sorted, compact)");
    reply
}

#[test]
fn captured_replies_decode_and_serialise_unchanged() {
    let Reply::Ok(Data::Status(st)) = same_again(&Request::Status, "status") else { panic!() };
    assert_eq!((st.datapath, st.handoff, st.nonce_bits), (DatapathMode::Ebpf, Handoff::Soft, 32));
    assert_eq!(st.locators[0].router_preference, Some(RouterPreference::Medium));
    assert_eq!(st.locators[0].lifetime_s, u32::MAX);
    let Reply::Ok(Data::Ilcc(il)) = same_again(&Request::IlccShow, "ilcc_show") else { panic!() };
    assert!(il[0].fast.is_some() && il[0].srtt_us.is_some());
    assert_eq!(il[0].remote_locators[0].state, LocatorState::Active);
    same_again(&Request::LocatorShow, "locator_show");
    same_again(&Request::PeerShow, "peer_show");
    let Reply::Ok(Data::Peers(p)) = same_again(&Request::PeerShow, "peer_show2") else { panic!() };
    assert_eq!(p[1].locators[0], PeerLocator { l64: ilnp_wire::Locator(0x2001_0db8_000e_0000), pref: 5 });
    let Reply::Ok(Data::Stats(s)) = same_again(&Request::Stats, "stats") else { panic!() };
    assert_eq!(s.datapath.get("ingress_fast"), Some(&3));
    let add = every_request()[4].clone();
    assert_eq!(
        same_again(&add, "peer_add"),
        Reply::Ok(Data::PeerAdded(PeerAdded { added: ilnp_wire::Nid(0x0200_00ff_fe00_00ee), persistent: false }))
    );
    same_again(&every_request()[5], "peer_del");
    assert_eq!(same_again(&Request::IlccFlush, "ilcc_flush"), Reply::Ok(Data::Flushed(Flushed { flushed: 1 })));
    assert_eq!(same_again(&Request::Monitor, "monitor_first"), Reply::Ok(Data::Monitoring(Monitoring)));
    for k in ["err_unknown", "err_peer_del_missing", "err_peer_add_noloc"] {
        assert!(matches!(same_again(&Request::Status, k), Reply::Err(_)), "{k}");
    }
}

#[test]
fn ilcc_entry_without_fast_counters_has_no_fast_key() {
    let e = IlccEntry { nid: ilnp_wire::Nid(0x0200_00ff_fe00_000d), ..IlccEntry::default() };
    let v = serde_json::to_value(&e).unwrap();
    assert!(v.get("fast").is_none(), "{v}");
    // null, not absent: nonce_rx and srtt_us before they are known
    assert_eq!((v["nonce_rx"].clone(), v["srtt_us"].clone()), (Value::Null, Value::Null));
}

#[test]
fn ilnpctl_json_output_is_the_data_as_sent() {
    // `ilnpctl --json` pretty-prints the reply's data; the typed data prints the same
    let line = cap("ilcc_show");
    let Reply::Ok(d) = Reply::from_line(&Request::IlccShow, &line).unwrap() else { panic!() };
    let sent = Reply::envelope(&line).unwrap().unwrap();
    let typed = serde_json::to_value(&d).unwrap();
    assert_eq!(serde_json::to_string_pretty(&typed).unwrap(), serde_json::to_string_pretty(&sent).unwrap());
    let printed: Value = serde_json::from_str(&cap("ctl_json_ilcc_show")).unwrap();
    assert_eq!(
        Data::decode(&Request::IlccShow, printed.clone()).map(|d| serde_json::to_value(d).unwrap()).unwrap(),
        printed
    );
}

#[test]
fn envelope_errors() {
    assert_eq!(Reply::envelope(r#"{"ok":true,"data":[1]}"#).unwrap(), Ok(json!([1])));
    assert_eq!(Reply::envelope(r#"{"ok":true}"#).unwrap(), Ok(Value::Null));
    assert_eq!(Reply::envelope(r#"{"ok":false,"error":"no peer"}"#).unwrap(), Err("no peer".into()));
    assert!(Reply::envelope("garbage").unwrap_err().0.contains("not JSON"));
    assert!(Reply::envelope(r#"{"data":1}"#).unwrap_err().0.contains("without \"ok\""));
    assert_eq!(Reply::Err("x".into()).to_line(), "{\"error\":\"x\",\"ok\":false}\n");
    let e = Reply::from_line(&Request::Stats, r#"{"ok":true,"data":[1]}"#).unwrap_err();
    assert!(e.0.contains("stats"), "{e}");
}

#[test]
fn lenient_decoding_of_partial_data() {
    let st: Status = serde_json::from_value(json!({"nid": "0200:00ff:fe00:000c", "future_field": 1})).unwrap();
    assert_eq!(st.nid.to_string(), "0200:00ff:fe00:000c");
    assert!(st.uplinks.is_empty() && st.version.is_empty());
    assert_eq!(st.nid_source, None, "an older daemon's status");
    for (text, want) in [
        ("stable-privacy", crate::NidSource::StablePrivacy),
        ("kept-from-upgrade", crate::NidSource::KeptFromUpgrade),
        ("eui64", crate::NidSource::Eui64),
        ("configured", crate::NidSource::Configured),
        ("from-a-newer-daemon", crate::NidSource::Other),
    ] {
        let st: Status = serde_json::from_value(json!({"nid": "0200:00ff:fe00:000c", "nid_source": text})).unwrap();
        assert_eq!(st.nid_source, Some(want), "{text}");
        if want != crate::NidSource::Other {
            assert_eq!(serde_json::to_value(st).unwrap()["nid_source"], text);
            assert_eq!(want.to_string(), text);
        }
    }
}

#[test]
fn events_round_trip_with_the_tag_first() {
    for line in captured()["monitor_events"].as_array().unwrap() {
        let line = line.as_str().unwrap();
        let ev = Event::from_line(line).unwrap();
        assert_eq!(ev.to_line().trim_end(), line, "bytes changed");
    }
    const N: ilnp_wire::Nid = ilnp_wire::Nid(0x0200_00ff_fe00_000d);
    const LA: ilnp_wire::Locator = ilnp_wire::Locator(0x2001_0db8_000a_0000);
    const LB: ilnp_wire::Locator = ilnp_wire::Locator(0x2001_0db8_000b_0000);
    let all = vec![
        Event::PeerCreated { nid: N, initiator: true, local_locator: LA, remote_locator: LB },
        Event::PeerRemoved { nid: N, reason: "idle".into() },
        Event::NonIlnpPeer { nid: N },
        Event::RemoteLocatorLearned { nid: N, locator: LA },
        Event::RemoteLocatorAged { nid: N, locator: LA },
        Event::RemoteLocatorFailover { nid: N, from: LA, to: LB },
        Event::LocalLocatorsChanged { locators: vec!["l(Active)".into()] },
        Event::LocalLocatorRetired { locator: LA, quiet_ms: 5 },
        Event::LuReceived { nid: N, locators: vec!["l|10".into()] },
        Event::LuSent { nid: N, attempt: 2, locators: vec![] },
        Event::LuAcked { nid: N, rtt_us: 812, attempts: 1 },
        Event::LuFailed { nid: N, attempts: 7 },
        Event::PeerChallenge { nid: N, outcome: "sent".into() },
        Event::V4Path {
            nid: N,
            locator: "v4:10.0.0.2:6740".parse().unwrap(),
            via: "198.51.100.1:40000".into(),
            outcome: "NAT detected".into(),
        },
        Event::Drop { reason: "bad_nonce".into(), detail: "x".into() },
        Event::Lagged { missed: 3 },
    ];
    for ev in all {
        let line = ev.to_line();
        assert!(line.starts_with("{\"event\":\""), "{line}");
        assert_eq!(Event::from_line(&line).unwrap(), ev);
    }
    assert_eq!(Event::Lagged { missed: 3 }.to_line(), "{\"event\":\"lagged\",\"missed\":3}\n");
}

/// `peer_add` refuses what ilnp-wire's unicast rules refuse, with their words.
#[test]
fn peer_add_refuses_what_cannot_name_a_peer() {
    let add = |nid: &str, l64: &str| {
        let line = json!({"cmd": "peer_add", "nid": nid, "locators": [{"l64": l64}]}).to_string();
        Request::from_line(&line).map(|_| ()).map_err(|e| e.to_string())
    };
    let good = "2001:db8:b::/64";
    assert_eq!(add("0200:00ff:fe00:000d", good), Ok(()));
    assert_eq!(
        add("0300:0000:0000:0001", good).unwrap_err(),
        "peer_add: nid 0300:0000:0000:0001: the group (g) bit is set; a unicast NID needs g = 0 (RFC 6740 §3.1.2)"
    );
    assert_eq!(add("0:0:0:0", good).unwrap_err(), format!("peer_add: nid {}", ilnp_wire::NidError::Zero));
    assert_eq!(
        add("ffff:ffff:ffff:ffff", good).unwrap_err(),
        format!("peer_add: nid {}", ilnp_wire::NidError::AllOnes)
    );
    let nid = "0200:00ff:fe00:000d";
    let e = add(nid, "2001:db8:b::/48").unwrap_err();
    assert!(e.starts_with("peer_add: l64 \"2001:db8:b::/48\": prefix length /48; a locator is a /64 prefix"), "{e}");
    let e = add(nid, "ff02::/64").unwrap_err();
    assert!(e.starts_with("peer_add: l64 ff02:0000:0000:0000: a multicast prefix (ff00::/8)"), "{e}");
    let e = add(nid, "fe80::").unwrap_err();
    assert!(e.starts_with("peer_add: l64 fe80:0000:0000:0000: a link-local prefix (fe80::/10)"), "{e}");
    let e = add(nid, "::/64").unwrap_err();
    assert!(e.starts_with("peer_add: l64 0000:0000:0000:0000: the all-zero locator"), "{e}");
    // peer_del takes any NID that parses: the daemon says whether it has that peer
    assert!(Request::from_line(r#"{"cmd":"peer_del","nid":"0300:0000:0000:0001"}"#).is_ok());
}

#[test]
fn client_checks_are_the_daemons() {
    let r =
        Request::PeerAdd { name: "x".into(), nid: nid("0100:0000:0000:0001"), locators: vec![l64("2001:db8::", 1)] };
    let client = r.check().unwrap_err();
    let daemon = Request::from_line(&r.to_line()).unwrap_err().to_string();
    assert_eq!(daemon, format!("peer_add: {client}"));
    assert!(client.starts_with("nid 0100:0000:0000:0001: the group (g) bit"), "{client}");
}

#[test]
fn locator_arguments() {
    let a = |s: &str| PeerLocatorArg::parse(s).map(|p| (p.l64.text, p.l64.value.0, p.pref));
    let b = 0x2001_0db8_000b_0000;
    assert_eq!(a("2001:0db8:000b:0000/20"), Ok(("2001:0db8:000b:0000".into(), b, 20)));
    assert_eq!(a("2001:db8:b::/64"), Ok(("2001:db8:b::/64".into(), b, DEFAULT_PREF)));
    assert_eq!(a("2001:db8:b::/64/5"), Ok(("2001:db8:b::/64".into(), b, 5)));
    assert_eq!(a("2001:0db8:000b:0000|7"), Ok(("2001:0db8:000b:0000".into(), b, 7)));
    let e = a("2001:db8:b::/48").unwrap_err();
    assert!(e.starts_with("l64 \"2001:db8:b::/48\": prefix length /48"), "{e}");
    assert!(a("2001:0db8:000b:0000/x").unwrap_err().contains("preference \"x\""));
    assert!(a("a/b/c/d").unwrap_err().contains("expected L64[/PREF]"));
}

/// Every request is read-only or mutating; a mutating one from anyone but root is
/// refused with its name and why.
#[test]
fn mutating_requests_are_roots_only() {
    let nid: Spelled<ilnp_wire::Nid> = Spelled::parse("0200:00ff:fe00:000d").unwrap();
    let all = [
        (Request::Status, false),
        (Request::IlccShow, false),
        (Request::IlccFlush, true),
        (Request::LocatorShow, false),
        (Request::PeerAdd { name: String::new(), nid: nid.clone(), locators: vec![] }, true),
        (Request::PeerDel { nid }, true),
        (Request::PeerShow, false),
        (Request::Stats, false),
        (Request::Monitor, false),
        (Request::PolicyShow, false),
        (Request::PolicySet { peer: None, policy: crate::Policy::Failover }, true),
        (Request::LocatorSet { dev: "eth0".into(), weight: 1 }, true),
        (Request::DnsStatus, false),
    ];
    assert_eq!(all.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(), Request::NAMES);
    for (r, mutating) in &all {
        assert_eq!(r.is_mutating(), *mutating, "{}", r.as_str());
        assert_eq!(r.refusal(0), None, "root may send {}", r.as_str());
        match r.refusal(1000) {
            None => assert!(!mutating, "{} allowed to uid 1000", r.as_str()),
            Some(e) => {
                assert!(e.starts_with(&format!("{} needs root", r.words())) && e.contains("uid 1000"), "{e}")
            }
        }
    }
    assert_eq!(Request::IlccFlush.words(), "ilcc flush");
}

/// A non-root client's entry: both nonces null and `nonces_hidden`; root's has no
/// such key (the shape of old replies).
#[test]
fn hidden_nonces_are_null_and_said() {
    let hidden = IlccEntry { nid: ilnp_wire::Nid(0x0200_00ff_fe00_000d), nonces_hidden: true, ..IlccEntry::default() };
    let v = serde_json::to_value(&hidden).unwrap();
    assert_eq!(
        (v["nonce_tx"].clone(), v["nonce_rx"].clone(), v["nonces_hidden"].clone()),
        (Value::Null, Value::Null, json!(true))
    );
    let root = IlccEntry { nonce_tx: Some("701d80b0".into()), ..IlccEntry::default() };
    let v = serde_json::to_value(&root).unwrap();
    assert!(v.get("nonces_hidden").is_none() && v["nonce_tx"] == json!("701d80b0"), "{v}");
}

/// The typed fields (NIDs, locators, policies, states) carry the text the daemon
/// sent when they were strings, and read it back; a state a newer daemon names
/// decodes as `Other`.
#[test]
fn typed_fields_keep_the_text_of_the_strings() {
    let peers = json!([{"name": "cn", "nid": "0200:00ff:fe00:000d", "locators": [{"l64": "2001:0db8:000b:0000", "pref": 10},
        {"l64": "v4:198.51.100.7:6740", "pref": 20}], "non_ilnp": false, "source": "dns", "ttl_s": 60,
        "expires_in_s": 59, "state": "fallback", "fallback": {"reason": "no_answer", "address": "2001:db8:b:0:200:ff:fe00:d",
        "since_s": 3, "pkts_out": 1, "pkts_in": 0}}]);
    let d = Data::decode(&Request::PeerShow, peers.clone()).unwrap();
    let Data::Peers(p) = &d else { panic!() };
    assert_eq!(p[0].nid, ilnp_wire::Nid(0x0200_00ff_fe00_000d));
    assert!(p[0].locators[1].l64.is_v4_path());
    assert_eq!((p[0].state, p[0].source), (Some(PeerState::Fallback), Some(PeerSource::Dns)));
    assert_eq!(p[0].fallback.as_ref().unwrap().reason, FallbackReason::NoAnswer);
    assert_eq!(serde_json::to_value(&d).unwrap(), peers);
    let balance = json!({"default_policy": "failover", "peer_policy": {"0200:00ff:fe00:000d": "per-packet"},
        "weights": {"eth0": 1}, "flow_seed": 7, "peers": [{"nid": "0200:00ff:fe00:000d", "policy": "per-packet",
        "pairs": [["2001:0db8:000a:0000>2001:0db8:000b:0000", 1]], "seq": 4}]});
    let d = Data::decode(&Request::PolicyShow, balance.clone()).unwrap();
    let Data::Balance(b) = &d else { panic!() };
    assert_eq!(b.peer_policy.get(&ilnp_wire::Nid(0x0200_00ff_fe00_000d)), Some(&crate::Policy::PerPacket));
    assert_eq!(serde_json::to_value(&d).unwrap(), balance);
    for (text, want) in
        [("idle", DnsUpdateState::Idle), ("failed", DnsUpdateState::Failed), ("x", DnsUpdateState::Other)]
    {
        let u: DnsUpdateStatus = serde_json::from_value(json!({"state": text})).unwrap();
        assert_eq!(u.state, want, "{text}");
    }
    let a: AdmissionStatus = serde_json::from_value(json!({"policy": "open"})).unwrap();
    assert_eq!(serde_json::to_value(&a).unwrap()["policy"], "open");
    let bad = Data::decode(&Request::PeerShow, json!([{"nid": "not-a-nid"}])).unwrap_err().to_string();
    assert!(bad.contains("not-a-nid"), "{bad}");
}
