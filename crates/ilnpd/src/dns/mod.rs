//! The resolver proxy (RFC 6742 names for unmodified applications).
//!
//! The host's resolver (`/etc/resolv.conf`, per namespace in the lab) points at
//! this proxy. Every query is passed to the upstream server unchanged (new ID,
//! the answer returned with the client's ID), except AAAA: for those the NID and
//! L64 records of the name are asked at the same time; when the name has them, the
//! core learns the peer (`Core::peer_from_dns`, through the daemon's loop) and only
//! then the client gets the identifier address. A name without ILNP records, or
//! with bad ones (logged, naming the name and the record), gets the upstream's
//! own AAAA answer. Why a proxy and not an NSS module: docs/architecture.md.
//! The messages themselves (what a query asks, the answers built, the lookup's
//! decisions) are `ilnp_dns`'s, without I/O; here are the sockets and the waits.

pub mod lookup;
pub mod update;
pub mod upstream;

use anyhow::{Context, Result};
use hickory_proto::op::Message;
use ilnp_core::{DnsPeer, DnsPeerResult};
use ilnp_dns::reply::{self, truncate_for_udp, Ask};
use ilnp_wire::Locator;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot, Semaphore};
use upstream::Upstream;

/// Queries answered at once at most; more are dropped (the client retries).
const MAX_IN_FLIGHT: usize = 256;

/// A TCP client's time for one message: from the end of the previous answer (or
/// the accept) until the length prefix and the whole body are in, and again for
/// taking our answer. One deadline per message, as BIND's tcp-idle-timeout: a
/// client that sends two bytes and stalls holds a connection this long at most.
pub const TCP_MESSAGE_DEADLINE: Duration = Duration::from_secs(10);

/// TCP clients served at once; a connection beyond it is closed at once
/// (`tcp_refused_full`). Each holds a descriptor (the unit's `LimitNOFILE` is far
/// above it) and at most one 64 KiB message.
pub const MAX_TCP_CLIENTS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsConfig {
    /// where the proxy answers (UDP and TCP)
    pub listen: Vec<SocketAddr>,
    /// the recursive or authoritative server asked
    pub upstream: SocketAddr,
    pub timeout: Duration,
}

/// A peer for the core, and where to say it is known.
pub struct Learn {
    pub peer: DnsPeer,
    pub done: Done,
}

/// Who waits for the core, and for what.
pub enum Done {
    /// an application's query (`Core::peer_from_dns`)
    Answer(oneshot::Sender<DnsPeerResult>),
    /// a re-resolution after a failed Locator Update (`Core::recover_from_dns`)
    Recover(oneshot::Sender<Option<bool>>),
}

/// What the proxy did, for `ilnpctl dns status`.
#[derive(Default, Debug)]
pub struct DnsCounters {
    pub queries: AtomicU64,
    pub ilnp_answers: AtomicU64,
    pub passed_through: AtomicU64,
    pub bad_ilnp_records: AtomicU64,
    pub upstream_failures: AtomicU64,
    pub dropped_overload: AtomicU64,
    /// TCP connections closed at accept: `MAX_TCP_CLIENTS` were being served
    pub tcp_refused_full: AtomicU64,
    /// TCP connections closed because a message had begun but was not complete
    /// within `TCP_MESSAGE_DEADLINE`, or the client did not take our answer within it
    pub tcp_slow_closed: AtomicU64,
    /// TCP connections closed because nothing of a next message came within the deadline
    pub tcp_idle_closed: AtomicU64,
}

