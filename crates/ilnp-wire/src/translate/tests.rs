use super::*;
use crate::addr::{ilnp_addr, Locator, Nid};
use crate::checksum;
use crate::destopts::Nonce;
use crate::error::Error;
use crate::icmpv6::{self, Icmpv6Type, LocatorUpdate, LuEntry, LuOperation};
use crate::ipv6::{self, NextHeader};
use crate::test_support::{
    self as ts, icmp_error_meta, icmp_error_to_identifier, icmp_error_to_wire, to_identifier, LA, LB, NA, NB, P,
};
use std::net::Ipv6Addr;

fn csum_field(proto: NextHeader) -> Option<usize> {
    checksum::field_offset(proto)
}

fn udp_packet(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
    ts::udp(src, dst, 0x9c41, 0x17d4, payload)
}

fn tcp_packet(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
    ts::tcp(src, dst, 0x9c41, 0x1b58, payload)
}

#[test]
fn udp_roundtrip_with_rfc6744_checksum() {
    for payload in [&b""[..], b"x", b"hello world", &[0xffu8; 1000][..]] {
        let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), payload);
        let n = Nonce::N32([1, 2, 3, 4]);
        let w = to_wire(&id, P, LA, LB, &n, Csum::Complete).unwrap();
        let wp = ipv6::Packet::new_checked(&w[..]).unwrap();
        assert_eq!(wp.src(), ilnp_addr(LA, NA));
        assert_eq!(wp.dst(), ilnp_addr(LB, NB));
        assert_eq!(wp.next_header(), NextHeader::DSTOPTS);
        assert_eq!(&w[40..56], &[NextHeader::UDP.0, 1, 0x8b, 4, 1, 2, 3, 4, 0x1e, 6, 0, 0, 0, 0, 0, 0]);
        // transport checksum valid with locators zeroed, not with full addresses
        assert!(checksum::verify(
            &checksum::nid_only(&wp.src()),
            &checksum::nid_only(&wp.dst()),
            NextHeader::UDP,
            &w[56..]
        ));
        let (back, meta) = to_identifier(&w, P, Csum::Complete).unwrap();
        assert_eq!(back, id);
        assert_eq!(meta.nonce, n);
        assert_eq!((meta.src_loc, meta.src_nid, meta.dst_loc, meta.dst_nid), (LA, NA, LB, NB));
    }
}

#[test]
fn tcp_partial_checksum_is_completed() {
    let id = tcp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"payload bytes");
    let mut partial = id.clone();
    // a partial field holds only the (non-inverted) pseudo-header sum
    let ph = checksum::fold(checksum::pseudo_header(&ilnp_addr(P, NA), &ilnp_addr(P, NB), NextHeader::TCP, 33));
    partial[56..58].copy_from_slice(&ph.to_be_bytes());
    let n = Nonce::N96([7; 12]);
    let w = to_wire(&partial, P, LA, LB, &n, Csum::Partial).unwrap();
    let full = to_wire(&id, P, LA, LB, &n, Csum::Complete).unwrap();
    assert_eq!(w, full);
    assert_eq!(w.len(), id.len() + 16);
}

#[test]
fn icmp_echo_checksum_uses_full_addresses() {
    let mut icmp = vec![128, 0, 0, 0, 0, 1, 0, 1, b'p', b'i', b'n', b'g'];
    let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, NB));
    let c = checksum::icmpv6_checksum(&s, &d, &icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut id = Vec::new();
    ipv6::Repr { src: s, dst: d, next_header: NextHeader::ICMPV6, payload_len: icmp.len() as u16, hop_limit: 64 }
        .emit(&mut id);
    id.extend_from_slice(&icmp);
    let w = to_wire(&id, P, LA, LB, &Nonce::N32([9; 4]), Csum::Complete).unwrap();
    assert!(checksum::verify(&ilnp_addr(LA, NA), &ilnp_addr(LB, NB), NextHeader::ICMPV6, &w[56..]));
    let (back, _) = to_identifier(&w, P, Csum::Complete).unwrap();
    assert_eq!(back, id);
}

#[test]
fn rejects_non_identifier_and_plain() {
    let plain = udp_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), b"x");
    assert_eq!(to_wire(&plain, P, LA, LB, &Nonce::N32([0; 4]), Csum::Complete).unwrap_err(), Error::NotIdentifierForm);
    assert_eq!(to_identifier(&plain, P, Csum::Complete).unwrap_err(), Error::NoNonce);
}

