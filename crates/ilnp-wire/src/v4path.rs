//! The v4 path (issue #26, docs/architecture.md § IPv4 and NAT): an unchanged ILNPv6
//! packet carried in a UDP datagram over IPv4, and the locator that names such a path.
//!
//! A v4-path locator is `0004:AABB:CCDD:PPPP`: the 16-bit marker `0x0004`, the IPv4
//! address, the UDP port. `0004::/16` lies in `::/8`, which RFC 4291 reserves and which
//! is never routed, so a peer that does not know the encoding sees an unroutable
//! locator and its other locators keep working.

pub use crate::addr::{DEFAULT_PORT, MARK};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Outer IPv4 header (no options) + UDP header.
pub const OVERHEAD: usize = 28;

/// A whole UDP/IPv4 datagram (as the ingress program hands a v4-path packet it does
/// not take to ilnpd, through ilnp0): its source, its destination and its payload.
/// None if it is not one: another protocol, IPv4 options, a fragment, lengths
/// that disagree with the bytes. Checksums are not looked at (the kernel checked
/// the outer ones; the inner packet has its own).
pub fn parse_udp4(pkt: &[u8]) -> Option<(SocketAddrV4, SocketAddrV4, &[u8])> {
    let h = pkt.get(..OVERHEAD)?;
    let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let total = usize::from(be16(2));
    if h[0] != 0x45 || h[9] != 17 || be16(6) & 0x3fff != 0 || total < OVERHEAD || total > pkt.len() {
        return None;
    }
    let udp_len = usize::from(be16(24));
    if udp_len < 8 || 20 + udp_len > total {
        return None;
    }
    let addr = |i: usize| Ipv4Addr::new(h[i], h[i + 1], h[i + 2], h[i + 3]);
    let src = SocketAddrV4::new(addr(12), be16(20));
    let dst = SocketAddrV4::new(addr(16), be16(22));
    Some((src, dst, &pkt[OVERHEAD..20 + udp_len]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp4_datagrams_parse_and_others_do_not() {
        let mut d = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 3, 2, 192, 0, 2, 10];
        d.extend_from_slice(&[0x1a, 0x54, 0x1a, 0x54, 0, 11, 0, 0, 0x60, 1, 2]);
        d[3] = d.len() as u8;
        let (src, dst, payload) = parse_udp4(&d).unwrap();
        assert_eq!(src, "10.0.3.2:6740".parse().unwrap());
        assert_eq!(dst, "192.0.2.10:6740".parse().unwrap());
        assert_eq!(payload, [0x60, 1, 2]);
        // trailing bytes past the IPv4 total length are not payload
        let mut padded = d.clone();
        padded.push(0xee);
        assert_eq!(parse_udp4(&padded).unwrap().2, [0x60, 1, 2]);
        let bad = |i: usize, v: u8| {
            let mut x = d.clone();
            x[i] = v;
            parse_udp4(&x).is_none()
        };
        assert!(bad(0, 0x46), "options");
        assert!(bad(9, 6), "TCP");
        assert!(bad(6, 0x20), "more fragments");
        assert!(bad(25, 200), "UDP length past the datagram");
        assert!(bad(3, 200), "total length past the bytes");
        assert!(parse_udp4(&d[..27]).is_none());
    }
}
