//! Slow-path cost per packet and memory per entry against the ILCC's size (issue #11
//! item 4): a core with N established entries (each made the way a responder makes
//! one, by a crafted first packet from a new NID under `admission = open`, so no test
//! hook), then the time of `handle_inbound` + `handle_outbound` for one established
//! peer, and of `handle_timeout`, averaged over many packets; RSS before and after.
//!
//!     cargo run --release -p ilnp-core --example ilcc_scale [N ...]
//!
//! Prints one line per N with the ratio to the first N.

use ilnp_core::{Admission, Core, CoreConfig, LocalLocator, LocatorState, RngCore};
use ilnp_wire::test_support::{udp, with_nonce, P};
use ilnp_wire::translate::Csum;
use ilnp_wire::{ilnp_addr, ipv6, Locator, Nid, Nonce};
use std::time::{Duration, Instant};

const LB: Locator = Locator(0x2001_0db8_000b_0000);
const LA: Locator = Locator(0x2001_0db8_000a_0000);
const NB: Nid = Nid(0x0200_00ff_fe00_000b);

struct Xorshift(u64);
impl RngCore for Xorshift {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn fill_bytes(&mut self, d: &mut [u8]) {
        for c in d.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
    fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), ilnp_core::RngError> {
        self.fill_bytes(d);
        Ok(())
    }
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace().nth(1).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0) * 4
}

/// A wire-form UDP packet from `nid` (at LA) to us with `nonce`.
fn from(nid: Nid, nonce: u32) -> Vec<u8> {
    let (s, d) = (ilnp_addr(LA, nid), ilnp_addr(LB, NB));
    let mut u = udp(ilnp_addr(P, nid), ilnp_addr(P, NB), 4000, 5000, b"payload-16-bytes");
    let upper = u.split_off(ipv6::HEADER_LEN);
    with_nonce(s, d, &Nonce::N32(nonce.to_be_bytes()), ipv6::NextHeader::UDP, &upper)
}

fn core(n: usize) -> Core {
    let mut cfg = CoreConfig::new(P, NB);
    cfg.admission = Admission::Open;
    cfg.ilcc_max_entries = n + 16;
    let mut c = Core::new(cfg, Box::new(Xorshift(0x9e37_79b9_7f4a_7c15)));
    let loc = LocalLocator {
        loc: LB,
        ifindex: 2,
        pref: 10,
        lifetime_s: u32::MAX,
        state: LocatorState::Active,
        has_router: true,
        deprecated: false,
    };
    c.set_local_locators(Instant::now(), vec![loc]);
    c
}

fn main() {
    let ns: Vec<usize> = {
        let a: Vec<usize> = std::env::args().skip(1).filter_map(|x| x.parse().ok()).collect();
        if a.is_empty() {
            vec![1, 1_000, 100_000, 1_000_000]
        } else {
            a
        }
    };
    let iters = 200_000u32;
    let mut base: Option<(f64, f64)> = None;
    println!("entries  in+out ns/pkt  ratio  timeout ns/call  ratio  RSS MiB  bytes/entry  fill s");
    for n in ns {
        let rss0 = rss_kib();
        let t = Instant::now();
        let mut c = core(n);
        let now = Instant::now();
        // entry 0 is the peer we time; the rest fill the cache
        for i in 0..n as u64 {
            c.handle_inbound(now, &from(Nid(0x0200_0000_0000_0000 + i), i as u32), Csum::Complete);
        }
        let fill_s = t.elapsed().as_secs_f64();
        assert_eq!(c.ilcc().iter().count(), n, "every crafted packet made an entry");
        let rss1 = rss_kib();
        let peer = Nid(0x0200_0000_0000_0000);
        let pin = from(peer, 0);
        let pout = udp(ilnp_addr(P, NB), ilnp_addr(P, peer), 5000, 4000, b"payload-16-bytes");
        let t = Instant::now();
        for k in 0..iters {
            // time moves a little, as it does: entries stay alive
            let at = now + Duration::from_micros(u64::from(k));
            std::hint::black_box(c.handle_inbound(at, &pin, Csum::Complete));
            std::hint::black_box(c.handle_outbound(at, &pout, Csum::Complete));
        }
        let per = t.elapsed().as_nanos() as f64 / f64::from(iters) / 2.0;
        let t = Instant::now();
        for k in 0..iters {
            std::hint::black_box(c.handle_timeout(now + Duration::from_micros(u64::from(k))));
        }
        let per_to = t.elapsed().as_nanos() as f64 / f64::from(iters);
        let (b_pkt, b_to) = *base.get_or_insert((per, per_to));
        let per_entry = (rss1.saturating_sub(rss0) * 1024) as f64 / n as f64;
        println!(
            "{n:>8}  {per:>13.0}  {:>5.2}  {per_to:>15.0}  {:>5.2}  {:>7.1}  {:>11.0}  {fill_s:>6.2}",
            per / b_pkt,
            per_to / b_to,
            rss1 as f64 / 1024.0,
            if n >= 1000 { per_entry } else { f64::NAN },
        );
    }
}
