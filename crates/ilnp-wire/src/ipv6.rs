//! IPv6 fixed header (RFC 8200 §3) view and builder, extension-header walk.

use crate::error::Error;
use std::net::Ipv6Addr;

pub const HEADER_LEN: usize = 40;
/// The Fragment header's length (RFC 8200 §4.5).
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// An IPv6 Next Header value (IANA "Assigned Internet Protocol Numbers"): the
/// extension headers and upper layers this crate knows, and any other value as is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NextHeader(pub u8);

impl NextHeader {
    /// IPv6 Hop-by-Hop Options (RFC 8200 §4.3).
    pub const HOPOPTS: Self = Self(0);
    pub const TCP: Self = Self(6);
    pub const UDP: Self = Self(17);
    /// Routing header (RFC 8200 §4.4).
    pub const ROUTING: Self = Self(43);
    /// Fragment header (RFC 8200 §4.5).
    pub const FRAGMENT: Self = Self(44);
    pub const ICMPV6: Self = Self(58);
    /// No Next Header (RFC 8200 §4.7).
    pub const NONE: Self = Self(59);
    /// Destination Options (RFC 8200 §4.6).
    pub const DSTOPTS: Self = Self(60);
}

named_u8!(NextHeader {
    HOPOPTS => "hop-by-hop",
    TCP => "tcp",
    UDP => "udp",
    ROUTING => "routing",
    FRAGMENT => "fragment",
    ICMPV6 => "icmpv6",
    NONE => "no-next-header",
    DSTOPTS => "destination-options",
});

mod field {
    use core::ops::Range;
    pub const VER_TC_FL: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Zero-copy view of an IPv6 packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks version 6, the fixed header length and that payload_len fits the buffer.
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(Error::NotIpv6);
        }
        let p = Packet { buf };
        if HEADER_LEN + p.payload_len() as usize > p.buf.as_ref().len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }
    /// Checks only version 6 and the fixed header length: for the invoking packet
    /// quoted in an ICMPv6 error, which may be cut short of its payload_len.
    /// `payload` and `packet_bytes` stop at the end of the buffer.
    pub fn new_quoted(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(Error::NotIpv6);
        }
        Ok(Packet { buf })
    }
    pub fn into_inner(self) -> T {
        self.buf
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }
    pub fn ver_tc_fl(&self) -> u32 {
        let b = &self.buf.as_ref()[field::VER_TC_FL];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    pub fn version(&self) -> u8 {
        (self.ver_tc_fl() >> 28) as u8
    }
    /// DSCP + ECN byte.
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_fl() >> 20) as u8
    }
    /// 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_fl() & 0x000f_ffff
    }
    pub fn payload_len(&self) -> u16 {
        let b = &self.buf.as_ref()[field::PAYLOAD_LEN];
        u16::from_be_bytes([b[0], b[1]])
    }
    pub fn next_header(&self) -> NextHeader {
        NextHeader(self.buf.as_ref()[field::NEXT_HEADER])
    }
    pub fn hop_limit(&self) -> u8 {
        self.buf.as_ref()[field::HOP_LIMIT]
    }
    pub fn src(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buf.as_ref()[field::SRC]);
        Ipv6Addr::from(a)
    }
    pub fn dst(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buf.as_ref()[field::DST]);
        Ipv6Addr::from(a)
    }
    /// End of the packet proper: fixed header + payload_len (a quote: the buffer's end
    /// if that comes first).
    fn end(&self) -> usize {
        (HEADER_LEN + self.payload_len() as usize).min(self.buf.as_ref().len())
    }
    /// Everything after the fixed header, up to payload_len (link padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[HEADER_LEN..self.end()]
    }
    /// Bytes of the packet proper (fixed header + payload_len).
    pub fn packet_bytes(&self) -> &[u8] {
        &self.buf.as_ref()[..self.end()]
    }
}

impl<'a> Packet<&'a [u8]> {
    /// `packet_bytes` with the lifetime of the underlying buffer.
    pub fn packet_slice(self) -> &'a [u8] {
        let end = self.end();
        &self.buf[..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets traffic class and flow label (version stays 6).
    pub fn set_tc_fl(&mut self, traffic_class: u8, flow_label: u32) {
        let v = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0x000f_ffff);
        self.buf.as_mut()[field::VER_TC_FL].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buf.as_mut()[field::HOP_LIMIT] = v;
    }
    pub fn set_payload_len(&mut self, v: u16) {
        self.buf.as_mut()[field::PAYLOAD_LEN].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_next_header(&mut self, v: NextHeader) {
        self.buf.as_mut()[field::NEXT_HEADER] = v.0;
    }
    pub fn set_src(&mut self, a: Ipv6Addr) {
        self.buf.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }
    pub fn set_dst(&mut self, a: Ipv6Addr) {
        self.buf.as_mut()[field::DST].copy_from_slice(&a.octets());
    }
    /// Everything after the fixed header (up to payload_len or the buffer's end).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.end();
        &mut self.buf.as_mut()[HEADER_LEN..end]
    }
}

