//! One exchange with the upstream server, as bytes: the query we send for a name's
//! records, and whether an answer answers our query (same ID, QR set, same
//! question). ilnpd's `dns/upstream.rs` sends and waits; an answer that fails
//! `answers` is ignored there (spoofed or stray) and the wait goes on.

use hickory_proto::op::{Message, MessageType, Query};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use hickory_proto::ProtoError;

pub const HEADER_LEN: usize = 12;

/// The question section of a message (bytes after the header up to the end of the
/// first question), for matching an answer to its query; None if it does not parse.
pub fn question_bytes(msg: &[u8]) -> Option<&[u8]> {
    if msg.len() < HEADER_LEN || u16::from_be_bytes([msg[4], msg[5]]) != 1 {
        return None;
    }
    let mut i = HEADER_LEN;
    loop {
        let l = *msg.get(i)? as usize;
        if l == 0 {
            i += 1;
            break;
        }
        if l & 0xc0 != 0 {
            return None; // a query's question is never compressed
        }
        i += 1 + l;
    }
    msg.get(HEADER_LEN..i + 4)
}

/// Whether `ans` answers `query`: same ID, QR set, same question (names compared
/// case-insensitively, RFC 4343; a 0x20-randomising server echoes the case anyway).
/// `query` is ours: at least a header long.
pub fn answers(query: &[u8], ans: &[u8]) -> Result<(), String> {
    if ans.len() < HEADER_LEN {
        return Err(format!("{} bytes, shorter than a DNS header", ans.len()));
    }
    if ans[0..2] != query[0..2] {
        return Err(format!(
            "wrong ID 0x{:04x} (expected 0x{:04x})",
            u16::from_be_bytes([ans[0], ans[1]]),
            u16::from_be_bytes([query[0], query[1]])
        ));
    }
    if ans[2] & 0x80 == 0 {
        return Err("not a response (QR clear)".into());
    }
    // an answer may omit the question only with an error rcode (e.g. FORMERR)
    if u16::from_be_bytes([ans[4], ans[5]]) == 0 && ans[3] & 0x0f != 0 {
        return Ok(());
    }
    match (question_bytes(query), question_bytes(ans)) {
        (Some(q), Some(a)) if q.eq_ignore_ascii_case(a) => Ok(()),
        (None, _) => Ok(()), // a query we cannot read ourselves: ID and QR decide
        _ => Err("question differs from the query's".into()),
    }
}

/// Our query for `name` `rtype` (class IN, recursion desired, ID 0: the exchange
/// gives it a random one).
pub fn question(name: &Name, rtype: RecordType) -> Result<Vec<u8>, ProtoError> {
    let mut m = Message::new();
    m.set_id(0).set_message_type(MessageType::Query).set_recursion_desired(true);
    let mut q = Query::query(name.clone(), rtype);
    q.set_query_class(DNSClass::IN);
    m.add_query(q);
    m.to_vec()
}

/// `name TYPE` of a raw query, for logs.
pub fn describe(q: &[u8]) -> String {
    match Message::from_vec(q) {
        Ok(m) => match m.queries().first() {
            Some(q) => format!("{} {}", q.name(), type_name(q.query_type())),
            None => "a query without a question".into(),
        },
        Err(_) => format!("an unparsable {}-byte query", q.len()),
    }
}

/// A record type's mnemonic, the RFC 6742 ones included (hickory does not know them).
pub fn type_name(t: RecordType) -> String {
    match ilnp_wire::rdata::rr_type_name(u16::from(t)) {
        Some(n) => n.into(),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(id: u16, name: &str) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(id).set_message_type(MessageType::Query);
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::AAAA));
        m.to_vec().unwrap()
    }

    fn response_of(q: &[u8]) -> Vec<u8> {
        let mut a = q.to_vec();
        a[2] |= 0x80;
        a
    }

    #[test]
    fn an_answer_must_match_id_flag_and_question() {
        let q = query(0x1234, "mn.lab.example.");
        assert_eq!(answers(&q, &response_of(&q)), Ok(()));
        let e = answers(&q, &response_of(&query(0x1235, "mn.lab.example."))).unwrap_err();
        assert!(e.contains("wrong ID 0x1235 (expected 0x1234)"), "{e}");
        assert!(answers(&q, &q).unwrap_err().contains("QR"));
        let e = answers(&q, &response_of(&query(0x1234, "cn.lab.example."))).unwrap_err();
        assert!(e.contains("question"), "{e}");
        assert_eq!(answers(&q, &response_of(&query(0x1234, "MN.lab.EXAMPLE."))), Ok(()), "case-insensitive");
        assert!(answers(&q, &q[..5]).unwrap_err().contains("shorter"));
        assert_eq!(type_name(RecordType::Unknown(106)), "L64");
        assert_eq!(type_name(RecordType::AAAA), "AAAA");
    }

    #[test]
    fn our_question_is_one_in_question_with_recursion_desired() {
        let q = question(&Name::from_ascii("mn.lab.example.").unwrap(), RecordType::Unknown(104)).unwrap();
        let m = Message::from_vec(&q).unwrap();
        assert!(m.recursion_desired());
        assert_eq!(m.queries().len(), 1);
        assert_eq!((m.queries()[0].query_class(), u16::from(m.queries()[0].query_type())), (DNSClass::IN, 104));
        assert_eq!(describe(&q), "mn.lab.example. NID");
        assert_eq!(question_bytes(&q), Some(&q[HEADER_LEN..]));
    }
}
