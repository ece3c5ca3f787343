//! ilnpd configuration: a TOML file plus command-line overrides.
//! Unknown keys and bad values are errors that name the key and the line.
//!
//! One document, two readers: the protocol core's keys fill `ilnp_core::CoreConfig`
//! directly (`CoreConfig::from_document`), ilnpd's own fill `FileConfig`; a key
//! neither reads is refused (`known_keys`). The command line's flags are the
//! same keys (`ilnpd::cli::Args`, serialized over the file's values).

use anyhow::{anyhow, bail, Context, Result};
use ilnp_core::{ChecksumRule, CoreConfig, PeerRecord, Policy};
use ilnp_wire::{split_addr, Locator, Nid};
use ilnpd::cli::Args;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

pub mod peers;
pub mod privacy;
mod sections;

use crate::nid::NidChoice;
use peers::TomlPeer;
pub use sections::{FileDns, FileIpv4, FileMetrics, Ipv4Config};

pub const DEFAULT_ID_PREFIX: &str = "fd69:6c6e:7000::/64";

/// The default `state_dir` (the unit's `StateDirectory=ilnp`).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/ilnp";

/// ilnpd's own keys, as written (the core's are `CoreConfig`'s; a key neither
/// reads is refused by `parse_text`, so no `deny_unknown_fields` here).
#[derive(Debug, Deserialize, Default)]
pub struct FileConfig {
    pub uplinks: Option<Vec<String>>,
    pub identifier_prefix: Option<String>,
    /// "auto" (default: stable privacy, `state_dir`), "eui64" (the first uplink's MAC)
    /// or four hex groups
    pub nid: Option<String>,
    /// where ilnpd keeps what outlives a reboot: the NID secret and the NID "auto"
    /// resolved to (default /var/lib/ilnp)
    pub state_dir: Option<PathBuf>,
    pub tun_name: Option<String>,
    pub datapath: Option<String>,
    pub control_socket: Option<PathBuf>,
    pub hosts_file: Option<PathBuf>,
    pub peers_file: Option<PathBuf>,
    pub log_level: Option<String>,
    /// preference per uplink (lower preferred), default 10
    pub locator_pref: Option<BTreeMap<String, u16>>,
    /// seeds the nonce generator: reproducible runs for tests and the lab only
    pub rng_seed: Option<u64>,
    /// bpffs directory for the maps and tc links ("" = no pinning); default
    /// `/sys/fs/bpf/ilnp/<instance>` (`default_pin_dir`)
    pub pin_dir: Option<PathBuf>,
    /// where the core's state is kept for a restart ("" = nowhere); default the
    /// control socket's path with extension `.state`
    pub state_file: Option<PathBuf>,
    /// load balancing (issue #12): default policy, `failover` | `per-flow` | `per-packet`
    pub balance_policy: Option<String>,
    /// policy per peer (name or NID)
    pub peer_policy: Option<BTreeMap<String, String>>,
    /// TCP/UDP checksum rule per peer (name or NID): "rfc6741" or "full-address"
    /// (the default is the core's `transport_checksum`); docs/interop.md
    pub peer_checksum: Option<BTreeMap<String, String>>,
    /// nonce model per peer (name or NID): "shared" for a correspondent that uses one
    /// nonce both ways and reflects ours (FreeBSD ILNP6, the Linux 4.9 code; its
    /// hosts lines say so already), "own" for one that shows its own (the default);
    /// docs/security.md
    pub peer_nonce: Option<BTreeMap<String, String>>,
    /// interop mode per peer (name or NID): "linux49" for the authors' Linux 4.9
    /// prototype (its Locator Update layout and checksum, docs/interop.md), "rfc"
    /// (the default)
    pub peer_interop: Option<BTreeMap<String, String>>,
    /// balancing weight per uplink (default 1; 0 = backup only)
    pub locator_weight: Option<BTreeMap<String, u32>>,
    /// per-flow hash seed; default derived from the NID (stable across restarts)
    pub flow_hash_seed: Option<u64>,
    /// hand TCP connections to a peer that came back on another locator an RFC 6069
    /// hint, so they retransmit at once instead of at a backed-off timer (default
    /// true; needs a cgroup v2 hierarchy, attaches a sock_ops program to its root)
    pub tcp_hints: Option<bool>,
    /// datapath = "ebpf": translate small packets at the identifier prefix's route
    /// (an lwt xmit program), so they are transmitted once, on the uplink (default
    /// true; false: every fast-path packet goes through ilnp0's tc program)
    pub route_xmit: Option<bool>,
    #[serde(default)]
    pub peer: Vec<TomlPeer>,
    /// the resolver proxy (RFC 6742 names); absent = off
    pub dns: Option<FileDns>,
    /// the OpenMetrics endpoint for Prometheus; absent = off
    pub metrics: Option<FileMetrics>,
    /// the v4 path: ILNPv6 in UDP over IPv4 for IPv4-only and NATed networks
    /// (docs/architecture.md § IPv4 and NAT); absent = off
    pub ipv4: Option<FileIpv4>,
    /// temporary NIDs for outgoing sessions (`config/privacy.rs`); absent = off
    pub privacy: Option<privacy::FilePrivacy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datapath {
    Ebpf,
    Userspace,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// the protocol core's settings, filled from the file once (`local_nid` is
    /// set at start, when the NID is known): the core takes them as they are
    pub core: CoreConfig,
    pub uplinks: Vec<String>,
    pub id_prefix: Locator,
    pub nid: crate::nid::NidChoice,
    /// the NID secret and record of `nid = "auto"` (crate::nid)
    pub state_dir: PathBuf,
    pub tun_name: String,
    pub datapath: Datapath,
    pub control_socket: PathBuf,
    pub peers: Vec<PeerRecord>,
    pub log_level: String,
    pub locator_pref: BTreeMap<String, u16>,
    pub balance_policy: Policy,
    /// NID → policy (peer names resolved)
    pub peer_policy: BTreeMap<Nid, Policy>,
    pub locator_weight: BTreeMap<String, u32>,
    pub flow_hash_seed: Option<u64>,
    pub rng_seed: Option<u64>,
    pub pin_dir: Option<PathBuf>,
    pub state_file: Option<PathBuf>,
    pub dns: Option<crate::dns::DnsConfig>,
    pub dns_update: Option<crate::dns::update::UpdateConfig>,
    pub metrics: Option<crate::metrics::MetricsConfig>,
    /// `[ipv4]`: the v4 path; None = off
    pub ipv4: Option<Ipv4Config>,
    /// `[privacy]`: temporary NIDs; None = off
    pub privacy: Option<privacy::PrivacyConfig>,
    pub tcp_hints: bool,
    pub route_xmit: bool,
}

/// The default pin directory: one per daemon instance, named after its control
/// socket (two daemons on one host, e.g. in two network namespaces, cannot share
/// a socket path): `/run/ilnp/ilnpd.sock` → `/sys/fs/bpf/ilnp/run_ilnp_ilnpd_sock`.
/// Only letters, digits, `-` and `_` are kept: bpffs refuses names with a dot
/// (the kernel's `bpf_lookup`), so `ilnpd.sock` as it is could never be created.
pub fn default_pin_dir(control_socket: &Path) -> PathBuf {
    let s = control_socket.to_string_lossy();
    let name: String = s
        .trim_start_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    Path::new("/sys/fs/bpf/ilnp").join(name)
}

/// "" turns a path-valued feature off; absent takes the default.
fn path_or_off(v: Option<PathBuf>, default: impl FnOnce() -> PathBuf) -> Option<PathBuf> {
    match v {
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) => Some(p),
        None => Some(default()),
    }
}