#[test]
fn ptb_translation_and_fallback_signal() {
    let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), &[0u8; 1300]);
    let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 1, 1, 1]), Csum::Complete).unwrap();
    let router: Ipv6Addr = "2001:db8:a::1".parse().unwrap();
    let mk = |t: Icmpv6Type, code: u8, data: u32| {
        let mut body = Vec::new();
        icmpv6::emit_error(t, code, data, &w, &mut body);
        let c = checksum::icmpv6_checksum(&router, &ilnp_addr(LA, NA), &body);
        body[2..4].copy_from_slice(&c.to_be_bytes());
        let mut v = Vec::new();
        ipv6::Repr {
            src: router,
            dst: ilnp_addr(LA, NA),
            next_header: NextHeader::ICMPV6,
            payload_len: body.len() as u16,
            hop_limit: 64,
        }
        .emit(&mut v);
        v.extend_from_slice(&body);
        v
    };
    let ptb = mk(Icmpv6Type::PACKET_TOO_BIG, 0, 1280);
    let (t, meta) = icmp_error_to_identifier(&ptb, P).unwrap();
    assert!(!meta.rejects_nonce);
    assert_eq!((meta.peer_nid, meta.peer_loc), (NB, LB));
    let tp = ipv6::Packet::new_checked(&t[..]).unwrap();
    assert_eq!(tp.dst(), ilnp_addr(P, NA));
    assert_eq!(u32::from_be_bytes([t[44], t[45], t[46], t[47]]), 1264);
    assert!(checksum::verify(&tp.src(), &tp.dst(), NextHeader::ICMPV6, &t[40..]));
    // quoted packet is now identifier form: addresses in P, UDP directly after the header
    assert_eq!(&t[48 + 8..48 + 24], &ilnp_addr(P, NA).octets());
    assert_eq!(t[48 + 6], NextHeader::UDP.0);

    let pp = mk(Icmpv6Type::PARAM_PROBLEM, 2, 42);
    assert!(icmp_error_meta(&pp).unwrap().rejects_nonce);
    let pp = mk(Icmpv6Type::PARAM_PROBLEM, 2, 40);
    assert!(!icmp_error_meta(&pp).unwrap().rejects_nonce);
}

#[test]
fn unreachable_for_app() {
    let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"x");
    let u = unreachable_to_app(&id, icmpv6::UNREACH_ADDRESS).unwrap();
    let p = ipv6::Packet::new_checked(&u[..]).unwrap();
    assert_eq!((p.src(), p.dst()), (ilnp_addr(P, NB), ilnp_addr(P, NA)));
    assert_eq!(&u[40..42], &[1, 3]);
    assert!(checksum::verify(&p.src(), &p.dst(), NextHeader::ICMPV6, &u[40..]));
    assert_eq!(&u[48..], &id[..]);
}

#[test]
fn lu_packet_roundtrip() {
    let lu = LocatorUpdate {
        operation: LuOperation::Advertisement,
        entries: vec![LuEntry { locator: LA, preference: 10, lifetime: 30 }],
    };
    let n = Nonce::N32([5, 6, 7, 8]);
    let v = lu_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), &n, &lu).unwrap();
    assert_eq!(ts::lu(&v).unwrap(), (Some(n), lu));
    let mut bad = v.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(ts::lu(&bad).unwrap_err(), Error::BadChecksum);
}

/// Full recomputation under the wire rule, for comparing with the incremental path.
fn full_wire_checksum(w: &[u8]) -> u16 {
    let p = ipv6::Packet::new_checked(w).unwrap();
    let (proto, off) = ipv6::upper_layer(w).unwrap();
    let field = csum_field(proto).unwrap();
    let mut l4 = w[off..].to_vec();
    l4[field..field + 2].copy_from_slice(&[0, 0]);
    checksum::transport_checksum_wire(&p.src(), &p.dst(), proto, &l4)
}

fn l4_csum(w: &[u8]) -> u16 {
    let (proto, off) = ipv6::upper_layer(w).unwrap();
    let f = off + csum_field(proto).unwrap();
    u16::from_be_bytes([w[f], w[f + 1]])
}

