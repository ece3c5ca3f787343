//! The Locator Update of the authors' Linux 4.9.52 ILNPv6 prototype
//! (github.com/ilnp/ilnp-public-1 at 068701b8), spoken only with peers marked
//! `linux49` (ilnpd's `[peer_interop]`, docs/interop.md); built from its source:
//!
//! * the message (`send_lu`, net/ipv6/ilnp6.c:989-1086; `struct lu_msg`,
//!   include/net/ilnp6.h:155-167): RFC 6743's 8-byte header (type 156, code 0,
//!   Num of Locs 1 (:1023), Operation 1 = LU / 2 = ack, reserved 0), then one
//!   16-byte `struct lu_data` (ilnp6.h:148-152): the L64 as the address's 8 bytes
//!   (copied from `s6_addr`, so network order), `prec` and `lifetime` as host-order
//!   `uint32_t` (:1013-1014; little-endian on x86-64, the architecture
//!   scripts/linux49-live.sh builds): 24 bytes in all, where RFC 6743's entries are
//!   12 bytes of network-order fields. It always writes prec 10 and lifetime 30.
//! * its checksum (:1034-1043): the pseudo-header's locators zeroed (NIDs only),
//!   RFC 6741's transport rule rather than RFC 4443's; a result of 0 sent as 0xffff.
//! * its receiver (`rcv_lu`, :1160-1360) reads `l64`, `prec` and `lifetime` of the
//!   first entry only, whatever Num of Locs says (:1202-1248), and `icmpv6_rcv`
//!   (net/ipv6/icmp.c:823, since 068701b8 "Fixed ICMPv6 ILNP checksum") verifies every
//!   ICMPv6 checksum over the full addresses. So what we send a `linux49` peer is this
//!   layout with RFC 4443's checksum (`packet`), and what we accept from one is this
//!   layout with its NID-only checksum (`verify_checksum`): two of these kernels
//!   cannot take each other's LUs.

use super::{field, Icmpv6Type, LocatorUpdate, LuEntry, LuFormat, LuMessage, LuOperation, Repr};
use crate::addr::Locator;
use crate::checksum::{self, nid_only};
use crate::destopts::Nonce;
use crate::error::Error;
use crate::ipv6::NextHeader;
use std::net::Ipv6Addr;

/// Length of the whole message: 8-byte header + one 16-byte `struct lu_data`.
pub const LEN: usize = 24;

/// The one entry of a message body (`b`: the 16 bytes after the ICMPv6 header).
/// `prec` and `lifetime` are 32-bit: a value over 65535 is kept as 65535.
pub(super) fn entry(b: &[u8]) -> LuEntry {
    let u32le = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let sat = |v: u32| u16::try_from(v).unwrap_or(u16::MAX);
    LuEntry {
        locator: Locator(u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
        preference: sat(u32le(8)),
        lifetime: sat(u32le(12)),
    }
}

/// A view of a Linux 4.9 LU (the ICMPv6 message from its Type byte): 24 bytes,
/// type 156, code 0, Operation 1 or 2. Num of Locs is not checked: its receiver
/// never reads it (it writes 1). The checksum is the caller's (`verify_checksum`).
pub fn new_checked<T: AsRef<[u8]>>(buf: T) -> Result<LuMessage<T>, Error> {
    let b = buf.as_ref();
    if b.len() < LEN {
        return Err(Error::Truncated);
    }
    if Icmpv6Type(b[field::TYPE]) != Icmpv6Type::LOCATOR_UPDATE {
        return Err(Error::Malformed("not a Locator Update"));
    }
    if b.len() != LEN {
        return Err(Error::LuLengthMismatch { num_locs: b[field::LU_NUM_LOCS], len: b.len() });
    }
    let (code, op) = (b[field::CODE], b[field::LU_OPERATION]);
    let operation = match (code, op) {
        (0, 1) => LuOperation::Advertisement,
        (0, 2) => LuOperation::Acknowledgement,
        _ => return Err(Error::UnknownLuOperation { code, operation: op }),
    };
    Ok(LuMessage { buf, operation, format: LuFormat::Linux49 })
}

/// True if `icmp`'s checksum is the prototype's: over a pseudo-header whose
/// addresses keep only their NIDs (ilnp6.c:1034-1043).
pub fn verify_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, icmp: &[u8]) -> bool {
    checksum::verify(&nid_only(src), &nid_only(dst), NextHeader::ICMPV6, icmp)
}