impl DnsCounters {
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        // one line per counter: the order is the status table's
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        vec![
            ("queries", g(&self.queries)),
            ("ilnp_answers", g(&self.ilnp_answers)),
            ("passed_through", g(&self.passed_through)),
            ("bad_ilnp_records", g(&self.bad_ilnp_records)),
            ("upstream_failures", g(&self.upstream_failures)),
            ("dropped_overload", g(&self.dropped_overload)),
            ("tcp_refused_full", g(&self.tcp_refused_full)),
            ("tcp_slow_closed", g(&self.tcp_slow_closed)),
            ("tcp_idle_closed", g(&self.tcp_idle_closed)),
        ]
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

pub struct Proxy {
    pub up: Upstream,
    id_prefix: Locator,
    learn: mpsc::Sender<Learn>,
    pub listen: Vec<SocketAddr>,
    pub counters: DnsCounters,
    slots: Semaphore,
    /// one permit per TCP client served (`MAX_TCP_CLIENTS`)
    tcp_slots: Arc<Semaphore>,
    /// `TCP_MESSAGE_DEADLINE` (shorter in tests)
    tcp_deadline: Duration,
}

/// Binds every listen address (errors name the address) and serves in spawned
/// tasks. Learned peers arrive on the returned receiver; the proxy answers a
/// client only after the `done` of its `Learn` was sent.
pub fn start(cfg: &DnsConfig, id_prefix: Locator) -> Result<(Arc<Proxy>, mpsc::Receiver<Learn>)> {
    let (tx, rx) = mpsc::channel(64);
    let proxy = Arc::new(Proxy {
        up: Upstream { server: cfg.upstream, timeout: cfg.timeout },
        id_prefix,
        learn: tx,
        listen: cfg.listen.clone(),
        counters: DnsCounters::default(),
        slots: Semaphore::new(MAX_IN_FLIGHT),
        tcp_slots: Arc::new(Semaphore::new(MAX_TCP_CLIENTS)),
        tcp_deadline: TCP_MESSAGE_DEADLINE,
    });
    for a in &cfg.listen {
        let std_udp = std::net::UdpSocket::bind(a).with_context(|| format!("dns listen: UDP {a}"))?;
        std_udp.set_nonblocking(true)?;
        let udp = UdpSocket::from_std(std_udp)?;
        let std_tcp = std::net::TcpListener::bind(a).with_context(|| format!("dns listen: TCP {a}"))?;
        std_tcp.set_nonblocking(true)?;
        let tcp = TcpListener::from_std(std_tcp)?;
        tokio::spawn(serve_udp(proxy.clone(), Arc::new(udp)));
        tokio::spawn(serve_tcp(proxy.clone(), tcp));
    }
    tracing::info!("dns: resolver proxy on {:?}, upstream {}", cfg.listen, cfg.upstream);
    Ok((proxy, rx))
}

async fn serve_udp(p: Arc<Proxy>, sock: Arc<UdpSocket>) {
    let mut buf = vec![0u8; 65535];
    loop {
        let (n, from) = match sock.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("dns: receiving a query: {e}");
                continue;
            }
        };
        let q = buf[..n].to_vec();
        let (p, sock) = (p.clone(), sock.clone());
        tokio::spawn(async move {
            if let Some(ans) = p.answer(&q).await {
                let ans = truncate_for_udp(&q, ans);
                if let Err(e) = sock.send_to(&ans, from).await {
                    tracing::debug!("dns: answering {from}: {e}");
                }
            }
        });
    }
}

