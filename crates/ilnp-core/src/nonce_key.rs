//! The nonces we derive instead of drawing (issue #11 admission, issue #46 item 2):
//! SipHash-2-4 under a secret key drawn once from the core's RNG, of the peer's NID,
//! locator and nonce. Reproducible without state, so every packet we send a
//! correspondent carries one nonce from the first on: a stateless answer (a TCP RST,
//! an ICMPv6 error towards a NID with no entry: `admission::answer_unadmitted`),
//! the responder's entry made when the same peer comes back (`admit_responder`),
//! and the entry we open to a peer we answered lately (`NonceKey::answered`).
//! Unpredictable without the key; bound to the locator the answer went to, so a host
//! that claims a NID from its own locator learns a nonce worthless for that NID's
//! session elsewhere. docs/design/nonce-models.md § One nonce from the first packet.
//! The nonces we draw come from here too (`random_nonce`), and every 96-bit one,
//! drawn or derived, passes `nonce96`.

use crate::admission_terms::{Admission, AnswerHint};
use crate::config::CoreConfig;
use ilnp_wire::{Locator, Nid, Nonce};
use rand_core::RngCore;
use std::time::Instant;

/// SipHash-2-4 (Aumasson, Bernstein 2012) of `msg` under `key`: the keyed PRF behind
/// our derived nonces.
fn siphash24(key: [u64; 2], msg: &[u8]) -> u64 {
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut v = [
        key[0] ^ 0x736f_6d65_7073_6575,
        key[1] ^ 0x646f_7261_6e64_6f6d,
        key[0] ^ 0x6c79_6765_6e65_7261,
        key[1] ^ 0x7465_6462_7974_6573,
    ];
    let absorb = |v: &mut [u64; 4], m: u64| {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    };
    let chunks = msg.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        absorb(&mut v, u64::from_le_bytes(b));
    }
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    last[7] = msg.len() as u8;
    absorb(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// The key of our derived nonces, drawn from the core's RNG at its first use (never
/// logged, never saved: a restart derives other nonces, as a restart draws others).
#[derive(Default)]
pub struct NonceKey(Option<[u64; 2]>);

impl std::fmt::Debug for NonceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "NonceKey(set)" } else { "NonceKey(unset)" })
    }
}

impl NonceKey {
    /// Our nonce towards `nid` at `loc` whose nonce is `peer_nonce` (a responder's
    /// peer, or the source of a packet we answer without state): SipHash-2-4 of the
    /// three under the key. A refusal sent with no state and the entry made when the
    /// same peer (same session on its side) comes back carry the same nonce, so its
    /// core sees no change (no peer-restart challenge). A peer that shares one nonce
    /// both ways (`CoreConfig::shared_nonce`) gets its own.
    pub(crate) fn derive(
        &mut self,
        cfg: &CoreConfig,
        rng: &mut dyn RngCore,
        nid: Nid,
        loc: Locator,
        peer_nonce: &Nonce,
    ) -> Nonce {
        if cfg.shared_nonce(nid) {
            // one nonce both ways: the refusal carries the one the entry will use
            return *peer_nonce;
        }
        let key = *self.0.get_or_insert_with(|| [rng.next_u64(), rng.next_u64()]);
        let mut msg = Vec::with_capacity(29);
        msg.push(0);
        msg.extend_from_slice(&nid.0.to_be_bytes());
        msg.extend_from_slice(&loc.0.to_be_bytes());
        msg.extend_from_slice(peer_nonce.as_bytes());
        let a = siphash24(key, &msg).to_be_bytes();
        if cfg.nonce_len != 12 {
            return Nonce::N32([a[0], a[1], a[2], a[3]]);
        }
        msg[0] = 1;
        let b = siphash24(key, &msg).to_be_bytes();
        let mut n = [0u8; 12];
        n[..8].copy_from_slice(&a);
        n[8..].copy_from_slice(&b[..4]);
        crate::nonce_key::nonce96(n)
    }

    /// Our nonce for the entry we open to `nid` (initiator) when a stateless answer
    /// to it may have gone out lately: the one that answer carried, so the peer sees
    /// one nonce from us from the first packet on (the Linux 4.9 prototype keeps the
    /// first it sees and drops every later packet with another; an ilnpd peer that
    /// learned it would take a new one for a restart). Only under admission = socket
    /// (the only policy with stateless answers), from the fast path's `hint` for `nid`
    /// no older than the ILCC idle timeout (as long as a peer may hold that nonce),
    /// and only if the hint's locator is one of `locators`, those we open the entry
    /// with: a host that claims `nid` from elsewhere got a nonce bound to its own
    /// locator, not this session's. None: the caller draws a random one.
    pub(crate) fn answered(
        &mut self,
        cfg: &CoreConfig,
        rng: &mut dyn RngCore,
        now: Instant,
        nid: Nid,
        locators: &[Locator],
        hint: Option<AnswerHint>,
    ) -> Option<Nonce> {
        let h = hint.filter(|h| {
            cfg.admission == Admission::Socket
                && now.saturating_duration_since(h.at) <= cfg.idle_timeout
                && locators.contains(&h.remote_loc)
        })?;
        Some(self.derive(cfg, rng, nid, h.remote_loc, &h.peer_nonce))
    }
}

