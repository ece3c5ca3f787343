//! ICMPv6 messages ILNPv6 cares about: the Locator Update (RFC 6743, type 156)
//! and the error messages that quote an invoking packet (RFC 4443).

use crate::addr::Locator;
use crate::checksum;
use crate::destopts::{self, Nonce};
use crate::error::Error;
use crate::ipv6::{NextHeader, HEADER_LEN};
use std::net::Ipv6Addr;

pub mod linux49;

/// An ICMPv6 Type (IANA "ICMPv6 Parameters"): the messages this crate knows, and
/// any other value as is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Icmpv6Type(pub u8);

impl Icmpv6Type {
    pub const DEST_UNREACH: Self = Self(1);
    pub const PACKET_TOO_BIG: Self = Self(2);
    pub const TIME_EXCEEDED: Self = Self(3);
    pub const PARAM_PROBLEM: Self = Self(4);
    pub const ECHO_REQUEST: Self = Self(128);
    pub const ECHO_REPLY: Self = Self(129);
    /// ILNPv6 Locator Update (RFC 6743).
    pub const LOCATOR_UPDATE: Self = Self(156);

    /// True for the error types (1–4) that carry an invoking packet.
    pub fn is_error(self) -> bool {
        (Self::DEST_UNREACH..=Self::PARAM_PROBLEM).contains(&self)
    }
}

named_u8!(Icmpv6Type {
    DEST_UNREACH => "destination-unreachable",
    PACKET_TOO_BIG => "packet-too-big",
    TIME_EXCEEDED => "time-exceeded",
    PARAM_PROBLEM => "parameter-problem",
    ECHO_REQUEST => "echo-request",
    ECHO_REPLY => "echo-reply",
    LOCATOR_UPDATE => "locator-update",
});

pub const UNREACH_NO_ROUTE: u8 = 0;
pub const UNREACH_ADMIN: u8 = 1;
pub const UNREACH_ADDRESS: u8 = 3;
pub const UNREACH_PORT: u8 = 4;
pub const PARAM_UNRECOGNIZED_OPTION: u8 = 2;

/// Minimum IPv6 MTU: an ICMPv6 error must fit in it (RFC 4443 §2.4 (c)).
pub const MIN_MTU: usize = 1280;

/// Byte offsets of an ICMPv6 message (RFC 4443 §2.1) and of a Locator Update
/// (RFC 6743 §2), from the Type byte.
mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// MTU (Packet Too Big), pointer (Parameter Problem), unused (other errors),
    /// Num of Locs + Operation + reserved (Locator Update)
    pub const DATA_WORD: Range<usize> = 4..8;
    /// invoking packet (errors), locator entries (Locator Update)
    pub const BODY: usize = 8;
    pub const LU_NUM_LOCS: usize = 4;
    pub const LU_OPERATION: usize = 5;
}

/// Length of the ICMPv6 header (type, code, checksum, data word).
pub const HEADER_LEN_ICMP: usize = field::BODY;

