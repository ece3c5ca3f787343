//! ilnp-rr: UDP request/response latency, a compiled client for `bench/datapath.py`
//! (issue #14: the Python client's own cost hid the data path's). `server` echoes every
//! datagram; `client` sends one datagram, waits for its echo, and repeats, timing each
//! round trip with the monotonic clock. Debian's sockperf 3.7 has no IPv6, hence this.
//! The client prints one JSON object: {"n", "lost", "median_us", "p99_us", "min_us", "mean_us"}.

use clap::{Parser, Subcommand};
use std::net::{Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "UDP request/response latency (server echoes, client times round trips)")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// echo every datagram received on ADDR:PORT back to its sender
    Server {
        #[arg(long)]
        bind: Ipv6Addr,
        #[arg(long, default_value_t = 6200)]
        port: u16,
        /// exit after this many seconds without a datagram (0: never)
        #[arg(long, default_value_t = 0)]
        idle_exit: u64,
    },
    /// time `count` round trips to the server (after `warmup` untimed ones)
    Client {
        #[arg(long)]
        dst: Ipv6Addr,
        #[arg(long, default_value_t = 6200)]
        port: u16,
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        #[arg(long, default_value_t = 500)]
        warmup: usize,
        /// UDP payload bytes
        #[arg(long, default_value_t = 64)]
        size: usize,
    },
}

fn server(bind: Ipv6Addr, port: u16, idle_exit: u64) -> std::io::Result<()> {
    let s = UdpSocket::bind(SocketAddr::new(bind.into(), port))?;
    if idle_exit > 0 {
        s.set_read_timeout(Some(Duration::from_secs(idle_exit)))?;
    }
    let mut buf = [0u8; 65536];
    loop {
        match s.recv_from(&mut buf) {
            Ok((n, from)) => {
                s.send_to(&buf[..n], from)?;
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
}

/// Round-trip times (ns) sorted; `lost`: requests with no echo within the timeout.
fn client(dst: Ipv6Addr, port: u16, count: usize, warmup: usize, size: usize) -> std::io::Result<(Vec<u64>, usize)> {
    let s = UdpSocket::bind(SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), 0))?;
    s.connect(SocketAddr::new(dst.into(), port))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    let mut msg = vec![0x5au8; size.max(8)];
    let mut buf = vec![0u8; msg.len() + 64];
    let mut rtts = Vec::with_capacity(count);
    let mut lost = 0;
    for i in 0..(warmup + count) as u64 {
        msg[..8].copy_from_slice(&i.to_be_bytes());
        let t0 = Instant::now();
        s.send(&msg)?;
        // an echo of an earlier (timed-out) request is skipped, not counted
        let got = loop {
            match s.recv(&mut buf) {
                Ok(n) if n >= 8 && buf[..8] == msg[..8] => break true,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    break false
                }
                Err(e) => return Err(e),
            }
        };
        let ns = t0.elapsed().as_nanos() as u64;
        if i >= warmup as u64 {
            if got {
                rtts.push(ns);
            } else {
                lost += 1;
            }
        }
    }
    rtts.sort_unstable();
    Ok((rtts, lost))
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[i] as f64 / 1000.0
}

fn main() -> std::io::Result<()> {
    match Args::parse().cmd {
        Cmd::Server { bind, port, idle_exit } => server(bind, port, idle_exit),
        Cmd::Client { dst, port, count, warmup, size } => {
            let (rtts, lost) = client(dst, port, count, warmup, size)?;
            let mean =
                if rtts.is_empty() { f64::NAN } else { rtts.iter().sum::<u64>() as f64 / rtts.len() as f64 / 1000.0 };
            let out = serde_json::json!({
                "n": rtts.len(), "lost": lost, "median_us": pct(&rtts, 0.5), "p99_us": pct(&rtts, 0.99),
                "min_us": pct(&rtts, 0.0), "mean_us": mean,
            });
            println!("{out}");
            if rtts.is_empty() {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_over_loopback() {
        let port = 20000 + (std::process::id() % 20000) as u16;
        std::thread::spawn(move || server(Ipv6Addr::LOCALHOST, port, 5));
        std::thread::sleep(Duration::from_millis(100));
        let (rtts, lost) = client(Ipv6Addr::LOCALHOST, port, 200, 10, 64).unwrap();
        assert_eq!(lost, 0);
        assert_eq!(rtts.len(), 200);
        assert!(rtts.windows(2).all(|w| w[0] <= w[1]));
        assert!(pct(&rtts, 0.99) >= pct(&rtts, 0.5));
    }
}
