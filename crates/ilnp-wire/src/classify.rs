//! One walk over a packet: what it is, in protocol terms, and the fields the
//! protocol needs, so the core matches a packet once instead of asking "is there
//! a nonce? is it an ICMPv6 error? an LU?"... one after the other.
//!
//! The order of the questions is the order the slow path asks them:
//! 1. the fixed header and the nonce option (in a Destination Options header
//!    directly after the fixed header, RFC 6744): errors are [`Kind::Header`];
//! 2. the extension-header walk to the upper layer;
//! 3. an ICMPv6 error (types 1–4, checksum verified) → [`Packet::IcmpError`];
//! 4. an ICMPv6 Locator Update (checksum verified, then the LU checked) → [`Packet::Lu`]
//!    (RFC 6743's, or the Linux 4.9 prototype's: `LuMessage::format`);
//! 5. with a nonce: No Next Header → [`Packet::NonceOnly`], else [`Packet::Data`];
//!    without: [`Packet::Plain`] (e.g. an identifier-form packet from the stack).
//!
//! A failure says which kind of packet it was found in ([`ClassifyError::kind`]),
//! so the caller can count it where it belongs (a malformed LU is not a malformed
//! data packet).

use crate::addr::{split_addr, Locator, Nid};
use crate::checksum;
use crate::destopts::{self, Nonce, NonceHeader};
use crate::error::Error;
use crate::icmpv6::{self, Icmpv6Type, LuMessage, Message};
use crate::ipv6::{self, NextHeader, Repr, UpperLayer, HEADER_LEN};
use crate::translate::{self, data, icmp_error, Csum, QuotedMeta, WireMeta};
use core::fmt;

/// Which kind of packet a [`ClassifyError`] was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// the IPv6 fixed header, or the Destination Options header holding the nonce
    Header,
    /// no nonce, not an ICMPv6 error or LU
    Plain,
    /// a nonce, an upper layer other than ICMPv6 error/LU
    Data,
    /// a nonce and No Next Header
    NonceOnly,
    /// an ICMPv6 Locator Update
    Lu,
    /// an ICMPv6 error (types 1–4)
    IcmpError,
}

/// Why `classify` refused a packet, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassifyError {
    pub kind: Kind,
    pub error: Error,
}

impl fmt::Display for ClassifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.error)
    }
}

impl std::error::Error for ClassifyError {}

/// A packet as the ILNPv6 slow path sees it.
#[derive(Debug, Clone, Copy)]
pub enum Packet<'a> {
    /// wire-form data: a nonce (alone in its DestOpts header) and an upper layer
    Data(Data<'a>),
    /// a nonce and nothing else (Next Header = No Next Header, RFC 6741 §13.1)
    NonceOnly(Data<'a>),
    /// an ICMPv6 Locator Update (RFC 6743), checksum verified, LU checked
    Lu(Lu<'a>),
    /// an ICMPv6 error (RFC 4443 types 1–4), checksum verified
    IcmpError(IcmpError<'a>),
    /// no nonce: not an ILNPv6 wire packet (identifier form, or plain IPv6)
    Plain(Plain<'a>),
}

/// A data packet (or nonce-only packet) with its nonce.
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    packet: ipv6::Packet<&'a [u8]>,
    pub ip: Repr,
    /// the nonce and its Destination Options header (holding nothing else)
    pub nonce: NonceHeader,
    pub upper: UpperLayer,
    /// the nonce header follows a Fragment header (a first fragment, FreeBSD's layout)
    pub after_fragment: bool,
}

/// A Locator Update packet.
#[derive(Debug, Clone, Copy)]
pub struct Lu<'a> {
    pub ip: Repr,
    /// `None`: the LU came without a nonce (it cannot be verified)
    pub nonce: Option<NonceHeader>,
    pub lu: LuMessage<&'a [u8]>,
}

/// An ICMPv6 error and what it quotes.
#[derive(Debug, Clone, Copy)]
pub struct IcmpError<'a> {
    packet: ipv6::Packet<&'a [u8]>,
    pub ip: Repr,
    /// the nonce on the error itself (an ILNPv6 node puts its own on every ICMPv6
    /// message it sends, RFC 6744 §7; a router's error has none)
    pub nonce: Option<NonceHeader>,
    pub upper: UpperLayer,
    pub message: Message<&'a [u8]>,
    /// the invoking packet's header, if at least the fixed header (version 6) was quoted
    pub quoted: Option<Quoted>,
}

/// The fixed header and nonce of the packet an ICMPv6 error quotes (maybe cut short).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quoted {
    /// as quoted; `payload_len` is what the invoking packet said, not what was quoted
    pub ip: Repr,
    /// the nonce we (or the peer) put on the quoted packet
    pub nonce: Option<NonceHeader>,
    /// Parameter Problem code 2 pointing exactly at that nonce option: the
    /// destination does not speak ILNPv6 (RFC 6744 §8)
    pub rejects_nonce: bool,
}

