//! Mobile server: when our locator set changes, a TSIG-signed dynamic update
//! (RFC 2136, RFC 8945) replaces this host's L64 records in its zone, so a
//! correspondent that starts a session after the move finds the new locators.
//! Retried with back-off (0.5 s doubling to 30 s) until it succeeds or a newer
//! set replaces it; every outcome logged; the state is shown by `ilnpctl dns status`.

use super::upstream::type_name;
use anyhow::{anyhow, bail, Context, Result};
use hickory_proto::dnssec::rdata::tsig::TsigAlgorithm;
use hickory_proto::dnssec::tsig::TSigner;
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::NULL;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use ilnp_control::DnsUpdateState;
use ilnp_core::PeerLocator;
use ilnp_wire::rdata::{Rdata, TYPE_L64};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateConfig {
    pub zone: String,
    /// our name in the zone (absolute, no trailing dot)
    pub name: String,
    pub server: SocketAddr,
    pub key_file: PathBuf,
    pub ttl_s: u32,
}

/// A BIND key file (`tsig-keygen` output): `key "NAME" { algorithm A; secret "B64"; };`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsigKey {
    pub name: String,
    pub algorithm: String,
    pub secret: Vec<u8>,
}

pub fn parse_key_file(text: &str, origin: &Path) -> Result<TsigKey> {
    let field = |kw: &str| -> Option<String> {
        let i = text.find(kw)? + kw.len();
        let rest = text[i..].trim_start();
        let end = rest.find(';')?;
        Some(rest[..end].trim().trim_matches('"').to_string())
    };
    let name = field("key").ok_or_else(|| anyhow!("{}: no `key \"NAME\"`", origin.display()))?;
    let name = name.split_whitespace().next().unwrap_or("").trim_matches('"').to_string();
    let algorithm = field("algorithm").ok_or_else(|| anyhow!("{}: no `algorithm`", origin.display()))?;
    let secret = field("secret").ok_or_else(|| anyhow!("{}: no `secret`", origin.display()))?;
    let secret = data_encoding::BASE64
        .decode(secret.as_bytes())
        .map_err(|e| anyhow!("{}: secret is not base64: {e}", origin.display()))?;
    if name.is_empty() || secret.is_empty() {
        bail!("{}: empty key name or secret", origin.display());
    }
    Ok(TsigKey { name, algorithm, secret })
}

fn algorithm(a: &str) -> Result<TsigAlgorithm> {
    Ok(match a.to_ascii_lowercase().as_str() {
        "hmac-sha256" => TsigAlgorithm::HmacSha256,
        "hmac-sha384" => TsigAlgorithm::HmacSha384,
        "hmac-sha512" => TsigAlgorithm::HmacSha512,
        o => bail!("TSIG algorithm {o:?} not supported (hmac-sha256, hmac-sha384, hmac-sha512)"),
    })
}

/// The update message: zone section = the zone's SOA; prerequisites none; update
/// section = delete our L64 RRset, then add one L64 per locator (RFC 2136 §2.5).
pub fn update_message(zone: &Name, name: &Name, locs: &[PeerLocator], ttl: u32) -> Result<Message> {
    let mut m = Message::new();
    m.set_id(rand::random()).set_message_type(MessageType::Query).set_op_code(OpCode::Update);
    let mut z = Query::query(zone.clone(), RecordType::SOA);
    z.set_query_class(DNSClass::IN);
    m.add_query(z);
    let l64 = RecordType::Unknown(TYPE_L64);
    let mut del = Record::update0(name.clone(), 0, l64);
    del.set_dns_class(DNSClass::ANY);
    m.add_name_server(del);
    for l in locs {
        let mut rd = Vec::new();
        Rdata::L64 { preference: l.pref, locator: l.loc }.emit(&mut rd)?;
        let data = RData::Unknown { code: l64, rdata: NULL::with(rd) };
        m.add_name_server(Record::from_rdata(name.clone(), ttl, data));
    }
    Ok(m)
}

/// What `ilnpctl dns status` shows.
#[derive(Debug, Default, Clone)]
pub struct UpdateState {
    pub state: DnsUpdateState,
    pub locators: Vec<PeerLocator>,
    pub updates_ok: u64,
    pub updates_failed: u64,
    pub last_error: Option<String>,
    pub last_ok: Option<Instant>,
    pub last_latency: Option<Duration>,
}

pub struct Updater {
    pub cfg: UpdateConfig,
    pub state: Mutex<UpdateState>,
    signer: TSigner,
    zone: Name,
    name: Name,
}

/// The locator set and when it changed.
pub type Wanted = Option<(Vec<PeerLocator>, Instant)>;

/// Reads the key (errors name the file) and starts the update task; send locator
/// sets on the returned channel.
pub fn start(cfg: UpdateConfig) -> Result<(Arc<Updater>, watch::Sender<Wanted>)> {
    let text = std::fs::read_to_string(&cfg.key_file)
        .with_context(|| format!("key_file: reading {}", cfg.key_file.display()))?;
    let key = parse_key_file(&text, &cfg.key_file)?;
    let signer = TSigner::new(key.secret, algorithm(&key.algorithm)?, Name::from_ascii(&key.name)?, 300)
        .map_err(|e| anyhow!("key_file: {e}"))?;
    let zone = Name::from_ascii(format!("{}.", cfg.zone)).map_err(|e| anyhow!("zone: {e}"))?;
    let name = Name::from_ascii(format!("{}.", cfg.name)).map_err(|e| anyhow!("name: {e}"))?;
    if !zone.zone_of(&name) {
        bail!("name: {} is not in zone {}", cfg.name, cfg.zone);
    }
    let up = Arc::new(Updater {
        cfg,
        state: Mutex::new(UpdateState { state: DnsUpdateState::Idle, ..Default::default() }),
        signer,
        zone,
        name,
    });
    let (tx, rx) = watch::channel(None);
    tokio::spawn(run(up.clone(), rx));
    Ok((up, tx))
}

