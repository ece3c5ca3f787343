//! One exchange with the upstream DNS server: a fresh random ID and a fresh
//! connected UDP socket (random source port; the kernel drops datagrams from any
//! other address or port), answers with another ID or question ignored and logged,
//! a truncated answer retried over TCP, the whole exchange bounded by a timeout.

use hickory_proto::op::{Message, MessageType, Query};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// Why the upstream gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    Timeout,
    Io(String),
    /// the answer did not parse
    Malformed(String),
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Timeout => f.write_str("no answer from the upstream server (timeout)"),
            UpstreamError::Io(e) => write!(f, "upstream I/O: {e}"),
            UpstreamError::Malformed(e) => write!(f, "malformed answer: {e}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Upstream {
    pub server: SocketAddr,
    pub timeout: Duration,
}

const HEADER_LEN: usize = 12;

/// The question section of a message (bytes after the header up to the end of the
/// first question), for matching an answer to its query; None if it does not parse.
fn question_bytes(msg: &[u8]) -> Option<&[u8]> {
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
fn answers(query: &[u8], ans: &[u8]) -> Result<(), String> {
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

impl Upstream {
    /// Sends `query` (its ID is replaced by a random one) and returns the answer
    /// with the ID the caller's query had.
    pub async fn exchange_raw(&self, query: &[u8]) -> Result<Vec<u8>, UpstreamError> {
        if query.len() < HEADER_LEN {
            return Err(UpstreamError::Malformed("query shorter than a DNS header".into()));
        }
        let orig_id = [query[0], query[1]];
        let mut q = query.to_vec();
        q[0..2].copy_from_slice(&rand::random::<u16>().to_be_bytes());
        let mut ans = match tokio::time::timeout(self.timeout, self.udp(&q)).await {
            Ok(r) => r?,
            Err(_) => return Err(UpstreamError::Timeout),
        };
        if ans[2] & 0x02 != 0 {
            // TC: the whole answer is only over TCP (RFC 7766)
            ans = match tokio::time::timeout(self.timeout, self.tcp(&q)).await {
                Ok(r) => r?,
                Err(_) => return Err(UpstreamError::Timeout),
            };
        }
        ans[0..2].copy_from_slice(&orig_id);
        Ok(ans)
    }

    async fn udp(&self, q: &[u8]) -> Result<Vec<u8>, UpstreamError> {
        let any: SocketAddr = if self.server.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        let io = |e: std::io::Error| UpstreamError::Io(format!("{}: {e}", self.server));
        let s = UdpSocket::bind(any).await.map_err(io)?;
        s.connect(self.server).await.map_err(io)?;
        s.send(q).await.map_err(io)?;
        let mut buf = vec![0u8; 65535];
        loop {
            let n = s.recv(&mut buf).await.map_err(io)?;
            match answers(q, &buf[..n]) {
                Ok(()) => return Ok(buf[..n].to_vec()),
                Err(why) => tracing::warn!(
                    "dns: answer from {} for {} ignored: {why} (spoofed or stray)",
                    self.server,
                    describe(q)
                ),
            }
        }
    }

    async fn tcp(&self, q: &[u8]) -> Result<Vec<u8>, UpstreamError> {
        let io = |e: std::io::Error| UpstreamError::Io(format!("{} (TCP): {e}", self.server));
        let mut s = TcpStream::connect(self.server).await.map_err(io)?;
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(q);
        s.write_all(&framed).await.map_err(io)?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await.map_err(io)?;
        let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut buf).await.map_err(io)?;
        answers(q, &buf).map_err(UpstreamError::Malformed)?;
        Ok(buf)
    }

    /// Asks `name` `rtype` (recursion desired) and parses the answer.
    pub async fn query(&self, name: &Name, rtype: RecordType) -> Result<Message, UpstreamError> {
        let mut m = Message::new();
        m.set_id(0).set_message_type(MessageType::Query).set_recursion_desired(true);
        let mut q = Query::query(name.clone(), rtype);
        q.set_query_class(DNSClass::IN);
        m.add_query(q);
        let bytes = m.to_vec().map_err(|e| UpstreamError::Malformed(e.to_string()))?;
        let ans = self.exchange_raw(&bytes).await?;
        Message::from_vec(&ans).map_err(|e| UpstreamError::Malformed(e.to_string()))
    }
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
    match u16::from(t) {
        104 => "NID".into(),
        105 => "L32".into(),
        106 => "L64".into(),
        107 => "LP".into(),
        _ => t.to_string(),
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

    #[tokio::test(flavor = "current_thread")]
    async fn a_spoofed_answer_is_ignored_and_the_real_one_taken() {
        let srv = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let up = Upstream { server: srv.local_addr().unwrap(), timeout: Duration::from_secs(2) };
        let server = tokio::spawn(async move {
            let mut b = [0u8; 512];
            let (n, from) = srv.recv_from(&mut b).await.unwrap();
            let mut wrong = response_of(&b[..n]);
            wrong[0] ^= 0xff;
            srv.send_to(&wrong, from).await.unwrap();
            srv.send_to(&response_of(&b[..n]), from).await.unwrap();
        });
        let q = query(0x4242, "mn.lab.example.");
        let a = up.exchange_raw(&q).await.unwrap();
        assert_eq!(&a[0..2], &[0x42, 0x42], "the caller's ID is restored");
        server.await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_silent_server_times_out() {
        let srv = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let up = Upstream { server: srv.local_addr().unwrap(), timeout: Duration::from_millis(100) };
        let t = std::time::Instant::now();
        assert_eq!(up.exchange_raw(&query(1, "x.")).await, Err(UpstreamError::Timeout));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