/// A packet without a nonce that is not an ICMPv6 error.
#[derive(Debug, Clone, Copy)]
pub struct Plain<'a> {
    packet: ipv6::Packet<&'a [u8]>,
    pub ip: Repr,
    pub upper: UpperLayer,
}

/// Classifies a packet (wire or identifier form) in one walk. Never panics.
pub fn classify(pkt: &[u8]) -> Result<Packet<'_>, ClassifyError> {
    let fail = |kind| move |error| ClassifyError { kind, error };
    let packet = ipv6::Packet::new_checked(pkt).map_err(fail(Kind::Header))?;
    let ip = Repr::parse(&packet);
    let nonce = if ip.next_header == NextHeader::DSTOPTS {
        destopts::find_nonce_in_header(packet.payload(), HEADER_LEN).map_err(fail(Kind::Header))?
    } else {
        None
    };
    // RFC 8200 allows the Destination Options header after a Fragment header (FreeBSD
    // ILNP6 puts the nonce there, `ip6po_dest2`): only in the first fragment
    let after_fragment = if nonce.is_none() && ip.next_header == NextHeader::FRAGMENT {
        nonce_after_fragment(packet.payload()).map_err(fail(Kind::Header))?
    } else {
        None
    };
    let (nonce, after_fragment) = match after_fragment {
        Some(n) => (Some(n), true),
        None => (nonce, false),
    };
    let body_kind = if nonce.is_some() { Kind::Data } else { Kind::Plain };
    let upper = ipv6::upper_layer_info(pkt).map_err(fail(body_kind))?;
    let upper_bytes = packet.packet_slice().get(upper.offset..).unwrap_or_default();
    if upper.proto == NextHeader::ICMPV6 && upper.has_header() {
        match upper_bytes.first().map(|&t| Icmpv6Type(t)) {
            Some(t) if t.is_error() => {
                let message = Message::new_checked(upper_bytes).map_err(fail(Kind::IcmpError))?;
                if !message.verify_checksum(&ip.src, &ip.dst) {
                    return Err(fail(Kind::IcmpError)(Error::BadChecksum));
                }
                let quoted = quoted(&message);
                return Ok(Packet::IcmpError(IcmpError { packet, ip, nonce, upper, message, quoted }));
            }
            Some(Icmpv6Type::LOCATOR_UPDATE) => {
                // checksum first, then the LU: a corrupted LU is a bad checksum. The
                // Linux 4.9 prototype's LU (its layout, its NID-only checksum) is told
                // apart here; whether its sender may use it is the core's question
                if !checksum::verify_icmpv6(&ip.src, &ip.dst, upper_bytes) {
                    if icmpv6::linux49::verify_checksum(&ip.src, &ip.dst, upper_bytes) {
                        if let Ok(lu) = icmpv6::linux49::new_checked(upper_bytes) {
                            return Ok(Packet::Lu(Lu { ip, nonce, lu }));
                        }
                    }
                    return Err(fail(Kind::Lu)(Error::BadChecksum));
                }
                let lu = LuMessage::new_checked(upper_bytes).map_err(fail(Kind::Lu))?;
                return Ok(Packet::Lu(Lu { ip, nonce, lu }));
            }
            _ => {}
        }
    }
    let Some(nonce) = nonce else { return Ok(Packet::Plain(Plain { packet, ip, upper })) };
    let kind = if upper.proto == NextHeader::NONE { Kind::NonceOnly } else { Kind::Data };
    if !nonce.only_nonce {
        return Err(fail(kind)(Error::UnsupportedOptions));
    }
    let d = Data { packet, ip, nonce, upper, after_fragment };
    Ok(if kind == Kind::NonceOnly { Packet::NonceOnly(d) } else { Packet::Data(d) })
}

