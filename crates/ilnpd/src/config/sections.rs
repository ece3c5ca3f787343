//! The configuration's sections as written (`[ipv4]`, `[metrics]`, `[dns]`,
//! `[dns.update]`) and their checks; `config.rs` holds the top level.

use anyhow::{anyhow, bail, Result};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// `[ipv4]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileIpv4 {
    /// the UDP port ILNPv6-in-UDP is received on and sent from (default 6740)
    pub port: Option<u16>,
    /// a session over a v4 path quiet this long sends a NAT keepalive (default 25; 0 = none)
    pub keepalive_s: Option<u64>,
}

/// The v4 path's settings (`[ipv4]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Config {
    pub port: u16,
    pub keepalive: Duration,
}

impl FileIpv4 {
    pub(super) fn validate(&self) -> Result<Ipv4Config> {
        let port = self.port.unwrap_or(ilnp_wire::v4path::DEFAULT_PORT);
        if port == 0 {
            bail!("[ipv4] port: 0 is not a port");
        }
        let keepalive_s = self.keepalive_s.unwrap_or(25);
        if keepalive_s > 3600 {
            bail!("[ipv4] keepalive_s: {keepalive_s} is more than 3600; NATs forget UDP mappings after 30 s to a few minutes");
        }
        Ok(Ipv4Config { port, keepalive: Duration::from_secs(keepalive_s) })
    }
}

/// `[metrics]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileMetrics {
    /// addresses of `GET /metrics` ("addr:port", "[v6]:port"), e.g. ["127.0.0.1:9469"]
    pub listen: Option<Vec<String>>,
    /// per-peer series for the busiest N peers (default 10; 0 = none)
    pub top_peers: Option<u32>,
}

impl FileMetrics {
    pub(super) fn validate(&self) -> Result<crate::metrics::MetricsConfig> {
        let listen: Vec<std::net::SocketAddr> = match &self.listen {
            None => bail!("listen: [metrics] needs `listen` (e.g. [\"127.0.0.1:9469\"])"),
            Some(l) if l.is_empty() => bail!("listen: [metrics] needs at least one address"),
            Some(l) => l
                .iter()
                .map(|a| a.parse().map_err(|_| anyhow!("listen: {a:?} is not addr:port or [v6]:port")))
                .collect::<Result<_>>()?,
        };
        let top_peers = self.top_peers.unwrap_or(10);
        if top_peers > 1000 {
            bail!("top_peers: {top_peers} is more than 1000 (one series per peer and counter)");
        }
        Ok(crate::metrics::MetricsConfig { listen, top_peers: top_peers as usize })
    }
}

/// `[dns]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileDns {
    /// addresses the proxy answers on (UDP + TCP), default ["127.0.0.1:53"]
    pub listen: Option<Vec<String>>,
    /// the DNS server the proxy asks ("addr" = port 53, "addr:port", "[v6]:port")
    pub upstream: Option<String>,
    pub timeout_ms: Option<u64>,
    /// `[dns.update]`: replace our L64 records when our locators change
    pub update: Option<FileDnsUpdate>,
}

/// `[dns.update]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileDnsUpdate {
    pub zone: Option<String>,
    /// our name (absolute), e.g. "mn.lab.example"
    pub name: Option<String>,
    /// the primary server ("addr", "addr:port", "[v6]:port")
    pub server: Option<String>,
    /// BIND key file (tsig-keygen output)
    pub key_file: Option<PathBuf>,
    /// TTL of our L64 records, default 5 s (RFC 6741 §8.3: a few seconds for mobile nodes)
    pub ttl_s: Option<u32>,
}

impl FileDnsUpdate {
    pub(super) fn validate(&self) -> Result<crate::dns::update::UpdateConfig> {
        let need = |v: &Option<String>, k: &str| v.clone().ok_or_else(|| anyhow!("{k}: [dns.update] needs `{k}`"));
        let zone = need(&self.zone, "zone")?.trim_end_matches('.').to_string();
        let name = need(&self.name, "name")?.trim_end_matches('.').to_string();
        let server = parse_dns_addr("server", &need(&self.server, "server")?)?;
        let key_file = self.key_file.clone().ok_or_else(|| anyhow!("key_file: [dns.update] needs `key_file`"))?;
        let ttl_s = self.ttl_s.unwrap_or(5);
        if ttl_s > 86400 {
            bail!("ttl_s: {ttl_s} is more than a day");
        }
        Ok(crate::dns::update::UpdateConfig { zone, name, server, key_file, ttl_s })
    }
}

/// "192.0.2.1", "2001:db8::53", "192.0.2.1:5353" or "[2001:db8::53]:5353".
fn parse_dns_addr(key: &str, s: &str) -> Result<std::net::SocketAddr> {
    if let Ok(a) = s.parse::<std::net::SocketAddr>() {
        return Ok(a);
    }
    match s.parse::<std::net::IpAddr>() {
        Ok(ip) => Ok(std::net::SocketAddr::new(ip, 53)),
        Err(_) => bail!("{key}: {s:?} is not an address or address:port"),
    }
}

impl FileDns {
    /// (the proxy, if `upstream` is set; the update, if `[dns.update]` is there)
    pub(super) fn validate(&self) -> Result<(Option<crate::dns::DnsConfig>, Option<crate::dns::update::UpdateConfig>)> {
        let update = self.update.as_ref().map(FileDnsUpdate::validate).transpose()?;
        let Some(up) = self.upstream.as_deref() else {
            if update.is_some() && self.listen.is_none() {
                return Ok((None, update));
            }
            bail!("upstream: [dns] needs the upstream server");
        };
        let upstream = parse_dns_addr("upstream", up)?;
        let listen = match &self.listen {
            None => vec!["127.0.0.1:53".parse().expect("literal")],
            Some(l) if l.is_empty() => bail!("listen: [dns] needs at least one address"),
            Some(l) => l.iter().map(|a| parse_dns_addr("listen", a)).collect::<Result<_>>()?,
        };
        let ms = self.timeout_ms.unwrap_or(2000);
        if !(10..=30_000).contains(&ms) {
            bail!("timeout_ms: {ms} is not 10-30000");
        }
        Ok((Some(crate::dns::DnsConfig { listen, upstream, timeout: Duration::from_millis(ms) }), update))
    }
}
