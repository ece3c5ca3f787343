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

pub mod lookup;
pub mod update;
pub mod upstream;

use anyhow::{Context, Result};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::AAAA;
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use ilnp_core::{DnsPeer, DnsPeerResult};
use ilnp_wire::{ilnp_addr, Locator};
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
            Ok((s, _)) => {
                tokio::spawn(serve_tcp_conn(p.clone(), s));
            }
            Err(e) => tracing::warn!("dns: accepting a TCP client: {e}"),
        }
    }
}

async fn serve_tcp_conn(p: Arc<Proxy>, mut s: TcpStream) {
    loop {
        let mut len = [0u8; 2];
        let idle = Duration::from_secs(10);
        match tokio::time::timeout(idle, s.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
        if s.read_exact(&mut q).await.is_err() {
            return;
        }
        let Some(ans) = p.answer(&q).await else { return };
        let mut framed = (ans.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&ans);
        if s.write_all(&framed).await.is_err() {
            return;
        }
    }
}

/// An answer too long for the client's UDP size: header + question with TC set,
/// so the client asks again over TCP (RFC 1035 §4.2.1, RFC 6891 §6.2.5).
fn truncate_for_udp(q: &[u8], ans: Vec<u8>) -> Vec<u8> {
    let limit = Message::from_vec(q)
        .ok()
        .and_then(|m| m.extensions().as_ref().map(|e| e.max_payload().max(512) as usize))
        .unwrap_or(512);
    if ans.len() <= limit {
        return ans;
    }
    match Message::from_vec(&ans) {
        Ok(m) => {
            let mut t = Message::new();
            t.set_header(*m.header());
            t.add_queries(m.queries().to_vec());
            t.set_truncated(true);
            t.to_vec().unwrap_or(ans)
        }
        Err(_) => ans,
    }
}

impl Proxy {
    /// The answer to one client query (None: dropped, the client retries).
    pub async fn answer(&self, q: &[u8]) -> Option<Vec<u8>> {
        bump(&self.counters.queries);
        let Ok(_slot) = self.slots.try_acquire() else {
            bump(&self.counters.dropped_overload);
            return None;
        };
        let msg = Message::from_vec(q).ok();
        let aaaa = msg.as_ref().and_then(|m| {
            let ours = m.message_type() == MessageType::Query && m.op_code() == OpCode::Query && m.queries().len() == 1;
            let qq = m.queries().first()?;
            (ours && qq.query_type() == RecordType::AAAA && qq.query_class() == DNSClass::IN).then(|| qq.name().clone())
        });
        let Some(name) = aaaa else { return self.pass_through(q, msg.as_ref()).await };
        let (plain, ilnp) = tokio::join!(self.up.exchange_raw(q), lookup::lookup(&self.up, &name));
        match ilnp {
            Ok(Some(found)) => {
                let m = msg.as_ref().expect("parsed above");
                let peer = DnsPeer {
                    name: found.owner.to_string().trim_end_matches('.').to_string(),
                    nid: found.nid,
                    locators: found.locators.clone(),
                    ttl_s: found.ttl,
                };
                if self.teach_core(peer).await {
                    bump(&self.counters.ilnp_answers);
                    return Some(self.synthesise(m, &found, plain.as_deref().ok()));
                }
            }
            Ok(None) => {}
            Err(bad) => {
                bump(&self.counters.bad_ilnp_records);
                tracing::warn!("dns: {bad}; nothing learned, the client gets the plain AAAA answer");
            }
        }
        self.relay(q, msg.as_ref(), plain)
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
                msg.and_then(|m| servfail(m).ok())
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
            Ok(Ok(r)) => !matches!(r, DnsPeerResult::NoLocator),
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

    /// AAAA answer: the CNAME chain, then the identifier address of the NID.
    fn synthesise(&self, q: &Message, f: &lookup::Found, plain: Option<&[u8]>) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(q.id())
            .set_message_type(MessageType::Response)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(q.recursion_desired())
            .set_recursion_available(plain.map(|p| p.len() > 3 && p[3] & 0x80 != 0).unwrap_or(true))
            .set_response_code(ResponseCode::NoError);
        m.add_queries(q.queries().to_vec());
        m.add_answers(f.cnames.iter().cloned());
        let addr = ilnp_addr(self.id_prefix, f.nid);
        m.add_answer(Record::from_rdata(f.owner.clone(), f.ttl, RData::AAAA(AAAA(addr))));
        if let Some(e) = q.extensions() {
            let mut e = e.clone();
            e.set_max_payload(e.max_payload().max(512));
            m.set_edns(e);
        }
        m.to_vec().unwrap_or_else(|_| servfail(q).unwrap_or_default())
    }
}

fn servfail(q: &Message) -> Result<Vec<u8>, hickory_proto::ProtoError> {
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
