#![no_main]
//! The resolver proxy's handling of untrusted bytes (issue #42 item 7), without
//! sockets: (a) a client's query (`reply::classify`, SERVFAIL, the synthesised
//! answer, truncation to the client's UDP size) and (b) the upstream's answers
//! (`exchange::answers`, the plain answer relayed, and the NID/L64/L32/LP answers
//! `lookup::resolve` resolves a name from, LP followed).
//!
//! Input: messages, each a 2-byte length and its bytes: the client's query, the
//! upstream's plain answer to it (empty: the upstream failed), then the upstream's
//! answers to the lookup's questions in the order asked. Such an answer's first byte
//! says what it is: 1 = records described compactly (built into a real message here,
//! so the fuzzer reaches LP chains quickly), 2 = the exchange failed, else a message
//! on the wire. Questions after the input ran out fail (timeout).
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{AAAA, CNAME, NULL};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use ilnp_dns::exchange::{answers, describe};
use ilnp_dns::lookup::{resolve, Answers, Question, Step, LP_MAX_DEPTH, LP_MAX_TARGETS, MAX_LOCATORS};
use ilnp_dns::reply::{classify, servfail, synthesise, truncate_for_udp, udp_limit, Ask};
use ilnp_wire::rdata::{Rdata, TYPE_L32, TYPE_L64, TYPE_LP, TYPE_NID};
use ilnp_wire::{ilnp_addr, v4path, Locator, Nid, DEFAULT_IDENTIFIER_PREFIX};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;

/// Owners and LP targets of the compact answers.
const NAMES: [&str; 6] = [
    "mn.lab.example.",
    "MN.Lab.Example.",
    "net.lab.example.",
    "cell.lab.example.",
    "other.example.",
    "v4.lab.example.",
];
const TTLS: [u32; 8] = [0, 1, 5, 30, 300, 86_400, 0x7fff_ffff, u32::MAX];

struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn message(&mut self) -> Option<&'a [u8]> {
        let (len, rest) = self.0.split_first_chunk::<2>()?;
        let n = usize::from(u16::from_be_bytes(*len)).min(rest.len());
        let (m, rest) = rest.split_at(n);
        self.0 = rest;
        Some(m)
    }
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (h, t) = b.split_at_checked(n)?;
    *b = t;
    Some(h)
}

/// A compact answer to `q`: `flags` (rcode, TC) then records `kind owner ttl pref data`.
fn compact(q: &Question, mut b: &[u8]) -> Result<Message, String> {
    let [flags] = arr(&mut b).unwrap_or([0]);
    let rcodes = [ResponseCode::NoError, ResponseCode::NXDomain, ResponseCode::ServFail, ResponseCode::Refused];
    let mut m = Message::new();
    m.set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_response_code(rcodes[usize::from(flags & 3)])
        .set_truncated(flags & 4 != 0);
    m.add_query(Query::query(q.name.clone(), RecordType::Unknown(q.rtype)));
    let name = |sel: u8| Name::from_ascii(NAMES[usize::from(sel) % NAMES.len()]).expect("literal");
    // a record cut short ends the list
    while let Some([kind, owner, ttl, pref]) = arr(&mut b) {
        let owner = if owner & 0x80 != 0 { q.name.clone() } else { name(owner) };
        let ttl = TTLS[usize::from(ttl) % TTLS.len()];
        let pref = u16::from(pref);
        let (code, rd) = match kind % 7 {
            0 => {
                let Some(n) = arr(&mut b) else { break };
                (TYPE_NID, Rdata::Nid { preference: pref, nid: Nid(u64::from_be_bytes(n)) })
            }
            1 => {
                let Some(l) = arr(&mut b) else { break };
                (TYPE_L64, Rdata::L64 { preference: pref, locator: Locator(u64::from_be_bytes(l)) })
            }
            2 => {
                let Some(a) = arr::<4>(&mut b) else { break };
                (TYPE_L32, Rdata::L32 { preference: pref, locator: a.into() })
            }
            3 => {
                let Some([t]) = arr(&mut b) else { break };
                let t = name(t).to_string();
                (TYPE_LP, Rdata::Lp { preference: pref, fqdn: t.trim_end_matches('.').into() })
            }
            4 => {
                let Some([t]) = arr(&mut b) else { break };
                m.add_answer(Record::from_rdata(owner, ttl, RData::CNAME(CNAME(name(t)))));
                continue;
            }
            5 => {
                // raw RDATA of an ILNP type (malformed ones too)
                let Some([t, len]) = arr(&mut b) else { break };
                let Some(raw) = take(&mut b, usize::from(len)) else { break };
                let code = TYPE_NID + u16::from(t % 4);
                let rdata = if raw.is_empty() { NULL::new() } else { NULL::with(raw.to_vec()) };
                m.add_answer(Record::from_rdata(owner, ttl, RData::Unknown { code: RecordType::Unknown(code), rdata }));
                continue;
            }
            _ => {
                let Some(a) = arr(&mut b) else { break };
                let a = AAAA(u128::from_be_bytes(a).into());
                m.add_answer(Record::from_rdata(owner, ttl, RData::AAAA(a)));
                continue;
            }
        };
        let mut raw = Vec::new();
        rd.emit(&mut raw).map_err(|e| e.to_string())?;
        let data = RData::Unknown { code: RecordType::Unknown(code), rdata: NULL::with(raw) };
        m.add_answer(Record::from_rdata(owner, ttl, data));
    }
    // through the wire, as the proxy gets it
    let wire = m.to_vec().map_err(|e| e.to_string())?;
    Message::from_vec(&wire).map_err(|e| e.to_string())
}

