//! ilnp-delayline: forwards L2 frames between two interfaces in both directions with
//! per-direction one-way delay, delay variation (jitter, with a distribution), random
//! loss and rate limit. For kernels without netem.
//!
//! One thread per direction: read a batch (recvmmsg) from the input interface, decide
//! (line.rs), sleep with ppoll until the next release time or new input, send the due
//! frames as a batch (sendmmsg) on the other interface. PACKET_VNET_HDR keeps GSO
//! super-frames intact, so 64 KB TSO frames from veth pass through unsegmented.
//!
//! Typical use: R1 <-veth-> [dl-a | ilnp-delayline | dl-b] <-veth-> R2, the middle in its
//! own namespace with `net.ipv6.conf.dl-{a,b}.disable_ipv6=1` so its stack stays silent:
//!   ip netns exec dl ilnp-delayline --a dl-a --b dl-b --delay-ms 20 --loss 1 --seed 7
//! Loss and the queue limit act per frame as received: a GSO super-frame is lost whole
//! (turn TSO/GSO off on the senders for per-segment loss).

mod line;
mod sock;

use clap::Parser;
use line::{DirConfig, DirStats, Direction, Dist, Frame, Order, Verdict};
use serde::Serialize;
use sock::{mono_ns, send_batch, PacketSock, RxBatch};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

static STOP: AtomicBool = AtomicBool::new(false);

macro_rules! log {
    ($lvl:literal, $($arg:tt)*) => { eprintln!(concat!("ilnp-delayline ", $lvl, " {}"), format_args!($($arg)*)) };
}

const BATCH: usize = 64;
/// Largest frame: 64 KB GSO frame + Ethernet + virtio_net_hdr, with room to spare.
const SLOT_BYTES: usize = 128 * 1024;
/// Longest sleep without checking for a stop request.
const MAX_IDLE_NS: u64 = 100_000_000;

fn parse_ms(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=3_600_000.0).contains(&v) {
        Ok(v)
    } else {
        Err("must be between 0 and 3600000 ms".into())
    }
}

fn parse_pct(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=100.0).contains(&v) {
        Ok(v)
    } else {
        Err("must be a percentage between 0 and 100".into())
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err("must be > 0 (Mbit/s)".into())
    }
}

