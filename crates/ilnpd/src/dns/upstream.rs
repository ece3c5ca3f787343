//! One exchange with the upstream DNS server: a fresh random ID and a fresh
//! connected UDP socket (random source port; the kernel drops datagrams from any
//! other address or port), answers with another ID or question ignored and logged,
//! a truncated answer retried over TCP, the whole exchange bounded by a timeout.
//! Which answer answers our query, and the query itself: `ilnp_dns::exchange`.

pub use ilnp_dns::exchange::{describe, type_name};

use hickory_proto::op::Message;
use hickory_proto::rr::{Name, RecordType};
use ilnp_dns::exchange::{answers, question, HEADER_LEN};
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
        let bytes = question(name, rtype).map_err(|e| UpstreamError::Malformed(e.to_string()))?;
        let ans = self.exchange_raw(&bytes).await?;
        Message::from_vec(&ans).map_err(|e| UpstreamError::Malformed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, Query};

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