/// Fields of a fixed header to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: NextHeader,
    pub payload_len: u16,
    pub hop_limit: u8,
}

impl Repr {
    /// Emits the 40-byte fixed header (traffic class and flow label zero).
    pub fn emit(&self, out: &mut Vec<u8>) {
        self.emit_with_tc_fl(0, 0, out)
    }

    /// Emits the fixed header with a traffic class and a 20-bit flow label.
    pub fn emit_with_tc_fl(&self, traffic_class: u8, flow_label: u32, out: &mut Vec<u8>) {
        let v = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0x000f_ffff);
        out.extend_from_slice(&v.to_be_bytes());
        out.extend_from_slice(&self.payload_len.to_be_bytes());
        out.push(self.next_header.0);
        out.push(self.hop_limit);
        out.extend_from_slice(&self.src.octets());
        out.extend_from_slice(&self.dst.octets());
    }
}

impl Repr {
    /// The fixed-header fields of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Repr {
        Repr {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            payload_len: p.payload_len(),
            hop_limit: p.hop_limit(),
        }
    }
}

/// Where the upper layer of a packet starts, and whether it is a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpperLayer {
    /// upper-layer protocol (Next Header of the last extension header)
    pub proto: NextHeader,
    /// offset of the upper-layer header from the start of the packet
    pub offset: usize,
    /// `Some((fragment offset in 8-octet units, M flag))` if a Fragment header was crossed.
    /// Only a fragment with offset 0 starts with the upper-layer header, and only an
    /// unfragmented packet (or the reassembled datagram) holds the whole transport
    /// payload a checksum covers.
    pub fragment: Option<(u16, bool)>,
}

impl UpperLayer {
    /// True if bytes at `offset` are the upper-layer header (not a later fragment).
    pub fn has_header(&self) -> bool {
        !matches!(self.fragment, Some((off, _)) if off != 0)
    }
    /// True if the packet holds the whole upper-layer message.
    pub fn is_whole(&self) -> bool {
        matches!(self.fragment, None | Some((0, false)))
    }
}

/// Walks the extension-header chain (Hop-by-Hop, Routing, Destination Options,
/// Fragment) with bounds checks against payload_len; at most 16 headers.
pub fn upper_layer_info(pkt: &[u8]) -> Result<UpperLayer, Error> {
    let p = Packet::new_checked(pkt)?;
    let end = HEADER_LEN + p.payload_len() as usize;
    let mut nh = p.next_header();
    let mut off = HEADER_LEN;
    let mut fragment = None;
    for _ in 0..16 {
        match nh {
            NextHeader::HOPOPTS | NextHeader::ROUTING | NextHeader::DSTOPTS => {
                let (Some(&next), Some(&units)) = (pkt.get(off), pkt.get(off + 1)) else {
                    return Err(Error::Truncated);
                };
                let len = (units as usize + 1) * 8;
                if off + len > end {
                    return Err(Error::Truncated);
                }
                nh = NextHeader(next);
                off += len;
            }
            NextHeader::FRAGMENT => {
                if off + 8 > end {
                    return Err(Error::Truncated);
                }
                let fo = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]);
                fragment = Some((fo >> 3, fo & 1 != 0));
                nh = NextHeader(pkt[off]);
                off += 8;
                if fo >> 3 != 0 {
                    // a later fragment: what follows is data, not the headers its
                    // Next Header names (a FreeBSD datagram's nonce header is in the
                    // first fragment only)
                    return Ok(UpperLayer { proto: nh, offset: off, fragment });
                }
            }
            _ => return Ok(UpperLayer { proto: nh, offset: off, fragment }),
        }
    }
    Err(Error::Malformed("too many extension headers"))
}