/// True if `classify` found an ICMPv6 error message (types 1-4), even one it
/// refused (e.g. a bad checksum): never answer an error with an error.
pub fn is_icmp_error(c: &Result<Packet<'_>, ClassifyError>) -> bool {
    matches!(c, Ok(Packet::IcmpError(_)) | Err(ClassifyError { kind: Kind::IcmpError, .. }))
}

/// The nonce header of a first fragment whose Fragment header (directly after the
/// fixed header: `payload`) is followed by a Destination Options header; `Ok(None)`
/// for a later fragment or another layout.
fn nonce_after_fragment(payload: &[u8]) -> Result<Option<NonceHeader>, Error> {
    let Some(frag) = payload.get(..ipv6::FRAGMENT_HEADER_LEN) else { return Ok(None) };
    let offset = u16::from_be_bytes([frag[2], frag[3]]) >> 3;
    if NextHeader(frag[0]) != NextHeader::DSTOPTS || offset != 0 {
        return Ok(None);
    }
    destopts::find_nonce_in_header(&payload[ipv6::FRAGMENT_HEADER_LEN..], HEADER_LEN + ipv6::FRAGMENT_HEADER_LEN)
}

fn quoted(m: &Message<&[u8]>) -> Option<Quoted> {
    let q = ipv6::Packet::new_quoted(m.invoking_packet()).ok()?;
    let nonce = translate::quoted_nonce(m.invoking_packet());
    let rejects_nonce = nonce.is_some_and(|n| icmp_error::points_at_nonce(m, &n));
    Some(Quoted { ip: Repr::parse(&q), nonce, rejects_nonce })
}

impl<'a> Packet<'a> {
    /// The fixed header.
    pub fn ip(&self) -> &Repr {
        match self {
            Packet::Data(d) | Packet::NonceOnly(d) => &d.ip,
            Packet::Lu(l) => &l.ip,
            Packet::IcmpError(e) => &e.ip,
            Packet::Plain(p) => &p.ip,
        }
    }
    /// The nonce on the packet itself, if any.
    pub fn nonce(&self) -> Option<Nonce> {
        match self {
            Packet::Data(d) | Packet::NonceOnly(d) => Some(d.nonce.nonce),
            Packet::Lu(l) => l.nonce.map(|n| n.nonce),
            Packet::IcmpError(e) => e.nonce.map(|n| n.nonce),
            Packet::Plain(_) => None,
        }
    }
    /// What it is, as [`ClassifyError::kind`] would name it.
    pub fn kind(&self) -> Kind {
        match self {
            Packet::Data(_) => Kind::Data,
            Packet::NonceOnly(_) => Kind::NonceOnly,
            Packet::Lu(_) => Kind::Lu,
            Packet::IcmpError(_) => Kind::IcmpError,
            Packet::Plain(_) => Kind::Plain,
        }
    }
    /// `src -> dst`, for logs.
    pub fn summary(&self) -> String {
        format!("{} -> {}", self.ip().src, self.ip().dst)
    }
}

/// Locators and NIDs of a header's two addresses: `((src_loc, src_nid), (dst_loc, dst_nid))`.
pub fn endpoints(ip: &Repr) -> ((Locator, Nid), (Locator, Nid)) {
    (split_addr(ip.src), split_addr(ip.dst))
}

