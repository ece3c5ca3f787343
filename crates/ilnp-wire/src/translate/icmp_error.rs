//! ICMPv6 errors about wire-form packets: matched to the nonce we put on the
//! quoted packet and translated for the local stack, and the local stack's own
//! errors made fit for the wire.

use super::{adjust_checksum, identifier_nids, pseudo_addrs};
use crate::addr::{ilnp_addr, split_addr, Locator, Nid};
use crate::checksum;
use crate::destopts::{self, Nonce, NonceHeader};
use crate::error::Error;
use crate::icmpv6::{self, Icmpv6Type, Message};
use crate::ipv6::{self, NextHeader};

/// The nonce header of a quoted (possibly truncated) invoking packet.
pub fn quoted_nonce(quoted: &[u8]) -> Option<NonceHeader> {
    let q = ipv6::Packet::new_quoted(quoted).ok()?;
    if q.next_header() != NextHeader::DSTOPTS {
        return None;
    }
    // A quote may be cut short: its payload ends where the quote does.
    let rest = quoted.get(ipv6::HEADER_LEN..)?;
    destopts::find_nonce_in_header(rest, ipv6::HEADER_LEN).ok().flatten()
}

/// What an ICMPv6 error about one of our wire-form packets refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotedMeta {
    pub icmp_type: Icmpv6Type,
    pub icmp_code: u8,
    /// our NID and locator (source of the quoted packet)
    pub local_nid: Nid,
    pub local_loc: Locator,
    /// the correspondent (destination of the quoted packet)
    pub peer_nid: Nid,
    pub peer_loc: Locator,
    /// nonce we had put on the quoted packet
    pub nonce: Nonce,
    /// Parameter Problem code 2 pointing exactly at our nonce option:
    /// the destination does not speak ILNPv6 (RFC 6744 §6 fallback signal).
    pub rejects_nonce: bool,
}

/// True if `m` is a Parameter Problem code 2 whose pointer is exactly the type
/// byte of the quoted nonce option (RFC 6744 §8).
pub(crate) fn points_at_nonce(m: &Message<&[u8]>, quoted: &NonceHeader) -> bool {
    m.msg_type() == Icmpv6Type::PARAM_PROBLEM
        && m.code() == icmpv6::PARAM_UNRECOGNIZED_OPTION
        && m.data_word() as usize == quoted.option_offset
}

/// The meta of an error `m` whose quote carries the nonce header `nh`.
pub(crate) fn meta_of(m: &Message<&[u8]>, nh: &NonceHeader) -> Result<QuotedMeta, Error> {
    let q = ipv6::Packet::new_quoted(m.invoking_packet())?;
    let (local_loc, local_nid) = split_addr(q.src());
    let (peer_loc, peer_nid) = split_addr(q.dst());
    Ok(QuotedMeta {
        icmp_type: m.msg_type(),
        icmp_code: m.code(),
        local_nid,
        local_loc,
        peer_nid,
        peer_loc,
        nonce: nh.nonce,
        rejects_nonce: points_at_nonce(m, nh),
    })
}

/// An ICMPv6 error about one of our wire-form packets translated for the local
/// stack (`IcmpError::to_identifier`): outer destination → our identifier address;
/// the quoted packet → identifier form without our DestOpts header; a Packet Too
/// Big MTU and a Parameter Problem pointer are corrected for the header we strip.
/// Of a verified error `m` carried by `p`, whose quote holds the nonce header `nh`.
pub(crate) fn error_to_identifier(
    p: &ipv6::Packet<&[u8]>,
    m: &Message<&[u8]>,
    nh: &NonceHeader,
    meta: &QuotedMeta,
    id_prefix: Locator,
) -> Result<Vec<u8>, Error> {
    let quoted = ipv6::Packet::new_quoted(m.invoking_packet())?;
    let hlen = nh.header_len;
    // the quoted packet in identifier form: fixed header | what followed our header
    let mut q = Vec::with_capacity(quoted.as_bytes().len());
    q.extend_from_slice(&quoted.as_bytes()[..ipv6::HEADER_LEN]);
    q.extend_from_slice(quoted.as_bytes().get(ipv6::HEADER_LEN + hlen..).unwrap_or_default());
    let (wire_src, wire_dst) = (quoted.src(), quoted.dst());
    let (id_src, id_dst) = (ilnp_addr(id_prefix, meta.local_nid), ilnp_addr(id_prefix, meta.peer_nid));
    {
        let mut v = ipv6::Packet::new_quoted(&mut q[..])?;
        v.set_payload_len(quoted.payload_len().saturating_sub(hlen as u16));
        v.set_next_header(nh.next_header);
        v.set_src(id_src);
        v.set_dst(id_dst);
    }
    // the quoted upper-layer checksum back to the identifier form, if it was quoted
    // (TCP/UDP: from the locator-zeroed rule; ICMPv6: full wire addresses)
    if let Some(field) = checksum::field_offset(nh.next_header) {
        let old = pseudo_addrs(nh.next_header, wire_src, wire_dst, true);
        adjust_checksum(&mut q, ipv6::HEADER_LEN + field, nh.next_header, old, (id_src, id_dst));
    }
    let mut data = m.data_word();
    match m.msg_type() {
        Icmpv6Type::PACKET_TOO_BIG => data = data.saturating_sub(hlen as u32),
        Icmpv6Type::PARAM_PROBLEM if data as usize >= ipv6::HEADER_LEN + hlen => data -= hlen as u32,
        _ => {}
    }
    let repr = icmpv6::Repr { msg_type: m.msg_type(), code: m.code(), data_word: data, body: &q };
    Ok(repr.packet(p.src(), id_src, p.hop_limit(), None))
}

