use super::*;
use crate::addr::ilnp_addr;
use crate::destopts::Nonce;
use crate::icmpv6::{Icmpv6Type, LocatorUpdate, LuEntry, LuOperation};
use crate::test_support::{self as ts, LA, LB, NA, NB, P};
use crate::translate::{self, Csum};

/// `2001:db8:a::200:ff:fe00:c` → `2001:db8:b::200:ff:fe00:d` (LA:NA → LB:NB).
const WIRE_ADDRS: [u8; 32] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0x0a, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 0, 0x0c, //
    0x20, 0x01, 0x0d, 0xb8, 0, 0x0b, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 0, 0x0d,
];

fn literal(first: [u8; 8], rest: &[u8]) -> Vec<u8> {
    let mut v = first.to_vec();
    v.extend_from_slice(&WIRE_ADDRS);
    v.extend_from_slice(rest);
    v
}

#[test]
fn nonce_only_literal() {
    // IPv6 (payload 16, Next Header 60) | DestOpts: NH 59, len 1, nonce 0x8b/4 deadbeef, filler 0x1e/6
    let v =
        literal([0x60, 0, 0, 0, 0, 16, 60, 64], &[59, 1, 0x8b, 4, 0xde, 0xad, 0xbe, 0xef, 0x1e, 6, 0, 0, 0, 0, 0, 0]);
    let Ok(Packet::NonceOnly(d)) = classify(&v) else { panic!("{:?}", classify(&v)) };
    assert_eq!(d.nonce.nonce, Nonce::N32([0xde, 0xad, 0xbe, 0xef]));
    assert_eq!((d.nonce.option_offset, d.nonce.header_len, d.nonce.next_header), (42, 16, NextHeader::NONE));
    assert_eq!((d.upper.proto, d.upper.offset), (NextHeader::NONE, 56));
    assert_eq!(endpoints(&d.ip), ((LA, NA), (LB, NB)));
    assert_eq!(d.bytes(), &v[..]);
    // what the core sends is what classify recognises
    assert_eq!(translate::nonce_only_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), &d.nonce.nonce), v);
}

#[test]
fn data_literal_and_its_translation() {
    // IPv6 | DestOpts(UDP, 96-bit nonce 0x01..0x0c) | UDP 12345 -> 6000, length 8, checksum 0
    let mut rest = vec![17, 1, 0x8b, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    rest.extend_from_slice(&[0x30, 0x39, 0x17, 0x70, 0, 8, 0, 0]);
    let v = literal([0x60, 0, 0, 0, 0, 24, 60, 64], &rest);
    let p = classify(&v).unwrap();
    assert_eq!((p.kind(), p.nonce()), (Kind::Data, Some(Nonce::N96([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]))));
    assert_eq!(p.summary(), "2001:db8:a:0:200:ff:fe00:c -> 2001:db8:b:0:200:ff:fe00:d");
    let Packet::Data(d) = p else { unreachable!() };
    assert_eq!(d.upper, UpperLayer { proto: NextHeader::UDP, offset: 56, fragment: None });
    let (id, meta) = d.to_identifier(P, Csum::Complete).unwrap();
    // identifier form: no nonce any more, both addresses in the identifier prefix
    let Ok(Packet::Plain(back)) = classify(&id) else { panic!("{:?}", classify(&id)) };
    assert_eq!(endpoints(&back.ip), ((P, NA), (P, NB)));
    assert_eq!((meta.src_loc, meta.dst_nid, meta.proto), (LA, NB, NextHeader::UDP));
    assert_eq!(&id[..8], &[0x60, 0, 0, 0, 0, 8, 17, 64]);
    // link padding after payload_len is not part of the packet
    let mut padded = v.clone();
    padded.extend_from_slice(&[0; 6]);
    let Ok(Packet::Data(d)) = classify(&padded) else { panic!() };
    assert_eq!(d.bytes(), &v[..]);
}

#[test]
fn plain_literal() {
    // identifier-form TCP header (no nonce): what the stack hands ilnp0
    let mut v = literal([0x60, 0, 0, 0, 0, 20, 6, 64], &[0; 20]);
    let Ok(Packet::Plain(p)) = classify(&v) else { panic!() };
    assert_eq!((p.upper.proto, p.upper.offset, p.bytes().len()), (NextHeader::TCP, 40, 60));
    // a Destination Options header without a nonce is still plain
    v[6] = 60;
    v[5] = 28;
    v.splice(40..40, [6, 0, 1, 4, 0, 0, 0, 0]);
    let Ok(Packet::Plain(p)) = classify(&v) else { panic!() };
    assert_eq!((p.upper.proto, p.upper.offset), (NextHeader::TCP, 48));
    // an ICMPv6 echo without a nonce
    let e = ts::echo_request(ilnp_addr(P, NA), ilnp_addr(P, NB), 1, 1, b"x");
    assert_eq!(classify(&e).unwrap().kind(), Kind::Plain);
}

#[test]
fn locator_update_and_its_errors() {
    let lu = LocatorUpdate {
        operation: LuOperation::Advertisement,
        entries: vec![LuEntry { locator: LA, preference: 10, lifetime: 30 }],
    };
    let n = Nonce::N32([5, 6, 7, 8]);
    let v = translate::lu_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), &n, &lu).unwrap();
    // the literal layout: DestOpts(ICMPv6, nonce) | 156 0 csum | 1 locator, operation 1
    assert_eq!(&v[..8], &[0x60, 0, 0, 0, 0, 36, 60, 64]);
    assert_eq!(&v[40..56], &[58, 1, 0x8b, 4, 5, 6, 7, 8, 0x1e, 6, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&v[56..58], &[156, 0]);
    assert_eq!(&v[60..], &[1, 1, 0, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0x0a, 0, 0, 0, 10, 0, 30]);
    let Ok(Packet::Lu(l)) = classify(&v) else { panic!() };
    assert_eq!((l.nonce.map(|h| h.nonce), l.to_owned()), (Some(n), lu.clone()));
    assert_eq!((l.ip.src, l.ip.dst), (ilnp_addr(LA, NA), ilnp_addr(LB, NB)));
    // bad checksum, then a bad LU with a good checksum: both are LU errors
    let mut bad = v.clone();
    bad[71] ^= 1;
    assert_eq!(classify(&bad).unwrap_err(), ClassifyError { kind: Kind::Lu, error: Error::BadChecksum });
    let mut zero = v.clone();
    zero[60] = 0; // Num of Locs 0
    ts::set_icmpv6_checksum(&ilnp_addr(LA, NA), &ilnp_addr(LB, NB), &mut zero[56..], 0);
    assert_eq!(classify(&zero).unwrap_err(), ClassifyError { kind: Kind::Lu, error: Error::LuNoLocators });
    // an LU without a nonce is still an LU (it cannot be verified: `nonce` None)
    let (s, d) = (ilnp_addr(LA, NA), ilnp_addr(LB, NB));
    let plain = ts::ipv6_packet(s, d, NextHeader::ICMPV6, &v[56..]);
    let Ok(Packet::Lu(l)) = classify(&plain) else { panic!() };
    assert_eq!(l.nonce, None);
}

