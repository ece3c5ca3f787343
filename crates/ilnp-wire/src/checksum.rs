//! Internet checksums (RFC 1071/1624) and the two ILNPv6 pseudo-header rules.
//!
//! * TCP/UDP in an ILNPv6 session: the upper 64 bits (locators) of both addresses
//!   are zeroed in the pseudo-header (RFC 6744 §3, RFC 6741 §4.2).
//! * ICMPv6 (including Locator Updates): the ordinary full-address pseudo-header
//!   (RFC 6741 §4.3, RFC 6743 §2).

use crate::ipv6::NextHeader;
use std::net::Ipv6Addr;

/// One's-complement sum of `data` (big-endian 16-bit words), not folded.
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [b] = chunks.remainder() {
        acc += (*b as u64) << 8;
    }
    fold64(acc)
}

fn fold64(mut acc: u64) -> u32 {
    while acc >> 32 != 0 {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
    }
    acc as u32
}

/// Folds a 32-bit one's-complement accumulator to 16 bits (not inverted).
pub fn fold(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Adds two one's-complement accumulators.
pub fn add(a: u32, b: u32) -> u32 {
    fold64(a as u64 + b as u64)
}

fn addr_sum(a: &Ipv6Addr) -> u32 {
    sum(&a.octets())
}

named_enum! {
    /// Which pseudo-header an ILNPv6 correspondent's TCP/UDP checksums use on the wire.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum ChecksumRule {
        /// locators zeroed: the NIDs only (RFC 6744 §3, RFC 6740/6741; FreeBSD ILNP6 and
        /// the Linux 4.9 code)
        #[default]
        Rfc6741 = "rfc6741",
        /// the full wire addresses, so the value equals plain IPv6's
        /// (`draft-bhatti-ilnp-tcp-udp-checksums`)
        FullAddress = "full-address",
    }
}

impl ChecksumRule {
    /// `"rfc6741"` or `"full-address"`.
    pub fn parse(s: &str) -> Result<ChecksumRule, String> {
        ChecksumRule::from_name(s).ok_or_else(|| format!("{s:?} is not \"rfc6741\" or \"full-address\""))
    }
}

/// Address with its upper 64 bits zeroed, as the ILNPv6 transport rule wants.
pub fn nid_only(a: &Ipv6Addr) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(*a) & 0xffff_ffff_ffff_ffff)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1).
pub fn pseudo_header(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: NextHeader, upper_len: u32) -> u32 {
    let mut acc = addr_sum(src);
    acc = add(acc, addr_sum(dst));
    acc = add(acc, upper_len >> 16);
    acc = add(acc, upper_len & 0xffff);
    add(acc, u32::from(next_header.0))
}

/// Checksum over pseudo-header + `upper` (whose checksum field must be zero).
pub fn compute(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: NextHeader, upper: &[u8]) -> u16 {
    let acc = add(pseudo_header(src, dst, next_header, upper.len() as u32), sum(upper));
    !fold(acc)
}

/// TCP/UDP checksum of an ILNPv6 packet: locators zeroed (RFC 6744 §3).
/// `upper` is the transport header + payload with the checksum field zeroed.
/// A UDP result of 0 must be sent as 0xffff; `transport_checksum_wire` does that.
pub fn transport_checksum_wire(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: NextHeader, upper: &[u8]) -> u16 {
    let c = compute(&nid_only(src), &nid_only(dst), next_header, upper);
    if next_header == NextHeader::UDP && c == 0 {
        0xffff
    } else {
        c
    }
}

/// ICMPv6 checksum: full addresses (RFC 4443 §2.3).
pub fn icmpv6_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, icmp: &[u8]) -> u16 {
    compute(src, dst, NextHeader::ICMPV6, icmp)
}

/// True if the checksum in `upper` verifies with the given pseudo-header addresses.
pub fn verify(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: NextHeader, upper: &[u8]) -> bool {
    let acc = add(pseudo_header(src, dst, next_header, upper.len() as u32), sum(upper));
    fold(acc) == 0xffff
}

/// True if a TCP/UDP checksum in `upper` verifies under the ILNPv6 wire rule
/// (locators zeroed). A UDP checksum of 0 (none) does not verify.
pub fn verify_transport_wire(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: NextHeader, upper: &[u8]) -> bool {
    if next_header == NextHeader::UDP && upper.get(6..8) == Some(&[0, 0]) {
        return false;
    }
    verify(&nid_only(src), &nid_only(dst), next_header, upper)
}

/// True if an ICMPv6 checksum verifies over the full addresses.
pub fn verify_icmpv6(src: &Ipv6Addr, dst: &Ipv6Addr, icmp: &[u8]) -> bool {
    verify(src, dst, NextHeader::ICMPV6, icmp)
}

/// RFC 1624 incremental update: the checksum field `old_csum` covered data whose
/// sum was `old_sum`; that data now sums to `new_sum`. Returns the new field value.
pub fn update(old_csum: u16, old_sum: u32, new_sum: u32) -> u16 {
    // HC' = ~(~HC + ~m + m')
    let acc = add(add(!old_csum as u32, (!fold(old_sum)) as u32), new_sum);
    !fold(acc)
}