/// 0x0000 and 0xffff are the same one's-complement value (both verify for TCP).
fn same_csum(a: u16, b: u16) -> bool {
    a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
}

#[test]
fn incremental_adjustment_matches_full_recomputation() {
    let mut n = 0;
    for seed in 0u32..300 {
        let payload: Vec<u8> = (0..(seed % 97)).map(|i| (i * 31 + seed * 7) as u8).collect();
        let nb = Nid(0x0200_00ff_fe00_0000 | seed as u64);
        for tcp in [false, true] {
            let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, nb));
            let id = if tcp { tcp_packet(s, d, &payload) } else { udp_packet(s, d, &payload) };
            let nonce = if seed % 2 == 0 { Nonce::N32([1, 2, 3, 4]) } else { Nonce::N96([9; 12]) };
            let la = Locator(0x2001_0db8_0000_0000 | seed as u64);
            let w = to_wire(&id, P, la, LB, &nonce, Csum::Complete).unwrap();
            let full = full_wire_checksum(&w);
            let inc = l4_csum(&w);
            if tcp {
                assert!(same_csum(inc, full), "seed {seed}: incremental {inc:#06x} full {full:#06x}");
            } else {
                assert_eq!(inc, full, "seed {seed}: UDP must send 0xffff for a computed 0");
            }
            let (back, _) = to_identifier(&w, P, Csum::Complete).unwrap();
            let p = ipv6::Packet::new_checked(&back[..]).unwrap();
            let proto = if tcp { NextHeader::TCP } else { NextHeader::UDP };
            assert!(checksum::verify(&p.src(), &p.dst(), proto, &back[40..]), "seed {seed}");
            n += 1;
        }
    }
    assert_eq!(n, 600);
}

#[test]
fn partial_checksum_inbound_is_completed() {
    let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"partial in");
    let w = to_wire(&id, P, LA, LB, &Nonce::N32([3; 4]), Csum::Complete).unwrap();
    let mut partial = w.clone();
    partial[48 + 6..48 + 8].copy_from_slice(&[0x12, 0x34]); // junk: Partial ignores the field
    let (back, _) = to_identifier(&partial, P, Csum::Partial).unwrap();
    assert_eq!(back, id);
}

#[test]
fn existing_extension_headers_stay_after_ours() {
    // identifier packet: IPv6 | Routing(type 0xfe, 8 bytes, segments left 0) | UDP
    let inner = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"ext");
    let mut id = inner[..40].to_vec();
    id[6] = NextHeader::ROUTING.0;
    id[4..6].copy_from_slice(&((inner.len() - 40 + 8) as u16).to_be_bytes());
    id.extend_from_slice(&[NextHeader::UDP.0, 0, 0xfe, 0, 0, 0, 0, 0]);
    id.extend_from_slice(&inner[40..]);
    let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    assert_eq!(w[6], NextHeader::DSTOPTS.0);
    assert_eq!(&w[40..56], &[NextHeader::ROUTING.0, 1, 0x8b, 4, 1, 2, 3, 4, 0x1e, 6, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&w[56..64], &[NextHeader::UDP.0, 0, 0xfe, 0, 0, 0, 0, 0]);
    assert_eq!(u16::from_be_bytes([w[4], w[5]]) as usize, w.len() - 40);
    assert_eq!(ipv6::upper_layer(&w).unwrap(), (NextHeader::UDP, 64));
    assert!(checksum::verify_transport_wire(&ilnp_addr(LA, NA), &ilnp_addr(LB, NB), NextHeader::UDP, &w[64..]));
    let (back, meta) = to_identifier(&w, P, Csum::Complete).unwrap();
    assert_eq!(back, id);
    assert_eq!(meta.proto, NextHeader::UDP);
}