#[test]
fn icmp_error_about_our_packet() {
    let id = ts::udp(ilnp_addr(P, NA), ilnp_addr(P, NB), 0x9c41, 0x17d4, b"hello");
    let w = translate::to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    let router = "2001:db8:a::1".parse().unwrap();
    let pp = ts::icmp_error(router, ilnp_addr(LA, NA), Icmpv6Type::PARAM_PROBLEM, 2, 42, &w);
    let Ok(Packet::IcmpError(e)) = classify(&pp) else { panic!() };
    assert_eq!(
        (e.nonce, e.message.msg_type(), e.message.code(), e.message.pointer()),
        (None, Icmpv6Type::PARAM_PROBLEM, 2, Some(42))
    );
    let q = e.quoted.unwrap();
    assert_eq!((q.ip.src, q.ip.dst, q.ip.next_header), (ilnp_addr(LA, NA), ilnp_addr(LB, NB), NextHeader::DSTOPTS));
    assert_eq!(q.nonce.map(|n| (n.nonce, n.option_offset)), Some((Nonce::N32([1, 2, 3, 4]), 42)));
    assert!(q.rejects_nonce);
    let m = e.meta().unwrap();
    assert_eq!(
        (m.nonce, m.local_nid, m.peer_nid, m.local_loc, m.rejects_nonce),
        (Nonce::N32([1, 2, 3, 4]), NA, NB, LA, true)
    );
    assert_eq!(e.to_identifier(P).map(|(_, m)| m), Ok(m));
    // a PTB from a correspondent, with its own nonce on the error
    let inner = ts::icmp_error(ilnp_addr(LB, NB), ilnp_addr(LA, NA), Icmpv6Type::PACKET_TOO_BIG, 0, 1400, &w);
    let with =
        ts::with_nonce(ilnp_addr(LB, NB), ilnp_addr(LA, NA), &Nonce::N32([9; 4]), NextHeader::ICMPV6, &inner[40..]);
    let Ok(Packet::IcmpError(e)) = classify(&with) else { panic!() };
    assert_eq!((e.nonce.map(|n| n.nonce), e.message.mtu()), (Some(Nonce::N32([9; 4])), Some(1400)));
    assert!(!e.quoted.unwrap().rejects_nonce);
    // a corrupted error is an ICMPv6-error failure, not something else
    let mut bad = pp.clone();
    bad[90] ^= 1;
    assert_eq!(classify(&bad).unwrap_err(), ClassifyError { kind: Kind::IcmpError, error: Error::BadChecksum });
    // the local stack's error (identifier form, quote without a nonce) goes to the wire
    let local = ts::icmp_error(ilnp_addr(P, NA), ilnp_addr(P, NB), Icmpv6Type::DEST_UNREACH, 4, 0, &id);
    let Ok(Packet::IcmpError(e)) = classify(&local) else { panic!() };
    assert_eq!((e.quoted.unwrap().nonce, e.meta()), (None, Err(Error::NoNonce)));
    let (n, qn) = (Nonce::N32([7; 4]), Nonce::N96([8; 12]));
    let w2 = e.to_wire(P, LA, LB, &n, &qn).unwrap();
    // the peer sees our nonce on the error and its own in the quote
    let Ok(Packet::IcmpError(back)) = classify(&w2) else { panic!("{:?}", classify(&w2)) };
    assert_eq!((back.nonce.map(|h| h.nonce), back.meta().map(|m| m.nonce)), (Some(n), Ok(qn)));
    // a quote shorter than a fixed header: no quoted view
    let short = ts::icmp_error(router, ilnp_addr(LA, NA), Icmpv6Type::DEST_UNREACH, 0, 0, &w[..39]);
    let Ok(Packet::IcmpError(e)) = classify(&short) else { panic!() };
    assert_eq!(e.quoted, None);
}

