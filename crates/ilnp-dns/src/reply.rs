//! What a client asked and what it is answered: one AAAA/IN question gets the ILNP
//! lookup beside the plain query (`Ask::Aaaa`), anything else is passed through;
//! the synthesised answer (the CNAME chain, then the identifier address of the
//! NID), SERVFAIL when the upstream gave nothing, and the truncation of an answer
//! longer than the client's UDP size.

use crate::exchange::{question_bytes, HEADER_LEN};
use crate::lookup::Found;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::AAAA;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::ProtoError;
use ilnp_wire::{ilnp_addr, Locator};

/// A client's query, as the proxy sees it.
#[derive(Debug, Clone)]
pub enum Ask {
    /// a query (opcode QUERY) of one question, AAAA/IN: the ILNP records of `name`
    /// are looked up beside the plain query
    Aaaa { msg: Message, name: Name },
    /// anything else (another type or class, several questions, another opcode, a
    /// response): passed to the upstream unchanged; the message if it parsed (for a SERVFAIL)
    Other(Option<Message>),
}

pub fn classify(q: &[u8]) -> Ask {
    let Ok(m) = Message::from_vec(q) else { return Ask::Other(None) };
    let ours = m.message_type() == MessageType::Query && m.op_code() == OpCode::Query && m.queries().len() == 1;
    match m.queries().first() {
        Some(qq) if ours && qq.query_type() == RecordType::AAAA && qq.query_class() == DNSClass::IN => {
            let name = qq.name().clone();
            Ask::Aaaa { msg: m, name }
        }
        _ => Ask::Other(Some(m)),
    }
}

/// The AAAA answer for a name with ILNP records: the CNAME chain, then the
/// identifier address `id_prefix::NID` with the records' smallest TTL. RA as the
/// upstream's plain answer had it (set if there was none).
pub fn synthesise(q: &Message, f: &Found, plain: Option<&[u8]>, id_prefix: Locator) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(q.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(q.recursion_desired())
        .set_recursion_available(plain.map(|p| p.len() > 3 && p[3] & 0x80 != 0).unwrap_or(true))
        .set_response_code(ResponseCode::NoError);
    m.add_queries(q.queries().to_vec());
    m.add_answers(f.cnames.iter().cloned());
    let addr = ilnp_addr(id_prefix, f.nid);
    m.add_answer(Record::from_rdata(f.owner.clone(), f.ttl, RData::AAAA(AAAA(addr))));
    if let Some(e) = q.extensions() {
        let mut e = e.clone();
        e.set_max_payload(e.max_payload().max(512));
        m.set_edns(e);
    }
    m.to_vec().unwrap_or_else(|_| servfail(q).unwrap_or_default())
}

/// SERVFAIL for `q` (the upstream gave no usable answer): the client hears at once.
pub fn servfail(q: &Message) -> Result<Vec<u8>, ProtoError> {
    let mut m = Message::new();
    m.set_id(q.id())
        .set_message_type(MessageType::Response)
        .set_op_code(q.op_code())
        .set_recursion_desired(q.recursion_desired())
        .set_recursion_available(true)
        .set_response_code(ResponseCode::ServFail);
    m.add_queries(q.queries().to_vec());
    m.to_vec()
}

/// The client's UDP size: its EDNS payload size, at least 512 (RFC 6891 §6.2.5);
/// 512 without EDNS or for a query that does not parse.
pub fn udp_limit(q: &[u8]) -> usize {
    Message::from_vec(q)
        .ok()
        .and_then(|m| m.extensions().as_ref().map(|e| e.max_payload().max(512) as usize))
        .unwrap_or(512)
}