#[test]
fn later_fragments_are_not_touched() {
    // IPv6 | Fragment(offset 185, M=0) | 16 bytes of payload that only look like UDP
    let mut id = Vec::new();
    ipv6::Repr {
        src: ilnp_addr(P, NA),
        dst: ilnp_addr(P, NB),
        next_header: NextHeader::FRAGMENT,
        payload_len: 24,
        hop_limit: 64,
    }
    .emit(&mut id);
    id.extend_from_slice(&[NextHeader::UDP.0, 0, 0x05, 0xc8, 0, 0, 0, 42]); // offset 185 << 3
    id.extend_from_slice(&[0xaa; 16]);
    let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    assert_eq!(&w[64..], &[0xaa; 16]);
    let (back, _) = to_identifier(&w, P, Csum::Complete).unwrap();
    assert_eq!(back, id);
    // a first fragment (offset 0, M=1) gets the pseudo-header adjustment
    let full = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), &[7; 32]);
    let mut first = full[..40].to_vec();
    first[6] = NextHeader::FRAGMENT.0;
    first[4..6].copy_from_slice(&(8u16 + 24).to_be_bytes());
    first.extend_from_slice(&[NextHeader::UDP.0, 0, 0, 1, 0, 0, 0, 42]);
    first.extend_from_slice(&full[40..64]);
    let w = to_wire(&first, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    let whole = to_wire(&full, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    assert_eq!(&w[64 + 6..64 + 8], &whole[56 + 6..56 + 8], "same checksum as the unfragmented datagram");
    assert!(to_wire(&first, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Partial).is_err());
}

#[test]
fn inbound_option_errors() {
    let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"opts");
    let w = to_wire(&id, P, LA, LB, &Nonce::N96([5; 12]), Csum::Complete).unwrap();
    assert_eq!(&w[40..44], &[NextHeader::UDP.0, 1, 0x8b, 12]);
    // replace the 96-bit nonce by a 32-bit nonce + an unknown option (type 0x3e, 6 bytes)
    let mut other = w.clone();
    other[42..56].copy_from_slice(&[0x8b, 4, 1, 2, 3, 4, 0x3e, 6, 0, 0, 0, 0, 0, 0]);
    assert_eq!(to_identifier(&other, P, Csum::Complete).unwrap_err(), Error::UnsupportedOptions);
    // the filler option (0x1e) is padding: accepted, whatever its data, as any
    // receiver skips it (ilnp_wire::destopts::OPT_FILLER)
    let mut filler = w.clone();
    filler[42..56].copy_from_slice(&[0x8b, 4, 1, 2, 3, 4, 0x1e, 6, 0, 0, 0, 0, 0, 9]);
    assert_eq!(to_identifier(&filler, P, Csum::Complete).unwrap().0, id);
    // two nonces
    let mut two = w.clone();
    two[42..56].copy_from_slice(&[0x8b, 4, 1, 2, 3, 4, 0x8b, 4, 5, 6, 7, 8, 1, 0]);
    assert_eq!(to_identifier(&two, P, Csum::Complete).unwrap_err(), Error::MoreThanOneNonce);
    // nonce of 8 bytes
    let mut bad = w.clone();
    bad[42..56].copy_from_slice(&[0x8b, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 0, 0]);
    assert_eq!(to_identifier(&bad, P, Csum::Complete).unwrap_err(), Error::BadNonceLength(8));
    // nonce after Pad1 + PadN: accepted, the header is stripped
    let mut padded = w.clone();
    padded[42..56].copy_from_slice(&[0, 1, 0, 0x8b, 4, 1, 2, 3, 4, 1, 1, 0, 0, 0]);
    let (back, meta) = to_identifier(&padded, P, Csum::Complete).unwrap();
    assert_eq!(back, id);
    assert_eq!(meta.nonce, Nonce::N32([1, 2, 3, 4]));
}

fn error_about(w: &[u8], t: Icmpv6Type, code: u8, data: u32) -> Vec<u8> {
    let router: Ipv6Addr = "2001:db8:a::1".parse().unwrap();
    icmpv6::error_packet(router, ilnp_addr(LA, NA), t, code, data, w)
}