/// Line (1-based) of the first `key = ...` (or `[key]`, `[[key]]`) in a TOML text,
/// for errors about a value that parsed but is not acceptable, or a key nobody reads.
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            let header = t.trim_start_matches('[').strip_prefix(key).is_some_and(|r| r.starts_with([']', '.']));
            header && t.starts_with('[')
                || t.strip_prefix(key).map(|r| r.trim_start().starts_with('=')).unwrap_or(false)
        })
        .map(|i| i + 1)
}

/// Why a /64 cannot be the identifier prefix, if it cannot: the kernel gives these
/// ranges meanings of their own (RFC 4291 §2.4), so routing one to ilnp0 fails or
/// takes over traffic that is not ILNP's. (Overlap with the host's own prefixes is
/// checked at start, against the addresses the host has then.)
pub fn reserved_identifier_prefix(p: Locator) -> Option<&'static str> {
    let top = (p.0 >> 48) as u16;
    if top & 0xff00 == 0xff00 {
        Some("multicast (ff00::/8)")
    } else if top & 0xffc0 == 0xfe80 {
        Some("link-local (fe80::/10)")
    } else if top & 0xffc0 == 0xfec0 {
        Some("site-local, deprecated by RFC 3879 (fec0::/10)")
    } else if p.0 == 0 {
        Some("the unspecified, loopback and IPv4-mapped range (::/64)")
    } else {
        None
    }
}

fn parse_prefix64(key: &str, s: &str) -> Result<Locator> {
    let (addr, len) = s.split_once('/').unwrap_or((s, "64"));
    if len != "64" {
        bail!("{key}: {s:?} must be a /64");
    }
    let a: Ipv6Addr = addr.parse().map_err(|_| anyhow!("{key}: {s:?} is not an IPv6 prefix"))?;
    let (l, n) = split_addr(a);
    if n.0 != 0 {
        bail!("{key}: {s:?} has bits set below /64");
    }
    Ok(l)
}

/// The file as its two readers took it: ilnpd's keys and the core's.
#[derive(Debug, Default)]
pub struct Parsed {
    pub file: FileConfig,
    pub core: CoreConfig,
}

/// A TOML error with the line it points at and the key on that line in front of
/// the message (the core's checks leave it out); `origin` None: the command line,
/// whose text is ilnpd's rendering, so no line.
fn toml_error(e: &toml::de::Error, text: &str, origin: Option<&Path>) -> anyhow::Error {
    let msg = e.message().trim_end();
    let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let quoted = line.and_then(|l| text.lines().nth(l - 1)).unwrap_or("").trim();
    let key = quoted.split_once('=').map(|(k, _)| k.trim().trim_matches('"')).unwrap_or("");
    let msg = if key.is_empty() || msg.starts_with(&format!("{key}:")) || msg.contains(&format!("`{key}`")) {
        msg.to_string()
    } else {
        format!("{key}: {msg}")
    };
    // quote the line: it shows the value as written
    let msg = if origin.is_some() && line.is_some() { format!("{msg} (`{quoted}`)") } else { msg };
    at(origin, line, &msg)
}

