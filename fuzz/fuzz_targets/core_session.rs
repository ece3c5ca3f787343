#![no_main]
//! The core as ilnpd runs it (admission = socket, the fallback probe on), driven over
//! time: each input is a configuration byte and then a sequence of operations —
//! packets in and out, clock steps and the timers they make due, fast-path activity,
//! local locator changes (moves), and a snapshot restored into a fresh core (a
//! restart). The clock is injected (an offset from one `Instant`), so an input
//! replays the same way every time.
//!
//! Input: `cfg` then `op*`. `cfg` bit 0: the correspondent is a configured peer (the
//! default, as in the lab); bit 1: hard handoff; bit 2: 96-bit nonces; bit 3:
//! responder adopts the initiator's nonce; bit 4: admission = open; bit 5: the peer
//! record also lists a v4 path (issue #26). `op` = one byte, its low 3 bits select (the
//! rest are arguments):
//!   0 `len:u16be bytes` wire packet in (from the uplink); op bit 3: as a datagram on
//!     the v4 path's port instead, from one of four IPv4 sources (op bits 4-5)
//!   1 `len:u16be bytes` identifier packet out (from ilnp0); the fast path's answer
//!     hint for an unadmitted peer is given when op bit 3 is set
//!   2 `ms:u16be` clock step, then every due timer
//!   3 clock to the next deadline the core asked for (if any), then the timers
//!   4 fast-path activity for the correspondent (op bit 3: for a stranger NID)
//!   5 local locators: op bits 3-6 choose {LB, LC} present, has_router, deprecated;
//!     op bit 7 adds a v4 path of ours (LV4)
//!   6 snapshot, restored into a fresh core that replaces this one (must succeed)
//!   7 fast-path receive stamp on a local locator
//!
//! Checked: no panic anywhere, a core's own snapshot restores, and after
//! `handle_timeout(now)` no timer is still due at `now` beyond a few rounds (ilnpd's
//! loop would spin). Seeds: fuzz/seeds/core_session, made by fuzz/make-session-seeds.py
//! from the golden packets of ilnp-wire's tests (the core here is LB:NB, the
//! correspondent LA:NA, as in those packets).
use ilnp_core::{
    Admission, AnswerHint, Core, CoreConfig, HandoffMode, LocalLocator, LocatorState, PeerLocator, PeerRecord,
};
use ilnp_wire::translate::Csum;
use ilnp_wire::{Locator, Nid, Nonce};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};

const P: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;
const LA: Locator = Locator(0x2001_0db8_000a_0000);
const LB: Locator = Locator(0x2001_0db8_000b_0000);
const LC: Locator = Locator(0x2001_0db8_000c_0000);
const NA: Nid = Nid(0x0200_00ff_fe00_000c);
const NB: Nid = Nid(0x0200_00ff_fe00_000d);
const STRANGER: Nid = Nid(0x0200_00ff_fe00_0099);
/// v4 paths: ours (10.0.0.2:6740) and the correspondent's (192.0.2.10:6740)
const LV4: Locator = Locator(0x0004_0a00_0002_1a54);
const LAV4: Locator = Locator(0x0004_c000_020a_1a54);
/// outer sources of datagrams: the correspondent's own, its NAT's, a rebinding, a stranger
const FROM: [([u8; 4], u16); 4] =
    [([192, 0, 2, 10], 6740), ([198, 51, 100, 1], 40000), ([198, 51, 100, 1], 41000), ([203, 0, 113, 9], 5555)];

struct Fixed(u64);
impl ilnp_core::RngCore for Fixed {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1);
        self.0 >> 11
    }
    fn fill_bytes(&mut self, d: &mut [u8]) {
        for b in d {
            *b = self.next_u64() as u8;
        }
    }
    fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), ilnp_core::RngError> {
        self.fill_bytes(d);
        Ok(())
    }
}

fn config(cfg: u8) -> CoreConfig {
    let mut c = CoreConfig::new(P, NB);
    // ilnpd's defaults where they differ from the core's (crates/ilnpd/src/daemon.rs build_core)
    c.admission = if cfg & 16 != 0 { Admission::Open } else { Admission::Socket };
    c.fallback_probe_after = Duration::from_millis(2000);
    if cfg & 2 != 0 {
        c.handoff = HandoffMode::Hard;
    }
    if cfg & 4 != 0 {
        c.nonce_len = 12;
    }
    c.adopt_initiator_nonce = cfg & 8 != 0;
    c
}