/// The other direction of `error_to_identifier`: an ICMPv6 error the local
/// stack sent on `ilnp0` (identifier form, e.g. a port unreachable) about a packet a
/// correspondent sent us, made fit for the wire so the correspondent can match it:
/// outer addresses `src_loc:NID` → `dst_loc:NID` with our `nonce` (RFC 6744 §7:
/// every ICMP from an ILNPv6 endpoint carries it), and the quoted packet rewritten
/// back into the wire form it arrived in: `dst_loc:peer` → `src_loc:us` with the
/// correspondent's own nonce `quoted_nonce` first (what its `IcmpError::meta` looks
/// for), its transport checksum back to the wire rule. The quote is cut so the whole
/// packet fits in 1280 bytes; a Parameter Problem pointer past the fixed header
/// moves by the inserted header (`IcmpError::to_wire`, whose checksum was verified).
/// Of a verified error `m` carried by the identifier-form `p`.
pub(crate) fn error_to_wire(
    p: &ipv6::Packet<&[u8]>,
    m: &Message<&[u8]>,
    id_prefix: Locator,
    src_loc: Locator,
    dst_loc: Locator,
    nonce: &Nonce,
    quoted_nonce: &Nonce,
) -> Result<Vec<u8>, Error> {
    let (_, our_nid) = split_addr(p.src());
    let (_, peer_nid) = split_addr(p.dst());
    let quoted = ipv6::Packet::new_quoted(m.invoking_packet())?;
    let (qs, qd) = (quoted.src(), quoted.dst());
    let (q_src_nid, q_dst_nid) = identifier_nids(qs, qd, id_prefix)?;
    // the quoted packet in wire form: fixed header | DestOpts(quoted_nonce) | rest
    let proto = quoted.next_header();
    let qhlen = destopts::header_len(quoted_nonce.len());
    let (wqs, wqd) = (ilnp_addr(dst_loc, q_src_nid), ilnp_addr(src_loc, q_dst_nid));
    let bytes = quoted.as_bytes();
    let mut q = Vec::with_capacity(bytes.len() + qhlen);
    q.extend_from_slice(&bytes[..ipv6::HEADER_LEN]);
    destopts::emit_nonce_header(proto, quoted_nonce, &mut q);
    q.extend_from_slice(&bytes[ipv6::HEADER_LEN..]);
    {
        let mut v = ipv6::Packet::new_quoted(&mut q[..])?;
        v.set_payload_len(quoted.payload_len().saturating_add(qhlen as u16));
        v.set_next_header(NextHeader::DSTOPTS);
        v.set_src(wqs);
        v.set_dst(wqd);
    }
    if let Some(field) = checksum::field_offset(proto) {
        let new = pseudo_addrs(proto, wqs, wqd, true);
        adjust_checksum(&mut q, ipv6::HEADER_LEN + qhlen + field, proto, (qs, qd), new);
    }
    let mut data = m.data_word();
    if m.msg_type() == Icmpv6Type::PARAM_PROBLEM && data as usize >= ipv6::HEADER_LEN {
        data = data.saturating_add(qhlen as u32);
    }
    q.truncate(icmpv6::quote_room(destopts::header_len(nonce.len())));
    let repr = icmpv6::Repr { msg_type: m.msg_type(), code: m.code(), data_word: data, body: &q };
    let (src, dst) = (ilnp_addr(src_loc, our_nid), ilnp_addr(dst_loc, peer_nid));
    Ok(repr.packet(src, dst, p.hop_limit(), Some(nonce)))
}
