//! `ilnp-sim run scenario.toml`: runs a scenario, writes results.json (deterministic),
//! lu.csv, timeline.csv and perf.json (wall clock) to `--out`; `ilnp-sim plot DIR`
//! draws them with the lab's matplotlib helpers (`.venv/bin/python -m ilnp_lab.simplot`).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ilnp_sim::scenario::ScenarioFile;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "ilnp-sim", about = "ILNPv6 protocol core in a discrete-event simulation")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// run a scenario file
    Run {
        scenario: PathBuf,
        /// output directory (default: sim-out/<scenario name>)
        #[arg(long)]
        out: Option<PathBuf>,
        /// apply the file's [quick] table
        #[arg(long)]
        quick: bool,
        /// first run's seed (default: the file's)
        #[arg(long)]
        seed: Option<u64>,
        /// runs per variant (default: the file's)
        #[arg(long)]
        runs: Option<u32>,
        /// no progress bar
        #[arg(long, short)]
        quiet: bool,
        /// runs (of every variant) at once on this many threads; results unchanged
        #[arg(long, short, default_value_t = 1)]
        jobs: usize,
    },
    /// plots of a results directory (a Python with matplotlib and the lab's package)
    Plot {
        dir: PathBuf,
        /// the interpreter (default: the repository's .venv/bin/python if present, else python3)
        #[arg(long)]
        python: Option<PathBuf>,
    },
}

/// Transparent huge pages for the heap (glibc's `malloc.hugetlb=1`: the arenas are
/// `madvise(MADV_HUGEPAGE)`d). 10^5 cores spread their tables over ~0.5 GB, touched
/// in no order: with 4 KiB pages nearly every host visited is a TLB miss; with
/// 2 MiB pages the user CPU of the flash crowd falls ~15 %. glibc reads its tunables
/// only at start-up, so the process re-executes itself once with the setting added
/// (`ILNP_SIM_THP=0` keeps 4 KiB pages). Results do not depend on it.
fn reexec_with_huge_pages() {
    use std::os::unix::process::CommandExt;
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if std::env::var_os("ILNP_SIM_THP").is_some_and(|v| v == "0") || tunables.contains("malloc.hugetlb") {
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    let value = if tunables.is_empty() {
        "glibc.malloc.hugetlb=1".to_string()
    } else {
        format!("{tunables}:glibc.malloc.hugetlb=1")
    };
    // only returns on failure: then run on with 4 KiB pages
    let _ = std::process::Command::new(exe).args(std::env::args_os().skip(1)).env("GLIBC_TUNABLES", value).exec();
}

fn main() -> Result<()> {
    reexec_with_huge_pages();
    match Cli::parse().cmd {
        Cmd::Run { scenario, out, quick, seed, runs, quiet, jobs } => {
            let file = ScenarioFile::load(&scenario)?;
            let name = file.base()?.name;
            let out = out.unwrap_or_else(|| PathBuf::from("sim-out").join(&name));
            let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(1000) };
            bar.set_style(
                ProgressStyle::with_template("{prefix} [{bar:40}] {percent}% sim time, {elapsed} wall")
                    .expect("template"),
            );
            let (report, perf) = ilnp_sim::run_file_jobs(&file, quick, seed, runs, jobs, &|now, end, label| {
                bar.set_prefix(label.to_string());
                bar.set_position(now.saturating_mul(1000) / end.max(1));
            })?;
            bar.finish_and_clear();
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            std::fs::write(out.join("results.json"), report.json())?;
            std::fs::write(out.join("lu.csv"), report.lu_csv())?;
            std::fs::write(out.join("timeline.csv"), report.timeline_csv())?;
            std::fs::write(out.join("perf.json"), serde_json::to_string_pretty(&perf)? + "\n")?;
            for v in &report.summary {
                let h = &v.handoff;
                println!(
                    "{:<16} runs {:>3}  LUs {:>7}  acked {:>6.2}%  delay ms p50 {} p90 {} p99 {}",
                    v.variant,
                    v.runs,
                    h.lus,
                    h.success_pct.unwrap_or(0.0),
                    opt(h.delay_ms.p50),
                    opt(h.delay_ms.p90),
                    opt(h.delay_ms.p99)
                );
            }
            for v in &report.summary {
                let ps: Vec<_> = perf.iter().filter(|p| p.variant == v.variant).collect();
                let ev = ps.iter().map(|p| p.events).sum::<u64>();
                let wall = ps.iter().map(|p| p.wall_s).sum::<f64>();
                let cpu = ps.iter().map(|p| p.cpu_s).sum::<f64>();
                let p = ps[0];
                println!(
                    "{:<16} {} hosts, {} events in {:.2} s CPU ({:.2} s wall) = {:.0} events per CPU-second; \
                     {} bytes/host, peak RSS {} MiB",
                    v.variant,
                    p.hosts,
                    ev,
                    cpu,
                    wall,
                    ev as f64 / cpu.max(1e-9),
                    p.bytes_per_host.map_or("?".into(), |b| format!("{b:.0}")),
                    p.peak_rss_bytes.map_or("?".into(), |b| format!("{}", b >> 20)),
                );
            }
            println!("results in {}", out.display());
            Ok(())
        }
        Cmd::Plot { dir, python } => {
            let venv = PathBuf::from(".venv/bin/python");
            let py = python.unwrap_or_else(|| if venv.exists() { venv } else { PathBuf::from("python3") });
            let st = std::process::Command::new(&py)
                .args(["-m", "ilnp_lab.simplot"])
                .arg(&dir)
                .status()
                .with_context(|| format!("running {} -m ilnp_lab.simplot", py.display()))?;
            anyhow::ensure!(st.success(), "ilnp_lab.simplot failed: {st}");
            Ok(())
        }
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v}"))
}