/// A fresh random nonce from `rng`: 96 bits if `nonce_len` is 12, else 32.
pub(crate) fn random_nonce(rng: &mut dyn RngCore, nonce_len: usize) -> Nonce {
    let mut b = [0u8; 12];
    rng.fill_bytes(&mut b);
    if nonce_len == 12 {
        nonce96(b)
    } else {
        Nonce::N32([b[0], b[1], b[2], b[3]])
    }
}

/// Every 96-bit nonce we use (random or derived) goes through here: 95 bits, not 96.
/// Nonce byte 8 is DestOpts header byte 12, which Linux routers read as the TCP data
/// offset of a forwarded GSO packet (ilnp_wire::destopts::GSO_DOFF_BYTE); with its top
/// bit set they answer every GSO packet of the session with Packet Too Big.
pub(crate) fn nonce96(mut b: [u8; 12]) -> Nonce {
    b[8] &= 0x7f;
    Nonce::N96(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Core;

    #[test]
    fn siphash_matches_the_reference_vector() {
        // the paper's appendix: key 00..0f, message 00..0e
        let key = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(key, &msg), 0xa129_ca61_49be_45e5);
        assert_ne!(siphash24(key, &msg[..14]), siphash24(key, &msg));
    }

    use crate::event::{DropReason, Outcome};
    use crate::peers::{PeerLocator, PeerRecord};
    use crate::tests::{core, core_with, delivered, nonce_of, udp, wire, TestRng, LA, LB, LB2, NA, NB, P};
    use ilnp_wire::ipv6::{self, NextHeader};
    use ilnp_wire::test_support as ts;
    use ilnp_wire::translate::Csum;
    use ilnp_wire::{ilnp_addr, split_addr};
    use std::time::Duration;

    const NC: Nid = Nid(0x0200_0000_0000_00cc);
    /// A host that claims NA from its own network.
    const LX: Locator = Locator(0x2001_0db8_0066_0000);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// B under admission = socket, with a record for each of `peers` (NID, locator).
    fn b_socket(peers: &[(Nid, Locator)]) -> Core {
        let mut b = core_with(NB, LB, 2, None, |c| c.admission = Admission::Socket);
        for &(nid, loc) in peers {
            b.add_peer(PeerRecord { name: "p".into(), nid, locators: vec![PeerLocator { loc, pref: 10 }] });
        }
        b
    }

    /// A TCP segment in identifier form with the given flags, port 4000 -> 80.
    fn seg(src: Nid, dst: Nid, flags: u8) -> Vec<u8> {
        let (s, d) = (ilnp_addr(P, src), ilnp_addr(P, dst));
        let (sp, dp) = if src == NB { (80, 4000) } else { (4000, 80) };
        let mut t = ts::tcp(s, d, sp, dp, b"");
        t[40 + 13] = flags;
        t[40 + 16..40 + 18].copy_from_slice(&[0, 0]);
        let c = ilnp_wire::checksum::compute(&s, &d, NextHeader::TCP, &t[40..]);
        t[40 + 16..40 + 18].copy_from_slice(&c.to_be_bytes());
        t
    }

    /// B's stack refusing a TCP connection from `to` (an identifier-form RST).
    fn rst(to: Nid) -> Vec<u8> {
        seg(NB, to, 0x14)
    }

    fn hint(remote_loc: Locator, peer_nonce: Nonce, at: Instant) -> AnswerHint {
        AnswerHint { remote_loc, local_loc: LB, peer_nonce, at, via: None }
    }

    /// The Linux 4.9 prototype's case (issue #46): A's SYN reaches a closed port of B,
    /// B's stack answers statelessly (RST), then B's application opens a session to A. Both
    /// carry one nonce, so A's core (which learned it from the answer) neither
    /// challenges nor drops; before, the entry drew a fresh one.
    #[test]
    fn the_entry_we_open_after_a_stateless_answer_carries_its_nonce() {
        for len in [4, 12] {
            let now = Instant::now();
            let set = |c: &mut CoreConfig| c.nonce_len = len;
            let mut a = core_with(NA, LA, 1, Some((NB, LB)), set);
            let mut b = core_with(NB, LB, 2, None, |c| {
                set(c);
                c.admission = Admission::Socket;
            });
            b.add_peer(PeerRecord { name: "a".into(), nid: NA, locators: vec![PeerLocator { loc: LA, pref: 10 }] });
            let syn = wire(&a.handle_outbound(now, &seg(NA, NB, 0x02), Csum::Complete)).pop().unwrap();
            let h = hint(LA, nonce_of(&syn), now);
            let answer = wire(&b.handle_outbound_hinted(now, &rst(NA), Csum::Complete, &mut |_| Some(h)));
            let first = nonce_of(answer.first().expect("the stateless answer"));
            assert!(b.ilcc.iter().next().is_none(), "no state");
            a.handle_inbound(now + ms(1), &answer[0], Csum::Complete);
            assert_eq!(a.ilcc.iter().next().unwrap().nonce_rx, Some(first), "A learned it");
            // B's application opens a session to A a moment later
            let out = b.handle_outbound_hinted(now + ms(50), &udp(NB, NA, b"hello"), Csum::Complete, &mut |_| Some(h));
            let data = wire(&out).pop().expect("sent");
            assert_eq!(nonce_of(&data), first, "one nonce from our first packet on ({len} bytes)");
            assert_eq!(b.ilcc.iter().next().unwrap().nonce_tx, first);
            let got = a.handle_inbound(now + ms(51), &data, Csum::Complete);
            assert_eq!(delivered(&got).len(), 1, "{got:?}");
            assert_eq!(a.stats().outcome(Outcome::PeerChallengeSent), 0, "no restart seen");
            assert_eq!(a.stats().dropped(DropReason::BadNonce), 0);
        }
    }

    /// Each peer its own nonce; a host that claims A's NID from another network
    /// learns the nonce of its own answer, never that of the session B opens to A.
    #[test]
    fn answers_to_different_peers_differ_and_a_claimant_elsewhere_learns_nothing() {
        let now = Instant::now();
        let n = Nonce::N32([7, 7, 7, 7]);
        let mut b = b_socket(&[(NA, LA), (NC, LA)]);
        let answer = |b: &mut Core, to: Nid, h: AnswerHint| {
            nonce_of(&wire(&b.handle_outbound_hinted(now, &rst(to), Csum::Complete, &mut |_| Some(h))).pop().unwrap())
        };
        let to_a = answer(&mut b, NA, hint(LA, n, now));
        let to_c = answer(&mut b, NC, hint(LA, n, now));
        assert_ne!(to_a, to_c, "another NID, same locator and peer nonce");
        // the claimant at LX (its last packet is the hint B's shell holds for NA)
        let x = answer(&mut b, NA, hint(LX, n, now));
        assert_ne!(x, to_a);
        let out =
            b.handle_outbound_hinted(now + ms(1), &udp(NB, NA, b"s"), Csum::Complete, &mut |_| Some(hint(LX, n, now)));
        let w = wire(&out).pop().expect("sent to A's listed locator");
        assert_eq!(split_addr(ipv6::Packet::new_checked(&w[..]).unwrap().dst()).0, LA);
        let session = nonce_of(&w);
        assert_ne!(session, x, "the claimant's answer does not give the session's nonce away");
        assert_ne!(session, to_a, "nor is it derived from the claimant's hint");
        // C's session takes C's answer's nonce
        let out =
            b.handle_outbound_hinted(now + ms(2), &udp(NB, NC, b"s"), Csum::Complete, &mut |_| Some(hint(LA, n, now)));
        assert_eq!(nonce_of(&wire(&out).pop().unwrap()), to_c);
    }

    #[test]
    fn only_a_fresh_hint_from_a_listed_locator_under_admission_socket_counts() {
        let now = Instant::now() + Duration::from_secs(3600);
        let mut cfg = CoreConfig::new(P, NB);
        cfg.admission = Admission::Socket;
        let mut rng = TestRng::new(5);
        let mut k = NonceKey::default();
        let n = Nonce::N32([1, 2, 3, 4]);
        let derived = k.derive(&cfg, &mut rng, NA, LA, &n);
        let mut ask = |cfg: &CoreConfig, h| k.answered(cfg, &mut rng, now, NA, &[LB2, LA], h);
        assert_eq!(ask(&cfg, Some(hint(LA, n, now))), Some(derived));
        assert_eq!(ask(&cfg, Some(hint(LA, n, now - cfg.idle_timeout))), Some(derived), "as old as the idle timeout");
        assert_eq!(ask(&cfg, Some(hint(LA, n, now - cfg.idle_timeout - ms(1)))), None, "older");
        assert_eq!(ask(&cfg, Some(hint(LX, n, now))), None, "a locator not listed");
        assert_eq!(ask(&cfg, None), None);
        let open = CoreConfig { admission: Admission::Open, ..cfg.clone() };
        assert_eq!(ask(&open, Some(hint(LA, n, now))), None, "no stateless answers under open");
        // the key never shows in a log line
        assert_eq!(format!("{k:?}"), "NonceKey(set)");
        // with no hint the initiator's nonce is drawn as before
        let mut a = core(NB, LB, 2, Some((NA, LA)));
        let w = wire(&a.handle_outbound(now, &udp(NB, NA, b"x"), Csum::Complete)).pop().unwrap();
        assert_ne!(nonce_of(&w), derived);
    }
}