const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

async fn run(up: Arc<Updater>, mut rx: watch::Receiver<Wanted>) {
    loop {
        if rx.changed().await.is_err() {
            return;
        }
        let mut delay = BACKOFF_FIRST;
        let mut attempt = 1u32;
        loop {
            let Some((locs, changed_at)) = rx.borrow_and_update().clone() else { break };
            up.set(|s| {
                s.state = DnsUpdateState::Pending;
                s.locators = locs.clone();
            });
            let list: Vec<String> = locs.iter().map(|l| format!("{}|{}", l.loc, l.pref)).collect();
            match up.send(&locs).await {
                Ok(()) => {
                    let lat = changed_at.elapsed();
                    tracing::info!(
                        "dns update: {} L64 [{}] TTL {} s accepted by {} (attempt {attempt}, {:.1} ms after the change)",
                        up.cfg.name,
                        list.join(", "),
                        up.cfg.ttl_s,
                        up.cfg.server,
                        lat.as_secs_f64() * 1e3
                    );
                    up.set(|s| {
                        s.state = DnsUpdateState::Ok;
                        s.updates_ok += 1;
                        s.last_ok = Some(Instant::now());
                        s.last_latency = Some(lat);
                        s.last_error = None;
                    });
                    break;
                }
                Err(e) => {
                    tracing::warn!(
                        "dns update: {} L64 [{}] to {} failed (attempt {attempt}): {e:#}; retrying in {:.1} s",
                        up.cfg.name,
                        list.join(", "),
                        up.cfg.server,
                        delay.as_secs_f64()
                    );
                    up.set(|s| {
                        s.state = DnsUpdateState::Failed;
                        s.updates_failed += 1;
                        s.last_error = Some(format!("{e:#}"));
                    });
                }
            }
            // a newer set ends the wait at once (it replaces this one)
            if tokio::time::timeout(delay, rx.changed()).await.is_ok_and(|r| r.is_err()) {
                return;
            }
            delay = (delay * 2).min(BACKOFF_MAX);
            attempt += 1;
        }
    }
}

impl Updater {
    fn set(&self, f: impl FnOnce(&mut UpdateState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }

    /// One signed update over TCP; Ok when the server answered NOERROR.
    async fn send(&self, locs: &[PeerLocator]) -> Result<()> {
        let mut m = update_message(&self.zone, &self.name, locs, self.cfg.ttl_s)?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as u32).unwrap_or(0);
        m.finalize(&self.signer, now).map_err(|e| anyhow!("signing: {e}"))?;
        let bytes = m.to_vec()?;
        let exchange = async {
            let mut s = TcpStream::connect(self.cfg.server).await?;
            let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(&bytes);
            s.write_all(&framed).await?;
            let mut len = [0u8; 2];
            s.read_exact(&mut len).await?;
            let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
            s.read_exact(&mut buf).await?;
            Ok::<_, std::io::Error>(buf)
        };
        let buf = tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .map_err(|_| anyhow!("no answer within 5 s"))??;
        let ans = Message::from_vec(&buf).map_err(|e| anyhow!("unparsable answer: {e}"))?;
        if ans.id() != m.id() {
            bail!("answer with the wrong ID");
        }
        match ans.response_code() {
            ResponseCode::NoError => Ok(()),
            ResponseCode::NotAuth => {
                bail!("NOTAUTH: the server did not accept the TSIG key/signature (BADKEY, BADSIG or BADTIME)")
            }
            rc => bail!(
                "the server answered {rc} for the {} update of {}",
                type_name(RecordType::Unknown(TYPE_L64)),
                self.cfg.name
            ),
        }
    }

    pub fn status(&self) -> UpdateState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_wire::Locator;

    #[test]
    fn bind_key_files_parse() {
        let text = "key \"ilnp-update\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0LWtleS1ieXRlcw==\";\n};\n";
        let k = parse_key_file(text, Path::new("k")).unwrap();
        assert_eq!((k.name.as_str(), k.algorithm.as_str()), ("ilnp-update", "hmac-sha256"));
        assert_eq!(k.secret, b"secret-key-bytes");
        let e = parse_key_file("key \"x\" { algorithm hmac-sha256; secret \"!!\"; };", Path::new("k.key")).unwrap_err();
        assert!(e.to_string().contains("k.key") && e.to_string().contains("base64"), "{e}");
        assert!(algorithm("hmac-md5").is_err());
    }

    #[test]
    fn the_update_replaces_the_l64_rrset() {
        let zone = Name::from_ascii("lab.example.").unwrap();
        let name = Name::from_ascii("mn.lab.example.").unwrap();
        let locs = [PeerLocator { loc: Locator(0x2001_0db8_0003_0000), pref: 10 }];
        let m = update_message(&zone, &name, &locs, 5).unwrap();
        let m = Message::from_vec(&m.to_vec().unwrap()).unwrap();
        assert_eq!(m.op_code(), OpCode::Update);
        assert_eq!(m.queries()[0].query_type(), RecordType::SOA);
        let up = m.name_servers();
        assert_eq!(up.len(), 2);
        assert_eq!((up[0].dns_class(), up[0].ttl(), u16::from(up[0].record_type())), (DNSClass::ANY, 0, TYPE_L64));
        assert_eq!((up[1].dns_class(), up[1].ttl()), (DNSClass::IN, 5));
        let RData::Unknown { rdata, .. } = up[1].data() else { panic!("{:?}", up[1]) };
        assert_eq!(rdata.anything(), &[0, 10, 0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, 0]);
    }
}
