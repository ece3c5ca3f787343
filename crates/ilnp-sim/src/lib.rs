//! `ilnp-sim`: the protocol core (`ilnp_core::Core`, unchanged) at Internet scale
//! in a deterministic discrete-event simulation. See `docs/simulation.md`.
//!
//! * `scenario`: the TOML scenario files, variants and `--quick`
//! * `sim`: the engine: the world's parts and the event loop dispatching between them
//! * `network`: access links, backbone, routers (locator → host), Neighbour Discovery
//! * `hosts`: one core per host, its networks, the fast path's admission check
//! * `apps`: UDP senders and echo servers
//! * `mobility`: moves and renumbering (when, where, how)
//! * `packet`: the applications' UDP datagrams on `ilnp-wire`
//! * `queue`: the event queue (a calendar of 1 ms buckets, (time, sequence) order)
//! * `metrics`: what a run counts; `results`: what it reports, from simulated time only
//! * `time`, `rng`, `hash`: simulated time, the shared random stream, the routers' hasher

mod apps;
mod hash;
mod hosts;
mod metrics;
mod mobility;
mod network;
mod packet;
pub mod queue;
pub mod results;
mod rng;
pub mod scenario;
pub mod sim;
pub mod time;

use anyhow::Result;
use results::{LuSummary, Results};
use scenario::ScenarioFile;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Instant;

/// Wall-clock cost of one run (never part of the deterministic results).
#[derive(Clone, Debug, Serialize)]
pub struct Perf {
    pub variant: String,
    pub run: u32,
    pub hosts: usize,
    pub events: u64,
    pub setup_s: f64,
    pub wall_s: f64,
    pub events_per_s: f64,
    /// CPU time of the run (after setup), user + system, of its thread
    pub cpu_s: f64,
    pub events_per_cpu_s: f64,
    /// resident set growth while building the hosts, per host
    pub bytes_per_host: Option<f64>,
    pub peak_rss_bytes: Option<u64>,
}

/// Every run of every variant.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub title: String,
    pub quick: bool,
    /// per variant, the runs pooled
    pub summary: Vec<VariantSummary>,
    pub runs: Vec<Results>,
}

#[derive(Clone, Debug, Serialize)]
pub struct VariantSummary {
    pub variant: String,
    pub runs: usize,
    pub handoff: LuSummary,
}

/// Runs every variant `runs` times (seed + run index); `progress(done_ns, total_ns, label)`.
pub fn run_file(
    file: &ScenarioFile,
    quick: bool,
    seed: Option<u64>,
    runs: Option<u32>,
    progress: &mut dyn FnMut(u64, u64, &str),
) -> Result<(Report, Vec<Perf>)> {
    let (base, tasks) = tasks(file, quick, seed, runs)?;
    let done = tasks.iter().map(|t| run_one(t, true, &mut |now, end, label| progress(now, end, label))).collect();
    Ok(assemble(&base, quick, &tasks, done))
}

/// As `run_file`, the runs (every variant's) spread over `jobs` threads: each
/// `Sim` is independent and its results go back in the same order, so the report is
/// byte-identical to `run_file`'s. `perf.json`'s `bytes_per_host` is left out (the
/// resident set then grows for several runs at once).
pub fn run_file_jobs(
    file: &ScenarioFile,
    quick: bool,
    seed: Option<u64>,
    runs: Option<u32>,
    jobs: usize,
    progress: &(dyn Fn(u64, u64, &str) + Sync),
) -> Result<(Report, Vec<Perf>)> {
    let (base, tasks) = tasks(file, quick, seed, runs)?;
    let jobs = jobs.clamp(1, tasks.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<(Results, Perf)>>> = tasks.iter().map(|_| Default::default()).collect();
    std::thread::scope(|sc| {
        for _ in 0..jobs {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(t) = tasks.get(i) else { break };
                let r = run_one(t, jobs == 1, &mut |now, end, label| progress(now, end, label));
                *slots[i].lock().expect("no panics while held") = Some(r);
            });
        }
    });
    let done = slots.into_iter().map(|m| m.into_inner().expect("not poisoned").expect("every task ran")).collect();
    Ok(assemble(&base, quick, &tasks, done))
}

/// One run to do: variant name, its scenario, run index, runs of the variant, seed.
struct Task {
    name: String,
    s: scenario::Scenario,
    run: u32,
    runs: u32,
    seed: u64,
}