#[test]
fn header_and_body_errors() {
    let err = |kind, error| Err(ClassifyError { kind, error });
    let r = |v: &[u8]| classify(v).map(|p| p.kind());
    assert_eq!(r(&[]), err(Kind::Header, Error::Truncated));
    assert_eq!(r(&[0x45; 40]), err(Kind::Header, Error::NotIpv6));
    // payload_len beyond the buffer
    assert_eq!(r(&literal([0x60, 0, 0, 0, 0, 9, 59, 64], &[0; 8])), err(Kind::Header, Error::Truncated));
    // two nonces, a nonce of 2 bytes
    let two = literal([0x60, 0, 0, 0, 0, 16, 60, 64], &[59, 1, 0x8b, 4, 1, 2, 3, 4, 0x8b, 4, 5, 6, 7, 8, 1, 0]);
    assert_eq!(r(&two), err(Kind::Header, Error::MoreThanOneNonce));
    let two_bytes = literal([0x60, 0, 0, 0, 0, 8, 60, 64], &[59, 0, 1, 0, 0x8b, 2, 0, 0]);
    assert_eq!(r(&two_bytes), err(Kind::Header, Error::BadNonceLength(2)));
    // a nonce then a header running past the payload: a data-packet failure
    let mut walk = literal([0x60, 0, 0, 0, 0, 16, 60, 64], &[43, 0, 0x8b, 4, 1, 2, 3, 4, 17, 4, 0, 0, 0, 0, 0, 0]);
    assert_eq!(r(&walk), err(Kind::Data, Error::Truncated));
    walk[40] = 0; // the same without a nonce header in front: plain
    walk[6] = 43;
    walk[42] = 1;
    assert_eq!(r(&walk), err(Kind::Plain, Error::Truncated));
    // a nonce next to another option: data the slow path does not translate
    let other = literal([0x60, 0, 0, 0, 0, 16, 60, 64], &[59, 1, 0x8b, 4, 1, 2, 3, 4, 0x3e, 2, 0, 0, 1, 0, 0, 0]);
    assert_eq!(r(&other), err(Kind::NonceOnly, Error::UnsupportedOptions));
    // an ICMPv6 error shorter than its 8-byte header
    let short = literal([0x60, 0, 0, 0, 0, 4, 58, 64], &[1, 0, 0, 0]);
    assert_eq!(r(&short), err(Kind::IcmpError, Error::Truncated));
}

#[test]
fn garbage_and_cuts_never_panic() {
    let id = ts::udp(ilnp_addr(P, NA), ilnp_addr(P, NB), 0x9c41, 0x17d4, b"abcdefgh");
    let w = translate::to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    let e =
        ts::icmp_error("2001:db8:a::1".parse().unwrap(), ilnp_addr(LA, NA), Icmpv6Type::PACKET_TOO_BIG, 0, 1280, &w);
    let mut ok = 0;
    for s in [&id, &w, &e] {
        for cut in 0..s.len() {
            ok += classify(&s[..cut]).is_ok() as usize;
        }
        for i in 0..s.len() {
            let mut m = s.to_vec();
            m[i] ^= 0xa5;
            ok += classify(&m).is_ok() as usize;
        }
    }
    let mut rng = ts::Rng(7);
    for _ in 0..5000 {
        let n = (rng.next_u64() % 120) as usize;
        let mut v = rng.bytes(n);
        if v.len() > 6 {
            v[0] = 0x60;
        }
        ok += classify(&v).is_ok() as usize;
    }
    assert!(ok > 0, "some mutations still classify");
}