fn locators(bits: u8) -> Vec<LocalLocator> {
    let mut v = Vec::new();
    for (i, loc) in [(0u8, LB), (1, LC), (4, LV4)] {
        if bits & (1 << i) != 0 {
            v.push(LocalLocator {
                loc,
                ifindex: 2 + u32::from(i),
                pref: 10,
                lifetime_s: 30,
                state: LocatorState::Active,
                has_router: bits & 4 == 0,
                deprecated: bits & 8 != 0 && i == 0,
            });
        }
    }
    v
}

fn fresh(cfg: u8, now: Instant, locs: u8) -> Core {
    let mut c = Core::new(config(cfg), Box::new(Fixed(1)));
    c.set_local_locators(now, locators(locs));
    if cfg & 1 != 0 {
        c.add_peer(PeerRecord {
            name: "cn".into(),
            nid: NA,
            locators: if cfg & 32 != 0 {
                vec![PeerLocator { loc: LA, pref: 10 }, PeerLocator { loc: LAV4, pref: 30 }]
            } else {
                vec![PeerLocator { loc: LA, pref: 10 }]
            },
        });
    }
    c
}

/// Every due timer, as ilnpd's loop runs them; a timer still due after a few rounds is a spin.
fn timers(c: &mut Core, now: Instant) {
    for _ in 0..4 {
        match c.poll_timeout() {
            Some(t) if t <= now => {
                let _ = c.handle_timeout(now);
            }
            _ => return,
        }
    }
    panic!("a timer stays due at now after 4 rounds of handle_timeout: {:?}", c.poll_timeout());
}

fn take<'a>(d: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(d.len());
    let (a, b) = d.split_at(n);
    *d = b;
    a
}

fn u16be(d: &mut &[u8]) -> u16 {
    let b = take(d, 2);
    match b {
        [a, b] => u16::from_be_bytes([*a, *b]),
        [a] => u16::from(*a),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut d = data;
    let Some((&cfg, rest)) = d.split_first() else { return };
    d = rest;
    let t0 = Instant::now();
    let mut now = t0;
    let mut locs = 1u8;
    let mut c = fresh(cfg, now, locs);
    let mut steps = 0;
    while let Some((&op, rest)) = d.split_first() {
        d = rest;
        steps += 1;
        if steps > 256 {
            break;
        }
        match op & 7 {
            0 => {
                let n = u16be(&mut d) as usize;
                let pkt = take(&mut d, n);
                if op & 8 != 0 {
                    let (a, port) = FROM[usize::from((op >> 4) & 3)];
                    let from = std::net::SocketAddrV4::new(a.into(), port);
                    let _ = c.handle_inbound_v4(now, pkt, Csum::Complete, from);
                } else {
                    let _ = c.handle_inbound(now, pkt, Csum::Complete);
                }
            }
            1 => {
                let n = u16be(&mut d) as usize;
                let pkt = take(&mut d, n);
                let hint = op & 8 != 0;
                let nonce = if cfg & 4 != 0 { Nonce::N96([9; 12]) } else { Nonce::N32([9; 4]) };
                let at = now;
                let _ = c.handle_outbound_hinted(now, pkt, Csum::Partial, &mut |_| {
                    hint.then_some(AnswerHint { remote_loc: LA, local_loc: LB, peer_nonce: nonce, at, via: None })
                });
            }
            2 => {
                now += Duration::from_millis(u64::from(u16be(&mut d)));
                timers(&mut c, now);
            }
            3 => {
                if let Some(t) = c.poll_timeout() {
                    // never backwards, at most a day ahead (the clock stays bounded)
                    if t > now && t - now < Duration::from_secs(86_400) {
                        now = t;
                    }
                }
                timers(&mut c, now);
            }
            4 => c.note_activity(ilnp_core::IlccKey::stable(if op & 8 != 0 { STRANGER } else { NA }), now),
            5 => {
                locs = (op >> 3) & 31;
                let _ = c.set_local_locators(now, locators(locs));
            }
            6 => {
                let snap = c.snapshot(now);
                let mut n = fresh(cfg, now, locs);
                if let Err(e) = n.restore(now, &snap) {
                    panic!("a core's own snapshot does not restore: {e:?}");
                }
                c = n;
            }
            _ => c.note_local_activity(if op & 8 != 0 { LC } else { LB }, now),
        }
    }
    let _ = c.ilcc_view(now);
});