fn tasks(
    file: &ScenarioFile,
    quick: bool,
    seed: Option<u64>,
    runs: Option<u32>,
) -> Result<(scenario::Scenario, Vec<Task>)> {
    let mut tasks = Vec::new();
    for (name, s) in file.variants(quick)? {
        let n = runs.unwrap_or(s.runs).max(1);
        for r in 0..n {
            let seed = seed.unwrap_or(s.seed) + r as u64;
            tasks.push(Task { name: name.clone(), s: s.clone(), run: r, runs: n, seed });
        }
    }
    Ok((file.base()?, tasks))
}

/// `measure_rss`: the resident set's growth while building is this run's alone.
fn run_one(t: &Task, measure_rss: bool, progress: &mut dyn FnMut(u64, u64, &str)) -> (Results, Perf) {
    let rss0 = rss_bytes();
    let t0 = Instant::now();
    let mut sim = sim::Sim::new(&t.s, t.seed);
    let setup = t0.elapsed().as_secs_f64();
    let rss1 = rss_bytes();
    let label = format!("{} run {}/{}", t.name, t.run + 1, t.runs);
    let end = sim.end;
    let t1 = Instant::now();
    let c1 = thread_cpu_s();
    let mut res = sim.run(&mut |now| progress(now, end, &label));
    let wall = t1.elapsed().as_secs_f64();
    let cpu = thread_cpu_s() - c1;
    res.scenario = t.s.name.clone();
    res.variant = t.name.clone();
    res.run = t.run;
    res.seed = t.seed;
    let perf = Perf {
        variant: t.name.clone(),
        run: t.run,
        hosts: sim.host_count(),
        events: sim.events,
        setup_s: (setup * 1e3).round() / 1e3,
        wall_s: (wall * 1e3).round() / 1e3,
        events_per_s: (sim.events as f64 / wall.max(1e-9)).round(),
        cpu_s: (cpu * 1e3).round() / 1e3,
        events_per_cpu_s: (sim.events as f64 / cpu.max(1e-9)).round(),
        bytes_per_host: rss0
            .zip(rss1)
            .filter(|_| measure_rss)
            .map(|(a, b)| (b.saturating_sub(a) as f64 / sim.host_count().max(1) as f64).round()),
        peak_rss_bytes: peak_rss_bytes(),
    };
    (res, perf)
}

fn assemble(base: &scenario::Scenario, quick: bool, tasks: &[Task], done: Vec<(Results, Perf)>) -> (Report, Vec<Perf>) {
    let (all, perf): (Vec<Results>, Vec<Perf>) = done.into_iter().unzip();
    let mut summary = Vec::new();
    let mut first = 0;
    while first < tasks.len() {
        let name = &tasks[first].name;
        let n = tasks[first..].iter().take_while(|t| &t.name == name).count();
        summary.push(VariantSummary {
            variant: name.clone(),
            runs: n,
            handoff: LuSummary::of(all[first..first + n].iter().flat_map(|r| r.lu_samples.iter())),
        });
        first += n;
    }
    (Report { scenario: base.name.clone(), title: base.title.clone(), quick, summary, runs: all }, perf)
}

impl Report {
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serialisable") + "\n"
    }

    /// One line per Locator Update advertisement.
    pub fn lu_csv(&self) -> String {
        let mut s = String::from("variant,run,host,group,t_s,delay_ms,attempts,acked,pending\n");
        for r in &self.runs {
            for l in &r.lu_samples {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{},{}",
                    r.variant, r.run, l.host, l.group, l.t_s, l.delay_ms, l.attempts, l.acked, l.pending
                );
            }
        }
        s
    }

    /// The server's samples.
    pub fn timeline_csv(&self) -> String {
        let mut s = String::from("variant,run,t_s,ilcc_established,ilcc_embryonic,lus_received\n");
        for r in &self.runs {
            for t in &r.timeline {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{}",
                    r.variant, r.run, t.t_s, t.ilcc_established, t.ilcc_embryonic, t.lus_received
                );
            }
        }
        s
    }
}

fn status_field(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU time of the calling thread (user + system), in seconds: on a shared machine
/// the figure that does not depend on what else runs.
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for clock_gettime
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

pub fn rss_bytes() -> Option<u64> {
    status_field("VmRSS:")
}

pub fn peak_rss_bytes() -> Option<u64> {
    status_field("VmHWM:")
}
