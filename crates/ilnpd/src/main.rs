//! ilnpd — ILNPv6 for unmodified applications on a stock Linux kernel.

// the data path module lives in the library (shared with its tests): compiled once
use ilnpd::bpf;
mod config;
mod control;
mod daemon;
mod dns;
mod gso;
mod netlink;
mod state;
mod tun;

use clap::Parser;
use ilnpd::cli::Args;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = Args::parse();
    let ov = config::Overrides {
        uplinks: args.uplinks,
        datapath: args.datapath,
        control_socket: args.control_socket,
        log_level: args.log_level,
        nid: args.nid,
        identifier_prefix: args.identifier_prefix,
        tun_name: args.tun_name,
        nonce_bits: args.nonce_bits,
        hosts_file: args.hosts_file,
        handoff: args.handoff,
        ilcc_max_entries: args.ilcc_max_entries,
        idle_timeout_s: args.idle_timeout_s,
    };
    let cfg = match config::Config::load(args.config.as_deref(), &ov) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ilnpd: {e:#}");
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("ilnpd={0},ilnp_core={0}", cfg.log_level)));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ilnpd: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        let signals = match daemon::Signals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("ilnpd: {e:#}");
                return ExitCode::FAILURE;
            }
        };
        let (d, req) = match daemon::Daemon::start(cfg).await {
            Ok(x) => x,
            Err(e) => {
                eprintln!("ilnpd: {e:#}");
                return ExitCode::FAILURE;
            }
        };
        match d.run(req, signals).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ilnpd: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}