/// L2 link emulator: forwards frames between two interfaces (A <-> B) with one-way delay,
/// random loss and rate limit per direction. Counters are printed on SIGINT/SIGTERM.
#[derive(Parser, Debug, Serialize)]
#[command(version, about, long_about = None)]
struct Cli {
    /// First interface (frames read here go to --b)
    #[arg(long = "a", value_name = "IFACE")]
    a: String,
    /// Second interface (frames read here go to --a)
    #[arg(long = "b", value_name = "IFACE")]
    b: String,
    /// One-way delay in both directions (milliseconds, fractional allowed)
    #[arg(long, value_name = "MS", default_value = "0", value_parser = parse_ms)]
    delay_ms: f64,
    /// One-way delay A->B, overrides --delay-ms
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    delay_ms_ab: Option<f64>,
    /// One-way delay B->A, overrides --delay-ms
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    delay_ms_ba: Option<f64>,
    /// Delay variation in both directions: the standard deviation of the one-way delay
    /// (milliseconds; 0 = constant delay)
    #[arg(long, value_name = "MS", default_value = "0", value_parser = parse_ms)]
    jitter_ms: f64,
    /// Jitter A->B, overrides --jitter-ms
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    jitter_ms_ab: Option<f64>,
    /// Jitter B->A, overrides --jitter-ms
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    jitter_ms_ba: Option<f64>,
    /// Shape of the delay variation (mean 0, deviation --jitter-ms; see line.rs)
    #[arg(long, value_enum, default_value = "normal")]
    jitter_dist: Dist,
    /// fifo: a frame never overtakes an earlier one (its release waits for the previous
    /// frame's); reorder: each frame keeps its own delay, as netem does with jitter
    #[arg(long, value_enum, default_value = "fifo")]
    jitter_order: Order,
    /// Random loss in both directions, percent of frames
    #[arg(long, value_name = "PCT", default_value = "0", value_parser = parse_pct)]
    loss: f64,
    /// Random loss A->B, overrides --loss
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    loss_ab: Option<f64>,
    /// Random loss B->A, overrides --loss
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    loss_ba: Option<f64>,
    /// Rate limit per direction in Mbit/s (L2 bytes; default unlimited)
    #[arg(long, value_name = "MBIT", value_parser = parse_rate)]
    rate_mbit: Option<f64>,
    /// Maximum packets held per direction, delayed or waiting for the rate (like netem's
    /// limit; a GSO super-frame counts as its segments); tail drop beyond. With --rate-mbit,
    /// about rate x delay plus the router buffer you want
    #[arg(long, value_name = "N", default_value_t = 50000, value_parser = clap::value_parser!(u32).range(1..))]
    queue_packets: u32,
    /// RNG seed for the loss decisions (default: from the clock, and logged)
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Run the two forwarding threads SCHED_FIFO at this priority (1-99): keeps the
    /// release times accurate when other work competes for the CPUs
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
    rt_prio: Option<i32>,
    /// Write the final counters as JSON to this file on exit
    #[arg(long, value_name = "PATH")]
    stats_json: Option<std::path::PathBuf>,
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Forwards `rx` -> `tx` until STOP. Returns the direction for its counters.
fn run_direction(
    tag: &str,
    rx: &PacketSock,
    tx: &PacketSock,
    mut line: Direction,
    rt_prio: Option<i32>,
) -> Result<DirStats, String> {
    // 1 us timer slack (default 50 us) for release-time accuracy.
    // SAFETY: prctl with integer args.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
    if let Some(prio) = rt_prio {
        let param = libc::sched_param { sched_priority: prio };
        // SAFETY: param is valid; applies to this thread only.
        let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
        if r != 0 {
            log!("WARN", "{tag}: --rt-prio {prio}: SCHED_FIFO refused: {}", std::io::Error::from_raw_os_error(r));
        }
    }
    let mut rxb = RxBatch::new(BATCH, SLOT_BYTES);
    let mut due: Vec<Frame> = Vec::with_capacity(BATCH);
    let (mut iovs, mut msgs) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH));
    let mut last_send_err: Option<i32> = None;
    let mut result = Ok(());
    while !STOP.load(Ordering::Relaxed) {
        // Send everything that is due, in batches.
        loop {
            let now = mono_ns();
            due.clear();
            while due.len() < BATCH {
                match line.pop_due(now) {
                    Some(f) => due.push(f),
                    None => break,
                }
            }
            if due.is_empty() {
                break;
            }
            let frames: Vec<&[u8]> = due.iter().map(|f| f.data.as_slice()).collect();
            let mut errs: Vec<(usize, std::io::Error)> = Vec::new();
            let mut ok: Vec<usize> = Vec::with_capacity(frames.len());
            send_batch(tx, &frames, &mut iovs, &mut msgs, |i, r| match r {
                Ok(()) => ok.push(i),
                Err(e) => errs.push((i, e)),
            });
            let sent_at = mono_ns();
            for i in ok {
                line.record_sent(&due[i], sent_at);
            }
            for (_, e) in errs {
                line.record_send_error();
                if last_send_err != e.raw_os_error() {
                    log!("WARN", "{tag}: send on {} failed: {e} (counted as dropped_send_error)", tx.name);
                    last_send_err = e.raw_os_error();
                }
            }
        }
        let wait = match line.next_release() {
            Some(t) => t.saturating_sub(mono_ns()).min(MAX_IDLE_NS),
            None => MAX_IDLE_NS,
        };
        if wait > 0 {
            match rx.wait_readable(wait) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(e) => {
                    result = Err(format!("{tag}: poll on {}: {e}", rx.name));
                    break;
                }
            }
        }
        match rxb.recv(rx) {
            Ok(n) => {
                let now = mono_ns();
                for i in 0..n {
                    let r = rxb.get(i);
                    if r.truncated {
                        line.record_truncated();
                        continue;
                    }
                    if line.offer(now, r.data.to_vec()) == Verdict::QueueFull && line.stats().dropped_queue_full == 1 {
                        log!("WARN", "{tag}: queue full ({} frames), tail-dropping", line.queued());
                    }
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                log!("WARN", "{tag}: {} is down", rx.name);
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => {
                result = Err(format!("{tag}: receive on {}: {e}", rx.name));
                break;
            }
        }
    }
    STOP.store(true, Ordering::SeqCst);
    line.record_kernel_drops(rx.kernel_drops());
    let stats = line.finish();
    result.map(|_| stats)
}

#[derive(Serialize)]
struct Report<'a> {
    a: &'a str,
    b: &'a str,
    seed: u64,
    config: &'a Cli,
    a_to_b: &'a DirStats,
    b_to_a: &'a DirStats,
}