/// `msg` with where it was found: the file and its line, or the command line.
fn at(origin: Option<&Path>, line: Option<usize>, msg: &str) -> anyhow::Error {
    match (origin, line) {
        (Some(o), Some(l)) => anyhow!("{}: line {l}: {msg}", o.display()),
        (Some(o), None) => anyhow!("{}: {msg}", o.display()),
        (None, _) => anyhow!("command line: {msg}"),
    }
}

/// Every top-level key ilnpd or the core reads, sorted.
fn known_keys() -> Vec<&'static str> {
    let mut keys = ilnp_core::config::struct_fields::<FileConfig>().to_vec();
    keys.extend(CoreConfig::file_keys());
    keys.sort_unstable();
    keys
}

/// Both readers over one text; errors name the key and the line.
fn parse_text(text: &str, origin: Option<&Path>) -> Result<Parsed> {
    let err = |e: toml::de::Error| toml_error(&e, text, origin);
    let doc: toml::Table = toml::from_str(text).map_err(err)?;
    let known = known_keys();
    if let Some(k) = doc.keys().find(|k| !known.contains(&k.as_str())) {
        let msg = format!("unknown key `{k}`; the keys are {}", known.join(", "));
        return Err(at(origin, key_line(text, k), &msg));
    }
    let file = toml::from_str(text).map_err(err)?;
    let core = CoreConfig::from_document(|| toml::Deserializer::new(text)).map_err(err)?;
    Ok(Parsed { file, core })
}

/// The file's text with the command line's flags in place of its keys (None: no
/// flag given). Each flag is the key of the same name (`Args`' fields).
fn overridden(text: &str, args: &Args) -> Result<Option<String>> {
    let flags = toml::Table::try_from(args).context("the command line")?;
    if flags.is_empty() {
        return Ok(None);
    }
    let mut doc: toml::Table = toml::from_str(text)?;
    doc.extend(flags);
    Ok(Some(toml::to_string(&doc)?))
}

