//! The applications' packets, on `ilnp-wire`: the IPv6 header (`ipv6::Repr`,
//! `ipv6::Packet`), the extension-header walk (`ipv6::upper_layer_info`), and the
//! UDP header's view, builder and checksum (`l4`).

use ilnp_wire::ipv6::{self, NextHeader, HEADER_LEN};
use ilnp_wire::l4::{self, UDP_HEADER_LEN};
use ilnp_wire::{split_addr, Nid};
use std::net::Ipv6Addr;

/// An identifier-form UDP datagram `src → dst` into `v` (cleared first, its
/// allocation reused), checksum complete (a computed 0 sent as 0xffff).
#[inline]
pub(crate) fn udp_into(v: &mut Vec<u8>, src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) {
    v.clear();
    let len = UDP_HEADER_LEN + payload.len();
    ipv6::Repr { src, dst, next_header: NextHeader::UDP, payload_len: len as u16, hop_limit: 64 }.emit(v);
    l4::UdpRepr { src_port: sport, dst_port: dport }.emit(payload, v);
    l4::fill_checksum(&mut v[HEADER_LEN..], NextHeader::UDP, &src, &dst, l4::PseudoHeader::Full);
}

/// A UDP datagram directly after the fixed header (identifier form, as the core
/// delivers them to the stack).
pub(crate) struct Udp<'a> {
    pub(crate) src_nid: Nid,
    pub(crate) sport: u16,
    pub(crate) dport: u16,
    /// everything after the UDP header
    pub(crate) payload: &'a [u8],
}

impl<'a> Udp<'a> {
    /// None: not IPv6, not UDP directly after the fixed header, or shorter than
    /// the two headers.
    #[inline]
    pub(crate) fn parse(pkt: &'a [u8]) -> Option<Udp<'a>> {
        let ip = ipv6::Packet::new_checked(pkt).ok()?;
        if ip.next_header() != NextHeader::UDP {
            return None;
        }
        let (_, src_nid) = split_addr(ip.src());
        let u = l4::Udp::new_checked(&pkt[HEADER_LEN..]).ok()?;
        Some(Udp { src_nid, sport: u.src_port(), dport: u.dst_port(), payload: u.payload_slice() })
    }
}

/// A TCP/UDP packet's destination port, its header found past any extension
/// headers (a wire-form packet's nonce option): what the ingress program's socket
/// lookup reads. None: not TCP/UDP, a later fragment, too short, or not IPv6.
#[inline]
pub(crate) fn transport_dport(pkt: &[u8]) -> Option<u16> {
    let u = ipv6::upper_layer_info(pkt).ok()?;
    if (u.proto != NextHeader::UDP && u.proto != NextHeader::TCP) || !u.has_header() {
        return None;
    }
    l4::ports(pkt.get(u.offset..)?).map(|(_, dport)| dport)
}

/// The source NID of an IPv6 packet (of `::` if it is not one).
#[inline]
pub(crate) fn src_nid(pkt: &[u8]) -> Nid {
    split_addr(ipv6::Packet::new_checked(pkt).map_or(Ipv6Addr::UNSPECIFIED, |p| p.src())).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_wire::{checksum, ilnp_addr};

    #[test]
    fn datagrams_verify_and_read_back() {
        let p = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;
        let (a, b) = (Nid(0x0200_5100_0000_0001), Nid(0x0200_5100_0000_0002));
        let (s, d) = (ilnp_addr(p, a), ilnp_addr(p, b));
        let mut v = vec![1, 2, 3];
        udp_into(&mut v, s, d, 40001, 7, b"payload");
        assert_eq!(v.len(), HEADER_LEN + UDP_HEADER_LEN + 7);
        assert!(checksum::verify(&s, &d, NextHeader::UDP, &v[HEADER_LEN..]));
        let u = Udp::parse(&v).expect("a UDP datagram");
        assert_eq!((u.src_nid, u.sport, u.dport, u.payload), (a, 40001, 7, &b"payload"[..]));
        assert_eq!(transport_dport(&v), Some(7));
        assert_eq!(src_nid(&v), a);
        assert!(Udp::parse(&v[..HEADER_LEN + 4]).is_none());
        assert_eq!(transport_dport(&v[..HEADER_LEN + 3]), None);
    }
}