async fn serve_tcp(p: Arc<Proxy>, l: TcpListener) {
    loop {
        match l.accept().await {
            Ok((s, from)) => match p.tcp_slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    let p = p.clone();
                    tokio::spawn(async move {
                        serve_tcp_conn(&p, s).await;
                        drop(slot);
                    });
                }
                Err(_) => {
                    // closed at once: a flood of connections costs a descriptor for no time
                    bump(&p.counters.tcp_refused_full);
                    tracing::debug!("dns: TCP client {from} refused: {MAX_TCP_CLIENTS} are being served");
                    drop(s);
                }
            },
            Err(e) => {
                // e.g. out of descriptors: do not spin on it
                tracing::warn!("dns: accepting a TCP client: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves one TCP client: each message (RFC 1035 §4.2.2: 2-byte length, body) and
/// each answer under `tcp_deadline`.
async fn serve_tcp_conn(p: &Proxy, mut s: TcpStream) {
    loop {
        let mut started = false;
        let q = match tokio::time::timeout(p.tcp_deadline, read_message(&mut s, &mut started)).await {
            Ok(Ok(Some(q))) => q,
            // closed between messages, or mid-message: nothing to answer
            Ok(Ok(None)) | Ok(Err(_)) => return,
            Err(_) => {
                bump(if started { &p.counters.tcp_slow_closed } else { &p.counters.tcp_idle_closed });
                return;
            }
        };
        let Some(ans) = p.answer(&q).await else { return };
        let mut framed = (ans.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&ans);
        match tokio::time::timeout(p.tcp_deadline, s.write_all(&framed)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                bump(&p.counters.tcp_slow_closed);
                return;
            }
        }
    }
}

/// One length-prefixed message; `None`: the client closed before sending any of
/// it. `started` is set once its first byte came.
async fn read_message(s: &mut TcpStream, started: &mut bool) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 2];
    let mut got = 0;
    while got < len.len() {
        let n = s.read(&mut len[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got += n;
        *started = true;
    }
    let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut q).await?;
    Ok(Some(q))
}

impl Proxy {
    /// The answer to one client query (None: dropped, the client retries).
    pub async fn answer(&self, q: &[u8]) -> Option<Vec<u8>> {
        bump(&self.counters.queries);
        let Ok(_slot) = self.slots.try_acquire() else {
            bump(&self.counters.dropped_overload);
            return None;
        };
        let (msg, name) = match reply::classify(q) {
            Ask::Aaaa { msg, name } => (msg, name),
            Ask::Other(msg) => return self.pass_through(q, msg.as_ref()).await,
        };
        let (plain, ilnp) = tokio::join!(self.up.exchange_raw(q), lookup::lookup(&self.up, &name));
        match ilnp {
            Ok(Some(found)) => {
                let peer = DnsPeer {
                    name: found.owner.to_string().trim_end_matches('.').to_string(),
                    nid: found.nid,
                    locators: found.locators.clone(),
                    ttl_s: found.ttl,
                };
                if self.teach_core(peer).await {
                    bump(&self.counters.ilnp_answers);
                    return Some(reply::synthesise(&msg, &found, plain.as_deref().ok(), self.id_prefix));
                }
            }
            Ok(None) => {}
            Err(bad) => {
                bump(&self.counters.bad_ilnp_records);
                tracing::warn!("dns: {bad}; nothing learned, the client gets the plain AAAA answer");
            }
        }
        self.relay(q, Some(&msg), plain)
    }

    async fn pass_through(&self, q: &[u8], msg: Option<&Message>) -> Option<Vec<u8>> {
        let r = self.up.exchange_raw(q).await;
        self.relay(q, msg, r)
    }

    fn relay(&self, q: &[u8], msg: Option<&Message>, r: Result<Vec<u8>, upstream::UpstreamError>) -> Option<Vec<u8>> {
        match r {
            Ok(a) => {
                bump(&self.counters.passed_through);
                Some(a)
            }
            Err(e) => {
                bump(&self.counters.upstream_failures);
                tracing::warn!("dns: {}: {e}; answering SERVFAIL", upstream::describe(q));
                // never a hang: the client hears at once
                msg.and_then(|m| reply::servfail(m).ok())
            }
        }
    }

    /// Hands the peer to the core; true once it is known there.
    async fn teach_core(&self, peer: DnsPeer) -> bool {
        let name = peer.name.clone();
        let (done, wait) = oneshot::channel();
        if self.learn.send(Learn { peer, done: Done::Answer(done) }).await.is_err() {
            return false;
        }
        match tokio::time::timeout(Duration::from_secs(1), wait).await {
            Ok(Ok(r)) => r.identifier_answer(),
            _ => {
                tracing::warn!("dns: {name}: the daemon did not take the peer; plain answer");
                false
            }
        }
    }

    /// Both ends moved: resolves `name` again (a peer whose LU went unanswered at
    /// every known locator) and hands the result to the core's recovery; while DNS
    /// still lists the locators the session already has (the peer's own update may
    /// not be in yet), asks again after 0.5, 1, 2, 4 s.
    pub fn re_resolve(self: &Arc<Self>, name: String) {
        let p = self.clone();
        tokio::spawn(async move {
            let Ok(n) = hickory_proto::rr::Name::from_ascii(format!("{name}.")) else { return };
            let mut delay = Duration::from_millis(500);
            for attempt in 1..=5 {
                match lookup::lookup(&p.up, &n).await {
                    Ok(Some(f)) => {
                        let peer = DnsPeer { name: name.clone(), nid: f.nid, locators: f.locators, ttl_s: f.ttl };
                        let (done, wait) = oneshot::channel();
                        if p.learn.send(Learn { peer, done: Done::Recover(done) }).await.is_err() {
                            return;
                        }
                        match wait.await {
                            Ok(Some(true)) => {
                                tracing::info!("dns: re-resolved {name} after a failed Locator Update (attempt {attempt}): new locators");
                                return;
                            }
                            Ok(Some(false)) => {
                                tracing::info!("dns: re-resolved {name} (attempt {attempt}): no new locator yet")
                            }
                            _ => return, // nothing to recover any more
                        }
                    }
                    Ok(None) => {
                        tracing::warn!("dns: re-resolving {name}: no NID any more");
                        return;
                    }
                    Err(bad) => tracing::warn!("dns: re-resolving {name} (attempt {attempt}): {bad}"),
                }
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            tracing::warn!("dns: re-resolving {name}: no new locator after 5 attempts; the session stays as it is");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RecordType};
    use std::time::Instant;

    fn a_query(id: u16) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(id).set_message_type(MessageType::Query).set_op_code(OpCode::Query).set_recursion_desired(true);
        m.add_query(Query::query(Name::from_ascii("cn.lab.example.").unwrap(), RecordType::A));
        m.to_vec().unwrap()
    }

    /// A proxy on 127.0.0.1 (TCP only) in front of an upstream that answers every
    /// query with its own question, QR set.
    async fn proxy(deadline: Duration, cap: usize) -> (Arc<Proxy>, SocketAddr, mpsc::Receiver<Learn>) {
        let srv = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let up = srv.local_addr().unwrap();
        tokio::spawn(async move {
            let mut b = [0u8; 512];
            while let Ok((n, from)) = srv.recv_from(&mut b).await {
                let mut r = b[..n].to_vec();
                r[2] |= 0x80;
                let _ = srv.send_to(&r, from).await;
            }
        });
        let (tx, rx) = mpsc::channel(4);
        let p = Arc::new(Proxy {
            up: Upstream { server: up, timeout: Duration::from_secs(2) },
            id_prefix: ilnp_wire::DEFAULT_IDENTIFIER_PREFIX,
            learn: tx,
            listen: vec![],
            counters: DnsCounters::default(),
            slots: Semaphore::new(MAX_IN_FLIGHT),
            tcp_slots: Arc::new(Semaphore::new(cap)),
            tcp_deadline: deadline,
        });
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = l.local_addr().unwrap();
        tokio::spawn(serve_tcp(p.clone(), l));
        (p, at, rx)
    }

    /// Reads until the proxy closes (EOF or reset); how long that took.
    async fn until_closed(s: &mut TcpStream, limit: Duration) -> Duration {
        let t = Instant::now();
        let mut b = [0u8; 64];
        loop {
            match tokio::time::timeout(limit, s.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return t.elapsed(),
                Ok(Ok(_)) => {}
                Err(_) => panic!("still open after {limit:?}"),
            }
        }
    }

    async fn ask(at: SocketAddr, id: u16) -> Vec<u8> {
        let mut s = TcpStream::connect(at).await.unwrap();
        let q = a_query(id);
        let mut framed = (q.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        s.write_all(&framed).await.unwrap();
        let mut len = [0u8; 2];
        tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut len)).await.expect("no answer").unwrap();
        let mut a = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut a).await.unwrap();
        a
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_tcp_client_that_stalls_mid_message_is_closed_at_the_deadline() {
        let deadline = Duration::from_millis(300);
        let (p, at, _rx) = proxy(deadline, 8).await;
        // the length prefix of a 40-byte query, then nothing
        let mut slow = TcpStream::connect(at).await.unwrap();
        slow.write_all(&[0, 40]).await.unwrap();
        let took = until_closed(&mut slow, Duration::from_secs(3)).await;
        assert!(took >= deadline - Duration::from_millis(50) && took < deadline * 3, "closed after {took:?}");
        assert_eq!(p.counters.tcp_slow_closed.load(Ordering::Relaxed), 1);
        // half the body, the rest never: the deadline is the message's, not per read
        let mut dribble = TcpStream::connect(at).await.unwrap();
        let t = Instant::now();
        dribble.write_all(&[0, 40, 1, 2, 3]).await.unwrap();
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = dribble.write_all(&[4]).await;
        }
        until_closed(&mut dribble, Duration::from_secs(3)).await;
        assert!(t.elapsed() < deadline * 3, "a dribbling client kept it open {:?}", t.elapsed());
        assert_eq!(p.counters.tcp_slow_closed.load(Ordering::Relaxed), 2);
        // one that says nothing at all: idle
        let mut idle = TcpStream::connect(at).await.unwrap();
        until_closed(&mut idle, Duration::from_secs(3)).await;
        assert_eq!(p.counters.tcp_idle_closed.load(Ordering::Relaxed), 1);
        // and a normal query is answered, with its ID
        assert_eq!(&ask(at, 0x5151).await[0..2], &[0x51, 0x51]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn tcp_clients_beyond_the_cap_are_closed_at_once_and_a_query_is_answered_after() {
        let cap = 4;
        let (p, at, _rx) = proxy(Duration::from_secs(30), cap).await;
        let mut held = vec![];
        for _ in 0..cap {
            held.push(TcpStream::connect(at).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        for _ in 0..3 {
            let mut over = TcpStream::connect(at).await.unwrap();
            let took = until_closed(&mut over, Duration::from_secs(2)).await;
            assert!(took < Duration::from_millis(500), "refused after {took:?}");
        }
        assert_eq!(p.counters.tcp_refused_full.load(Ordering::Relaxed), 3);
        // one client leaves: its slot is free again
        drop(held.pop());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(&ask(at, 0x7777).await[0..2], &[0x77, 0x77]);
        assert_eq!(p.counters.tcp_refused_full.load(Ordering::Relaxed), 3);
    }
}