fn print_stats(tag: &str, s: &DirStats) {
    log!(
        "INFO",
        "{tag}: received {} frames, forwarded {} frames / {} segments / {} bytes, lost(random) {}, jitter clamped at 0 {}, held for order {}, dropped(queue full) {}, dropped(send error) {}, dropped(truncated) {}, kernel rx drops {}, unsent at exit {}, max queue {} frames / {} packets, release lateness avg {:.1} us max {:.1} us",
        s.received_frames, s.forwarded_frames, s.forwarded_segments, s.forwarded_bytes, s.lost_random,
        s.jitter_clamped, s.held_for_order, s.dropped_queue_full, s.dropped_send_error, s.dropped_truncated, s.kernel_rx_drops, s.unsent_at_exit,
        s.max_queue_frames, s.max_queue_segments, s.release_late_us_avg, s.release_late_us_max
    );
}

fn run(cli: &Cli) -> Result<(), String> {
    if cli.a == cli.b {
        return Err(format!("--a and --b name the same interface {}", cli.a));
    }
    let seed = cli.seed.unwrap_or_else(|| mono_ns() ^ ((std::process::id() as u64) << 32));
    let dir = |delay: Option<f64>, loss: Option<f64>, jitter: Option<f64>| DirConfig {
        delay_ns: (delay.unwrap_or(cli.delay_ms) * 1e6).round() as u64,
        loss: loss.unwrap_or(cli.loss) / 100.0,
        rate_bps: cli.rate_mbit.map(|m| m * 1e6),
        limit: cli.queue_packets as usize,
        jitter_ns: (jitter.unwrap_or(cli.jitter_ms) * 1e6).round() as u64,
        dist: cli.jitter_dist,
        order: cli.jitter_order,
    };
    let cab = dir(cli.delay_ms_ab, cli.loss_ab, cli.jitter_ms_ab);
    let cba = dir(cli.delay_ms_ba, cli.loss_ba, cli.jitter_ms_ba);
    let sa = Arc::new(PacketSock::open("--a", &cli.a)?);
    let sb = Arc::new(PacketSock::open("--b", &cli.b)?);
    install_signals();
    let rt = cli.rt_prio;
    let spawn = |tag: &'static str, rx: Arc<PacketSock>, tx: Arc<PacketSock>, cfg: DirConfig, seed: u64| {
        std::thread::Builder::new()
            .name(tag.into())
            .spawn(move || run_direction(tag, &rx, &tx, Direction::new(cfg, seed), rt))
            .map_err(|e| format!("spawn thread: {e}"))
    };
    let tab = spawn("a->b", sa.clone(), sb.clone(), cab, seed)?;
    let tba = spawn("b->a", sb, sa, cba, seed.wrapping_add(1))?;
    log!(
        "INFO",
        "ready: {} <-> {}; a->b delay {} ms jitter {} ms loss {}%; b->a delay {} ms jitter {} ms loss {}%; jitter {:?} {:?}; rate {}; queue {} packets; seed {seed}",
        cli.a,
        cli.b,
        cab.delay_ns as f64 / 1e6,
        cab.jitter_ns as f64 / 1e6,
        cab.loss * 100.0,
        cba.delay_ns as f64 / 1e6,
        cba.jitter_ns as f64 / 1e6,
        cba.loss * 100.0,
        cli.jitter_dist,
        cli.jitter_order,
        cli.rate_mbit.map_or("unlimited".to_string(), |r| format!("{r} Mbit/s")),
        cli.queue_packets
    );
    let rab = tab.join().map_err(|_| "a->b thread panicked".to_string())?;
    let rba = tba.join().map_err(|_| "b->a thread panicked".to_string())?;
    let (ab, ba) = match (rab, rba) {
        (Ok(ab), Ok(ba)) => (ab, ba),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    print_stats("a->b", &ab);
    print_stats("b->a", &ba);
    if let Some(path) = &cli.stats_json {
        let rep = Report { a: &cli.a, b: &cli.b, seed, config: cli, a_to_b: &ab, b_to_a: &ba };
        let text = serde_json::to_string_pretty(&rep).map_err(|e| format!("stats json: {e}"))?;
        std::fs::write(path, text + "\n").map_err(|e| format!("--stats-json {}: {e}", path.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => {
            log!("INFO", "stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            log!("ERROR", "{e}");
            ExitCode::FAILURE
        }
    }
}
