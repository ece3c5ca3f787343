//! A name's ILNP records (RFC 6742): NID, L64 and L32 asked at once, LP followed
//! (§2.4) to the names holding the L64 records, with a loop check and a depth
//! limit. The RDATA is `ilnp_wire::rdata`'s; hickory only frames the messages.
//! Any bad record makes the whole answer bad (nothing from it is used).
//!
//! Without I/O: `resolve` is given the upstream's answers so far and says which
//! questions to ask next, or what the name resolved to. The caller (ilnpd's
//! `dns/lookup.rs`) asks them, records the answers and calls it again; it starts
//! over each time (a handful of questions, and no state of its own to get out of
//! step with the answers).

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use ilnp_core::PeerLocator;
use ilnp_wire::rdata::{Rdata, TYPE_L32, TYPE_L64, TYPE_LP, TYPE_NID};
use ilnp_wire::{Locator, Nid};
use std::cell::OnceCell;
use std::collections::HashMap;

/// LP records followed one after another at most this many times.
pub const LP_MAX_DEPTH: usize = 4;
/// LP records of one name followed at most (the best by preference).
pub const LP_MAX_TARGETS: usize = 4;
/// Locators of one name kept at most: the best of each answer by preference, the
/// name's L64s first, then its L32s, then the LP targets' in LP order. A 64 KiB
/// answer lists ~2,900 L64s and LP can lead to 256 such answers; every locator
/// kept is compared with the others on the daemon's one thread, and goes into the
/// core's record, its event and the state file (the ILCC uses the best 8 anyway).
pub const MAX_LOCATORS: usize = 16;

/// What a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// owner of the NID records (the end of a CNAME chain)
    pub owner: Name,
    pub nid: Nid,
    pub locators: Vec<PeerLocator>,
    /// smallest TTL of the records used
    pub ttl: u32,
    /// CNAME records that led to `owner`, to answer with
    pub cnames: Vec<Record>,
    /// the L32 answer when it was not used (failed or bad): it costs the name
    /// nothing, the caller may log it
    pub l32_ignored: Option<Bad>,
}

/// Why a name's ILNP records were not used: the name, the record and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad {
    pub name: String,
    pub record: &'static str,
    pub why: String,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} record: {}", self.name, self.record, self.why)
    }
}

fn bad(name: &Name, record: &'static str, why: impl Into<String>) -> Bad {
    Bad { name: name.to_string(), record, why: why.into() }
}

/// An answer's ILNP records of one type (each with the owner it came under) and
/// their smallest TTL.
pub type Records = (Vec<(Rdata, Name)>, u32);

/// A question the lookup asks the upstream: `name` and an ILNP record type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Question {
    pub name: Name,
    pub rtype: u16,
}

impl Question {
    fn new(name: &Name, rtype: u16) -> Question {
        Question { name: name.clone(), rtype }
    }

    /// The record's mnemonic, for `Bad`.
    pub fn record(&self) -> &'static str {
        ilnp_wire::rdata::rr_type_name(self.rtype).unwrap_or("LP")
    }
}

/// The upstream's answers to the questions asked so far (names compare
/// case-insensitively); an error is why there was no usable answer (timeout, I/O,
/// unparsable), as the caller words it. Each answer's records are parsed once
/// (`resolve` runs again from the start after every step).
#[derive(Debug, Default, Clone)]
pub struct Answers(HashMap<Question, Answer>);

#[derive(Debug, Clone)]
struct Answer {
    msg: Result<Message, String>,
    /// `ilnp_records` of `msg`, sorted by preference
    records: OnceCell<Result<Records, Bad>>,
}

impl Answers {
    pub fn insert(&mut self, q: Question, a: Result<Message, String>) {
        self.0.insert(q, Answer { msg: a, records: OnceCell::new() });
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Question, &Result<Message, String>)> {
        self.0.iter().map(|(q, a)| (q, &a.msg))
    }
}

