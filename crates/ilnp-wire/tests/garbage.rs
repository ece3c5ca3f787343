//! Every parser fed truncated, mutated and random input: errors, never panics,
//! and what does parse keeps the round-trip properties the fuzz targets check.
//! Plain deterministic loops (no proptest), so the cases are the same on every run.

use ilnp_wire::destopts::{self, Header};
use ilnp_wire::icmpv6::{self, Icmpv6Type, LocatorUpdate, LuEntry, LuMessage, LuOperation, Message};
use ilnp_wire::ipv6::NextHeader;
use ilnp_wire::rdata::{self, Rdata};
use ilnp_wire::test_support::{self as ts, hex, Rng, LA, LB, NA, NB, P};
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{classify, ilnp_addr, ipv6, Nonce};
use std::net::Ipv6Addr;

/// Every parser in the crate on one input. Returns how many accepted it.
fn all_parsers(data: &[u8]) -> usize {
    let mut ok = 0;
    if let Ok(p) = ipv6::Packet::new_checked(data) {
        let _ = (p.src(), p.dst(), p.payload().len(), p.flow_label(), p.traffic_class());
        ok += 1;
    }
    ok += ipv6::upper_layer(data).is_ok() as usize;
    ok += ipv6::upper_layer_info(data).is_ok() as usize;
    ok += destopts::find_nonce_in_header(data, 0).is_ok() as usize;
    if let Ok(h) = Header::new_checked(data) {
        ok += h.options().filter(|o| o.is_ok()).count().min(1);
    }
    if let Ok(m) = Message::new_checked(data) {
        let _ = (m.msg_type(), m.code(), m.mtu(), m.pointer(), m.invoking_packet().len(), m.body().len());
        ok += 1;
    }
    if let Ok(m) = LuMessage::new_checked(data) {
        assert_eq!(m.entries().count(), m.num_locs() as usize);
        ok += 1;
    }
    ok += lu_roundtrip(data) as usize;
    for t in [rdata::TYPE_NID, rdata::TYPE_L32, rdata::TYPE_L64, rdata::TYPE_LP, 1] {
        ok += rdata_wire_roundtrip(t, data) as usize;
    }
    ok += rdata_text_roundtrip(data);
    ok += translate_roundtrip(data) as usize;
    ok += ts::to_identifier(data, P, Csum::Complete).is_ok() as usize;
    ok += ts::to_identifier(data, P, Csum::Partial).is_ok() as usize;
    ok += ts::icmp_error_to_identifier(data, P).is_ok() as usize;
    ok += ts::icmp_error_meta(data).is_ok() as usize;
    ok += ts::icmp_error_to_wire(data, P, LA, LB, &Nonce::N32([1; 4]), &Nonce::N96([2; 12])).is_ok() as usize;
    ok += translate::quoted_nonce(data).is_some() as usize;
    ok += ts::lu(data).is_ok() as usize;
    ok += translate::unreachable_to_app(data, 3).is_ok() as usize;
    ok += classify_agrees(data) as usize;
    ok
}

/// What `classify` accepts is consistent: a data packet's identifier form lost
/// our header, an LU's view parses as its owned form, an error's meta is the one
/// its translation reports, and a plain packet has no nonce option.
fn classify_agrees(data: &[u8]) -> bool {
    let Ok(p) = classify(data) else { return false };
    assert!(p.ip().payload_len as usize + 40 <= data.len());
    match p {
        ilnp_wire::Packet::Data(d) | ilnp_wire::Packet::NonceOnly(d) => {
            assert!(d.nonce.only_nonce);
            if let Ok((id, meta)) = d.to_identifier(P, Csum::Complete) {
                // our header stripped, both addresses in the identifier prefix
                assert_eq!(id.len(), d.bytes().len() - d.nonce.header_len);
                let q = ipv6::Packet::new_checked(&id[..]).expect("output is IPv6");
                assert_eq!((ilnp_wire::split_addr(q.src()).0, ilnp_wire::split_addr(q.dst()).0), (P, P));
                assert_eq!(meta.nonce, d.nonce.nonce);
            }
        }
        ilnp_wire::Packet::Lu(l) => {
            let again = match l.lu.format() {
                icmpv6::LuFormat::Rfc6743 => LocatorUpdate::parse(l.lu.as_bytes()),
                icmpv6::LuFormat::Linux49 => icmpv6::linux49::new_checked(l.lu.as_bytes()).map(|m| m.to_owned()),
            };
            assert_eq!(again, Ok(l.to_owned()));
        }
        ilnp_wire::Packet::IcmpError(e) => {
            assert!(e.message.is_error());
            if let Ok((_, m)) = e.to_identifier(P) {
                assert_eq!(e.meta(), Ok(m));
            }
        }
        ilnp_wire::Packet::Plain(p) => {
            let h = &p.bytes()[40..];
            if p.ip.next_header == NextHeader::DSTOPTS {
                assert_eq!(destopts::find_nonce_in_header(h, 40).map(|n| n.is_some()), Ok(false));
            }
        }
    }
    true
}

