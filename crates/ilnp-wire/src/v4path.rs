//! The v4 path (issue #26, docs/architecture.md § IPv4 and NAT): an unchanged ILNPv6
//! packet carried in a UDP datagram over IPv4, and the locator that names such a path.
//!
//! A v4-path locator is `0004:AABB:CCDD:PPPP`: the 16-bit marker `0x0004`, the IPv4
//! address, the UDP port. `0004::/16` lies in `::/8`, which RFC 4291 reserves and which
//! is never routed, so a peer that does not know the encoding sees an unroutable
//! locator and its other locators keep working.

use crate::Locator;
use std::net::{Ipv4Addr, SocketAddrV4};

/// The top 16 bits of every v4-path locator.
pub const MARK: u16 = 0x0004;
/// The UDP port ILNPv6-in-UDP is sent to and from unless configured otherwise.
pub const DEFAULT_PORT: u16 = 6740;
/// Outer IPv4 header (no options) + UDP header.
pub const OVERHEAD: usize = 28;

impl Locator {
    /// The locator naming the UDP/IPv4 path to `addr`:`port`.
    pub fn v4_path(addr: Ipv4Addr, port: u16) -> Locator {
        Locator((MARK as u64) << 48 | (u32::from(addr) as u64) << 16 | port as u64)
    }

    /// The IPv4 address and UDP port this locator names, if it is a v4 path.
    pub fn as_v4_path(self) -> Option<SocketAddrV4> {
        self.is_v4_path().then(|| SocketAddrV4::new(Ipv4Addr::from((self.0 >> 16) as u32), self.0 as u16))
    }

    pub fn is_v4_path(self) -> bool {
        (self.0 >> 48) as u16 == MARK
    }

    /// Both locators name paths of one family (a packet from one to the other can
    /// be sent: IPv6 to IPv6, UDP/IPv4 to UDP/IPv4).
    pub fn same_family(self, other: Locator) -> bool {
        self.is_v4_path() == other.is_v4_path()
    }
}

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

/// `A.B.C.D[:PORT]` (after the `v4:` of the presentation form).
pub(crate) fn parse(s: &str) -> Result<Locator, String> {
    let (addr, port) = match s.split_once(':') {
        Some((a, p)) => (a, p.parse::<u16>().map_err(|_| format!("port {p:?} is not a number 0-65535"))?),
        None => (s, DEFAULT_PORT),
    };
    let addr: Ipv4Addr = addr.parse().map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
    if addr.is_unspecified() || addr.is_multicast() || addr.is_broadcast() || addr.is_loopback() {
        return Err(format!("{addr} cannot carry a path (unspecified, loopback, multicast or broadcast)"));
    }
    if port == 0 {
        return Err("port 0".to_string());
    }
    Ok(Locator::v4_path(addr, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_reads_as_written() {
        let l = Locator::v4_path(Ipv4Addr::new(192, 0, 2, 10), 6740);
        assert_eq!(l.0, 0x0004_c000_020a_1a54);
        assert_eq!(l.as_v4_path(), Some("192.0.2.10:6740".parse().unwrap()));
        assert_eq!(l.to_string(), "v4:192.0.2.10:6740");
        assert_eq!("v4:192.0.2.10:6740".parse::<Locator>(), Ok(l));
        assert_eq!("v4:192.0.2.10".parse::<Locator>(), Ok(l));
        // the four-group form of the same value is the same locator
        assert_eq!("0004:c000:020a:1a54".parse::<Locator>(), Ok(l));
        assert_eq!(Locator::parse_unicast("v4:192.0.2.10:6740"), Ok(l));
        assert!(!Locator(0x2001_0db8_0001_0000).is_v4_path());
        assert!(l.same_family(Locator::v4_path(Ipv4Addr::new(10, 0, 0, 1), 1)));
        assert!(!l.same_family(Locator(0x2001_0db8_0001_0000)));
    }

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

    #[test]
    fn bad_text_names_the_part() {
        for (s, want) in [
            ("v4:192.0.2.300", "\"192.0.2.300\" is not an IPv4 address"),
            ("v4:192.0.2.1:x", "port \"x\" is not a number"),
            ("v4:127.0.0.1", "cannot carry a path"),
            ("v4:224.0.0.1:5", "cannot carry a path"),
            ("v4:192.0.2.1:0", "port 0"),
        ] {
            let e = s.parse::<Locator>().unwrap_err();
            assert!(e.contains(want) && e.contains(s), "{s}: {e}");
        }
    }
}