/// Generic ICMPv6 view: type, code, checksum, 4-byte data word, body.
#[derive(Debug, Clone, Copy)]
pub struct Message<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Message<T> {
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        if buf.as_ref().len() < HEADER_LEN_ICMP {
            return Err(Error::Truncated);
        }
        Ok(Message { buf })
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }
    pub fn msg_type(&self) -> Icmpv6Type {
        Icmpv6Type(self.buf.as_ref()[field::TYPE])
    }
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[field::CODE]
    }
    pub fn checksum(&self) -> u16 {
        let b = &self.buf.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([b[0], b[1]])
    }
    /// Bytes 4..8: MTU (PTB), pointer (Parameter Problem), unused otherwise.
    pub fn data_word(&self) -> u32 {
        let b = &self.buf.as_ref()[field::DATA_WORD];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// For error messages: the invoking packet (as much as was quoted).
    pub fn invoking_packet(&self) -> &[u8] {
        &self.buf.as_ref()[field::BODY..]
    }
    /// Everything after the checksum (bytes 4..).
    pub fn body(&self) -> &[u8] {
        &self.buf.as_ref()[field::DATA_WORD.start..]
    }
    /// True for the error types (1–4) that carry an invoking packet.
    pub fn is_error(&self) -> bool {
        self.msg_type().is_error()
    }
    /// Packet Too Big: the MTU of the next-hop link.
    pub fn mtu(&self) -> Option<u32> {
        (self.msg_type() == Icmpv6Type::PACKET_TOO_BIG).then(|| self.data_word())
    }
    /// Parameter Problem: offset of the offending byte in the invoking packet.
    pub fn pointer(&self) -> Option<u32> {
        (self.msg_type() == Icmpv6Type::PARAM_PROBLEM).then(|| self.data_word())
    }
    /// True if the checksum verifies over the full addresses (RFC 4443 §2.3).
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        checksum::verify(src, dst, NextHeader::ICMPV6, self.buf.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Message<T> {
    pub fn set_checksum(&mut self, v: u16) {
        self.buf.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Computes and stores the checksum over the full addresses.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let c = checksum::icmpv6_checksum(src, dst, self.buf.as_ref());
        self.set_checksum(c);
    }
}

/// The fields of an ICMPv6 message to emit. Every ICMPv6 message this crate
/// builds (errors, Locator Updates and their acks, errors for applications) is
/// emitted by this one builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    pub msg_type: Icmpv6Type,
    pub code: u8,
    pub data_word: u32,
    /// invoking packet (errors), locator entries (Locator Update), echo data...
    pub body: &'a [u8],
}

impl Repr<'_> {
    /// Length of the message.
    pub fn len(&self) -> usize {
        HEADER_LEN_ICMP + self.body.len()
    }
    /// Never true: a message has at least its 8-byte header.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Emits the message with a zero checksum (`Message::fill_checksum` fills it).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push(self.msg_type.0);
        out.push(self.code);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.data_word.to_be_bytes());
        out.extend_from_slice(self.body);
    }
    /// A complete IPv6 packet `src -> dst` carrying this message, preceded by a
    /// Destination Options header holding `nonce` if one is given (how an ILNPv6
    /// node sends every ICMPv6 message, RFC 6744 §7); checksum filled over the full
    /// addresses. The caller keeps the packet within 64 KiB (ours are at most 3,108 bytes).
    pub fn packet(&self, src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, nonce: Option<&Nonce>) -> Vec<u8> {
        let mut icmp = Vec::with_capacity(self.len());
        self.emit(&mut icmp);
        Message { buf: &mut icmp[..] }.fill_checksum(&src, &dst);
        destopts::packet(src, dst, hop_limit, nonce, NextHeader::ICMPV6, &icmp)
    }
}

/// Room for the invoking packet in an error sent with a nonce header of
/// `nonce_header_len` bytes (0: none), so the whole packet fits in 1280 bytes.
pub fn quote_room(nonce_header_len: usize) -> usize {
    MIN_MTU - HEADER_LEN - nonce_header_len - HEADER_LEN_ICMP
}

/// A complete IPv6 packet carrying an ICMPv6 error from `src` to `dst` quoting
/// `invoking` (cut so the packet fits in 1280 bytes), checksum filled, hop limit 64.
pub fn error_packet(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    msg_type: Icmpv6Type,
    code: u8,
    data_word: u32,
    invoking: &[u8],
) -> Vec<u8> {
    let body = &invoking[..invoking.len().min(quote_room(0))];
    Repr { msg_type, code, data_word, body }.packet(src, dst, 64, None)
}

/// Builds an ICMPv6 error (type, code, data word) quoting `invoking`, truncated so
/// the whole IPv6 packet stays within 1280 bytes. The checksum is left zero.
pub fn emit_error(msg_type: Icmpv6Type, code: u8, data_word: u32, invoking: &[u8], out: &mut Vec<u8>) {
    let body = &invoking[..invoking.len().min(quote_room(0))];
    Repr { msg_type, code, data_word, body }.emit(out)
}