impl Config {
    pub fn load(path: Option<&Path>, args: &Args) -> Result<Config> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading config {}", p.display()))?,
            None => String::new(),
        };
        // the file's own mistakes first, with its lines; then the flags over it
        let mut parsed = parse_text(&text, path)?;
        if let Some(t) = overridden(&text, args)? {
            parsed = parse_text(&t, None)?;
        }
        let Some(p) = path else { return Config::from_file(parsed) };
        Config::from_file(parsed).map_err(|e| {
            // validation errors start with the key: point at its line in the file
            let msg = format!("{e:#}");
            let key = msg.split([':', ' ']).next().unwrap_or("");
            at(Some(p), key_line(&text, key).filter(|_| !key.is_empty()), &msg)
        })
    }

    pub fn from_file(Parsed { file: f, mut core }: Parsed) -> Result<Config> {
        let uplinks = f.uplinks.unwrap_or_default();
        if uplinks.is_empty() {
            bail!("uplinks: at least one uplink interface is required (config key `uplinks` or --uplink)");
        }
        for (i, u) in uplinks.iter().enumerate() {
            if uplinks[..i].contains(u) {
                bail!("uplinks: {u:?} is listed twice");
            }
            if u.is_empty() || u.len() >= 16 || u.contains(['/', ' ']) {
                bail!("uplinks: {u:?} is not an interface name (1-15 characters, no '/' or space)");
            }
        }
        let id_prefix =
            parse_prefix64("identifier_prefix", f.identifier_prefix.as_deref().unwrap_or(DEFAULT_ID_PREFIX))?;
        if let Some(why) = reserved_identifier_prefix(id_prefix) {
            bail!("identifier_prefix: {}::/64 is {why}; use a unique local /64 (fd00::/8, e.g. the default {DEFAULT_ID_PREFIX})", id_prefix.prefix());
        }
        let nid = match f.nid.as_deref() {
            None | Some("auto") => NidChoice::Auto,
            Some("eui64") => NidChoice::Eui64,
            // the rules every NID of a node follows (ilnp-wire `unicast`, as for peers)
            Some(s) => NidChoice::Configured(
                Nid::parse_unicast(s).map_err(|e| anyhow!("nid: {e} (or \"auto\", the default, or \"eui64\")"))?,
            ),
        };
        let state_dir = f.state_dir.unwrap_or_else(|| DEFAULT_STATE_DIR.into());
        if state_dir.as_os_str().is_empty() || state_dir.is_relative() {
            bail!("state_dir: {:?} is not an absolute path", state_dir.display().to_string());
        }
        let datapath = match f.datapath.as_deref().unwrap_or("ebpf") {
            "ebpf" => Datapath::Ebpf,
            "userspace" => Datapath::Userspace,
            o => bail!("datapath: {o:?} is not \"ebpf\" or \"userspace\""),
        };
        let log_level = f.log_level.unwrap_or_else(|| "info".into());
        if !["error", "warn", "info", "debug", "trace"].contains(&log_level.as_str()) {
            bail!("log_level: {log_level:?} is not one of error, warn, info, debug, trace");
        }
        let mut peers = Vec::new();
        for p in &f.peer {
            peers.push(p.to_record().map_err(|e| anyhow!("[[peer]]: {e}"))?);
        }
        let mut peer_shared_nonce = BTreeSet::new();
        if let Some(h) = f.hosts_file.as_ref() {
            let text = std::fs::read_to_string(h).with_context(|| format!("hosts_file: reading {}", h.display()))?;
            let hosts = peers::load_hosts(&text, &h.display().to_string())?;
            peers.extend(hosts.peers);
            peer_shared_nonce.extend(hosts.freebsd);
        }
        if let Some(h) = &f.peers_file {
            let text = std::fs::read_to_string(h).with_context(|| format!("peers_file: reading {}", h.display()))?;
            peers.extend(peers::load_toml_str(&text, &h.display().to_string())?);
        }
        let policy = |key: &str, v: &str| -> Result<Policy> { v.parse::<Policy>().map_err(|e| anyhow!("{key}: {e}")) };
        let balance_policy = match &f.balance_policy {
            Some(p) => policy("balance_policy", p)?,
            None => Policy::Failover,
        };
        let mut peer_policy = BTreeMap::new();
        for (who, p) in f.peer_policy.iter().flatten() {
            let nid = peers
                .iter()
                .find(|r| r.name == *who || r.nid.to_string() == *who || who.parse::<Nid>().is_ok_and(|n| n == r.nid))
                .map(|r| r.nid)
                .ok_or_else(|| anyhow!("peer_policy: unknown peer {who:?} (not in the peer files or [[peer]])"))?;
            peer_policy.insert(nid, policy(&format!("peer_policy.{who}"), p)?);
        }
        let rule = |key: &str, v: &str| ChecksumRule::parse(v).map_err(|e| anyhow!("{key}: {e}"));
        let mut peer_checksum = BTreeMap::new();
        // a peer by name, or any NID (a correspondent found by DNS has no record yet)
        let name_or_nid = |table: &str, who: &str| -> Result<Nid> {
            peers
                .iter()
                .find(|r| r.name == who)
                .map(|r| r.nid)
                .or_else(|| who.parse::<Nid>().ok())
                .ok_or_else(|| anyhow!("{table}: {who:?} is neither a peer's name nor a NID"))
        };
        for (who, v) in f.peer_checksum.iter().flatten() {
            peer_checksum.insert(name_or_nid("peer_checksum", who)?, rule(&format!("peer_checksum.{who}"), v)?);
        }
        for (who, v) in f.peer_nonce.iter().flatten() {
            let nid = name_or_nid("peer_nonce", who)?;
            match v.as_str() {
                "shared" => peer_shared_nonce.insert(nid),
                "own" => peer_shared_nonce.remove(&nid),
                o => bail!("peer_nonce.{who}: {o:?} is not \"own\" or \"shared\""),
            };
        }
        let mut peer_linux49 = BTreeSet::new();
        for (who, v) in f.peer_interop.iter().flatten() {
            let nid = name_or_nid("peer_interop", who)?;
            match v.as_str() {
                "linux49" => peer_linux49.insert(nid),
                "rfc" => peer_linux49.remove(&nid),
                o => bail!("peer_interop.{who}: {o:?} is not \"rfc\" or \"linux49\""),
            };
        }
        let locator_weight = f.locator_weight.unwrap_or_default();
        for dev in locator_weight.keys() {
            if !uplinks.contains(dev) {
                bail!("locator_weight: unknown interface {dev:?} (uplinks are {uplinks:?})");
            }
        }
        if !locator_weight.is_empty() && uplinks.iter().all(|u| locator_weight.get(u).copied().unwrap_or(1) == 0) {
            bail!("locator_weight: every uplink has weight 0: nothing to balance onto");
        }
        let dns = f.dns.as_ref().map(FileDns::validate).transpose()?.unwrap_or((None, None));
        let metrics = f.metrics.as_ref().map(FileMetrics::validate).transpose()?;
        let ipv4 = f.ipv4.as_ref().map(FileIpv4::validate).transpose()?;
        let privacy = f.privacy.as_ref().map(privacy::FilePrivacy::validate).transpose()?;
        let control_socket: PathBuf = f.control_socket.unwrap_or_else(|| "/run/ilnp/ilnpd.sock".into());
        let pin_dir = path_or_off(f.pin_dir, || default_pin_dir(&control_socket));
        let state_file = path_or_off(f.state_file, || control_socket.with_extension("state"));
        // the core's keys are read (CoreConfig::from_document); these come from
        // ilnpd's: the prefix, tables that name peers, and the [ipv4] section
        core.id_prefix = id_prefix;
        core.peer_checksum = peer_checksum.into_iter().collect();
        core.peer_shared_nonce = peer_shared_nonce.into_iter().collect();
        core.peer_linux49 = peer_linux49.into_iter().collect();
        if let Some(v4) = &ipv4 {
            core.v4_keepalive = v4.keepalive;
        }
        Ok(Config {
            core,
            uplinks,
            id_prefix,
            nid,
            state_dir,
            tun_name: f.tun_name.unwrap_or_else(|| "ilnp0".into()),
            datapath,
            control_socket,
            peers,
            log_level,
            locator_pref: f.locator_pref.unwrap_or_default(),
            balance_policy,
            peer_policy,
            locator_weight,
            flow_hash_seed: f.flow_hash_seed,
            rng_seed: f.rng_seed,
            pin_dir,
            state_file,
            dns: dns.0,
            dns_update: dns.1,
            metrics,
            ipv4,
            privacy,
            tcp_hints: f.tcp_hints.unwrap_or(true),
            route_xmit: f.route_xmit.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_core::{HandoffMode, LuTimerMode};
    use std::time::Duration;

    /// A set of the core's config in NID order.
    fn sorted(s: &std::collections::HashSet<Nid>) -> Vec<Nid> {
        s.iter().copied().collect::<BTreeSet<_>>().into_iter().collect()
    }

    fn load(text: &str) -> Result<Config> {
        Config::from_file(parse_text(text, Some(Path::new("t.toml")))?)
    }

    /// `text` in a file, loaded as `ilnpd --config <file> <flags>` would
    fn load_with_flags(text: &str, flags: &[&str]) -> Result<Config> {
        use clap::Parser;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, text).unwrap();
        let args = Args::try_parse_from(["ilnpd"].iter().chain(flags))?;
        Config::load(Some(&p), &args)
    }

    #[test]
    fn pinning_and_state_are_on_by_default_one_place_per_instance() {
        let c = load("uplinks = [\"e\"]\ncontrol_socket = \"/run/ilnp-lab/ns1.sock\"\n").unwrap();
        assert_eq!(c.pin_dir.as_deref(), Some(Path::new("/sys/fs/bpf/ilnp/run_ilnp-lab_ns1_sock")));
        assert_eq!(c.state_file.as_deref(), Some(Path::new("/run/ilnp-lab/ns1.state")));
        let d = load("uplinks = [\"e\"]\n").unwrap();
        assert_eq!(d.pin_dir.as_deref(), Some(Path::new("/sys/fs/bpf/ilnp/run_ilnp_ilnpd_sock")));
        for c in [&c, &d] {
            let name = c.pin_dir.as_ref().unwrap().file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.contains('.'), "bpffs refuses names with a dot: {name}");
        }
        assert_ne!(c.pin_dir, d.pin_dir);
        let off = load("uplinks = [\"e\"]\npin_dir = \"\"\nstate_file = \"\"\n").unwrap();
        assert_eq!((off.pin_dir, off.state_file), (None, None));
    }

    #[test]
    fn transport_checksum_global_and_per_peer() {
        let d = load("uplinks = [\"e\"]\n").unwrap();
        assert_eq!((d.core.transport_checksum, d.core.peer_checksum.len()), (ChecksumRule::Rfc6741, 0));
        let t = "uplinks = [\"e\"]\ntransport_checksum = \"full-address\"\n\
                 [peer_checksum]\nmn = \"rfc6741\"\n\"0211:22ff:fe33:4455\" = \"full-address\"\n\
                 [[peer]]\nname = \"mn\"\nnid = \"0200:00ff:fe00:000d\"\nlocators = [{ l64 = \"2001:db8:b::/64\" }]\n";
        let c = load(t).unwrap();
        assert_eq!(c.core.transport_checksum, ChecksumRule::FullAddress);
        assert_eq!(c.core.peer_checksum[&Nid(0x0200_00ff_fe00_000d)], ChecksumRule::Rfc6741);
        assert_eq!(c.core.peer_checksum[&Nid(0x0211_22ff_fe33_4455)], ChecksumRule::FullAddress);
        let e = load("uplinks = [\"e\"]\ntransport_checksum = \"ipv6\"\n").unwrap_err().to_string();
        assert!(e.contains("transport_checksum") && e.contains("ipv6"), "{e}");
        let e = load("uplinks = [\"e\"]\n[peer_checksum]\nnobody = \"rfc6741\"\n").unwrap_err().to_string();
        assert!(e.contains("peer_checksum") && e.contains("nobody"), "{e}");
    }

    #[test]
    fn peer_interop_linux49_by_name_or_nid_errors_name_the_input() {
        let c = load(
            "uplinks = [\"e\"]\n[peer_interop]\nvm = \"linux49\"\n\"0200:00ff:fe00:00ee\" = \"rfc\"\n\
             [[peer]]\nname = \"vm\"\nnid = \"0211:22ff:fe33:4455\"\nlocators = [{ l64 = \"2001:db8:b::/64\" }]\n",
        )
        .unwrap();
        assert_eq!(sorted(&c.core.peer_linux49), [Nid(0x0211_22ff_fe33_4455)]);
        assert!(load("uplinks = [\"e\"]\n").unwrap().core.peer_linux49.is_empty(), "rfc by default");
        let e = load("uplinks = [\"e\"]\n[peer_interop]\nnobody = \"linux49\"\n").unwrap_err().to_string();
        assert!(e.contains("peer_interop") && e.contains("nobody"), "{e}");
        let e = load("uplinks = [\"e\"]\n[peer_interop]\n\"0200:00ff:fe00:00ee\" = \"linux4.9\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("peer_interop.0200:00ff:fe00:00ee") && e.contains("linux4.9"), "{e}");
    }

    #[test]
    fn peer_nonce_shared_by_name_nid_or_freebsd_hosts_line() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = dir.path().join("hosts");
        std::fs::write(
            &hosts,
            "2001-0db8-000b-0000.0211+22ff+fe33+4455 fbsd\n2001:0db8:000b:0000|10,0200:00ff:fe00:000d mn\n",
        )
        .unwrap();
        let h = hosts.display();
        let c = load(&format!("uplinks = [\"e\"]\nhosts_file = \"{h}\"\n")).unwrap();
        assert_eq!(sorted(&c.core.peer_shared_nonce), [Nid(0x0211_22ff_fe33_4455)]);
        let c = load(&format!(
            "uplinks = [\"e\"]\nhosts_file = \"{h}\"\n[peer_nonce]\nmn = \"shared\"\nfbsd = \"own\"\n\"0200:00ff:fe00:00ee\" = \"shared\"\n"
        ))
        .unwrap();
        let want = [Nid(0x0200_00ff_fe00_000d), Nid(0x0200_00ff_fe00_00ee)];
        assert_eq!(sorted(&c.core.peer_shared_nonce), want);
        assert!(load("uplinks = [\"e\"]\n").unwrap().core.peer_shared_nonce.is_empty(), "own by default");
        let e = load("uplinks = [\"e\"]\n[peer_nonce]\nnobody = \"shared\"\n").unwrap_err().to_string();
        assert!(e.contains("peer_nonce") && e.contains("nobody"), "{e}");
        let e = load(&format!("uplinks = [\"e\"]\nhosts_file = \"{h}\"\n[peer_nonce]\nmn = \"both\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("peer_nonce.mn") && e.contains("both"), "{e}");
    }

    #[test]
    fn responder_nonce_own_by_default_adopt_on_request() {
        assert!(!load("uplinks = [\"e\"]\n").unwrap().core.adopt_initiator_nonce);
        assert!(!load("uplinks = [\"e\"]\nresponder_nonce = \"own\"\n").unwrap().core.adopt_initiator_nonce);
        assert!(load("uplinks = [\"e\"]\nresponder_nonce = \"adopt\"\n").unwrap().core.adopt_initiator_nonce);
        let e = load("uplinks = [\"e\"]\nresponder_nonce = \"shared\"\n").unwrap_err().to_string();
        assert!(e.contains("responder_nonce") && e.contains("shared"), "{e}");
    }

    #[test]
    fn lu_timer_rtt_by_default_fixed_on_request() {
        let d = load("uplinks = [\"e\"]\n").unwrap();
        assert_eq!((d.core.lu.mode, d.core.lu.max_attempts), (LuTimerMode::RttBased, 7));
        let f = load("uplinks = [\"e\"]\nlu_timer = \"fixed-1s\"\n").unwrap();
        assert_eq!((f.core.lu.mode, f.core.lu.max_attempts), (LuTimerMode::Fixed(Duration::from_secs(1)), 5));
        let g = load("uplinks = [\"e\"]\nlu_timer = \"fixed-250ms\"\nlu_max_attempts = 3\n").unwrap();
        assert_eq!((g.core.lu.mode, g.core.lu.max_attempts), (LuTimerMode::Fixed(Duration::from_millis(250)), 3));
        assert_eq!(load("uplinks = [\"e\"]\nlu_timer = \"rtt\"\n").unwrap().core.lu.mode, LuTimerMode::RttBased);
        for bad in ["fixed", "fixed-1", "fixed-xs", "fixed-5ms", "fixed-61s", "sometimes"] {
            let e = load(&format!("uplinks = [\"e\"]\nlu_timer = \"{bad}\"\n")).unwrap_err().to_string();
            assert!(e.contains("lu_timer"), "{bad}: {e}");
        }
    }

    #[test]
    fn nid_is_auto_by_default_eui64_by_name_or_configured() {
        let d = load("uplinks = [\"e\"]\n").unwrap();
        assert_eq!(d.nid, NidChoice::Auto);
        assert_eq!(d.state_dir, Path::new(DEFAULT_STATE_DIR));
        assert_eq!(load("uplinks = [\"e\"]\nnid = \"auto\"\n").unwrap().nid, NidChoice::Auto);
        assert_eq!(load("uplinks = [\"e\"]\nnid = \"eui64\"\n").unwrap().nid, NidChoice::Eui64);
        let c = load("uplinks = [\"e\"]\nnid = \"0200:0000:0000:0001\"\nstate_dir = \"/srv/ilnp\"\n").unwrap();
        assert_eq!(c.nid, NidChoice::Configured(Nid(0x0200_0000_0000_0001)));
        assert_eq!(c.state_dir, Path::new("/srv/ilnp"));
        let c = load_with_flags("uplinks = [\"e\"]\n", &["--nid", "eui64"]).unwrap();
        assert_eq!(c.nid, NidChoice::Eui64, "--nid eui64");
        let e = load("uplinks = [\"e\"]\nnid = \"mac\"\n").unwrap_err().to_string();
        assert!(e.contains("nid") && e.contains("eui64") && e.contains("auto"), "{e}");
        for bad in ["\"\"", "\"var/lib/ilnp\""] {
            let e = load(&format!("uplinks = [\"e\"]\nstate_dir = {bad}\n")).unwrap_err().to_string();
            assert!(e.contains("state_dir") && e.contains("absolute"), "{e}");
        }
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = load("uplinks = [\"eth0\"]\n\nbogus_key = 1\n").unwrap_err().to_string();
        assert!(e.contains("bogus_key") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn bad_values_name_the_key() {
        for (t, key) in [
            ("uplinks = [\"e\"]\nnonce_bits = 48\n", "nonce_bits"),
            ("uplinks = [\"e\"]\ndatapath = \"xdp\"\n", "datapath"),
            ("uplinks = [\"e\"]\nidentifier_prefix = \"fd00::/48\"\n", "identifier_prefix"),
            ("uplinks = [\"e\"]\nnid = \"0300:0000:0000:0001\"\n", "nid"),
            ("uplinks = [\"e\"]\nhandoff = \"sometimes\"\n", "handoff"),
            ("uplinks = [\"e\"]\nadmission = \"closed\"\n", "admission"),
            ("uplinks = [\"e\"]\nilcc_embryonic_max = 0\n", "ilcc_embryonic_max"),
            ("nid = \"auto\"\n", "uplinks"),
            ("uplinks = [\"e\"]\nnonce_bits = \"x\"\n", "nonce_bits"),
            ("uplinks = [\"e\"]\nsoft_quiet_period_ms = 3600001\n", "soft_quiet_period_ms"),
            ("uplinks = [\"e\"]\nsoft_quiet_period_ms = -1\n", "soft_quiet_period_ms"),
            ("uplinks = [\"e\"]\n[dns]\nlisten = [\"127.0.0.1:53\"]\n", "upstream"),
            ("uplinks = [\"e\"]\n[dns]\nupstream = \"bind.example\"\n", "upstream"),
            ("uplinks = [\"e\"]\n[dns]\nupstream = \"::1\"\nlisten = [\"x\"]\n", "listen"),
            ("uplinks = [\"e\"]\n[dns]\nupstream = \"::1\"\ntimeout_ms = 0\n", "timeout_ms"),
            ("uplinks = [\"e\"]\n[dns]\nupstream = \"::1\"\nbogus = 1\n", "bogus"),
            ("uplinks = [\"eth0\", \"eth0\"]\n", "uplinks"),
            ("uplinks = [\"eth0/1\"]\n", "uplinks"),
            ("uplinks = [\"\"]\n", "uplinks"),
            ("uplinks = [\"e\"]\nidentifier_prefix = \"ff02::/64\"\n", "identifier_prefix"),
            ("uplinks = [\"e\"]\nidentifier_prefix = \"fe80::/64\"\n", "identifier_prefix"),
            ("uplinks = [\"e\"]\nidentifier_prefix = \"febf:1::/64\"\n", "identifier_prefix"),
            ("uplinks = [\"e\"]\nidentifier_prefix = \"::/64\"\n", "identifier_prefix"),
            ("uplinks = [\"e\"]\n[metrics]\ntop_peers = 5\n", "listen"),
            ("uplinks = [\"e\"]\n[metrics]\nlisten = [\"localhost:9469\"]\n", "listen"),
            ("uplinks = [\"e\"]\n[metrics]\nlisten = [\"127.0.0.1:9469\"]\ntop_peers = 100000\n", "top_peers"),
            ("uplinks = [\"e\"]\n[ipv4]\nport = 0\n", "[ipv4] port"),
            ("uplinks = [\"e\"]\n[ipv4]\nport = 70000\n", "port"),
            ("uplinks = [\"e\"]\n[ipv4]\nkeepalive_s = 86400\n", "keepalive_s"),
            ("uplinks = [\"e\"]\n[ipv4]\nbogus = 1\n", "bogus"),
        ] {
            let e = load(t).unwrap_err().to_string();
            assert!(e.contains(key), "{t:?}: {e}");
        }
    }

    #[test]
    fn ipv4_is_off_unless_its_table_is_there() {
        assert_eq!(load("uplinks = [\"e\"]\n").unwrap().ipv4, None);
        let c = load("uplinks = [\"e\"]\n[ipv4]\n").unwrap().ipv4.unwrap();
        assert_eq!((c.port, c.keepalive), (6740, Duration::from_secs(25)));
        let c = load("uplinks = [\"e\"]\n[ipv4]\nport = 4500\nkeepalive_s = 0\n").unwrap().ipv4.unwrap();
        assert_eq!((c.port, c.keepalive), (4500, Duration::ZERO));
    }

    #[test]
    fn fallback_defaults_on_and_can_be_turned_off() {
        let c = load("uplinks = [\"e\"]\n").unwrap();
        assert!(c.core.fallback);
        assert_eq!(c.core.fallback_probe_after, Duration::from_millis(2000));
        let c = load("uplinks = [\"e\"]\nfallback = false\nfallback_probe_ms = 0\n").unwrap();
        assert!(!c.core.fallback);
        assert!(c.core.fallback_probe_after.is_zero());
        assert!(load("uplinks = [\"e\"]\nfallback = \"yes\"\n").unwrap_err().to_string().contains("fallback"));
        assert!(load("uplinks = [\"e\"]\n").unwrap().tcp_hints, "RFC 6069 hints default on");
        assert!(!load("uplinks = [\"e\"]\ntcp_hints = false\n").unwrap().tcp_hints);
        assert!(!load("uplinks = [\"e\"]\n").unwrap().route_xmit, "translation at the route default off");
        assert!(load("uplinks = [\"e\"]\nroute_xmit = true\n").unwrap().route_xmit);
    }

    #[test]
    fn bad_value_names_key_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "uplinks = [\"e\"]\n# comment\n  nonce_bits = 48\n").unwrap();
        let e = format!("{:#}", Config::load(Some(&p), &Args::default()).unwrap_err());
        assert!(e.contains("nonce_bits") && e.contains("line 3") && e.contains("c.toml"), "{e}");
        std::fs::write(&p, "uplinks = [\"e\"]\nidentifier_prefix = \"fd00:1::/48\"\n").unwrap();
        let e = format!("{:#}", Config::load(Some(&p), &Args::default()).unwrap_err());
        assert!(e.contains("identifier_prefix") && e.contains("line 2"), "{e}");
        assert_eq!(key_line("a = 1\nnid_x = 2\nnid = 3\n", "nid"), Some(3));
        std::fs::write(&p, "uplinks = [\"e\"]\n\nsoft_quiet_period_ms = 7200000\n").unwrap();
        let e = format!("{:#}", Config::load(Some(&p), &Args::default()).unwrap_err());
        assert!(e.contains("soft_quiet_period_ms") && e.contains("line 3"), "{e}");
        std::fs::write(&p, "uplinks = [\"e\"]\nsoft_quiet_period_ms = \"3s\"\n").unwrap();
        let e = format!("{:#}", Config::load(Some(&p), &Args::default()).unwrap_err());
        assert!(e.contains("soft_quiet_period_ms") && e.contains("line 2"), "{e}");
        std::fs::write(&p, "uplinks = [\"e\"]\nsoft_quiet_period_ms = 0\n").unwrap();
        let c = Config::load(Some(&p), &Args::default()).unwrap();
        assert_eq!(c.core.soft_quiet_period, Duration::ZERO);
    }

    #[test]
    fn command_line_overrides_the_file() {
        let text = "uplinks = [\"eth0\"]\nnonce_bits = 32\ntun_name = \"a\"\n";
        let flags = ["--uplink", "eth9", "--nonce-bits", "96", "--tun-name", "ilnp7", "--identifier-prefix"];
        let flags = [&flags[..], &["fd00:1:2:3::/64", "--handoff", "hard", "--idle-timeout-s", "5"]].concat();
        let c = load_with_flags(text, &flags).unwrap();
        assert_eq!(c.uplinks, vec!["eth9".to_string()]);
        assert_eq!((c.core.nonce_len, c.tun_name.as_str()), (12, "ilnp7"));
        assert_eq!(c.id_prefix, Locator(0xfd00_0001_0002_0003));
        assert_eq!(c.core.handoff, HandoffMode::Hard);
        assert_eq!(c.core.idle_timeout, Duration::from_secs(5));
        let e = load_with_flags(text, &["--nonce-bits", "7"]).unwrap_err();
        assert!(e.to_string().contains("nonce_bits") && e.to_string().contains("7 is not 32 or 96"), "{e}");
    }

    #[test]
    fn every_config_in_the_readme_and_the_guide_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut n = 0;
        for doc in ["README.md", "docs/guide.md"] {
            let md = std::fs::read_to_string(root.join(doc)).unwrap();
            for block in md.split("```toml\n").skip(1) {
                let text = block.split("```").next().unwrap();
                parse_text(text, Some(Path::new(doc))).unwrap();
                n += 1;
            }
        }
        assert!(n >= 9, "{n} blocks");
    }

    #[test]
    fn example_config_in_dist_parses() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/ilnpd.toml");
        let c = Config::load(Some(&p), &Args::default()).unwrap();
        assert_eq!(c.uplinks, vec!["eth0".to_string()]);
    }

    #[test]
    fn dns_proxy_section() {
        let c = load("uplinks = [\"e\"]\n").unwrap();
        assert!(c.dns.is_none(), "off unless configured");
        let c = load("uplinks = [\"e\"]\n[dns]\nupstream = \"2001:db8::53\"\n").unwrap();
        let d = c.dns.unwrap();
        assert_eq!(d.upstream, "[2001:db8::53]:53".parse().unwrap());
        assert_eq!(d.listen, vec!["127.0.0.1:53".parse().unwrap()]);
        assert_eq!(d.timeout, Duration::from_secs(2));
        let c = load("uplinks = [\"e\"]\n[dns]\nupstream = \"[::1]:5353\"\nlisten = [\"[::1]:53\", \"127.0.0.1:5300\"]\ntimeout_ms = 500\n").unwrap();
        let d = c.dns.unwrap();
        assert_eq!((d.upstream.port(), d.listen.len(), d.timeout), (5353, 2, Duration::from_millis(500)));
        let c = load("uplinks = [\"e\"]\n[dns.update]\nzone = \"lab.example.\"\nname = \"mn.lab.example\"\nserver = \"2001:db8:53::53\"\nkey_file = \"/k\"\n").unwrap();
        let u = c.dns_update.unwrap();
        assert!(c.dns.is_none(), "an update without a proxy");
        assert_eq!(
            (u.zone.as_str(), u.name.as_str(), u.ttl_s, u.server.port()),
            ("lab.example", "mn.lab.example", 5, 53)
        );
        let e = load("uplinks = [\"e\"]\n[dns.update]\nzone = \"lab.example\"\n").unwrap_err().to_string();
        assert!(e.contains("name"), "{e}");
    }

    #[test]
    fn defaults_and_peers() {
        let c = load("uplinks = [\"eth0\"]\n[[peer]]\nname = \"mn\"\nnid = \"0200:00ff:fe00:000d\"\nlocators = [{ l64 = \"2001:0db8:000b:0000\", pref = 10 }]\n").unwrap();
        assert_eq!(c.id_prefix, ilnp_wire::DEFAULT_IDENTIFIER_PREFIX);
        assert_eq!(c.core.nonce_len, 4);
        assert_eq!(c.datapath, Datapath::Ebpf);
        assert_eq!(c.core.soft_quiet_period, Duration::from_secs(3));
        assert_eq!(c.peers[0].nid, Nid(0x0200_00ff_fe00_000d));
        let e = load("uplinks = [\"eth0\"]\n[[peer]]\nname = \"mn\"\nnid = \"zz\"\nlocators = []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("peer"), "{e}");
    }
}