/// The prototype's checksum of `icmp` (its checksum field zero), as `send_lu` computes it.
pub fn checksum(src: &Ipv6Addr, dst: &Ipv6Addr, icmp: &[u8]) -> u16 {
    match checksum::compute(&nid_only(src), &nid_only(dst), NextHeader::ICMPV6, icmp) {
        0 => 0xffff,
        c => c,
    }
}

/// The entry a Linux 4.9 message carries for `entries`: the preferred one (lowest
/// preference, the first of equals), the only one its receiver reads.
pub fn advertised(entries: &[LuEntry]) -> Option<LuEntry> {
    entries.iter().min_by_key(|e| e.preference).copied()
}

/// The message for `lu` in the prototype's layout (its preferred entry only),
/// checksum zero.
pub fn emit(lu: &LocatorUpdate, out: &mut Vec<u8>) -> Result<(), Error> {
    let e = advertised(&lu.entries).ok_or(Error::LuNoLocators)?;
    let mut body = Vec::with_capacity(LEN - field::BODY);
    body.extend_from_slice(&e.locator.0.to_be_bytes());
    body.extend_from_slice(&u32::from(e.preference).to_le_bytes());
    body.extend_from_slice(&u32::from(e.lifetime).to_le_bytes());
    let data_word = (1u32 << 24) | (u32::from(lu.operation.to_byte()) << 16);
    Repr { msg_type: Icmpv6Type::LOCATOR_UPDATE, code: 0, data_word, body: &body }.emit(out);
    Ok(())
}

