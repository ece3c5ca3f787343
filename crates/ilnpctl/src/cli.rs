//! The command line of ilnpctl, apart from what it does: main.rs runs it, and the
//! packaging step renders it as the man page and the shell completions.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

pub const DEFAULT_SOCKET: &str = "/run/ilnp/ilnpd.sock";

/// Seconds to wait for the daemon's reply unless `--timeout` says otherwise.
pub const DEFAULT_TIMEOUT_S: f64 = 5.0;

/// Help text on who may do what (the daemon decides, from the socket's peer credentials).
pub const PERMISSIONS: &str = "Permissions: root may use every command. Members of group ilnp (the control \
socket is root:ilnp 0660) may use those that only read: status, ilcc show, locator show, peer show, \
policy (without a POLICY), stats, monitor, dns status; `ilcc show` then lists no nonces (\"(root only)\"). \
ilnpd refuses the others (ilcc flush, peer add, peer del, setting a policy, locator set) with \
\"... needs root\", counted as control_refused_not_root, and ilnpctl exits 1.";

/// Control and inspect the ILNPv6 daemon (ilnpd).
#[derive(Parser, Debug)]
#[command(version, propagate_version = true, after_long_help = PERMISSIONS)]
pub struct Cli {
    /// control socket of the daemon
    #[arg(
        short = 's',
        long = "socket",
        value_name = "PATH",
        default_value = DEFAULT_SOCKET,
        env = "ILNPD_SOCKET",
        global = true
    )]
    pub socket: PathBuf,
    /// print the daemon's JSON instead of tables
    #[arg(short = 'j', long, global = true)]
    pub json: bool,
    /// seconds to wait for the daemon to connect and reply (0: no limit); `monitor`
    /// waits this long for its first reply, then for events without a limit
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIMEOUT_S, value_parser = seconds, global = true)]
    pub timeout: f64,
    #[command(subcommand)]
    pub object: Object,
}

/// A `--timeout`: a finite number of seconds, 0 or more.
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1e9).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds (0 or more; 0 waits forever)")),
    }
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum Object {
    /// identity, mode, uplinks, locators and counts
    Status,
    /// the ILNP Communication Cache (one entry per correspondent and NID of ours it talks to)
    Ilcc {
        #[command(subcommand)]
        verb: Option<IlccVerb>,
    },
    /// this node's locators (one per global /64 on an uplink)
    #[command(alias = "loc")]
    Locator {
        #[command(subcommand)]
        verb: Option<LocatorVerb>,
    },
    /// load balancing: `policy` shows, `policy POLICY` sets the default,
    /// `policy PEER POLICY` one peer's (PEER: name or NID; POLICY: failover | per-flow | per-packet)
    Policy {
        #[arg(num_args = 0..=2, value_name = "[PEER] POLICY")]
        args: Vec<String>,
    },
    /// static correspondents (name, NID, locators)
    Peer {
        #[command(subcommand)]
        verb: Option<PeerVerb>,
    },
    /// drop and outcome counters of the core and of the eBPF fast path
    Stats,
    /// stream events (sessions, Locator Updates, drops) until interrupted
    Monitor,
    /// the resolver proxy and the dynamic update of this host's L64 records
    Dns {
        #[command(subcommand)]
        verb: Option<DnsVerb>,
    },
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum DnsVerb {
    /// proxy counters and the last update of our L64 records
    Status,
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum IlccVerb {
    /// list the entries
    #[command(alias = "list", alias = "ls")]
    Show,
    /// remove every entry (sessions re-establish on their next packet)
    Flush,
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum ShowVerb {
    /// list
    #[command(alias = "list", alias = "ls")]
    Show,
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum LocatorVerb {
    /// list
    #[command(alias = "list", alias = "ls")]
    Show,
    /// `locator set DEV weight N`: the uplink's load-balancing weight (0 = backup only)
    Set {
        /// the uplink
        dev: String,
        /// `weight`
        key: String,
        value: String,
    },
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum PeerVerb {
    /// list the static peers
    #[command(alias = "list", alias = "ls")]
    Show,
    /// add (or replace) a peer: `peer add mn 0200:00ff:fe00:000d 2001:db8:b::/64/10 2001:0db8:000c:0000/20`
    Add {
        /// a name for logs and tables
        name: String,
        /// the peer's NID, xxxx:xxxx:xxxx:xxxx (unicast: g bit 0, not all-zero or all-ones)
        nid: String,
        /// locators: L64[/PREF] or L64|PREF (L64 as xxxx:xxxx:xxxx:xxxx or an IPv6 /64 prefix,
        /// e.g. 2001:db8:b::/64/20; PREF default 10, lower preferred)
        #[arg(required = true, value_name = "L64[/PREF]")]
        locators: Vec<String>,
    },
    /// delete a peer by NID
    #[command(alias = "delete", alias = "remove")]
    Del {
        /// the peer's NID
        nid: String,
    },
}