/// Walks the extension-header chain from the fixed header.
/// Returns (upper-layer protocol, offset of the upper-layer header from the start
/// of the packet). Bounds-checked against the packet length.
pub fn upper_layer(pkt: &[u8]) -> Result<(NextHeader, usize), Error> {
    upper_layer_info(pkt).map(|u| (u.proto, u.offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_emit() {
        let r = Repr {
            src: "2001:db8:a::c".parse().unwrap(),
            dst: "2001:db8:b::d".parse().unwrap(),
            next_header: NextHeader::UDP,
            payload_len: 8,
            hop_limit: 64,
        };
        let mut v = Vec::new();
        r.emit(&mut v);
        v.extend_from_slice(&[0u8; 8]);
        assert_eq!(&v[..8], &[0x60, 0, 0, 0, 0, 8, 17, 64]);
        let p = Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.src(), r.src);
        assert_eq!(p.dst(), r.dst);
        assert_eq!(upper_layer(&v).unwrap(), (NextHeader::UDP, 40));
    }

    #[test]
    fn rejects_short_and_wrong_version() {
        assert_eq!(Packet::new_checked(&[0x60u8; 39][..]).unwrap_err(), Error::Truncated);
        let mut v = [0u8; 40];
        v[0] = 0x45;
        assert_eq!(Packet::new_checked(&v[..]).unwrap_err(), Error::NotIpv6);
        v[0] = 0x60;
        v[5] = 1; // payload_len 1 but no payload
        assert_eq!(Packet::new_checked(&v[..]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn walks_destopts() {
        let mut v = vec![0x60, 0, 0, 0, 0, 16, NextHeader::DSTOPTS.0, 64];
        v.extend_from_slice(&[0u8; 32]);
        v.extend_from_slice(&[NextHeader::UDP.0, 0, 0x8b, 4, 1, 2, 3, 4]);
        v.extend_from_slice(&[0u8; 8]);
        assert_eq!(upper_layer(&v).unwrap(), (NextHeader::UDP, 48));
        v[41] = 5; // hdr ext len beyond the packet
        assert_eq!(upper_layer(&v).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn traffic_class_and_flow_label() {
        let r = Repr {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::LOCALHOST,
            next_header: NextHeader::NONE,
            payload_len: 0,
            hop_limit: 1,
        };
        let mut v = Vec::new();
        r.emit_with_tc_fl(0xb8, 0xabcde, &mut v);
        assert_eq!(&v[..4], &[0x6b, 0x8a, 0xbc, 0xde]);
        let mut p = Packet::new_checked(&mut v[..]).unwrap();
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0xb8, 0xabcde));
        p.set_tc_fl(0x01, 0xfffff);
        p.set_hop_limit(9);
        assert_eq!(&p.as_bytes()[..8], &[0x60, 0x1f, 0xff, 0xff, 0, 0, NextHeader::NONE.0, 9]);
        assert_eq!(Repr::parse(&p), Repr { hop_limit: 9, ..r });
    }

    #[test]
    fn walks_every_extension_header_kind() {
        // IPv6 | HBH(8) | Routing(16) | Fragment(8, offset 0, M) | DestOpts(8) | TCP
        let mut v = vec![0x60, 0, 0, 0, 0, 60, NextHeader::HOPOPTS.0, 64];
        v.extend_from_slice(&[0u8; 32]);
        v.extend_from_slice(&[NextHeader::ROUTING.0, 0, 1, 4, 0, 0, 0, 0]);
        v.extend_from_slice(&[NextHeader::FRAGMENT.0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        v.extend_from_slice(&[NextHeader::DSTOPTS.0, 0, 0, 1, 0, 0, 0, 1]);
        v.extend_from_slice(&[NextHeader::TCP.0, 0, 1, 4, 0, 0, 0, 0]);
        v.extend_from_slice(&[0u8; 20]);
        let u = upper_layer_info(&v).unwrap();
        assert_eq!(u, UpperLayer { proto: NextHeader::TCP, offset: 80, fragment: Some((0, true)) });
        assert!(u.has_header() && !u.is_whole());
        v[66] = 0x00;
        v[67] = 0x11; // offset 2, M
        assert!(!upper_layer_info(&v).unwrap().has_header());
        // every cut is an error, never a panic
        for cut in 40..v.len() {
            let mut t = v[..cut].to_vec();
            t[4..6].copy_from_slice(&((cut - 40) as u16).to_be_bytes());
            let r = upper_layer(&t);
            assert!(r.is_err() || r.unwrap().1 <= cut, "cut {cut}");
        }
    }

    #[test]
    fn header_loop_is_bounded() {
        // 20 Destination Options headers chained: more than we walk
        let mut v = vec![0x60, 0, 0, 0, 0, 160, NextHeader::DSTOPTS.0, 64];
        v.extend_from_slice(&[0u8; 32]);
        for _ in 0..20 {
            v.extend_from_slice(&[NextHeader::DSTOPTS.0, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert_eq!(upper_layer(&v).unwrap_err(), Error::Malformed("too many extension headers"));
    }
}