fn lu_roundtrip(data: &[u8]) -> bool {
    let Ok(lu) = LocatorUpdate::parse(data) else { return false };
    let mut v = Vec::new();
    lu.emit(&mut v).expect("a parsed LU re-emits");
    assert_eq!(v.len(), data.len());
    assert_eq!(&v[8..], &data[8..], "entries survive a parse/emit round trip");
    true
}

fn rdata_wire_roundtrip(t: u16, data: &[u8]) -> bool {
    let Ok(r) = Rdata::parse(t, data) else { return false };
    let mut v = Vec::new();
    r.emit(&mut v).expect("parsed RDATA re-emits");
    assert_eq!(v, data, "type {t}: RDATA round trip");
    let text = r.to_string();
    assert_eq!(Rdata::from_presentation(r.type_name(), &text).as_ref(), Ok(&r), "{text}");
    true
}

fn rdata_text_roundtrip(data: &[u8]) -> usize {
    let Ok(text) = std::str::from_utf8(data) else { return 0 };
    let mut n = 0;
    for ty in ["NID", "L32", "L64", "LP", "AAAA"] {
        if let Ok(r) = Rdata::from_presentation(ty, text) {
            let again = Rdata::from_presentation(ty, &r.to_string()).expect("printed form parses");
            assert_eq!(again, r);
            let mut w = Vec::new();
            r.emit(&mut w).expect("a parsed record emits");
            assert_eq!(Rdata::parse(r.rr_type(), &w).unwrap(), r);
            n += 1;
        }
    }
    n
}

/// to_wire then to_identifier gives the input back (the checksum field may turn
/// into its one's-complement twin).
fn translate_roundtrip(data: &[u8]) -> bool {
    let Ok(w) = translate::to_wire(data, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete) else {
        return false;
    };
    let (back, meta) = match classify(&w) {
        Ok(ilnp_wire::Packet::Data(d) | ilnp_wire::Packet::NonceOnly(d)) => {
            d.to_identifier(P, Csum::Complete).expect("our own wire form translates back")
        }
        // an ICMPv6 error or LU (even a broken one) is not a data packet on the wire
        other => {
            assert_eq!(ipv6::upper_layer_info(data).ok().map(|u| u.proto), Some(NextHeader::ICMPV6), "{other:?}");
            return false;
        }
    };
    assert_eq!((meta.src_loc, meta.dst_loc), (LA, LB));
    let n = 40 + u16::from_be_bytes([data[4], data[5]]) as usize;
    assert_eq!(back.len(), n);
    let diff: Vec<usize> = (0..n).filter(|&i| back[i] != data[i]).collect();
    assert!(diff.is_empty() || (diff.len() <= 2 && diff.windows(2).all(|w| w[1] == w[0] + 1)), "{diff:?}");
    true
}

fn udp(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
    ts::udp(src, dst, 0x9c41, 0x17d4, payload)
}

/// Valid inputs of every kind, to cut and mutate.
fn seeds() -> Vec<Vec<u8>> {
    let id = udp(ilnp_addr(P, NA), ilnp_addr(P, NB), b"seed payload");
    let w32 = translate::to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
    let w96 = translate::to_wire(&id, P, LA, LB, &Nonce::N96([7; 12]), Csum::Complete).unwrap();
    let lu = LocatorUpdate {
        operation: LuOperation::Advertisement,
        entries: vec![
            LuEntry { locator: LA, preference: 10, lifetime: 30 },
            LuEntry { locator: LB, preference: 20, lifetime: 300 },
        ],
    };
    let lu_pkt = translate::lu_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), &Nonce::N32([9; 4]), &lu).unwrap();
    let mut lu_msg = Vec::new();
    lu.emit(&mut lu_msg).unwrap();
    let router: Ipv6Addr = "2001:db8:a::1".parse().unwrap();
    let ptb = icmpv6::error_packet(router, ilnp_addr(LA, NA), Icmpv6Type::PACKET_TOO_BIG, 0, 1280, &w32);
    let pp = icmpv6::error_packet(router, ilnp_addr(LA, NA), Icmpv6Type::PARAM_PROBLEM, 2, 42, &w96);
    let local_err = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), Icmpv6Type::DEST_UNREACH, 4, 0, &id);
    let mut lp = Vec::new();
    Rdata::from_presentation("LP", "10 l64-subnet1.example.com.").unwrap().emit(&mut lp).unwrap();
    vec![
        id,
        w32.clone(),
        w96,
        lu_pkt,
        lu_msg,
        ptb,
        pp,
        local_err,
        w32[40..].to_vec(),
        lp,
        vec![0, 10, 0x20, 0x01, 0x0d, 0xb8, 0x11, 0x40, 0x10, 0x00],
        b"10 0014:4fff:ff20:ee64".to_vec(),
        b"10 10.1.02.0".to_vec(),
        b"10 l64-subnet1.example.com.".to_vec(),
    ]
}

