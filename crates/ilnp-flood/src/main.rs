//! ilnp-flood: sends spoofed ILNPv6 packets to one target as fast as one core can
//! (or at `--pps`), for the admission tests (issue #11) and the seed 004 runs.
//! Each packet comes from a new random NID (or `--nid`), carries a random nonce
//! (or none: `--no-nonce`), and is UDP to `--dport` or a TCP SYN (`--syn`).
//! Packets are built with ilnp-wire (the RFC 6744 checksum rule) and sent through
//! a raw IPv6 socket (`IPPROTO_RAW`: the header is ours, so any source works).
//! Prints one JSON object: {"sent", "errors", "seconds", "pps"}.

use clap::Parser;
use ilnp_wire::{destopts, ilnp_addr, ipv6, l4, Nid, Nonce};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "spoofed random-NID ILNPv6 flood towards one wire address")]
struct Args {
    /// the target's wire address (L64:NID)
    #[arg(long)]
    dst: Ipv6Addr,
    /// the source locator of the spoofed packets (a /64 prefix or L64 address)
    #[arg(long)]
    src_l64: Ipv6Addr,
    /// every packet from this NID (e.g. a known peer, with a wrong nonce) instead of random ones
    #[arg(long)]
    nid: Option<String>,
    /// packets to send
    #[arg(long, default_value_t = 100_000)]
    count: u64,
    /// packets per second (0: as fast as possible)
    #[arg(long, default_value_t = 0)]
    pps: u64,
    /// destination port
    #[arg(long, default_value_t = 9)]
    dport: u16,
    /// TCP SYNs instead of UDP datagrams
    #[arg(long)]
    syn: bool,
    /// no nonce option (plain IPv6 from random interface identifiers)
    #[arg(long)]
    no_nonce: bool,
    /// UDP payload bytes
    #[arg(long, default_value_t = 16)]
    payload: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

const GROUP_BIT: u64 = 0x0100_0000_0000_0000;

/// A UDP datagram carrying `payload`, checksum under the ILNPv6 wire rule.
fn udp(src: &Ipv6Addr, dst: &Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(l4::UDP_HEADER_LEN + payload.len());
    l4::UdpRepr { src_port: sport, dst_port: dport }.emit(payload, &mut u);
    l4::fill_checksum(&mut u, ipv6::NextHeader::UDP, src, dst, l4::PseudoHeader::Ilnp);
    u
}

/// A SYN (window 64240, no options), checksum under the ILNPv6 wire rule.
fn syn(src: &Ipv6Addr, dst: &Ipv6Addr, sport: u16, dport: u16, seq: u32) -> Vec<u8> {
    let mut t = Vec::with_capacity(l4::TCP_HEADER_LEN);
    l4::TcpRepr { src_port: sport, dst_port: dport, seq, ack: 0, flags: l4::tcp_flags::SYN, window: 64240 }
        .emit(&[], &mut t);
    l4::fill_checksum(&mut t, ipv6::NextHeader::TCP, src, dst, l4::PseudoHeader::Ilnp);
    t
}

fn main() {
    let a = Args::parse();
    let fixed = a.nid.as_deref().map(|s| s.parse::<Nid>().unwrap_or_else(|e| panic!("--nid {s:?}: {e}")));
    let (src_loc, _) = ilnp_wire::split_addr(a.src_l64);
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
    // SAFETY: plain socket(2); the fd is checked and closed at exit.
    let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_addr.s6_addr = a.dst.octets();
    let payload = vec![0x5a; a.payload];
    let (mut sent, mut errors) = (0u64, 0u64);
    let t0 = Instant::now();
    for i in 0..a.count {
        let nid = fixed.unwrap_or_else(|| Nid(rng.next_u64() & !GROUP_BIT));
        let src = ilnp_addr(src_loc, nid);
        let sport = 1024 + (rng.next_u32() % 60000) as u16;
        let (proto, upper) = if a.syn {
            (ipv6::NextHeader::TCP, syn(&src, &a.dst, sport, a.dport, rng.next_u32()))
        } else {
            (ipv6::NextHeader::UDP, udp(&src, &a.dst, sport, a.dport, &payload))
        };
        let nonce = Nonce::N32(rng.next_u32().to_be_bytes());
        let pkt = destopts::packet(src, a.dst, 64, (!a.no_nonce).then_some(&nonce), proto, &upper);
        // SAFETY: pkt and sa outlive the call; lengths are theirs.
        let r = unsafe {
            libc::sendto(
                fd,
                pkt.as_ptr().cast(),
                pkt.len(),
                0,
                (&sa as *const libc::sockaddr_in6).cast(),
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        };
        if r < 0 {
            errors += 1;
        } else {
            sent += 1;
        }
        if a.pps > 0 {
            let due = t0 + Duration::from_secs_f64((i + 1) as f64 / a.pps as f64);
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    // SAFETY: our fd, closed once.
    unsafe { libc::close(fd) };
    println!(
        "{}",
        serde_json::json!({"sent": sent, "errors": errors, "seconds": secs, "pps": sent as f64 / secs.max(1e-9)})
    );
}