/// What to do next for a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// ask these (none answered yet; all may be asked at once), record the answers,
    /// and resolve again
    Ask(Vec<Question>),
    /// Ok(None): not an ILNP name (no NID)
    Done(Result<Option<Found>, Bad>),
}

/// Why resolving stopped before an outcome: a question still unanswered, or a bad answer.
enum Stop {
    Ask(Vec<Question>),
    Bad(Bad),
}

impl From<Bad> for Stop {
    fn from(b: Bad) -> Stop {
        Stop::Bad(b)
    }
}

/// The next step in resolving `name`'s ILNP records, given the answers so far.
pub fn resolve(name: &Name, answers: &Answers) -> Step {
    match resolve_with(name, answers) {
        Ok(found) => Step::Done(Ok(found)),
        Err(Stop::Bad(b)) => Step::Done(Err(b)),
        Err(Stop::Ask(qs)) => Step::Ask(qs),
    }
}

/// The answer to `q`, or why there is none yet / none usable.
fn answer(answers: &Answers, q: Question) -> Result<&Message, Stop> {
    match answers.0.get(&q).map(|a| &a.msg) {
        None => Err(Stop::Ask(vec![q])),
        Some(Ok(m)) => Ok(m),
        Some(Err(e)) => Err(Stop::Bad(bad(&q.name, q.record(), e.clone()))),
    }
}

/// The ILNP records of `q`'s type in its answer, parsed (`ilnp_records`), by
/// preference; (records, smallest TTL).
fn records(answers: &Answers, q: Question) -> Result<&Records, Stop> {
    let m = answer(answers, q.clone())?;
    let a = &answers.0[&q];
    let parsed = a.records.get_or_init(|| {
        let mut r = ilnp_records(&q.name, q.record(), m)?;
        r.0.sort_by_key(|(r, _)| match r {
            Rdata::Nid { preference, .. }
            | Rdata::L64 { preference, .. }
            | Rdata::L32 { preference, .. }
            | Rdata::Lp { preference, .. } => *preference,
        });
        Ok(r)
    });
    parsed.as_ref().map_err(|b| Stop::Bad(b.clone()))
}

fn resolve_with(name: &Name, answers: &Answers) -> Result<Option<Found>, Stop> {
    // NID, L64 and L32 at once: one round trip for the common case
    let first = [TYPE_NID, TYPE_L64, TYPE_L32].map(|t| Question::new(name, t));
    let unasked: Vec<Question> = first.iter().filter(|q| !answers.0.contains_key(q)).cloned().collect();
    if !unasked.is_empty() {
        return Err(Stop::Ask(unasked));
    }
    let nid_m = answer(answers, Question::new(name, TYPE_NID))?;
    let (nids, nid_ttl) = records(answers, Question::new(name, TYPE_NID))?;
    let Some((Rdata::Nid { nid, .. }, owner)) =
        nids.iter().min_by_key(|(r, _)| if let Rdata::Nid { preference, .. } = r { *preference } else { u16::MAX })
    else {
        return Ok(None);
    };
    let cnames: Vec<Record> =
        nid_m.answers().iter().filter(|r| r.record_type() == RecordType::CNAME).cloned().collect();
    let mut ttl = *nid_ttl;
    for c in &cnames {
        ttl = ttl.min(c.ttl());
    }
    let mut locs = Vec::new();
    let (l64s, l64_ttl) = records(answers, Question::new(name, TYPE_L64))?;
    add_l64(l64s, *l64_ttl, &mut locs, &mut ttl);
    // L32s are the IPv4 paths beside the L64s (a server that has none answers NoError
    // with no records; one that fails the query costs the name nothing)
    let l32_ignored = match records(answers, Question::new(name, TYPE_L32)) {
        Ok((l32s, l32_ttl)) => {
            add_l64(l32s, *l32_ttl, &mut locs, &mut ttl);
            None
        }
        Err(Stop::Bad(b)) => Some(b),
        Err(ask) => return Err(ask),
    };
    if locs.iter().all(|l| l.loc.is_v4_path()) {
        let mut path = vec![owner.clone()];
        follow_lp(answers, owner, &mut path, &mut locs, &mut ttl)?;
    }
    if locs.is_empty() {
        return Err(bad(name, "NID", format!("NID {nid} but no L64 or LP record leading to one")).into());
    }
    Ok(Some(Found { owner: owner.clone(), nid: *nid, locators: locs, ttl, cnames, l32_ignored }))
}