#[test]
fn every_truncation_of_every_seed() {
    let mut accepted = 0;
    for s in seeds() {
        for cut in 0..=s.len() {
            accepted += all_parsers(&s[..cut]);
        }
        // a whole seed is accepted by something (else the seed would prove nothing)
        assert!(all_parsers(&s) > 0, "seed {s:02x?} parses nowhere");
    }
    assert!(accepted > 100, "only {accepted} acceptances: the seeds are not reaching the parsers");
}

#[test]
fn every_byte_flip_of_every_seed() {
    for s in seeds() {
        for i in 0..s.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut m = s.clone();
                m[i] ^= x;
                all_parsers(&m);
            }
        }
    }
}

#[test]
fn random_bytes_and_random_tails() {
    let mut r = Rng(0x1234_5678_9abc_def1);
    for _ in 0..20_000 {
        let n = (r.next_u64() % 200) as usize;
        all_parsers(&r.bytes(n));
    }
    // random tails behind plausible heads: IPv6 + DestOpts, ICMPv6 LU, RDATA
    for s in seeds() {
        for _ in 0..300 {
            let keep = (r.next_u64() as usize) % (s.len() + 1);
            let mut m = s[..keep].to_vec();
            let extra = (r.next_u64() % 64) as usize;
            m.extend(r.bytes(extra));
            all_parsers(&m);
        }
    }
}

#[test]
fn random_text_for_presentation_parsers() {
    let alphabet = b"0123456789abcdefABCDEF:.- \t+lpxyz\\\xc3\xa9";
    let mut r = Rng(42);
    for _ in 0..20_000 {
        let n = (r.next_u64() % 40) as usize;
        let s: Vec<u8> = (0..n).map(|_| alphabet[(r.next_u64() as usize) % alphabet.len()]).collect();
        all_parsers(&s);
    }
}

/// Inputs the fuzzers once found (fuzz/artifacts), kept as regressions.
#[test]
fn former_fuzz_findings() {
    for h in [
        // rdata: LP labels holding a dot or a NUL could not round-trip through text
        "12260a010a02000a0a020002000a3bd5d5d50012260a0a12000a0a020002000a0002000a120002002e00",
        "12233002002e00",
        // rdata_wire (selector byte 0x3a = LP): a 256-byte name was accepted
        "3a090002743002743402743002747402743102744002747402743002743002743002746c0274300274340135027430027474027431027474013502743002743002747402743002747402747402743002747402747402743002747402743002743402743002747402743102744002747402743002743002743002746c0274300234340135027430027474027431027474013502743002747402743002747402743002747402747402743002747402747402743002747402743002743002743002746c0274300274340135027430027430027474027431027474013502743002743002747402743002747402747402743002747402747402743002743002743002747400",
        // translate: ICMPv6 checksums are adjusted, not recomputed (a bad one stays bad)
        "612e000000043a00fd696c6e700000000000000000000000fd696c6e7000000000616161616161616161610a",
        "6100000000053a00fd696c6e700000000000000000000000fd696c6e70000000000000000400fd696c6e700000000000000000000000000000000800",
        "6100000000073a00fd696c6e700000000000000000000000fd696c6e7000000000000000eeeeeeeefffffffffffffffdfd696c6e700000000000eeeeeeeeeeeeeeeeeeeeeee5ee00000800ffffff0000080000",
    ] {
        let d = hex(h);
        all_parsers(&d);
        // the fuzz targets used the first byte as a selector: also without it
        for cut in 1..=d.len() {
            all_parsers(&d[1..cut]);
        }
    }
}

/// The fuzz seed corpus (`fuzz/seeds/<target>/seed-NN`) is exactly `seeds()`, so the fuzzers
/// start from every input these tests know. After changing `seeds()`, refresh it with
/// `ILNP_FUZZ_SEEDS_WRITE=1 cargo test -p ilnp-wire --test garbage fuzz_seed_corpus`.
#[test]
fn fuzz_seed_corpus_is_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let write = std::env::var("ILNP_FUZZ_SEEDS_WRITE").is_ok_and(|v| v == "1");
    let plain =
        ["ipv6", "destopts", "icmpv6_lu", "to_identifier", "icmp_error", "translate", "core_inbound", "classify"];
    // rdata_wire takes the RR type's offset from 104 as its first byte (107: L64)
    let targets = plain.iter().map(|t| (*t, None)).chain([("rdata_wire", Some(107u8 - 104)), ("rdata_text", None)]);
    let mut stale = Vec::new();
    for (t, prefix) in targets {
        if write {
            std::fs::create_dir_all(dir.join(t)).unwrap();
        }
        for (i, s) in seeds().iter().enumerate() {
            let mut v: Vec<u8> = prefix.map(|p| vec![p]).unwrap_or_default();
            v.extend_from_slice(s);
            let f = dir.join(t).join(format!("seed-{i:02}"));
            if write {
                std::fs::write(&f, &v).unwrap();
            } else if std::fs::read(&f).ok().as_deref() != Some(&v[..]) {
                stale.push(f.display().to_string());
            }
        }
    }
    assert!(stale.is_empty(), "fuzz seeds missing or stale (refresh: see this test's doc): {stale:?}");
}