/// Same as `update` for a field that holds a partial (pseudo-header-only,
/// not inverted) sum, as with CHECKSUM_PARTIAL / virtio NEEDS_CSUM.
pub fn update_partial(old_field: u16, old_sum: u32, new_sum: u32) -> u16 {
    let acc = add(add(old_field as u32, (!fold(old_sum)) as u32), new_sum);
    fold(acc)
}

/// Offset of the checksum field in the upper-layer header of `proto`, for the
/// protocols whose checksum covers the addresses (TCP, UDP, ICMPv6).
pub fn field_offset(proto: NextHeader) -> Option<usize> {
    match proto {
        NextHeader::TCP => Some(16),
        NextHeader::UDP => Some(6),
        NextHeader::ICMPV6 => Some(2),
        _ => None,
    }
}

/// The 16-bit checksum field at `at`, if the buffer holds it.
pub fn read_field(buf: &[u8], at: usize) -> Option<u16> {
    match buf.get(at..at.checked_add(2)?) {
        Some(&[hi, lo]) => Some(u16::from_be_bytes([hi, lo])),
        _ => None,
    }
}

/// Stores a checksum field at `at` (which `read_field` found in the buffer).
pub fn write_field(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Sum of the two addresses of a pseudo-header.
pub fn addr_pair_sum(src: &Ipv6Addr, dst: &Ipv6Addr) -> u32 {
    add(addr_sum(src), addr_sum(dst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: 0001 f203 f4f5 f6f7 → sum ddf2
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d)), 0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56])), 0x1234 + 0x5600);
    }

    #[test]
    fn udp_zero_is_sent_as_ffff() {
        // Find a UDP body whose wire checksum computes to 0 by choosing the last word.
        let a: Ipv6Addr = "2001:db8:1::200:ff:fe00:c".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:2::200:ff:fe00:d".parse().unwrap();
        let mut udp = vec![0x9c, 0x40, 0x17, 0x70, 0x00, 0x0a, 0, 0, 0, 0];
        let c = transport_checksum_wire(&a, &b, NextHeader::UDP, &udp);
        // adding the value c to the data turns the folded sum into 0xffff: checksum 0
        udp[8..10].copy_from_slice(&c.to_be_bytes());
        assert_eq!(compute(&nid_only(&a), &nid_only(&b), NextHeader::UDP, &udp), 0);
        assert_eq!(transport_checksum_wire(&a, &b, NextHeader::UDP, &udp), 0xffff);
        udp[6..8].copy_from_slice(&[0xff, 0xff]);
        assert!(verify_transport_wire(&a, &b, NextHeader::UDP, &udp));
        // TCP keeps the computed 0
        assert_eq!(
            transport_checksum_wire(&a, &b, NextHeader::TCP, &udp[..8]),
            compute(&nid_only(&a), &nid_only(&b), NextHeader::TCP, &udp[..8])
        );
        // UDP "no checksum" never verifies
        udp[6..8].copy_from_slice(&[0, 0]);
        assert!(!verify_transport_wire(&a, &b, NextHeader::UDP, &udp));
    }

    #[test]
    fn wire_rule_ignores_locators_icmp_rule_does_not() {
        let a: Ipv6Addr = "2001:db8:1::200:ff:fe00:c".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:2::200:ff:fe00:d".parse().unwrap();
        let a2: Ipv6Addr = "2001:db8:99::200:ff:fe00:c".parse().unwrap();
        let mut udp = vec![0x9c, 0x40, 0x17, 0x70, 0x00, 0x0b, 0, 0, b'a', b'b', b'c'];
        let c = transport_checksum_wire(&a, &b, NextHeader::UDP, &udp);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(
            verify_transport_wire(&a2, &b, NextHeader::UDP, &udp),
            "a locator change does not touch the wire checksum"
        );
        let mut icmp = vec![128, 0, 0, 0, 0, 1, 0, 1];
        let c = icmpv6_checksum(&a, &b, &icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        assert!(verify_icmpv6(&a, &b, &icmp));
        assert!(!verify_icmpv6(&a2, &b, &icmp));
    }

    #[test]
    fn incremental_equals_full() {
        let a: Ipv6Addr = "fd69:6c6e:7000::200:ff:fe00:c".parse().unwrap();
        let b: Ipv6Addr = "fd69:6c6e:7000::200:ff:fe00:d".parse().unwrap();
        let mut udp = vec![0x9c, 0x40, 0x17, 0x70, 0x00, 0x0d, 0, 0, b'h', b'e', b'l', b'l', b'o'];
        let c = compute(&a, &b, NextHeader::UDP, &udp);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(verify(&a, &b, NextHeader::UDP, &udp));
        let na = nid_only(&a);
        let nb = nid_only(&b);
        let c2 = update(c, addr_pair_sum(&a, &b), addr_pair_sum(&na, &nb));
        udp[6..8].copy_from_slice(&c2.to_be_bytes());
        assert!(verify(&na, &nb, NextHeader::UDP, &udp));
        assert!(!verify(&a, &b, NextHeader::UDP, &udp));
    }
}
