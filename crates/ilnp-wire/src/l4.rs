//! TCP and UDP headers (RFC 9293 §3.1, RFC 768): zero-copy views, builders, and
//! the checksum fill for a whole transport header + payload.
//!
//! Used by the daemon (GSO segmentation, TCP-LD hints), the simulator's
//! applications, `ilnp-flood` and the tests' packet builders, so the layout is
//! written once.

use crate::checksum;
use crate::error::Error;
use crate::ipv6::{self, NextHeader};
use std::net::Ipv6Addr;

/// Source port, destination port, length, checksum.
pub const UDP_HEADER_LEN: usize = 8;
/// A TCP header without options (data offset 5).
pub const TCP_HEADER_LEN: usize = 20;
/// Longest TCP header (data offset 15).
pub const TCP_MAX_HEADER_LEN: usize = 60;
/// Both headers start with the source and the destination port.
pub const PORTS_LEN: usize = 4;
/// Offset of the TCP data offset (high nibble) in the TCP header.
pub const TCP_DATA_OFFSET: usize = 12;
/// Offset of the TCP flags byte.
pub const TCP_FLAGS: usize = 13;

/// TCP flag bits (the flags byte, RFC 9293 §3.1).
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

mod field {
    use core::ops::Range;
    pub const SPORT: Range<usize> = 0..2;
    pub const DPORT: Range<usize> = 2..4;
    pub const UDP_LEN: Range<usize> = 4..6;
    pub const UDP_CHECKSUM: Range<usize> = 6..8;
    pub const TCP_SEQ: Range<usize> = 4..8;
    pub const TCP_ACK: Range<usize> = 8..12;
    pub const TCP_WINDOW: Range<usize> = 14..16;
    pub const TCP_CHECKSUM: Range<usize> = 16..18;
}

fn u16_at(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[r.start], b[r.start + 1]])
}

fn u32_at(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    u32::from_be_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
}

/// `(source, destination)` port of the TCP or UDP header at the start of `l4`;
/// None if it is shorter than the two ports.
pub fn ports(l4: &[u8]) -> Option<(u16, u16)> {
    (l4.len() >= PORTS_LEN).then(|| (u16_at(l4, field::SPORT), u16_at(l4, field::DPORT)))
}

/// A UDP header and what follows it.
#[derive(Debug, Clone, Copy)]
pub struct Udp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Udp<T> {
    /// `Truncated` if shorter than the 8-byte header.
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        if buf.as_ref().len() < UDP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Udp { buf })
    }
    pub fn src_port(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::SPORT)
    }
    pub fn dst_port(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::DPORT)
    }
    /// The Length field (header + data, as sent).
    pub fn length(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::UDP_LEN)
    }
    pub fn checksum(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::UDP_CHECKSUM)
    }
    /// Everything after the header (the buffer's end, not the Length field's).
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[UDP_HEADER_LEN..]
    }
}

impl<'a> Udp<&'a [u8]> {
    /// `payload` with the lifetime of the underlying buffer.
    pub fn payload_slice(self) -> &'a [u8] {
        &self.buf[UDP_HEADER_LEN..]
    }
}

/// A TCP header (with its options) and what follows it.
#[derive(Debug, Clone, Copy)]
pub struct Tcp<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Tcp<T> {
    /// `Truncated` if shorter than the fixed header or than its data offset says;
    /// `Malformed` if the data offset is below 5.
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        if b.len() < TCP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hlen = usize::from(b[TCP_DATA_OFFSET] >> 4) * 4;
        if hlen < TCP_HEADER_LEN {
            return Err(Error::Malformed("TCP data offset below 5"));
        }
        if b.len() < hlen {
            return Err(Error::Truncated);
        }
        Ok(Tcp { buf })
    }
    pub fn src_port(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::SPORT)
    }
    pub fn dst_port(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::DPORT)
    }
    pub fn seq(&self) -> u32 {
        u32_at(self.buf.as_ref(), field::TCP_SEQ)
    }
    pub fn ack(&self) -> u32 {
        u32_at(self.buf.as_ref(), field::TCP_ACK)
    }
    /// Header length in bytes, options included (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buf.as_ref()[TCP_DATA_OFFSET] >> 4) * 4
    }
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[TCP_FLAGS]
    }
    pub fn window(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::TCP_WINDOW)
    }
    pub fn checksum(&self) -> u16 {
        u16_at(self.buf.as_ref(), field::TCP_CHECKSUM)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..]
    }
}