fn arr<const N: usize>(b: &mut &[u8]) -> Option<[u8; N]> {
    take(b, N).map(|h| h.try_into().expect("N"))
}

/// The locators, NIDs and TTLs the upstream's answers hold (what `resolve` may use).
fn offered(answers: &Answers) -> (HashSet<Locator>, HashSet<Nid>, HashSet<u32>) {
    let (mut locs, mut nids, mut ttls) = (HashSet::new(), HashSet::new(), HashSet::new());
    for (_, a) in answers.iter() {
        let Ok(m) = a else { continue };
        for r in m.answers() {
            ttls.insert(r.ttl());
            let RData::Unknown { rdata, .. } = r.data() else { continue };
            match Rdata::parse(u16::from(r.record_type()), rdata.anything()) {
                Ok(Rdata::L64 { locator, .. }) => drop(locs.insert(locator)),
                Ok(Rdata::L32 { locator, .. }) => drop(locs.insert(Locator::v4_path(locator, v4path::DEFAULT_PORT))),
                Ok(Rdata::Nid { nid, .. }) => drop(nids.insert(nid)),
                _ => {}
            }
        }
    }
    (locs, nids, ttls)
}

/// What the proxy sends a UDP client, checked: within its size, and a truncated
/// answer is the header and question of the full one with TC.
fn check_udp(q: &[u8], ans: Vec<u8>) {
    let sent = truncate_for_udp(q, ans.clone());
    assert!(sent.len() <= udp_limit(q), "{} bytes to a client of {}", sent.len(), udp_limit(q));
    if sent != ans {
        let t = Message::from_vec(&sent).expect("a truncated answer parses");
        assert!(t.truncated() && t.answers().is_empty(), "{t:?}");
        assert_eq!(&sent[0..2], &ans[0..2], "the ID stays");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(q) = input.message() else { return };
    let plain = input.message().filter(|p| !p.is_empty());
    let _ = describe(q);

    // (a) the client's query
    let ask = classify(q);
    let (msg, name) = match &ask {
        Ask::Aaaa { msg, name } => {
            assert_eq!(msg.queries().len(), 1);
            let qq = &msg.queries()[0];
            assert_eq!((qq.name(), qq.query_type(), msg.op_code()), (name, RecordType::AAAA, OpCode::Query));
            assert_eq!(msg.message_type(), MessageType::Query);
            (Some(msg), name.clone())
        }
        Ask::Other(m) => {
            assert_eq!(m.is_none(), Message::from_vec(q).is_err());
            (m.as_ref(), Name::from_ascii(NAMES[0]).expect("literal"))
        }
    };
    if let Some(m) = msg {
        if let Ok(sf) = servfail(m) {
            let a = Message::from_vec(&sf).expect("our SERVFAIL parses");
            assert_eq!((a.id(), a.response_code(), a.queries()), (m.id(), ResponseCode::ServFail, m.queries()));
            check_udp(q, sf);
        }
    }

    // (b) the upstream's plain answer, relayed
    if let Some(p) = plain {
        if q.len() >= 12 && answers(q, p).is_ok() {
            assert!(p[0..2] == q[0..2] && p[2] & 0x80 != 0, "an answer has the query's ID and QR");
        }
        check_udp(q, p.to_vec());
    }

    // (b) the lookup's answers
    let mut known = Answers::default();
    let mut asked = 0usize;
    let found = loop {
        match resolve(&name, &known) {
            Step::Done(r) => break r,
            Step::Ask(qs) => {
                assert!(!qs.is_empty());
                for qu in qs {
                    assert!(!known.iter().any(|(k, _)| k == &qu), "{qu:?} asked again");
                    let a = match input.message() {
                        None => Err("timeout".to_string()),
                        Some([1, rest @ ..]) => compact(&qu, rest),
                        Some([2, ..]) => Err("I/O".to_string()),
                        Some(wire) => Message::from_vec(wire).map_err(|e| e.to_string()),
                    };
                    known.insert(qu, a);
                    asked += 1;
                }
                // NID+L64+L32, then per LP level the LP and each target's L64
                let most: usize = 3 + (0..=LP_MAX_DEPTH as u32).map(|d| 2 * LP_MAX_TARGETS.pow(d)).sum::<usize>();
                assert!(asked <= most, "{asked} questions");
            }
        }
    };
    let Ok(Some(f)) = found else { return };
    let (locs, nids, ttls) = offered(&known);
    assert!(!f.locators.is_empty() && f.locators.len() <= MAX_LOCATORS, "{} locators", f.locators.len());
    for (i, l) in f.locators.iter().enumerate() {
        assert!(locs.contains(&l.loc), "{} did not come from the answers", l.loc);
        assert!(!f.locators[..i].iter().any(|o| o.loc == l.loc), "{} twice", l.loc);
    }
    assert!(nids.contains(&f.nid) && f.nid.0 != 0 && !f.nid.is_group(), "{}", f.nid);
    assert!(ttls.contains(&f.ttl), "TTL {} is a record's", f.ttl);
    let nid_answer = known.iter().find(|(k, _)| k.name == name && k.rtype == TYPE_NID).expect("asked");
    let Ok(nm) = nid_answer.1 else { panic!("found from a failed NID answer") };
    for r in nm.answers() {
        if u16::from(r.record_type()) == TYPE_NID || r.record_type() == RecordType::CNAME {
            assert!(f.ttl <= r.ttl(), "TTL {} above the NID answer's {}", f.ttl, r.ttl());
        }
    }

    // (a) the synthesised answer answers the query
    let Some(m) = msg.filter(|_| matches!(ask, Ask::Aaaa { .. })) else { return };
    let prefix = Locator(DEFAULT_IDENTIFIER_PREFIX.0);
    let ans = synthesise(m, &f, plain, prefix);
    let a = Message::from_vec(&ans).expect("the synthesised answer parses");
    assert_eq!((a.id(), a.message_type(), a.response_code()), (m.id(), MessageType::Response, ResponseCode::NoError));
    assert_eq!(a.queries(), m.queries());
    assert_eq!(a.answers().len(), f.cnames.len() + 1);
    let last = a.answers().last().expect("one");
    assert_eq!(last.data(), &RData::AAAA(AAAA(ilnp_addr(prefix, f.nid))));
    assert_eq!((last.name(), last.ttl()), (&f.owner, f.ttl));
    check_udp(q, ans);
});
