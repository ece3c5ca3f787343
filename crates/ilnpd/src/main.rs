//! ilnpd — ILNPv6 for unmodified applications on a stock Linux kernel.

// the data path module lives in the library (shared with its tests): compiled once
use ilnpd::bpf;
mod config;
mod control;
mod daemon;
mod dns;
mod gso;
mod logging;
mod metrics;
mod netlink;
mod nid;
mod state;
mod tun;

use clap::Parser;
use ilnpd::cli::Args;
use std::process::ExitCode;

fn main() -> ExitCode {
    logging::ensure_stdio();
    let args = Args::parse();
    let cfg = match config::Config::load(args.config.as_deref(), &args) {
        Ok(c) => c,
        Err(e) => {
            logging::say(&format!("{e:#}"));
            return ExitCode::from(2);
        }
    };
    logging::init(&cfg.log_level);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            logging::say(&format!("starting the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let fail = |e: anyhow::Error| {
        logging::fatal(&e);
        ExitCode::FAILURE
    };
    rt.block_on(async {
        let signals = match daemon::Signals::install() {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let (d, req) = match daemon::Daemon::start(cfg).await {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        match d.run(req, signals).await {
            Ok(daemon::Exit::Stopped) => ExitCode::SUCCESS,
            Ok(daemon::Exit::HandedOver) => ExitCode::from(daemon::HANDOVER_EXIT),
            Err(e) => fail(e),
        }
    })
}