/// A complete packet for a `linux49` peer: IPv6 + DestOpts(`nonce`) + `lu` in the
/// prototype's layout, with RFC 4443's checksum (what its `icmpv6_rcv` verifies).
pub fn packet(src: Ipv6Addr, dst: Ipv6Addr, nonce: &Nonce, lu: &LocatorUpdate) -> Result<Vec<u8>, Error> {
    let mut icmp = Vec::with_capacity(LEN);
    emit(lu, &mut icmp)?;
    let c = checksum::icmpv6_checksum(&src, &dst, &icmp);
    icmp[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    Ok(crate::destopts::packet(src, dst, 64, Some(nonce), NextHeader::ICMPV6, &icmp))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "2001:db8:1:0:200:ff:fe00:a";
    const DST: &str = "2001:db8:2:0:200:ff:fe00:b";

    /// What `send_lu` (ilnp6.c:989-1086) puts on the wire for an LU of L64
    /// 2001:db8:1:0 from ...:a to ...:b, built by hand from its source on x86-64.
    fn prototype_lu(op: u8) -> Vec<u8> {
        let mut m = vec![
            156, 0, 0, 0, // type, code, checksum (below)
            1, op, 0, 0, // un_data8[0..4]: 1 locator, LU (1) / LU-ACK (2), reserved
            0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00, // data->l64, from s6_addr
            10, 0, 0, 0, // data->prec = L64_DEFAULT_PREC, host order
            30, 0, 0, 0, // data->lifetime = L64_DEFAULT_LIFETIME, host order
        ];
        // csum_ipv6_magic over ::200:ff:fe00:a, ::200:ff:fe00:b (L64s memset to 0)
        let s: Ipv6Addr = "::200:ff:fe00:a".parse().unwrap();
        let d: Ipv6Addr = "::200:ff:fe00:b".parse().unwrap();
        let mut acc = checksum::pseudo_header(&s, &d, NextHeader::ICMPV6, 24);
        acc = checksum::add(acc, checksum::sum(&m));
        let c = !checksum::fold(acc);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        m
    }

    #[test]
    fn the_prototypes_lu_is_read() {
        let (src, dst) = (SRC.parse().unwrap(), DST.parse().unwrap());
        let m = prototype_lu(1);
        assert!(verify_checksum(&src, &dst, &m));
        assert!(!checksum::verify_icmpv6(&src, &dst, &m), "not RFC 4443's checksum");
        assert_eq!(
            super::super::LocatorUpdate::parse(&m).unwrap_err(),
            Error::LuLengthMismatch { num_locs: 1, len: 24 },
            "not an RFC 6743 LU"
        );
        let v = new_checked(&m[..]).unwrap();
        assert_eq!((v.operation(), v.format()), (LuOperation::Advertisement, LuFormat::Linux49));
        let lu = v.to_owned();
        assert_eq!(lu.entries, [LuEntry { locator: Locator(0x2001_0db8_0001_0000), preference: 10, lifetime: 30 }]);
        assert_eq!(new_checked(&prototype_lu(2)[..]).unwrap().operation(), LuOperation::Acknowledgement);
        // the checksum moved with a locator: still the prototype's (NIDs only)
        let other: Ipv6Addr = "2001:db8:9:0:200:ff:fe00:a".parse().unwrap();
        assert!(verify_checksum(&other, &dst, &m));
    }

    #[test]
    fn what_we_send_is_its_layout_with_rfc4443s_checksum() {
        let (src, dst): (Ipv6Addr, Ipv6Addr) = (SRC.parse().unwrap(), DST.parse().unwrap());
        let lu = LocatorUpdate {
            operation: LuOperation::Advertisement,
            entries: vec![
                LuEntry { locator: Locator(0x2001_0db8_0003_0000), preference: 20, lifetime: 300 },
                LuEntry { locator: Locator(0x2001_0db8_0001_0000), preference: 10, lifetime: 30 },
            ],
        };
        let mut m = Vec::new();
        emit(&lu, &mut m).unwrap();
        let mut theirs = prototype_lu(1);
        theirs[2..4].copy_from_slice(&[0, 0]);
        assert_eq!(m, theirs, "the preferred entry, as send_lu lays it out");
        let n = Nonce::from_slice(&[1, 2, 3, 4]).unwrap();
        let p = packet(src, dst, &n, &lu).unwrap();
        let icmp = &p[p.len() - LEN..];
        assert!(checksum::verify_icmpv6(&src, &dst, icmp), "icmpv6_rcv's check (icmp.c:823)");
        assert_eq!(checksum(&src, &dst, &m), u16::from_be_bytes([prototype_lu(1)[2], prototype_lu(1)[3]]));
        let ack = lu.ack();
        let mut a = Vec::new();
        emit(&ack, &mut a).unwrap();
        assert_eq!(a[5], 2);
        assert_eq!(
            emit(&LocatorUpdate { operation: ack.operation, entries: vec![] }, &mut a),
            Err(Error::LuNoLocators)
        );
    }

    #[test]
    fn classify_tells_the_two_layouts_apart() {
        let (src, dst): (Ipv6Addr, Ipv6Addr) = (SRC.parse().unwrap(), DST.parse().unwrap());
        let n = Nonce::from_slice(&[1, 2, 3, 4]).unwrap();
        let theirs = crate::destopts::packet(src, dst, 64, Some(&n), NextHeader::ICMPV6, &prototype_lu(1));
        let Ok(crate::Packet::Lu(l)) = crate::classify(&theirs) else { panic!("{:?}", crate::classify(&theirs)) };
        assert_eq!((l.lu.format(), l.nonce.map(|h| h.nonce)), (LuFormat::Linux49, Some(n)));
        // its layout under RFC 4443's checksum (what we send it) is no LU of ours
        let ours = packet(src, dst, &n, &l.to_owned()).unwrap();
        let e = crate::classify(&ours).unwrap_err();
        assert_eq!((e.kind, e.error), (crate::classify::Kind::Lu, Error::LuLengthMismatch { num_locs: 1, len: 24 }));
        let mut bad = theirs.clone();
        bad[60] ^= 1; // a byte of the L64 entry
        assert_eq!(crate::classify(&bad).unwrap_err().error, Error::BadChecksum);
    }

    #[test]
    fn its_fields_are_bounded_and_its_shape_checked() {
        let mut m = prototype_lu(1);
        m[16..20].copy_from_slice(&70_000u32.to_le_bytes());
        let e = new_checked(&m[..]).unwrap().to_owned().entries[0];
        assert_eq!((e.preference, e.lifetime), (u16::MAX, 30));
        assert_eq!(new_checked(&m[..20]).unwrap_err(), Error::Truncated);
        let mut long = m.clone();
        long.push(0);
        assert_eq!(new_checked(&long[..]).unwrap_err(), Error::LuLengthMismatch { num_locs: 1, len: 25 });
        m[5] = 3;
        assert_eq!(new_checked(&m[..]).unwrap_err(), Error::UnknownLuOperation { code: 0, operation: 3 });
        m[0] = 128;
        assert_eq!(new_checked(&m[..]).unwrap_err(), Error::Malformed("not a Locator Update"));
    }
}