/// The RFC 6069 (TCP-LD) hint ilnpd hands its own stack for a TCP connection in
/// retransmission backoff whose peer is reachable again: a Destination Unreachable,
/// no route (code 0), from `remote` to `local`, quoting the connection's oldest
/// unacknowledged segment as the stack would have sent it: a fixed header
/// `local` → `remote` (TCP) and a 20-byte TCP header with `local_port`,
/// `remote_port` and sequence number `snd_una` (the only fields the stack
/// matches: its `tcp_v6_err` finds the socket by address and ports and undoes one
/// backoff step when the sequence number is its `snd_una`). Checksum filled.
pub fn tcp_no_route_hint(
    local: Ipv6Addr,
    remote: Ipv6Addr,
    local_port: u16,
    remote_port: u16,
    snd_una: u32,
) -> Vec<u8> {
    use crate::l4::{tcp_flags, TcpRepr, TCP_HEADER_LEN};
    let mut quoted = Vec::with_capacity(HEADER_LEN + TCP_HEADER_LEN);
    crate::ipv6::Repr {
        src: local,
        dst: remote,
        next_header: NextHeader::TCP,
        payload_len: TCP_HEADER_LEN as u16,
        hop_limit: 64,
    }
    .emit(&mut quoted);
    // acknowledgment number, window and checksum: not matched
    TcpRepr { src_port: local_port, dst_port: remote_port, seq: snd_una, ack: 0, flags: tcp_flags::ACK, window: 0 }
        .emit(&[], &mut quoted);
    error_packet(remote, local, Icmpv6Type::DEST_UNREACH, UNREACH_NO_ROUTE, 0, &quoted)
}

/// LU Operation byte (RFC 6743 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LuOperation {
    Advertisement,
    Acknowledgement,
}

impl LuOperation {
    pub fn to_byte(self) -> u8 {
        match self {
            LuOperation::Advertisement => 1,
            LuOperation::Acknowledgement => 2,
        }
    }
}

/// One locator entry of an LU: 12 bytes, not 8-byte aligned after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LuEntry {
    pub locator: Locator,
    /// lower is preferred (same meaning as the L64 RR preference)
    pub preference: u16,
    /// seconds
    pub lifetime: u16,
}

/// Decoded Locator Update (advertisement or ack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatorUpdate {
    pub operation: LuOperation,
    pub entries: Vec<LuEntry>,
}

pub const LU_HEADER_LEN: usize = 8;
pub const LU_ENTRY_LEN: usize = 12;
/// Num of Locs is one byte.
pub const LU_MAX_ENTRIES: usize = 255;

/// The layout of an LU's entries: RFC 6743's, or the Linux 4.9 prototype's
/// (`linux49`: one 16-byte entry, host-order fields, its own checksum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LuFormat {
    Rfc6743,
    Linux49,
}

/// Zero-copy view of a Locator Update (ICMPv6 message starting at the Type byte),
/// checked as `LocatorUpdate::parse` checks it (or as `linux49::new_checked` does).
#[derive(Debug, Clone, Copy)]
pub struct LuMessage<T: AsRef<[u8]>> {
    buf: T,
    operation: LuOperation,
    format: LuFormat,
}

