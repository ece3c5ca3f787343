//! The command line of ilnpd, apart from what it does: main.rs runs it, and the
//! packaging step renders it as the man page and the shell completions.
//!
//! Every flag but `--config` is the configuration key of the same name: the
//! configuration serializes the flags given over the file's keys (`config.rs`
//! `overridden`), so a new override is one field here.

use clap::Parser;
use serde::Serialize;
use std::path::PathBuf;

/// ILNPv6 host daemon: ILNPv6 sessions for unmodified applications (eBPF fast path).
///
/// Runs in the foreground (under systemd: ilnpd.service, Type=notify). SIGTERM or
/// SIGINT: a clean stop that removes everything it changed on the host. SIGUSR2:
/// exit (status 75) leaving the data path, the pins and the state file to the next
/// ilnpd, which adopts the running sessions (package upgrades). A start that fails
/// undoes what it did. Configuration errors exit with status 2.
#[derive(Parser, Debug, Default, Serialize)]
#[command(version)]
pub struct Args {
    /// TOML configuration file (see dist/ilnpd.toml)
    #[arg(short, long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// uplink interface (repeatable); overrides `uplinks` in the file
    #[arg(short, long = "uplink")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uplinks: Vec<String>,
    /// data path: ebpf (fast path) or userspace (reference)
    #[arg(long)]
    pub datapath: Option<String>,
    /// this node's NID (xxxx:xxxx:xxxx:xxxx), "auto" (a stable-privacy NID from the secret in
    /// `state_dir`, default /var/lib/ilnp) or "eui64" (the first uplink's MAC)
    #[arg(long)]
    pub nid: Option<String>,
    /// control socket path
    #[arg(short = 's', long)]
    pub control_socket: Option<PathBuf>,
    /// error, warn, info, debug or trace (RUST_LOG overrides)
    #[arg(long)]
    pub log_level: Option<String>,
    /// host-local identifier /64 (default fd69:6c6e:7000::/64)
    #[arg(long, value_name = "PREFIX/64")]
    pub identifier_prefix: Option<String>,
    /// name of the TUN device (default ilnp0)
    #[arg(long, value_name = "NAME")]
    pub tun_name: Option<String>,
    /// nonce option size: 32 or 96
    #[arg(long, value_name = "BITS")]
    pub nonce_bits: Option<u32>,
    /// static peers in the seeds' hosts-file form
    #[arg(long, value_name = "PATH")]
    pub hosts_file: Option<PathBuf>,
    /// soft or hard
    #[arg(long)]
    pub handoff: Option<String>,
    /// bound on ILCC entries
    #[arg(long, value_name = "N")]
    pub ilcc_max_entries: Option<u32>,
    /// seconds without traffic before an ILCC entry is aged out
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout_s: Option<u64>,
}
