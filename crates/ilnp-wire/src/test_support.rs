//! Packet builders and fixtures for tests, shared by every crate's tests.
//!
//! Compiled for this crate's own unit tests and, for other crates, behind the
//! `test-support` feature (enable it from `[dev-dependencies]` only):
//! ```toml
//! [dev-dependencies]
//! ilnp-wire = { workspace = true, features = ["test-support"] }
//! ```
//! Builders take full addresses and fill in correct checksums (TCP/UDP over the
//! ordinary full-address pseudo-header, i.e. as a host stack sends them in
//! identifier form; `to_wire` then adjusts them to the RFC 6744 rule).

pub mod linux_tlv;

use crate::addr::{Locator, Nid};
use crate::checksum;
use crate::classify::{classify, IcmpError, Packet};
use crate::destopts::{self, Nonce};
use crate::error::Error;
use crate::icmpv6::{self, Icmpv6Type};
use crate::ipv6::{self, NextHeader};
use crate::l4;
use crate::translate::{Csum, QuotedMeta, WireMeta};
use std::net::Ipv6Addr;

/// The default identifier prefix (`fd69:6c6e:7000::/64`).
pub const P: Locator = crate::addr::DEFAULT_IDENTIFIER_PREFIX;
/// Host A's locator (`2001:db8:a::/64`).
pub const LA: Locator = Locator(0x2001_0db8_000a_0000);
/// Host B's locator (`2001:db8:b::/64`).
pub const LB: Locator = Locator(0x2001_0db8_000b_0000);
/// Host A's NID.
pub const NA: Nid = Nid(0x0200_00ff_fe00_000c);
/// Host B's NID.
pub const NB: Nid = Nid(0x0200_00ff_fe00_000d);

/// Source port the `*_default` builders use.
pub const SPORT: u16 = 40001;

/// IPv6 fixed header (hop limit 64, traffic class and flow label 0) + `upper`.
pub fn ipv6_packet(src: Ipv6Addr, dst: Ipv6Addr, next_header: NextHeader, upper: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(ipv6::HEADER_LEN + upper.len());
    ipv6::Repr { src, dst, next_header, payload_len: upper.len() as u16, hop_limit: 64 }.emit(&mut v);
    v.extend_from_slice(upper);
    v
}

/// A UDP datagram with a correct (full-address) checksum.
pub fn udp(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(l4::UDP_HEADER_LEN + payload.len());
    l4::UdpRepr { src_port: sport, dst_port: dport }.emit(payload, &mut u);
    l4::fill_checksum(&mut u, NextHeader::UDP, &src, &dst, l4::PseudoHeader::Full);
    ipv6_packet(src, dst, NextHeader::UDP, &u)
}

/// A TCP segment (20-byte header, PSH|ACK, seq 1, ack 0, window 0xffff) with a
/// correct (full-address) checksum.
pub fn tcp(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(l4::TCP_HEADER_LEN + payload.len());
    let flags = l4::tcp_flags::PSH | l4::tcp_flags::ACK;
    l4::TcpRepr { src_port: sport, dst_port: dport, seq: 1, ack: 0, flags, window: 0xffff }.emit(payload, &mut t);
    l4::fill_checksum(&mut t, NextHeader::TCP, &src, &dst, l4::PseudoHeader::Full);
    ipv6_packet(src, dst, NextHeader::TCP, &t)
}

/// An ICMPv6 message (type, code, 4-byte data word, body) in an IPv6 packet,
/// checksum filled (full addresses).
pub fn icmpv6(src: Ipv6Addr, dst: Ipv6Addr, msg_type: Icmpv6Type, code: u8, data_word: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(8 + body.len());
    icmpv6::Repr { msg_type, code, data_word, body }.emit(&mut m);
    icmpv6::Message::new_checked(&mut m[..]).expect("8 bytes at least").fill_checksum(&src, &dst);
    ipv6_packet(src, dst, NextHeader::ICMPV6, &m)
}

/// An ICMPv6 Echo Request.
pub fn echo_request(src: Ipv6Addr, dst: Ipv6Addr, ident: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let word = (u32::from(ident) << 16) | u32::from(seq);
    icmpv6(src, dst, Icmpv6Type::ECHO_REQUEST, 0, word, payload)
}

/// An ICMPv6 error quoting `invoking` (cut to fit 1280 bytes), checksum filled.
pub fn icmp_error(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    msg_type: Icmpv6Type,
    code: u8,
    data_word: u32,
    invoking: &[u8],
) -> Vec<u8> {
    icmpv6::error_packet(src, dst, msg_type, code, data_word, invoking)
}

/// A packet with a Destination Options header of the given bytes (taken as they
/// are, e.g. a malformed one) directly after the IPv6 header, then `upper`.
/// No checksum is touched.
pub fn with_destopts(src: Ipv6Addr, dst: Ipv6Addr, destopts: &[u8], upper: &[u8]) -> Vec<u8> {
    let mut body = destopts.to_vec();
    body.extend_from_slice(upper);
    ipv6_packet(src, dst, NextHeader::DSTOPTS, &body)
}

/// A wire-form packet: IPv6 + our DestOpts header holding `nonce` + `upper` of
/// protocol `next_header`. No checksum is touched (build `upper` with the right one).
pub fn with_nonce(src: Ipv6Addr, dst: Ipv6Addr, nonce: &Nonce, next_header: NextHeader, upper: &[u8]) -> Vec<u8> {
    let mut h = Vec::with_capacity(destopts::header_len(nonce.len()));
    destopts::emit_nonce_header(next_header, nonce, &mut h);
    with_destopts(src, dst, &h, upper)
}