#[test]
fn icmp_error_details() {
    let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), &[1u8; 1400]);
    let w = to_wire(&id, P, LA, LB, &Nonce::N96([2; 12]), Csum::Complete).unwrap();
    // PTB with a 96-bit nonce: MTU reduced by 16
    let (t, _) = icmp_error_to_identifier(&error_about(&w, Icmpv6Type::PACKET_TOO_BIG, 0, 1400), P).unwrap();
    assert_eq!(&t[44..48], &1384u32.to_be_bytes());
    assert_eq!(t.len(), 1280 - 16, "the 1280-byte error loses the 16 bytes we strip from its quote");
    // Parameter Problem past our header: pointer moves back by the header length
    let (t, m) = icmp_error_to_identifier(&error_about(&w, Icmpv6Type::PARAM_PROBLEM, 0, 40 + 16 + 4), P).unwrap();
    assert!(!m.rejects_nonce);
    assert_eq!(&t[44..48], &44u32.to_be_bytes());
    // pointer into the fixed header: unchanged
    let (t, _) = icmp_error_to_identifier(&error_about(&w, Icmpv6Type::PARAM_PROBLEM, 0, 7), P).unwrap();
    assert_eq!(&t[44..48], &7u32.to_be_bytes());
    // the nonce-rejection signal
    let rejects = |e: Vec<u8>| icmp_error_meta(&e).is_ok_and(|m| m.rejects_nonce);
    assert!(rejects(error_about(&w, Icmpv6Type::PARAM_PROBLEM, 2, 42)));
    assert!(!rejects(error_about(&w, Icmpv6Type::PARAM_PROBLEM, 2, 43)));
    assert!(!rejects(error_about(&w, Icmpv6Type::PARAM_PROBLEM, 1, 42)));
    assert!(!rejects(error_about(&w, Icmpv6Type::DEST_UNREACH, 0, 42)));
    // a corrupted error is refused, not re-checksummed
    let mut bad = error_about(&w, Icmpv6Type::PACKET_TOO_BIG, 0, 1400);
    bad[100] ^= 0x40;
    assert_eq!(icmp_error_to_identifier(&bad, P).unwrap_err(), Error::BadChecksum);
    // an error about a plain IPv6 packet (no nonce) is not ours
    assert_eq!(
        icmp_error_to_identifier(&error_about(&id, Icmpv6Type::PACKET_TOO_BIG, 0, 1300), P).unwrap_err(),
        Error::NoNonce
    );
}

#[test]
fn quoted_echo_checksum_is_translated() {
    let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, NB));
    let mut icmp = vec![128, 0, 0, 0, 0, 7, 0, 1, b'p', b'i', b'n', b'g'];
    let c = checksum::icmpv6_checksum(&s, &d, &icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut id = Vec::new();
    ipv6::Repr { src: s, dst: d, next_header: NextHeader::ICMPV6, payload_len: 12, hop_limit: 64 }.emit(&mut id);
    id.extend_from_slice(&icmp);
    let w = to_wire(&id, P, LA, LB, &Nonce::N32([4; 4]), Csum::Complete).unwrap();
    let (t, _) = icmp_error_to_identifier(&error_about(&w, Icmpv6Type::TIME_EXCEEDED, 0, 0), P).unwrap();
    assert_eq!(&t[48..], &id[..], "the quoted packet is exactly the identifier-form original");
    let udp = udp_packet(s, d, b"quoted udp");
    let w = to_wire(&udp, P, LA, LB, &Nonce::N32([4; 4]), Csum::Complete).unwrap();
    let (t, _) = icmp_error_to_identifier(&error_about(&w, Icmpv6Type::DEST_UNREACH, 4, 0), P).unwrap();
    assert_eq!(&t[48..], &udp[..]);
}