/// A UDP header to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
}

impl UdpRepr {
    /// Appends the header (Length = 8 + payload, checksum 0) and `payload` to `out`.
    pub fn emit(&self, payload: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.extend_from_slice(&((UDP_HEADER_LEN + payload.len()) as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(payload);
    }
}

/// A TCP header without options to build (urgent pointer 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
}

impl TcpRepr {
    /// Appends the 20-byte header (data offset 5, checksum 0) and `payload` to `out`.
    pub fn emit(&self, payload: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.ack.to_be_bytes());
        out.extend_from_slice(&[(TCP_HEADER_LEN as u8 / 4) << 4, self.flags]);
        out.extend_from_slice(&self.window.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        out.extend_from_slice(payload);
    }
}

/// Which pseudo-header a transport checksum is computed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PseudoHeader {
    /// the two addresses as given (a host stack's view: plain IPv6, or identifier
    /// form before translation)
    Full,
    /// the ILNPv6 wire rule: locators zeroed, NIDs only (RFC 6744 §3)
    Ilnp,
}

/// Fills the checksum of `l4` (a whole TCP or UDP header + payload, checksum field
/// zero) for `src` → `dst`. A UDP checksum that comes out 0 is sent as 0xffff
/// (RFC 8200 §8.1). Other protocols: nothing is written.
pub fn fill_checksum(l4: &mut [u8], proto: NextHeader, src: &Ipv6Addr, dst: &Ipv6Addr, pseudo: PseudoHeader) {
    let at = match proto {
        NextHeader::UDP if l4.len() >= UDP_HEADER_LEN => field::UDP_CHECKSUM.start,
        NextHeader::TCP if l4.len() >= TCP_HEADER_LEN => field::TCP_CHECKSUM.start,
        _ => return,
    };
    let c = match pseudo {
        PseudoHeader::Full => match checksum::compute(src, dst, proto, l4) {
            0 if proto == NextHeader::UDP => 0xffff,
            c => c,
        },
        PseudoHeader::Ilnp => checksum::transport_checksum_wire(src, dst, proto, l4),
    };
    checksum::write_field(l4, at, c);
}

impl<T: AsRef<[u8]>> ipv6::Packet<T> {
    /// A TCP segment with RST set directly after the fixed header (how a host's
    /// stack sends its resets).
    pub fn is_tcp_rst(&self) -> bool {
        self.next_header() == NextHeader::TCP && self.payload().get(TCP_FLAGS).is_some_and(|f| f & tcp_flags::RST != 0)
    }
}

/// The transport fields that name a flow, read the way the egress fast path reads
/// them: the upper layer directly after the fixed header (a packet with extension
/// headers is one flow per protocol), TCP/UDP ports, the ICMPv6 echo identifier
/// as the source "port". Anything else or too short: ports 0. Used to keep a flow
/// on one locator pair (issue #12, per-flow balancing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowPorts {
    pub proto: NextHeader,
    pub sport: u16,
    pub dport: u16,
}

impl Default for FlowPorts {
    /// Protocol 0, ports 0 (what a packet too short to have a Next Header gets).
    fn default() -> Self {
        FlowPorts { proto: NextHeader(0), sport: 0, dport: 0 }
    }
}