/// Sets the ICMPv6 checksum of an ICMPv6 message (starting at the Type byte) over
/// the full addresses, XORed with `flip` (0: correct; anything else: wrong).
/// A message shorter than 4 bytes has no checksum field and is left alone.
pub fn set_icmpv6_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, icmp: &mut [u8], flip: u16) {
    if checksum::read_field(icmp, 2).is_some() {
        checksum::write_field(icmp, 2, 0);
        let c = checksum::icmpv6_checksum(src, dst, icmp) ^ flip;
        checksum::write_field(icmp, 2, c);
    }
}

/// Parses hex (`"60000000"`) into bytes; panics on bad input (test data).
pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

// ---- `classify` and one variant's method in one call (what the core does in two
// steps), so tests can ask about a packet in one line

fn not_a(what: &'static str) -> Error {
    Error::Malformed(what)
}

/// A wire-form data packet to identifier form (`classify` + `Data::to_identifier`);
/// a packet without a nonce: `NoNonce`.
pub fn to_identifier(pkt: &[u8], id_prefix: Locator, csum: Csum) -> Result<(Vec<u8>, WireMeta), Error> {
    match classify(pkt).map_err(|e| e.error)? {
        Packet::Data(d) | Packet::NonceOnly(d) => d.to_identifier(id_prefix, csum),
        Packet::Plain(_) => Err(Error::NoNonce),
        _ => Err(not_a("not a data packet")),
    }
}

fn icmp_error_of(pkt: &[u8]) -> Result<IcmpError<'_>, Error> {
    match classify(pkt).map_err(|e| e.error)? {
        Packet::IcmpError(e) => Ok(e),
        _ => Err(not_a("not an ICMPv6 error")),
    }
}

/// What an ICMPv6 error is about (`classify` + `IcmpError::meta`).
pub fn icmp_error_meta(pkt: &[u8]) -> Result<QuotedMeta, Error> {
    icmp_error_of(pkt)?.meta()
}

/// An ICMPv6 error for the local stack (`classify` + `IcmpError::to_identifier`).
pub fn icmp_error_to_identifier(pkt: &[u8], id_prefix: Locator) -> Result<(Vec<u8>, QuotedMeta), Error> {
    icmp_error_of(pkt)?.to_identifier(id_prefix)
}

/// The local stack's ICMPv6 error for the wire (`classify` + `IcmpError::to_wire`).
pub fn icmp_error_to_wire(
    pkt: &[u8],
    id_prefix: Locator,
    src_loc: Locator,
    dst_loc: Locator,
    nonce: &Nonce,
    quoted_nonce: &Nonce,
) -> Result<Vec<u8>, Error> {
    icmp_error_of(pkt)?.to_wire(id_prefix, src_loc, dst_loc, nonce, quoted_nonce)
}

/// A Locator Update packet's nonce and message (`classify` + `Packet::Lu`).
pub fn lu(pkt: &[u8]) -> Result<(Option<Nonce>, icmpv6::LocatorUpdate), Error> {
    match classify(pkt).map_err(|e| e.error)? {
        Packet::Lu(l) => Ok((l.nonce.map(|n| n.nonce), l.to_owned())),
        _ => Err(not_a("not a Locator Update")),
    }
}

/// xorshift64*: reproducible pseudo-random numbers (the same cases on every run).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    /// `n` pseudo-random bytes (the low byte of each draw).
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
    /// Fills `dest` with big-endian draws, 8 bytes each.
    pub fn fill_bytes(&mut self, dest: &mut [u8]) {
        for c in dest.chunks_mut(8) {
            let v = self.next_u64().to_be_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::ilnp_addr;

    #[test]
    fn builders_emit_verifying_packets() {
        let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, NB));
        let u = udp(s, d, 0x9c41, 0x17d4, b"ab");
        assert_eq!(&u[..8], &[0x60, 0, 0, 0, 0, 10, 17, 64]);
        assert_eq!(&u[40..46], &[0x9c, 0x41, 0x17, 0xd4, 0, 10]);
        assert!(checksum::verify(&s, &d, NextHeader::UDP, &u[40..]));
        let t = tcp(s, d, 0x9c41, 0x1b58, b"xyz");
        assert_eq!(&t[40..56], &[0x9c, 0x41, 0x1b, 0x58, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff]);
        assert!(checksum::verify(&s, &d, NextHeader::TCP, &t[40..]));
        let e = echo_request(s, d, 7, 1, b"ping");
        assert_eq!(&e[40..48], &[128, 0, e[42], e[43], 0, 7, 0, 1]);
        assert!(checksum::verify_icmpv6(&s, &d, &e[40..]));
        let w = with_nonce(s, d, &Nonce::N32([1, 2, 3, 4]), NextHeader::NONE, &[]);
        assert_eq!(&w[4..8], &[0, 16, 60, 64]);
        assert_eq!(&w[40..], &[59, 1, 0x8b, 4, 1, 2, 3, 4, 0x1e, 6, 0, 0, 0, 0, 0, 0]);
        let mut m = e[40..].to_vec();
        set_icmpv6_checksum(&s, &d, &mut m, 1);
        assert!(!checksum::verify_icmpv6(&s, &d, &m));
        assert_eq!(hex("0aff"), [10, 255]);
        let mut r = Rng(1);
        assert_ne!(r.next_u64(), r.next_u64());
    }
}