#[test]
fn local_error_goes_back_to_the_peer_in_wire_form() {
    // B sends A a UDP datagram; A's stack answers port unreachable on ilnp0
    let (nonce_b, nonce_a) = (Nonce::N32([0xb0, 0xb1, 0xb2, 0xb3]), Nonce::N96([0xa5; 12]));
    let at_b = udp_packet(ilnp_addr(P, NB), ilnp_addr(P, NA), &[3u8; 1400]);
    let wire = to_wire(&at_b, P, LB, LA, &nonce_b, Csum::Complete).unwrap();
    let (at_a, _) = to_identifier(&wire, P, Csum::Complete).unwrap();
    let err = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), Icmpv6Type::DEST_UNREACH, 4, 0, &at_a);
    let w = icmp_error_to_wire(&err, P, LA, LB, &nonce_a, &nonce_b).unwrap();
    assert_eq!(w.len(), 1280);
    let wp = ipv6::Packet::new_checked(&w[..]).unwrap();
    assert_eq!((wp.src(), wp.dst()), (ilnp_addr(LA, NA), ilnp_addr(LB, NB)));
    assert_eq!(crate::classify(&w).unwrap().nonce(), Some(nonce_a));
    assert!(checksum::verify_icmpv6(&wp.src(), &wp.dst(), &w[56..]));
    // the quote is what B sent, byte for byte, as far as it goes
    assert_eq!(&w[64..], &wire[..1280 - 64]);
    // and B's side matches it to its own nonce and translates it for its stack
    let meta = icmp_error_meta(&w).unwrap();
    assert_eq!((meta.nonce, meta.local_nid, meta.peer_nid, meta.local_loc), (nonce_b, NB, NA, LB));
    let (t, _) = icmp_error_to_identifier(&w, P).unwrap();
    assert_eq!(&t[48..], &at_b[..t.len() - 48]);
    // Parameter Problem pointer past the fixed header moves by the inserted header
    let pp = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), Icmpv6Type::PARAM_PROBLEM, 0, 46, &at_a);
    let w = icmp_error_to_wire(&pp, P, LA, LB, &nonce_a, &nonce_b).unwrap();
    assert_eq!(&w[60..64], &62u32.to_be_bytes());
    // refused: a bad checksum, a quote not in identifier form, not an error
    let mut bad = err.clone();
    bad[60] ^= 1;
    assert_eq!(icmp_error_to_wire(&bad, P, LA, LB, &nonce_a, &nonce_b).unwrap_err(), Error::BadChecksum);
    let foreign = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), Icmpv6Type::DEST_UNREACH, 4, 0, &wire);
    assert_eq!(icmp_error_to_wire(&foreign, P, LA, LB, &nonce_a, &nonce_b).unwrap_err(), Error::NotIdentifierForm);
    assert!(icmp_error_to_wire(&at_a, P, LA, LB, &nonce_a, &nonce_b).is_err());
    // found by the fuzzer: a quote that is not IPv6 would give the peer an unmatchable error
    let mut v4 = at_a.clone();
    v4[0] = 0x45;
    let e = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), Icmpv6Type::DEST_UNREACH, 4, 0, &v4);
    assert_eq!(icmp_error_to_wire(&e, P, LA, LB, &nonce_a, &nonce_b).unwrap_err(), Error::NotIpv6);
    for cut in 0..err.len() {
        let _ = icmp_error_to_wire(&err[..cut], P, LA, LB, &nonce_a, &nonce_b);
    }
}

#[test]
fn garbage_never_panics() {
    let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"abcdefgh");
    let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    for cut in 0..w.len() {
        let _ = to_identifier(&w[..cut], P, Csum::Complete);
        let _ = icmp_error_to_identifier(&w[..cut], P);
        let _ = ts::lu(&w[..cut]);
        let _ = to_wire(&id[..cut.min(id.len())], P, LA, LB, &Nonce::N32([0; 4]), Csum::Partial);
    }
    for i in 0..w.len() {
        let mut m = w.clone();
        m[i] ^= 0xff;
        let _ = to_identifier(&m, P, Csum::Complete);
        let _ = icmp_error_to_identifier(&m, P);
    }
}

#[test]
fn plain_fallback_roundtrip_keeps_full_address_checksums() {
    let n = Nonce::N32([1, 2, 3, 4]);
    for id in [
        udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"plain udp"),
        tcp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"plain tcp"),
        ts::echo_request(ilnp_addr(P, NA), ilnp_addr(P, NB), 7, 1, b"ping"),
    ] {
        let w = to_plain(&id, P, LA, LB, Csum::Complete).unwrap();
        assert_eq!(w.len(), id.len(), "no header added");
        let wp = ipv6::Packet::new_checked(&w[..]).unwrap();
        assert_eq!((wp.src(), wp.dst()), (ilnp_addr(LA, NA), ilnp_addr(LB, NB)));
        assert_ne!(wp.next_header(), NextHeader::DSTOPTS);
        let proto = wp.next_header();
        // an ordinary IPv6 checksum: full addresses, as a non-ILNP peer verifies it
        assert!(checksum::verify(&wp.src(), &wp.dst(), proto, &w[40..]), "proto {proto}");
        let with_nonce = to_wire(&id, P, LA, LB, &n, Csum::Complete).unwrap();
        assert_ne!(&with_nonce[40..], &w[40..]);
        let (back, meta) = from_plain(&w, P, Csum::Complete).unwrap();
        assert_eq!(back, id);
        assert_eq!(meta, PlainMeta { src_loc: LA, src_nid: NA, dst_loc: LB, dst_nid: NB });
    }
    // only identifier-form packets leave as plain IPv6
    let wire = udp_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), b"x");
    assert_eq!(to_plain(&wire, P, LA, LB, Csum::Complete), Err(Error::NotIdentifierForm));
}