pub fn flow_ports(pkt: &[u8]) -> FlowPorts {
    let Some(&proto) = pkt.get(6) else { return FlowPorts::default() };
    let proto = NextHeader(proto);
    let u16_at = |o: usize| pkt.get(o..o + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let l4 = ipv6::HEADER_LEN;
    match (proto, pkt.get(l4..).and_then(ports)) {
        (NextHeader::TCP | NextHeader::UDP, Some((sport, dport))) => FlowPorts { proto, sport, dport },
        // echo request/reply: the identifier (offset 4 of the ICMPv6 header)
        (NextHeader::ICMPV6, _) if matches!(pkt.get(l4), Some(128 | 129)) && pkt.len() >= l4 + 6 => {
            FlowPorts { proto, sport: u16_at(l4 + 4), dport: 0 }
        }
        _ => FlowPorts { proto, sport: 0, dport: 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn udp_builds_and_reads_back_with_a_checksum_that_verifies() {
        let (s, d) = (a("2001:db8:a::c"), a("2001:db8:b::d"));
        let mut v = Vec::new();
        UdpRepr { src_port: 40001, dst_port: 53 }.emit(b"hello", &mut v);
        fill_checksum(&mut v, NextHeader::UDP, &s, &d, PseudoHeader::Full);
        assert!(checksum::verify(&s, &d, NextHeader::UDP, &v));
        let u = Udp::new_checked(&v[..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.length()), (40001, 53, 13));
        assert_eq!(u.payload(), b"hello");
        assert_eq!(ports(&v), Some((40001, 53)));
        assert_eq!(Udp::new_checked(&v[..7]).unwrap_err(), Error::Truncated);
        assert_eq!(ports(&v[..3]), None);
    }

    #[test]
    fn tcp_builds_and_reads_back_under_both_pseudo_headers() {
        let (s, d) = (a("2001:db8:a::c"), a("2001:db8:b::d"));
        let r = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: 7,
            ack: 9,
            flags: tcp_flags::PSH | tcp_flags::ACK,
            window: 0xffff,
        };
        let mut v = Vec::new();
        r.emit(b"xy", &mut v);
        let mut w = v.clone();
        fill_checksum(&mut v, NextHeader::TCP, &s, &d, PseudoHeader::Full);
        fill_checksum(&mut w, NextHeader::TCP, &s, &d, PseudoHeader::Ilnp);
        assert!(checksum::verify(&s, &d, NextHeader::TCP, &v));
        assert!(checksum::verify_transport_wire(&s, &d, NextHeader::TCP, &w));
        let t = Tcp::new_checked(&v[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port(), t.seq(), t.ack(), t.window()), (1, 2, 7, 9, 0xffff));
        assert_eq!((t.header_len(), t.flags(), t.payload()), (20, 0x18, &b"xy"[..]));
        v[TCP_DATA_OFFSET] = 4 << 4;
        assert!(matches!(Tcp::new_checked(&v[..]), Err(Error::Malformed(_))));
        v[TCP_DATA_OFFSET] = 15 << 4;
        assert_eq!(Tcp::new_checked(&v[..]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn a_udp_checksum_of_zero_is_sent_as_ffff() {
        // search a payload word whose datagram sums to 0 under the full pseudo-header
        let (s, d) = (a("::1"), a("::2"));
        let found = (0..=u16::MAX).find_map(|w| {
            let mut v = Vec::new();
            UdpRepr { src_port: 1, dst_port: 2 }.emit(&w.to_be_bytes(), &mut v);
            (checksum::compute(&s, &d, NextHeader::UDP, &v) == 0).then_some(v)
        });
        let mut v = found.expect("some payload word sums to 0");
        fill_checksum(&mut v, NextHeader::UDP, &s, &d, PseudoHeader::Full);
        assert_eq!(Udp::new_checked(&v[..]).unwrap().checksum(), 0xffff);
    }

    #[test]
    fn flow_ports_as_the_fast_path_reads_them() {
        use crate::test_support as ts;
        let (a, b) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        assert_eq!(
            flow_ports(&ts::udp(a, b, 4000, 53, b"x")),
            FlowPorts { proto: NextHeader::UDP, sport: 4000, dport: 53 }
        );
        assert_eq!(flow_ports(&ts::tcp(a, b, 1, 2, b"")), FlowPorts { proto: NextHeader::TCP, sport: 1, dport: 2 });
        assert_eq!(
            flow_ports(&ts::echo_request(a, b, 0x1234, 7, b"")),
            FlowPorts { proto: NextHeader::ICMPV6, sport: 0x1234, dport: 0 }
        );
        // cut short, or behind an extension header: ports 0
        assert_eq!(
            flow_ports(&ts::udp(a, b, 4000, 53, b"")[..42]),
            FlowPorts { proto: NextHeader::UDP, sport: 0, dport: 0 }
        );
        assert_eq!(flow_ports(&[]), FlowPorts::default());
    }
}