/// Follows the LP records of `name` (the last element of `path`): each target's L64
/// records, or its own LP records one level deeper.
fn follow_lp(
    answers: &Answers,
    name: &Name,
    path: &mut Vec<Name>,
    locs: &mut Vec<PeerLocator>,
    ttl: &mut u32,
) -> Result<(), Stop> {
    let (lps, lp_ttl) = records(answers, Question::new(name, TYPE_LP))?;
    for (r, _) in lps.iter().take(LP_MAX_TARGETS) {
        let Rdata::Lp { fqdn, .. } = r else { continue };
        let target = Name::from_ascii(format!("{fqdn}.")).map_err(|e| bad(name, "LP", format!("{fqdn:?}: {e}")))?;
        if path.iter().any(|p| p.eq_case(&target) || p == &target) {
            let chain: Vec<String> = path.iter().map(|p| p.to_string()).collect();
            return Err(bad(name, "LP", format!("loop: {} -> {target}", chain.join(" -> "))).into());
        }
        if path.len() > LP_MAX_DEPTH {
            return Err(bad(name, "LP", format!("more than {LP_MAX_DEPTH} LP records in a chain")).into());
        }
        *ttl = (*ttl).min(*lp_ttl);
        let (l64s, l64_ttl) = records(answers, Question::new(&target, TYPE_L64))?;
        path.push(target.clone());
        if l64s.is_empty() {
            follow_lp(answers, &target, path, locs, ttl)?;
        } else {
            add_l64(l64s, *l64_ttl, locs, ttl);
        }
        path.pop();
    }
    Ok(())
}

/// The ILNP records of `rtype` in an answer, parsed; (records, smallest TTL).
/// Ok(empty) for NXDOMAIN / no data.
pub fn ilnp_records(name: &Name, record: &'static str, m: &Message) -> Result<Records, Bad> {
    let code = match record {
        "NID" => TYPE_NID,
        "L64" => TYPE_L64,
        "L32" => TYPE_L32,
        _ => TYPE_LP,
    };
    match m.response_code() {
        ResponseCode::NoError | ResponseCode::NXDomain => {}
        rc => return Err(bad(name, record, format!("the server answered {rc}"))),
    }
    if m.truncated() {
        return Err(bad(name, record, "answer truncated"));
    }
    let mut out = Vec::new();
    let mut ttl = u32::MAX;
    for r in m.answers() {
        if u16::from(r.record_type()) != code {
            continue;
        }
        let raw: &[u8] = match r.data() {
            RData::Unknown { rdata, .. } => rdata.anything(),
            RData::Update0(_) => &[],
            other => return Err(bad(name, record, format!("unexpected data {other}"))),
        };
        let rd = Rdata::parse(code, raw)
            .map_err(|e| bad(name, record, format!("malformed RDATA ({} bytes): {e}", raw.len())))?;
        if let Rdata::Nid { nid, .. } = &rd {
            if nid.is_group() || nid.0 == 0 {
                return Err(bad(name, record, format!("{nid} is not a unicast NID")));
            }
        }
        ttl = ttl.min(r.ttl());
        out.push((rd, r.name().clone()));
    }
    Ok((out, ttl))
}