#[test]
fn plain_fallback_completes_a_partial_checksum() {
    let id = tcp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"payload bytes");
    let mut partial = id.clone();
    let ph = checksum::fold(checksum::pseudo_header(&ilnp_addr(P, NA), &ilnp_addr(P, NB), NextHeader::TCP, 33));
    partial[56..58].copy_from_slice(&ph.to_be_bytes());
    let w = to_plain(&partial, P, LA, LB, Csum::Partial).unwrap();
    assert_eq!(w, to_plain(&id, P, LA, LB, Csum::Complete).unwrap());
}

/// Golden values for both transport checksum rules (issue #25 item 3): the same
/// identifier-form segment on the wire `LA:NA -> LB:NB`, checksums computed
/// independently (Python, `lab/ilnp_lab/freebsd.py`'s `l4_checksum`).
#[test]
fn golden_checksums_for_both_rules() {
    use crate::checksum::ChecksumRule::{FullAddress, Rfc6741};
    let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, NB));
    let nonce = Nonce::N32([1, 2, 3, 4]);
    // (segment, identifier-form value, RFC 6741 value, full-address value)
    let cases = [
        (ts::udp(s, d, 40001, 7000, b"golden"), NextHeader::UDP, 0x592c, 0x0cde, 0xb156),
        (ts::tcp(s, d, 40001, 7000, b"golden"), NextHeader::TCP, 0x0920, 0xbcd1, 0x614a),
    ];
    for (id, proto, v_id, v_rfc, v_full) in cases {
        let at = 40 + csum_field(proto).unwrap();
        assert_eq!(u16::from_be_bytes([id[at], id[at + 1]]), v_id);
        // identifier -> wire, complete and partial (the pseudo-header sum only) checksums
        let mut partial = id.clone();
        let ph = checksum::fold(checksum::pseudo_header(&s, &d, proto, (id.len() - 40) as u32));
        partial[at..at + 2].copy_from_slice(&ph.to_be_bytes());
        for (rule, want) in [(Rfc6741, v_rfc), (FullAddress, v_full)] {
            for (pkt, csum) in [(&id, Csum::Complete), (&partial, Csum::Partial)] {
                let w = to_wire_rule(pkt, P, LA, LB, &nonce, csum, rule).unwrap();
                let at_w = at + 16; // our 16-byte nonce header
                assert_eq!(u16::from_be_bytes([w[at_w], w[at_w + 1]]), want, "{rule:?} {csum:?} proto {proto}");
                // and back: the identifier-form value again
                let Ok(crate::Packet::Data(dd)) = crate::classify(&w) else { panic!() };
                let (back, _) = dd.to_identifier_rule(P, Csum::Complete, rule).unwrap();
                assert_eq!(back, id, "{rule:?} round trip");
            }
        }
        // the RFC 6741 default is what `to_wire` has always produced
        assert_eq!(
            to_wire(&id, P, LA, LB, &nonce, Csum::Complete).unwrap(),
            to_wire_rule(&id, P, LA, LB, &nonce, Csum::Complete, Rfc6741).unwrap()
        );
        // two ends on different rules: the receiver's transport checksum is wrong
        let w = to_wire_rule(&id, P, LA, LB, &nonce, Csum::Complete, FullAddress).unwrap();
        let Ok(crate::Packet::Data(dd)) = crate::classify(&w) else { panic!() };
        let (back, _) = dd.to_identifier_rule(P, Csum::Complete, Rfc6741).unwrap();
        assert!(!checksum::verify(&s, &d, proto, &back[40..]), "a rule mismatch must not verify");
        assert!(checksum::verify(&s, &d, proto, &id[40..]));
    }
    assert_eq!(crate::checksum::ChecksumRule::parse("full-address"), Ok(FullAddress));
    assert_eq!(crate::checksum::ChecksumRule::parse("rfc6741"), Ok(Rfc6741));
    assert!(crate::checksum::ChecksumRule::parse("ipv6").is_err());
}