impl<T: AsRef<[u8]>> LuMessage<T> {
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        if b.len() < LU_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if Icmpv6Type(b[field::TYPE]) != Icmpv6Type::LOCATOR_UPDATE {
            return Err(Error::Malformed("not a Locator Update"));
        }
        let (code, num, op) = (b[field::CODE], b[field::LU_NUM_LOCS] as usize, b[field::LU_OPERATION]);
        let operation = match (code, op) {
            (0, 1) | (1, 0) => LuOperation::Advertisement,
            (0, 2) | (2, 0) => LuOperation::Acknowledgement,
            _ => return Err(Error::UnknownLuOperation { code, operation: op }),
        };
        if num == 0 {
            return Err(Error::LuNoLocators);
        }
        // shorter or longer: both are a Num of Locs / length disagreement
        if b.len() != LU_HEADER_LEN + LU_ENTRY_LEN * num {
            return Err(Error::LuLengthMismatch { num_locs: num as u8, len: b.len() });
        }
        Ok(LuMessage { buf, operation, format: LuFormat::Rfc6743 })
    }
    pub fn operation(&self) -> LuOperation {
        self.operation
    }
    pub fn format(&self) -> LuFormat {
        self.format
    }
    pub fn num_locs(&self) -> u8 {
        self.buf.as_ref()[field::LU_NUM_LOCS]
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// The decoded message (entries copied out).
    pub fn to_owned(&self) -> LocatorUpdate {
        LocatorUpdate { operation: self.operation, entries: self.entries().collect() }
    }
    /// The 12-byte entries (unaligned on the wire; decoded by value); a Linux 4.9
    /// message's one entry.
    pub fn entries(&self) -> impl Iterator<Item = LuEntry> + '_ {
        let b = &self.buf.as_ref()[field::BODY..];
        let linux49 = (self.format == LuFormat::Linux49).then(|| linux49::entry(b));
        let rfc = if linux49.is_some() { &b[..0] } else { b };
        linux49.into_iter().chain(rfc.chunks_exact(LU_ENTRY_LEN).map(|e| LuEntry {
            locator: Locator(u64::from_be_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]])),
            preference: u16::from_be_bytes([e[8], e[9]]),
            lifetime: u16::from_be_bytes([e[10], e[11]]),
        }))
    }
}

impl LocatorUpdate {
    /// Parses the ICMPv6 message body starting at the Type byte.
    /// Sent form: Code 0 + Operation 1/2. Also accepted (Dupont's branch, erratum
    /// 5911 reading): Code 1/2 with Operation 0.
    pub fn parse(icmp: &[u8]) -> Result<LocatorUpdate, Error> {
        Ok(LuMessage::new_checked(icmp)?.to_owned())
    }

    /// The entries as they go on the wire, after a check that there are 1 to 255.
    fn entries_bytes(&self) -> Result<Vec<u8>, Error> {
        if self.entries.is_empty() {
            return Err(Error::LuNoLocators);
        }
        if self.entries.len() > LU_MAX_ENTRIES {
            return Err(Error::Malformed("more than 255 locators"));
        }
        let mut v = Vec::with_capacity(LU_ENTRY_LEN * self.entries.len());
        for e in &self.entries {
            v.extend_from_slice(&e.locator.0.to_be_bytes());
            v.extend_from_slice(&e.preference.to_be_bytes());
            v.extend_from_slice(&e.lifetime.to_be_bytes());
        }
        Ok(v)
    }