/// L64 records → locators, and L32 records → v4 paths to the default port
/// (`ilnp_wire::v4path`: ILNPv6 in UDP/IPv4, docs/architecture.md § IPv4 and NAT);
/// appends to `locs` up to `MAX_LOCATORS`, lowers `ttl`.
fn add_l64(recs: &[(Rdata, Name)], rec_ttl: u32, locs: &mut Vec<PeerLocator>, ttl: &mut u32) {
    for (r, _) in recs {
        if locs.len() >= MAX_LOCATORS {
            break;
        }
        let (loc, pref) = match r {
            Rdata::L64 { preference, locator } => (*locator, *preference),
            Rdata::L32 { preference, locator } => {
                (Locator::v4_path(*locator, ilnp_wire::v4path::DEFAULT_PORT), *preference)
            }
            _ => continue,
        };
        if !locs.iter().any(|l| l.loc == loc) {
            locs.push(PeerLocator { loc, pref });
        }
    }
    if !recs.is_empty() {
        *ttl = (*ttl).min(rec_ttl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, Query};
    use hickory_proto::rr::rdata::NULL;
    use ilnp_wire::Locator;

    fn answer(name: &str, rtype: u16, rdatas: &[Vec<u8>], rc: ResponseCode) -> Message {
        let n = Name::from_ascii(name).unwrap();
        let mut m = Message::new();
        m.set_message_type(MessageType::Response).set_response_code(rc);
        m.add_query(Query::query(n.clone(), RecordType::Unknown(rtype)));
        for rd in rdatas {
            // NULL::with debug-asserts non-empty data: an empty RDATA is NULL::new()
            let rdata = if rd.is_empty() { NULL::new() } else { NULL::with(rd.clone()) };
            let data = RData::Unknown { code: RecordType::Unknown(rtype), rdata };
            m.add_answer(Record::from_rdata(n.clone(), 30, data));
        }
        // through the wire, as the proxy gets it
        Message::from_vec(&m.to_vec().unwrap()).unwrap()
    }

    fn emit(r: Rdata) -> Vec<u8> {
        let mut v = Vec::new();
        r.emit(&mut v).unwrap();
        v
    }

    /// Resolves `name` against a zone of (name, type) → answer; unlisted questions
    /// get NOERROR without records. Also returns the questions in the order asked.
    fn run(name: &str, zone: &[(&str, u16, Message)]) -> (Result<Option<Found>, Bad>, Vec<Vec<Question>>) {
        let n = Name::from_ascii(name).unwrap();
        let mut answers = Answers::default();
        let mut asked = Vec::new();
        loop {
            match resolve(&n, &answers) {
                Step::Done(r) => return (r, asked),
                Step::Ask(qs) => {
                    for q in &qs {
                        assert!(!answers.0.contains_key(q), "{q:?} asked twice");
                        let z = zone.iter().find(|(zn, t, _)| Name::from_ascii(zn).unwrap() == q.name && *t == q.rtype);
                        let a = z
                            .map(|(_, _, m)| m.clone())
                            .unwrap_or_else(|| answer(&q.name.to_string(), q.rtype, &[], ResponseCode::NoError));
                        answers.insert(q.clone(), Ok(a));
                    }
                    asked.push(qs);
                }
            }
        }
    }

    fn nid(name: &str, n: u64) -> (&str, u16, Message) {
        let rd = emit(Rdata::Nid { preference: 10, nid: Nid(n) });
        (name, TYPE_NID, answer(name, TYPE_NID, &[rd], ResponseCode::NoError))
    }

    fn l64(name: &str, l: u64) -> (&str, u16, Message) {
        let rd = emit(Rdata::L64 { preference: 10, locator: Locator(l) });
        (name, TYPE_L64, answer(name, TYPE_L64, &[rd], ResponseCode::NoError))
    }

    fn lp<'a>(name: &'a str, targets: &[&str]) -> (&'a str, u16, Message) {
        let rds: Vec<Vec<u8>> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| emit(Rdata::Lp { preference: i as u16, fqdn: t.to_string() }))
            .collect();
        (name, TYPE_LP, answer(name, TYPE_LP, &rds, ResponseCode::NoError))
    }

    #[test]
    fn records_parse_with_the_wire_codec() {
        let n = Name::from_ascii("mn.lab.example.").unwrap();
        let l = emit(Rdata::L64 { preference: 10, locator: Locator(0x2001_0db8_000b_0000) });
        let (recs, ttl) =
            ilnp_records(&n, "L64", &answer("mn.lab.example.", TYPE_L64, &[l], ResponseCode::NoError)).unwrap();
        assert_eq!(ttl, 30);
        assert_eq!(recs[0].0, Rdata::L64 { preference: 10, locator: Locator(0x2001_0db8_000b_0000) });
        let nx = answer("mn.lab.example.", TYPE_NID, &[], ResponseCode::NXDomain);
        assert!(ilnp_records(&n, "NID", &nx).unwrap().0.is_empty());
    }

    #[test]
    fn l32_records_are_v4_paths_to_the_default_port() {
        let n = Name::from_ascii("cn.lab.example.").unwrap();
        let l32 = emit(Rdata::L32 { preference: 30, locator: "192.0.2.10".parse().unwrap() });
        let l64 = emit(Rdata::L64 { preference: 10, locator: Locator(0x2001_0db8_000a_0000) });
        let (mut locs, mut ttl) = (Vec::new(), u32::MAX);
        let (recs, t) =
            ilnp_records(&n, "L64", &answer("cn.lab.example.", TYPE_L64, &[l64], ResponseCode::NoError)).unwrap();
        add_l64(&recs, t, &mut locs, &mut ttl);
        let (recs, t) =
            ilnp_records(&n, "L32", &answer("cn.lab.example.", TYPE_L32, &[l32], ResponseCode::NoError)).unwrap();
        add_l64(&recs, t, &mut locs, &mut ttl);
        let want = [(Locator(0x2001_0db8_000a_0000), 10), ("v4:192.0.2.10:6740".parse::<Locator>().unwrap(), 30)];
        assert_eq!(locs.iter().map(|l| (l.loc, l.pref)).collect::<Vec<_>>(), want);
    }

    #[test]
    fn bad_records_name_the_name_and_the_record() {
        let n = Name::from_ascii("mn.lab.example.").unwrap();
        let short = answer("mn.lab.example.", TYPE_NID, &[vec![0, 10, 1, 2, 3]], ResponseCode::NoError);
        let e = ilnp_records(&n, "NID", &short).unwrap_err();
        assert_eq!((e.name.as_str(), e.record), ("mn.lab.example.", "NID"));
        assert!(e.to_string().contains("malformed RDATA (5 bytes)"), "{e}");
        let empty = answer("mn.lab.example.", TYPE_L64, &[vec![]], ResponseCode::NoError);
        assert!(ilnp_records(&n, "L64", &empty).unwrap_err().why.contains("malformed"));
        let group = answer("mn.lab.example.", TYPE_NID, &[vec![0, 10, 1, 0, 0, 0, 0, 0, 0, 1]], ResponseCode::NoError);
        assert!(ilnp_records(&n, "NID", &group).unwrap_err().why.contains("not a unicast NID"));
        let sf = answer("mn.lab.example.", TYPE_NID, &[], ResponseCode::ServFail);
        let e = ilnp_records(&n, "NID", &sf).unwrap_err();
        assert!(e.to_string().contains("mn.lab.example. NID record: the server answered"), "{e}");
        let lp = answer("mn.lab.example.", TYPE_LP, &[vec![0, 10, 0xc0, 0x0c]], ResponseCode::NoError);
        assert!(ilnp_records(&n, "LP", &lp).is_err(), "a compressed LP target is malformed (RFC 6742 §2.4)");
    }

    #[test]
    fn nid_l64_and_l32_are_asked_at_once_and_give_the_peer() {
        let (r, asked) =
            run("mn.lab.example.", &[nid("mn.lab.example.", 0x42), l64("mn.lab.example.", 0x2001_0db8_0003_0000)]);
        let f = r.unwrap().unwrap();
        assert_eq!((f.nid, f.ttl, f.owner.to_string()), (Nid(0x42), 30, "mn.lab.example.".to_string()));
        assert_eq!(f.locators, [PeerLocator { loc: Locator(0x2001_0db8_0003_0000), pref: 10 }]);
        assert_eq!(asked.len(), 1, "one round trip: {asked:?}");
        assert_eq!(asked[0].iter().map(|q| q.rtype).collect::<Vec<_>>(), [TYPE_NID, TYPE_L64, TYPE_L32]);
        // no NID: not an ILNP name, whatever else is there
        let (r, _) = run("mn.lab.example.", &[l64("mn.lab.example.", 0x2001_0db8_0003_0000)]);
        assert_eq!(r, Ok(None));
    }

    #[test]
    fn lp_is_followed_to_the_l64s_and_a_loop_is_bad() {
        let zone = [
            nid("mn.lab.example.", 0x42),
            lp("mn.lab.example.", &["net.lab.example"]),
            lp("net.lab.example.", &["cell.lab.example"]),
            l64("cell.lab.example.", 0x2001_0db8_000c_0000),
        ];
        let (r, asked) = run("mn.lab.example.", &zone);
        assert_eq!(r.unwrap().unwrap().locators[0].loc, Locator(0x2001_0db8_000c_0000));
        assert_eq!(asked.len(), 5, "NID+L64+L32, LP, net's L64, net's LP, cell's L64: {asked:?}");
        let looped = [
            nid("mn.lab.example.", 0x42),
            lp("mn.lab.example.", &["net.lab.example"]),
            lp("net.lab.example.", &["MN.lab.example"]),
        ];
        let e = run("mn.lab.example.", &looped).0.unwrap_err();
        assert!(e.why.contains("loop: mn.lab.example. -> net.lab.example. -> MN.lab.example."), "{e}");
        let none = [nid("mn.lab.example.", 0x42)];
        assert!(run("mn.lab.example.", &none).0.unwrap_err().why.contains("no L64 or LP record"));
    }

    #[test]
    fn a_name_keeps_at_most_max_locators_the_best_of_each_answer() {
        // 40 L64s, listed worst first, and an LP to another 40: the name's own best 16
        let n = "mn.lab.example.";
        let rds: Vec<Vec<u8>> = (0..40u16)
            .rev()
            .map(|i| emit(Rdata::L64 { preference: i, locator: Locator(0x2001_0db8_0000_0000 | u64::from(i)) }))
            .collect();
        let zone = [nid(n, 0x42), (n, TYPE_L64, answer(n, TYPE_L64, &rds, ResponseCode::NoError))];
        let f = run(n, &zone).0.unwrap().unwrap();
        assert_eq!(f.locators.len(), MAX_LOCATORS);
        assert_eq!(f.locators.iter().map(|l| l.pref).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
    }

    #[test]
    fn a_failed_l32_query_costs_the_name_nothing_and_a_failed_nid_query_is_bad() {
        let n = Name::from_ascii("mn.lab.example.").unwrap();
        let mut answers = Answers::default();
        let (_, _, nid_m) = nid("mn.lab.example.", 0x42);
        let (_, _, l64_m) = l64("mn.lab.example.", 0x2001_0db8_0003_0000);
        answers.insert(Question::new(&n, TYPE_NID), Ok(nid_m));
        answers.insert(Question::new(&n, TYPE_L64), Ok(l64_m));
        answers.insert(Question::new(&n, TYPE_L32), Err("timeout".into()));
        let Step::Done(Ok(Some(f))) = resolve(&n, &answers) else { panic!() };
        assert_eq!(f.l32_ignored.unwrap().to_string(), "mn.lab.example. L32 record: timeout");
        answers.insert(Question::new(&n, TYPE_NID), Err("timeout".into()));
        let Step::Done(Err(e)) = resolve(&n, &answers) else { panic!() };
        assert_eq!(e.to_string(), "mn.lab.example. NID record: timeout");
    }
}