impl Data<'_> {
    /// The whole packet (fixed header + payload_len, link padding excluded).
    pub fn bytes(&self) -> &[u8] {
        self.packet.packet_bytes()
    }
    /// Wire form → identifier form, without walking the packet again. A first
    /// fragment whose nonce header follows the Fragment header keeps that header,
    /// its options turned into padding (removing it would shift the offsets of the
    /// fragments that follow), for the kernel to reassemble.
    pub fn to_identifier(&self, id_prefix: Locator, csum: Csum) -> Result<(Vec<u8>, WireMeta), Error> {
        self.to_identifier_rule(id_prefix, csum, checksum::ChecksumRule::Rfc6741)
    }
    /// `to_identifier` for a correspondent whose TCP/UDP checksums follow `rule`.
    pub fn to_identifier_rule(
        &self,
        id_prefix: Locator,
        csum: Csum,
        rule: checksum::ChecksumRule,
    ) -> Result<(Vec<u8>, WireMeta), Error> {
        if self.after_fragment {
            return data::identifier_form_padded(&self.packet, &self.nonce, id_prefix, csum, rule);
        }
        data::identifier_form(&self.packet, &self.nonce, id_prefix, csum, rule)
    }
}

impl Lu<'_> {
    /// The decoded Locator Update (entries copied out).
    pub fn to_owned(&self) -> icmpv6::LocatorUpdate {
        self.lu.to_owned()
    }
}

impl IcmpError<'_> {
    /// The whole packet (fixed header + payload_len, link padding excluded).
    pub fn bytes(&self) -> &[u8] {
        self.packet.packet_bytes()
    }
    /// What the error is about, if it quotes a packet with a nonce (one of ours),
    /// without walking the packet again.
    pub fn meta(&self) -> Result<QuotedMeta, Error> {
        let nh = self.quoted.and_then(|q| q.nonce).ok_or(Error::NoNonce)?;
        icmp_error::meta_of(&self.message, &nh)
    }
    /// The error translated for the local stack (quote in identifier form, MTU and
    /// pointer corrected for the header we strip).
    pub fn to_identifier(&self, id_prefix: Locator) -> Result<(Vec<u8>, QuotedMeta), Error> {
        let nh = self.quoted.and_then(|q| q.nonce).ok_or(Error::NoNonce)?;
        let meta = icmp_error::meta_of(&self.message, &nh)?;
        Ok((icmp_error::error_to_identifier(&self.packet, &self.message, &nh, &meta, id_prefix)?, meta))
    }
    /// The local stack's error made fit for the wire (the quote back in the wire
    /// form it arrived in, with the peer's nonce `quoted_nonce`; ours on the error).
    pub fn to_wire(
        &self,
        id_prefix: Locator,
        src_loc: Locator,
        dst_loc: Locator,
        nonce: &Nonce,
        quoted_nonce: &Nonce,
    ) -> Result<Vec<u8>, Error> {
        let ((sl, _), (dl, _)) = endpoints(&self.ip);
        if sl != id_prefix || dl != id_prefix {
            return Err(Error::NotIdentifierForm);
        }
        icmp_error::error_to_wire(&self.packet, &self.message, id_prefix, src_loc, dst_loc, nonce, quoted_nonce)
    }
}

impl Plain<'_> {
    /// The whole packet (fixed header + payload_len, link padding excluded).
    pub fn bytes(&self) -> &[u8] {
        self.packet.packet_bytes()
    }
    /// A later fragment (offset > 0, directly after the fixed header: no transport
    /// header, no nonce) of a datagram whose first fragment carried the nonce after
    /// its Fragment header.
    pub fn is_later_fragment(&self) -> bool {
        self.ip.next_header == NextHeader::FRAGMENT && self.upper.fragment.is_some_and(|(off, _)| off > 0)
    }
    /// Such a later fragment in identifier form: the addresses only (the checksum
    /// it contributes to is adjusted in the first fragment).
    pub fn later_fragment_to_identifier(&self, id_prefix: Locator) -> Result<Vec<u8>, Error> {
        if !self.is_later_fragment() {
            return Err(Error::Malformed("not a later fragment"));
        }
        data::later_fragment_identifier_form(&self.packet, id_prefix)
    }
}

#[cfg(test)]
mod tests;