/// An answer too long for the client's UDP size: header + question with TC set,
/// so the client asks again over TCP (RFC 1035 §4.2.1, RFC 6891 §6.2.5). Never
/// longer than the limit: an answer hickory cannot read (the upstream's, passed
/// through) keeps its header and gets the query's question as it came, or none.
pub fn truncate_for_udp(q: &[u8], ans: Vec<u8>) -> Vec<u8> {
    let limit = udp_limit(q);
    if ans.len() <= limit {
        return ans;
    }
    if let Ok(m) = Message::from_vec(&ans) {
        let mut t = Message::new();
        t.set_header(*m.header());
        t.add_queries(m.queries().to_vec());
        t.set_truncated(true);
        if let Ok(t) = t.to_vec().map_err(|_| ()).and_then(|t| if t.len() <= limit { Ok(t) } else { Err(()) }) {
            return t;
        }
    }
    // the header (ID, flags, rcode) with TC and the counts of what follows
    let mut t = ans[..HEADER_LEN].to_vec();
    t[2] |= 0x02;
    t[4..HEADER_LEN].fill(0);
    if let Some(question) = question_bytes(q).filter(|b| HEADER_LEN + b.len() <= limit) {
        t[5] = 1;
        t.extend_from_slice(question);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Edns, Query};
    use ilnp_core::PeerLocator;
    use ilnp_wire::Nid;

    fn aaaa_query(id: u16, name: &str, edns: Option<u16>) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(id).set_message_type(MessageType::Query).set_op_code(OpCode::Query).set_recursion_desired(true);
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::AAAA));
        if let Some(size) = edns {
            let mut e = Edns::new();
            e.set_max_payload(size);
            m.set_edns(e);
        }
        m.to_vec().unwrap()
    }

    fn found(name: &str) -> Found {
        Found {
            owner: Name::from_ascii(name).unwrap(),
            nid: Nid(0x1234),
            locators: vec![PeerLocator { loc: Locator(0x2001_0db8_0003_0000), pref: 10 }],
            ttl: 7,
            cnames: vec![],
            l32_ignored: None,
        }
    }

    #[test]
    fn one_aaaa_in_question_is_ours_anything_else_passes() {
        let q = aaaa_query(9, "mn.lab.example.", None);
        assert!(matches!(classify(&q), Ask::Aaaa { name, .. } if name.to_string() == "mn.lab.example."));
        let mut a = q.clone();
        a[13 + "mn.lab.example".len() + 2] = 1; // QTYPE A
        assert!(matches!(classify(&a), Ask::Other(Some(_))));
        assert!(matches!(classify(&q[..5]), Ask::Other(None)));
    }

    #[test]
    fn the_synthesised_answer_answers_the_query_with_the_identifier_address() {
        let q = Message::from_vec(&aaaa_query(0xbeef, "mn.lab.example.", Some(1232))).unwrap();
        let a = Message::from_vec(&synthesise(&q, &found("mn.lab.example."), None, Locator(0xfd00_0000_0000_0000)))
            .unwrap();
        assert_eq!(
            (a.id(), a.message_type(), a.response_code()),
            (0xbeef, MessageType::Response, ResponseCode::NoError)
        );
        assert_eq!(a.queries(), q.queries());
        let RData::AAAA(AAAA(addr)) = a.answers()[0].data() else { panic!("{a:?}") };
        assert_eq!((addr.to_string().as_str(), a.answers()[0].ttl()), ("fd00::1234", 7));
        assert_eq!(a.extensions().as_ref().map(|e| e.max_payload()), Some(1232));
    }

    #[test]
    fn an_answer_over_the_clients_udp_size_is_header_and_question_with_tc() {
        let q = aaaa_query(5, "mn.lab.example.", None);
        let m = Message::from_vec(&q).unwrap();
        let mut big = found("mn.lab.example.");
        // names that do not compress: 10 CNAMEs of ~130 bytes each
        let long = |i: usize, c: &str| Name::from_ascii(format!("{}.n{i}.", c.repeat(60))).unwrap();
        for i in 0..10 {
            let target = hickory_proto::rr::rdata::CNAME(long(i, "t"));
            big.cnames.push(Record::from_rdata(long(i, "o"), 5, RData::CNAME(target)));
        }
        let ans = synthesise(&m, &big, None, Locator(0xfd00_0000_0000_0000));
        assert!(ans.len() > 512);
        let t = Message::from_vec(&truncate_for_udp(&q, ans.clone())).unwrap();
        assert!(t.truncated() && t.answers().is_empty());
        assert_eq!((t.id(), t.queries()), (5, m.queries()));
        // with EDNS 4096 it fits
        assert_eq!(truncate_for_udp(&aaaa_query(5, "mn.lab.example.", Some(4096)), ans.clone()), ans);
        // one hickory cannot read (an RDATA length past the end): its header and the query's question
        let mut bad = ans.clone();
        let n = bad.len();
        bad[n - 18..n - 16].copy_from_slice(&[0xff, 0xff]);
        assert!(Message::from_vec(&bad).is_err());
        let t = truncate_for_udp(&q, bad);
        assert_eq!(&t[..HEADER_LEN], &[0, 5, 0x83, 0x80, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Message::from_vec(&t).unwrap().queries(), m.queries());
        let sf = Message::from_vec(&servfail(&m).unwrap()).unwrap();
        assert_eq!((sf.id(), sf.response_code(), sf.queries()), (5, ResponseCode::ServFail, m.queries()));
    }
}