    /// Sent form: Code 0, Num of Locs, Operation 1/2, reserved 0.
    fn repr<'a>(&self, entries: &'a [u8]) -> Repr<'a> {
        let data_word = (u32::from(self.entries.len() as u8) << 24) | (u32::from(self.operation.to_byte()) << 16);
        Repr { msg_type: Icmpv6Type::LOCATOR_UPDATE, code: 0, data_word, body: entries }
    }

    /// Emits the ICMPv6 message (checksum zero; fill it with `checksum::icmpv6_checksum`).
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        let entries = self.entries_bytes()?;
        self.repr(&entries).emit(out);
        Ok(())
    }

    /// A complete wire-form LU packet: IPv6 + DestOpts(`nonce`) + this message,
    /// hop limit 64, ICMPv6 checksum over the full addresses (RFC 6743 §2).
    pub fn packet(&self, src: Ipv6Addr, dst: Ipv6Addr, nonce: &Nonce) -> Result<Vec<u8>, Error> {
        let entries = self.entries_bytes()?;
        Ok(self.repr(&entries).packet(src, dst, 64, Some(nonce)))
    }

    /// The ack for this advertisement: identical body except Operation (RFC 6743 §2).
    pub fn ack(&self) -> LocatorUpdate {
        LocatorUpdate { operation: LuOperation::Acknowledgement, entries: self.entries.clone() }
    }

    pub fn len(&self) -> usize {
        LU_HEADER_LEN + LU_ENTRY_LEN * self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_no_route_hint_quotes_the_head_segment() {
        let local: Ipv6Addr = "fd00:1::a".parse().unwrap();
        let remote: Ipv6Addr = "fd00:1::b".parse().unwrap();
        let p = tcp_no_route_hint(local, remote, 40000, 5201, 0xdead_beef);
        assert_eq!(p.len(), 40 + 8 + 40 + 20);
        let ip = crate::ipv6::Packet::new_checked(&p[..]).unwrap();
        assert_eq!((ip.src(), ip.dst(), ip.next_header()), (remote, local, NextHeader::ICMPV6));
        let icmp = ip.payload();
        assert_eq!((icmp[0], icmp[1]), (Icmpv6Type::DEST_UNREACH.0, UNREACH_NO_ROUTE));
        assert!(checksum::verify_icmpv6(&remote, &local, icmp));
        let quoted = crate::ipv6::Packet::new_quoted(&icmp[8..]).unwrap();
        assert_eq!((quoted.src(), quoted.dst(), quoted.next_header()), (local, remote, NextHeader::TCP));
        let tcp = &icmp[8 + 40..];
        assert_eq!(tcp[..8], [0x9c, 0x40, 0x14, 0x51, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(tcp[12] >> 4, 5, "data offset: a bare 20-byte header");
    }

    #[test]
    fn lu_literal_bytes() {
        let lu = LocatorUpdate {
            operation: LuOperation::Advertisement,
            entries: vec![
                LuEntry { locator: Locator(0x2001_0db8_0002_0000), preference: 10, lifetime: 30 },
                LuEntry { locator: Locator(0x2001_0db8_0003_0000), preference: 20, lifetime: 300 },
            ],
        };
        let mut v = Vec::new();
        lu.emit(&mut v).unwrap();
        assert_eq!(
            v,
            [
                156, 0, 0, 0, 2, 1, 0, 0, //
                0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 10, 0, 30, //
                0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, 0, 0, 20, 1, 44
            ]
        );
        assert_eq!(LocatorUpdate::parse(&v).unwrap(), lu);
        let mut a = Vec::new();
        lu.ack().emit(&mut a).unwrap();
        assert_eq!(a[5], 2);
        assert_eq!(a[6..], v[6..]);
    }

    #[test]
    fn lu_errors() {
        assert_eq!(LocatorUpdate::parse(&[156, 0, 0, 0, 0, 1, 0, 0]).unwrap_err(), Error::LuNoLocators);
        assert_eq!(
            LocatorUpdate::parse(&[156, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err(),
            Error::LuLengthMismatch { num_locs: 2, len: 20 }
        );
        assert!(matches!(
            LocatorUpdate::parse(&[156, 0, 0, 0, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::UnknownLuOperation { .. })
        ));
        assert_eq!(LocatorUpdate::parse(&[156, 0, 0]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn lu_accepts_code_variant() {
        let v = [156, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 10, 0, 30];
        assert_eq!(LocatorUpdate::parse(&v).unwrap().operation, LuOperation::Acknowledgement);
    }

    #[test]
    fn lu_255_entries_roundtrip() {
        let entries: Vec<LuEntry> =
            (0..255u64).map(|i| LuEntry { locator: Locator(i << 16), preference: i as u16, lifetime: 1 }).collect();
        let lu = LocatorUpdate { operation: LuOperation::Advertisement, entries };
        let mut v = Vec::new();
        lu.emit(&mut v).unwrap();
        assert_eq!(v.len(), 3068);
        assert_eq!(LocatorUpdate::parse(&v).unwrap(), lu);
    }

    #[test]
    fn error_quote_is_bounded() {
        let mut v = Vec::new();
        emit_error(Icmpv6Type::DEST_UNREACH, UNREACH_ADDRESS, 0, &[0u8; 3000], &mut v);
        assert_eq!(v.len() + 40, MIN_MTU);
    }

    #[test]
    fn lu_view_is_zero_copy_and_checked_like_parse() {
        let v = [
            156, 1, 0, 0, 2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0x12, 0x34, 0xff, 0xff, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0,
            1,
        ];
        let m = LuMessage::new_checked(&v[..]).unwrap();
        assert_eq!((m.operation(), m.num_locs()), (LuOperation::Advertisement, 2));
        let e: Vec<LuEntry> = m.entries().collect();
        assert_eq!(e[0], LuEntry { locator: Locator(0x0102_0304_0506_0708), preference: 0x1234, lifetime: 0xffff });
        assert_eq!(e[1], LuEntry { locator: Locator(0x0909_0909_0909_0909), preference: 0, lifetime: 1 });
        // Code 1 + Operation 1 is neither form
        let mut w = v;
        w[5] = 1;
        assert_eq!(LuMessage::new_checked(&w[..]).unwrap_err(), Error::UnknownLuOperation { code: 1, operation: 1 });
        assert_eq!(LuMessage::new_checked(&v[..31]).unwrap_err(), Error::LuLengthMismatch { num_locs: 2, len: 31 });
        let mut long = v.to_vec();
        long.push(0);
        assert_eq!(LocatorUpdate::parse(&long).unwrap_err(), Error::LuLengthMismatch { num_locs: 2, len: 33 });
        assert_eq!(
            LocatorUpdate::parse(&[128, 0, 0, 0, 0, 0, 0, 0]).unwrap_err(),
            Error::Malformed("not a Locator Update")
        );
        assert_eq!(
            LocatorUpdate { operation: LuOperation::Acknowledgement, entries: vec![] }.emit(&mut Vec::new()),
            Err(Error::LuNoLocators)
        );
    }

    #[test]
    fn error_view_and_builder() {
        let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let quoted = [0x60u8; 48];
        let v = error_packet(src, dst, Icmpv6Type::PACKET_TOO_BIG, 0, 1400, &quoted);
        assert_eq!(&v[..8], &[0x60, 0, 0, 0, 0, 56, NextHeader::ICMPV6.0, 64]);
        let m = Message::new_checked(&v[40..]).unwrap();
        assert_eq!((m.msg_type(), m.code(), m.mtu(), m.pointer()), (Icmpv6Type(2), 0, Some(1400), None));
        assert_eq!(m.invoking_packet(), &quoted[..]);
        assert!(m.verify_checksum(&src, &dst));
        assert!(!m.verify_checksum(&dst, &src.to_bits().wrapping_add(1).into()));
        let mut pp = error_packet(src, dst, Icmpv6Type::PARAM_PROBLEM, PARAM_UNRECOGNIZED_OPTION, 42, &quoted);
        let mut m = Message::new_checked(&mut pp[40..]).unwrap();
        assert_eq!(m.pointer(), Some(42));
        m.set_checksum(0);
        assert!(!m.verify_checksum(&src, &dst));
        m.fill_checksum(&src, &dst);
        assert!(m.verify_checksum(&src, &dst));
        assert_eq!(Message::new_checked(&[1u8, 0, 0, 0, 0, 0, 0][..]).unwrap_err(), Error::Truncated);
        let is_error = |t: u8| Icmpv6Type(t).is_error();
        assert!(is_error(1) && is_error(4) && !is_error(0) && !is_error(128) && !is_error(156));
    }
}
