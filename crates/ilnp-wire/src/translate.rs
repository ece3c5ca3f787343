//! Packet translation between the identifier form (what applications and the
//! kernel's transport see on `ilnp0`: `P::NID` addresses) and the wire form
//! (`L64:NID` addresses + the Nonce Destination Option), plus the ILNP packets
//! the daemon originates (Locator Updates, errors for applications).
//!
//! Transport checksums: both forms differ only in the upper 64 bits of the
//! addresses; the wire rule zeroes them (RFC 6744 §3), so a complete checksum is
//! adjusted incrementally (RFC 1624). A partial checksum (virtio NEEDS_CSUM) is
//! completed from scratch. ICMPv6 checksums cover full addresses and are recomputed.

use crate::checksum;
use crate::destopts::{self, NonceHeader};
use crate::icmpv6::{self, LocatorUpdate};
use crate::ipv6::{self, PROTO_DSTOPTS, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};
use crate::{ilnp_addr, split_addr, Error, Locator, Nid, Nonce};
use std::net::Ipv6Addr;

/// State of the transport checksum field of a packet handed to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Csum {
    /// the field holds a complete checksum
    #[default]
    Complete,
    /// the field holds only the pseudo-header sum (CHECKSUM_PARTIAL / NEEDS_CSUM)
    Partial,
}

/// What a wire-form ILNPv6 packet said about its endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireMeta {
    pub src_loc: Locator,
    pub src_nid: Nid,
    pub dst_loc: Locator,
    pub dst_nid: Nid,
    pub nonce: Nonce,
    /// upper-layer protocol
    pub proto: u8,
}

/// Offset of the checksum field inside an upper-layer header we adjust.
fn csum_field(proto: u8) -> Option<usize> {
    match proto {
        PROTO_TCP => Some(16),
        PROTO_UDP => Some(6),
        PROTO_ICMPV6 => Some(2),
        _ => None,
    }
}

/// Rewrites the upper-layer checksum of `pkt` (whose addresses were `old_src/old_dst`
/// and are now those in its header) according to the ILNP rules.
/// `old_wire` / `new_wire`: whether the old / new form is the wire form
/// (transport pseudo-header with locators zeroed).
fn fix_upper_checksum(
    pkt: &mut [u8],
    old_src: Ipv6Addr,
    old_dst: Ipv6Addr,
    old_wire: bool,
    new_wire: bool,
    csum: Csum,
) -> Result<(), Error> {
    let ul = ipv6::upper_layer_info(pkt)?;
    let (proto, off) = (ul.proto, ul.offset);
    let Some(field) = csum_field(proto) else { return Ok(()) };
    if !ul.has_header() {
        // a later fragment: no transport header here; the first fragment's
        // adjustment covers the whole datagram's pseudo-header change
        return Ok(());
    }
    if csum == Csum::Partial && !ul.is_whole() {
        return Err(Error::Malformed("partial checksum on a fragment"));
    }
    let p = ipv6::Packet::new_checked(&*pkt)?;
    let (new_src, new_dst) = (p.src(), p.dst());
    let end = ipv6::HEADER_LEN + p.payload_len() as usize;
    if off + field + 2 > end {
        return Err(Error::Truncated);
    }
    if proto == PROTO_ICMPV6 {
        // full addresses in both forms; adjust incrementally so a corrupt
        // checksum stays corrupt (the receiver must still reject it)
        let old = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]);
        let new = checksum::update(
            old,
            checksum::addr_pair_sum(&old_src, &old_dst),
            checksum::addr_pair_sum(&new_src, &new_dst),
        );
        pkt[off + 2..off + 4].copy_from_slice(&new.to_be_bytes());
        return Ok(());
    }
    let pseudo = |s: &Ipv6Addr, d: &Ipv6Addr, wire: bool| {
        if wire {
            (checksum::nid_only(s), checksum::nid_only(d))
        } else {
            (*s, *d)
        }
    };
    let (ns, nd) = pseudo(&new_src, &new_dst, new_wire);
    let at = off + field;
    let old = u16::from_be_bytes([pkt[at], pkt[at + 1]]);
    if proto == PROTO_UDP && old == 0 && csum == Csum::Complete {
        // no checksum (not valid in IPv6 except for tunnels): leave it alone
        return Ok(());
    }
    let new = match csum {
        Csum::Partial => {
            pkt[at..at + 2].copy_from_slice(&[0, 0]);
            checksum::compute(&ns, &nd, proto, &pkt[off..end])
        }
        Csum::Complete => {
            let (os, od) = pseudo(&old_src, &old_dst, old_wire);
            checksum::update(old, checksum::addr_pair_sum(&os, &od), checksum::addr_pair_sum(&ns, &nd))
        }
    };
    let new = if proto == PROTO_UDP && new == 0 { 0xffff } else { new };
    pkt[at..at + 2].copy_from_slice(&new.to_be_bytes());
    Ok(())
}

/// Identifier form → wire form: rewrite addresses to `src_loc:NID` / `dst_loc:NID`,
/// insert a DestOpts header with `nonce` directly after the IPv6 header, fix checksums.
pub fn to_wire(
    pkt: &[u8],
    id_prefix: Locator,
    src_loc: Locator,
    dst_loc: Locator,
    nonce: &Nonce,
    csum: Csum,
) -> Result<Vec<u8>, Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let (sl, sn) = split_addr(p.src());
    let (dl, dn) = split_addr(p.dst());
    if sl != id_prefix || dl != id_prefix {
        return Err(Error::NotIdentifierForm);
    }
    let hlen = destopts::header_len(nonce.len());
    let payload = p.payload();
    let new_plen = payload.len() + hlen;
    if new_plen > u16::MAX as usize {
        return Err(Error::Malformed("packet too large for a nonce header"));
    }
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + new_plen);
    out.extend_from_slice(&pkt[..ipv6::HEADER_LEN]);
    destopts::emit_nonce_header(p.next_header(), nonce, &mut out);
    out.extend_from_slice(payload);
    {
        let mut q = ipv6::Packet::new_checked(&mut out[..]).map_err(|_| Error::Truncated)?;
        q.set_payload_len(new_plen as u16);
        q.set_next_header(PROTO_DSTOPTS);
        q.set_src(ilnp_addr(src_loc, sn));
        q.set_dst(ilnp_addr(dst_loc, dn));
    }
    fix_upper_checksum(&mut out, p.src(), p.dst(), false, true, csum)?;
    Ok(out)
}

/// The nonce header of a wire-form packet, required to be the first extension header.
pub fn wire_nonce(pkt: &[u8]) -> Result<NonceHeader, Error> {
    destopts::find_nonce(pkt)?.ok_or(Error::NoNonce)
}

/// Wire form → identifier form: strip our DestOpts header, rewrite both addresses
/// into the identifier prefix, fix checksums.
pub fn to_identifier(pkt: &[u8], id_prefix: Locator, csum: Csum) -> Result<(Vec<u8>, WireMeta), Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let nh = wire_nonce(pkt)?;
    if !nh.only_nonce {
        return Err(Error::UnsupportedOptions);
    }
    let (src_loc, src_nid) = split_addr(p.src());
    let (dst_loc, dst_nid) = split_addr(p.dst());
    let body = &p.payload()[nh.header_len..];
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + body.len());
    out.extend_from_slice(&pkt[..ipv6::HEADER_LEN]);
    out.extend_from_slice(body);
    out[4..6].copy_from_slice(&(body.len() as u16).to_be_bytes());
    {
        let mut q = ipv6::Packet::new_checked(&mut out[..]).map_err(|_| Error::Truncated)?;
        q.set_payload_len(body.len() as u16);
        q.set_next_header(nh.next_header);
        q.set_src(ilnp_addr(id_prefix, src_nid));
        q.set_dst(ilnp_addr(id_prefix, dst_nid));
    }
    let (proto, _) = ipv6::upper_layer(&out)?;
    fix_upper_checksum(&mut out, p.src(), p.dst(), true, false, csum)?;
    Ok((out, WireMeta { src_loc, src_nid, dst_loc, dst_nid, nonce: nh.nonce, proto }))
}

/// The nonce header of a quoted (possibly truncated) invoking packet.
pub fn quoted_nonce(quoted: &[u8]) -> Option<NonceHeader> {
    if quoted.len() < ipv6::HEADER_LEN + 8 {
        return None;
    }
    // A quote may be cut short: pretend the payload ends where the quote does.
    let mut q = quoted.to_vec();
    let plen = (q.len() - ipv6::HEADER_LEN).min(u16::MAX as usize) as u16;
    q[4..6].copy_from_slice(&plen.to_be_bytes());
    destopts::find_nonce(&q).ok().flatten()
}

/// What an ICMPv6 error about one of our wire-form packets refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotedMeta {
    pub icmp_type: u8,
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

/// The ICMPv6 error message of `pkt`, checksum verified:
/// a corrupted error is never laundered into one the kernel would believe.
fn icmp_error(pkt: &[u8]) -> Result<icmpv6::Message<&[u8]>, Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let (proto, off) = ipv6::upper_layer(pkt)?;
    if proto != PROTO_ICMPV6 {
        return Err(Error::Malformed("not ICMPv6"));
    }
    let end = ipv6::HEADER_LEN + p.payload_len() as usize;
    let m = icmpv6::Message::new_checked(&pkt[off..end])?;
    if !icmpv6::is_error(m.msg_type()) {
        return Err(Error::Malformed("not an ICMPv6 error"));
    }
    if !m.verify_checksum(&p.src(), &p.dst()) {
        return Err(Error::BadChecksum);
    }
    Ok(m)
}

/// Inspects an ICMPv6 error (a full IPv6 packet) quoting one of our wire-form packets.
pub fn icmp_error_meta(pkt: &[u8]) -> Result<QuotedMeta, Error> {
    let m = icmp_error(pkt)?;
    let quoted = m.invoking_packet();
    let nh = quoted_nonce(quoted).ok_or(Error::NoNonce)?;
    let qs = Ipv6Addr::from(<[u8; 16]>::try_from(&quoted[8..24]).map_err(|_| Error::Truncated)?);
    let qd = Ipv6Addr::from(<[u8; 16]>::try_from(&quoted[24..40]).map_err(|_| Error::Truncated)?);
    let (local_loc, local_nid) = split_addr(qs);
    let (peer_loc, peer_nid) = split_addr(qd);
    let rejects_nonce = m.msg_type() == icmpv6::TYPE_PARAM_PROBLEM
        && m.code() == icmpv6::PARAM_UNRECOGNIZED_OPTION
        && m.data_word() as usize == nh.option_offset;
    Ok(QuotedMeta {
        icmp_type: m.msg_type(),
        icmp_code: m.code(),
        local_nid,
        local_loc,
        peer_nid,
        peer_loc,
        nonce: nh.nonce,
        rejects_nonce,
    })
}

/// `Some(meta)` if `pkt` is a Parameter Problem code 2 ("unrecognized IPv6 option")
/// whose pointer is exactly the type byte of the nonce option in the quoted packet
/// (RFC 6744 §8: the destination does not speak ILNPv6). `meta.nonce` is the nonce
/// quoted, for the caller to check it is ours.
pub fn quoted_nonce_pointer(pkt: &[u8]) -> Option<QuotedMeta> {
    icmp_error_meta(pkt).ok().filter(|m| m.rejects_nonce)
}

/// Translates an ICMPv6 error about one of our wire-form packets for the local
/// stack: outer destination → our identifier address; the quoted packet →
/// identifier form without our DestOpts header; a Packet Too Big MTU and a
/// Parameter Problem pointer are corrected for the header we strip.
pub fn icmp_error_to_identifier(pkt: &[u8], id_prefix: Locator) -> Result<(Vec<u8>, QuotedMeta), Error> {
    let meta = icmp_error_meta(pkt)?;
    let p = ipv6::Packet::new_checked(pkt)?;
    let (_, off) = ipv6::upper_layer(pkt)?;
    let end = ipv6::HEADER_LEN + p.payload_len() as usize;
    let icmp = &pkt[off..end];
    let m = icmpv6::Message::new_checked(icmp)?;
    let quoted = m.invoking_packet();
    let nh = quoted_nonce(quoted).ok_or(Error::NoNonce)?;
    let hlen = nh.header_len;
    // quoted packet in identifier form
    let mut q = Vec::with_capacity(quoted.len());
    q.extend_from_slice(&quoted[..ipv6::HEADER_LEN]);
    q.extend_from_slice(&quoted[(ipv6::HEADER_LEN + hlen).min(quoted.len())..]);
    let qplen = u16::from_be_bytes([quoted[4], quoted[5]]).saturating_sub(hlen as u16);
    q[4..6].copy_from_slice(&qplen.to_be_bytes());
    q[6] = nh.next_header;
    q[8..24].copy_from_slice(&ilnp_addr(id_prefix, meta.local_nid).octets());
    q[24..40].copy_from_slice(&ilnp_addr(id_prefix, meta.peer_nid).octets());
    // the quoted upper-layer checksum back to the identifier form, if it was quoted
    // (TCP/UDP: from the locator-zeroed rule; ICMPv6: full wire addresses)
    if let Some(field) = csum_field(nh.next_header) {
        let at = ipv6::HEADER_LEN + field;
        if let Some(&[hi, lo]) = q.get(at..at + 2) {
            let old = u16::from_be_bytes([hi, lo]);
            let (ws, wd) = (ilnp_addr(meta.local_loc, meta.local_nid), ilnp_addr(meta.peer_loc, meta.peer_nid));
            let (ws, wd) = if nh.next_header == PROTO_ICMPV6 {
                (ws, wd)
            } else {
                (checksum::nid_only(&ws), checksum::nid_only(&wd))
            };
            let (is, id) = (ilnp_addr(id_prefix, meta.local_nid), ilnp_addr(id_prefix, meta.peer_nid));
            if !(nh.next_header == PROTO_UDP && old == 0) {
                let new = checksum::update(old, checksum::addr_pair_sum(&ws, &wd), checksum::addr_pair_sum(&is, &id));
                let new = if nh.next_header == PROTO_UDP && new == 0 { 0xffff } else { new };
                q[at..at + 2].copy_from_slice(&new.to_be_bytes());
            }
        }
    }
    let mut data = m.data_word();
    match m.msg_type() {
        icmpv6::TYPE_PACKET_TOO_BIG => data = data.saturating_sub(hlen as u32),
        icmpv6::TYPE_PARAM_PROBLEM if data as usize >= ipv6::HEADER_LEN + hlen => data -= hlen as u32,
        _ => {}
    }
    let mut body = Vec::with_capacity(8 + q.len());
    body.extend_from_slice(&[m.msg_type(), m.code(), 0, 0]);
    body.extend_from_slice(&data.to_be_bytes());
    body.extend_from_slice(&q);
    let dst = ilnp_addr(id_prefix, meta.local_nid);
    let c = checksum::icmpv6_checksum(&p.src(), &dst, &body);
    body[2..4].copy_from_slice(&c.to_be_bytes());
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + body.len());
    ipv6::Repr {
        src: p.src(),
        dst,
        next_header: PROTO_ICMPV6,
        payload_len: body.len() as u16,
        hop_limit: p.hop_limit(),
    }
    .emit(&mut out);
    out.extend_from_slice(&body);
    Ok((out, meta))
}

/// The other direction of `icmp_error_to_identifier`: an ICMPv6 error the local
/// stack sent on `ilnp0` (identifier form, e.g. a port unreachable) about a packet a
/// correspondent sent us, made fit for the wire so the correspondent can match it:
/// outer addresses `src_loc:NID` → `dst_loc:NID` with our `nonce` (RFC 6744 §7:
/// every ICMP from an ILNPv6 endpoint carries it), and the quoted packet rewritten
/// back into the wire form it arrived in: `dst_loc:peer` → `src_loc:us` with the
/// correspondent's own nonce `quoted_nonce` first (what its `icmp_error_meta` looks
/// for), its transport checksum back to the wire rule. The quote is cut so the whole
/// packet fits in 1280 bytes; a Parameter Problem pointer past the fixed header
/// moves by the inserted header. The input's ICMPv6 checksum must verify.
pub fn icmp_error_to_wire(
    pkt: &[u8],
    id_prefix: Locator,
    src_loc: Locator,
    dst_loc: Locator,
    nonce: &Nonce,
    quoted_nonce: &Nonce,
) -> Result<Vec<u8>, Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let (sl, our_nid) = split_addr(p.src());
    let (dl, peer_nid) = split_addr(p.dst());
    if sl != id_prefix || dl != id_prefix {
        return Err(Error::NotIdentifierForm);
    }
    let m = icmp_error(pkt)?;
    let quoted = m.invoking_packet();
    let qh = quoted.get(..ipv6::HEADER_LEN).ok_or(Error::Truncated)?;
    if qh[0] >> 4 != 6 {
        return Err(Error::NotIpv6);
    }
    let (qs, qd) = (
        Ipv6Addr::from(<[u8; 16]>::try_from(&qh[8..24]).map_err(|_| Error::Truncated)?),
        Ipv6Addr::from(<[u8; 16]>::try_from(&qh[24..40]).map_err(|_| Error::Truncated)?),
    );
    let ((qsl, q_src_nid), (qdl, q_dst_nid)) = (split_addr(qs), split_addr(qd));
    if qsl != id_prefix || qdl != id_prefix {
        return Err(Error::NotIdentifierForm);
    }
    // the quoted packet in wire form: fixed header | DestOpts(quoted_nonce) | rest
    let qhlen = destopts::header_len(quoted_nonce.len());
    let (wqs, wqd) = (ilnp_addr(dst_loc, q_src_nid), ilnp_addr(src_loc, q_dst_nid));
    let mut q = Vec::with_capacity(quoted.len() + qhlen);
    q.extend_from_slice(qh);
    destopts::emit_nonce_header(qh[6], quoted_nonce, &mut q);
    q.extend_from_slice(&quoted[ipv6::HEADER_LEN..]);
    let qplen = u16::from_be_bytes([qh[4], qh[5]]).saturating_add(qhlen as u16);
    q[4..6].copy_from_slice(&qplen.to_be_bytes());
    q[6] = PROTO_DSTOPTS;
    q[8..24].copy_from_slice(&wqs.octets());
    q[24..40].copy_from_slice(&wqd.octets());
    if let Some(field) = csum_field(qh[6]) {
        let at = ipv6::HEADER_LEN + qhlen + field;
        if let Some(&[hi, lo]) = q.get(at..at + 2) {
            let old = u16::from_be_bytes([hi, lo]);
            let (ns, nd) =
                if qh[6] == PROTO_ICMPV6 { (wqs, wqd) } else { (checksum::nid_only(&wqs), checksum::nid_only(&wqd)) };
            if !(qh[6] == PROTO_UDP && old == 0) {
                let new = checksum::update(old, checksum::addr_pair_sum(&qs, &qd), checksum::addr_pair_sum(&ns, &nd));
                let new = if qh[6] == PROTO_UDP && new == 0 { 0xffff } else { new };
                q[at..at + 2].copy_from_slice(&new.to_be_bytes());
            }
        }
    }
    let mut data = m.data_word();
    if m.msg_type() == icmpv6::TYPE_PARAM_PROBLEM && data as usize >= ipv6::HEADER_LEN {
        data = data.saturating_add(qhlen as u32);
    }
    let hlen = destopts::header_len(nonce.len());
    let room = icmpv6::MIN_MTU - ipv6::HEADER_LEN - hlen - 8;
    q.truncate(room);
    let mut icmp = Vec::with_capacity(8 + q.len());
    icmp.extend_from_slice(&[m.msg_type(), m.code(), 0, 0]);
    icmp.extend_from_slice(&data.to_be_bytes());
    icmp.extend_from_slice(&q);
    let (src, dst) = (ilnp_addr(src_loc, our_nid), ilnp_addr(dst_loc, peer_nid));
    let c = checksum::icmpv6_checksum(&src, &dst, &icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + hlen + icmp.len());
    // at most 1280 bytes in all: the cast cannot truncate
    ipv6::Repr {
        src,
        dst,
        next_header: PROTO_DSTOPTS,
        payload_len: (hlen + icmp.len()) as u16,
        hop_limit: p.hop_limit(),
    }
    .emit(&mut out);
    destopts::emit_nonce_header(PROTO_ICMPV6, nonce, &mut out);
    out.extend_from_slice(&icmp);
    Ok(out)
}

/// An ICMPv6 Destination Unreachable for a local application, quoting its
/// identifier-form packet `orig` (from orig's destination to orig's source), so a
/// connecting socket fails at once instead of hanging.
pub fn unreachable_to_app(orig: &[u8], code: u8) -> Result<Vec<u8>, Error> {
    let p = ipv6::Packet::new_checked(orig)?;
    let mut body = Vec::new();
    icmpv6::emit_error(icmpv6::TYPE_DEST_UNREACH, code, 0, p.packet_bytes(), &mut body);
    let (src, dst) = (p.dst(), p.src());
    let c = checksum::icmpv6_checksum(&src, &dst, &body);
    body[2..4].copy_from_slice(&c.to_be_bytes());
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + body.len());
    ipv6::Repr { src, dst, next_header: PROTO_ICMPV6, payload_len: body.len() as u16, hop_limit: 64 }.emit(&mut out);
    out.extend_from_slice(&body);
    Ok(out)
}

/// A complete wire-form Locator Update packet: IPv6 + DestOpts(nonce) + ICMPv6 LU,
/// ICMPv6 checksum over the full addresses (RFC 6743 §2).
pub fn lu_packet(src: Ipv6Addr, dst: Ipv6Addr, nonce: &Nonce, lu: &LocatorUpdate) -> Result<Vec<u8>, Error> {
    let mut icmp = Vec::with_capacity(lu.len());
    lu.emit(&mut icmp)?;
    let c = checksum::icmpv6_checksum(&src, &dst, &icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let hlen = destopts::header_len(nonce.len());
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + hlen + icmp.len());
    ipv6::Repr { src, dst, next_header: PROTO_DSTOPTS, payload_len: (hlen + icmp.len()) as u16, hop_limit: 64 }
        .emit(&mut out);
    destopts::emit_nonce_header(PROTO_ICMPV6, nonce, &mut out);
    out.extend_from_slice(&icmp);
    Ok(out)
}

/// A wire-form packet carrying only our nonce (Next Header = No Next Header):
/// how a responder tells the initiator its nonce when the session has nothing
/// else to send back (RFC 6741 §13.1), so that later Locator Updates verify.
pub fn nonce_only_packet(src: Ipv6Addr, dst: Ipv6Addr, nonce: &Nonce) -> Vec<u8> {
    let hlen = destopts::header_len(nonce.len());
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + hlen);
    ipv6::Repr { src, dst, next_header: PROTO_DSTOPTS, payload_len: hlen as u16, hop_limit: 64 }.emit(&mut out);
    destopts::emit_nonce_header(ipv6::PROTO_NONE, nonce, &mut out);
    out
}

/// A parsed wire-form Locator Update with its addressing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuPacket {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// None if the packet carried no nonce (an LU without a nonce must be dropped)
    pub nonce: Option<Nonce>,
    pub lu: LocatorUpdate,
}

/// True if the wire packet's upper layer is an ICMPv6 Locator Update.
pub fn is_lu(pkt: &[u8]) -> bool {
    match ipv6::upper_layer(pkt) {
        Ok((PROTO_ICMPV6, off)) => pkt.get(off) == Some(&icmpv6::TYPE_LOCATOR_UPDATE),
        _ => false,
    }
}

/// Parses a wire-form LU packet and verifies its ICMPv6 checksum.
pub fn parse_lu_packet(pkt: &[u8]) -> Result<LuPacket, Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let nonce = destopts::find_nonce(pkt)?.map(|h| h.nonce);
    let (proto, off) = ipv6::upper_layer(pkt)?;
    if proto != PROTO_ICMPV6 {
        return Err(Error::Malformed("not ICMPv6"));
    }
    let end = ipv6::HEADER_LEN + p.payload_len() as usize;
    let icmp = &pkt[off..end];
    if !checksum::verify(&p.src(), &p.dst(), PROTO_ICMPV6, icmp) {
        return Err(Error::BadChecksum);
    }
    Ok(LuPacket { src: p.src(), dst: p.dst(), nonce, lu: LocatorUpdate::parse(icmp)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icmpv6::{LuEntry, LuOperation};

    const P: Locator = Locator(0xfd69_6c6e_7000_0000);
    const LA: Locator = Locator(0x2001_0db8_000a_0000);
    const LB: Locator = Locator(0x2001_0db8_000b_0000);
    const NA: Nid = Nid(0x0200_00ff_fe00_000c);
    const NB: Nid = Nid(0x0200_00ff_fe00_000d);

    fn udp_packet(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
        let mut udp = vec![0x9c, 0x41, 0x17, 0xd4];
        udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        let c = checksum::compute(&src, &dst, PROTO_UDP, &udp);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        let mut v = Vec::new();
        ipv6::Repr { src, dst, next_header: PROTO_UDP, payload_len: udp.len() as u16, hop_limit: 64 }.emit(&mut v);
        v.extend_from_slice(&udp);
        v
    }

    fn tcp_packet(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
        let mut tcp = vec![0x9c, 0x41, 0x1b, 0x58, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0];
        tcp.extend_from_slice(payload);
        let c = checksum::compute(&src, &dst, PROTO_TCP, &tcp);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        let mut v = Vec::new();
        ipv6::Repr { src, dst, next_header: PROTO_TCP, payload_len: tcp.len() as u16, hop_limit: 64 }.emit(&mut v);
        v.extend_from_slice(&tcp);
        v
    }

    #[test]
    fn udp_roundtrip_with_rfc6744_checksum() {
        for payload in [&b""[..], b"x", b"hello world", &[0xffu8; 1000][..]] {
            let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), payload);
            let n = Nonce::N32([1, 2, 3, 4]);
            let w = to_wire(&id, P, LA, LB, &n, Csum::Complete).unwrap();
            let wp = ipv6::Packet::new_checked(&w[..]).unwrap();
            assert_eq!(wp.src(), ilnp_addr(LA, NA));
            assert_eq!(wp.dst(), ilnp_addr(LB, NB));
            assert_eq!(wp.next_header(), PROTO_DSTOPTS);
            assert_eq!(&w[40..48], &[PROTO_UDP, 0, 0x8b, 4, 1, 2, 3, 4]);
            // transport checksum valid with locators zeroed, not with full addresses
            assert!(checksum::verify(&checksum::nid_only(&wp.src()), &checksum::nid_only(&wp.dst()), 17, &w[48..]));
            let (back, meta) = to_identifier(&w, P, Csum::Complete).unwrap();
            assert_eq!(back, id);
            assert_eq!(meta.nonce, n);
            assert_eq!((meta.src_loc, meta.src_nid, meta.dst_loc, meta.dst_nid), (LA, NA, LB, NB));
        }
    }

    #[test]
    fn tcp_partial_checksum_is_completed() {
        let id = tcp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"payload bytes");
        let mut partial = id.clone();
        // a partial field holds only the (non-inverted) pseudo-header sum
        let ph = checksum::fold(checksum::pseudo_header(&ilnp_addr(P, NA), &ilnp_addr(P, NB), 6, 33));
        partial[56..58].copy_from_slice(&ph.to_be_bytes());
        let n = Nonce::N96([7; 12]);
        let w = to_wire(&partial, P, LA, LB, &n, Csum::Partial).unwrap();
        let full = to_wire(&id, P, LA, LB, &n, Csum::Complete).unwrap();
        assert_eq!(w, full);
        assert_eq!(w.len(), id.len() + 16);
    }

    #[test]
    fn icmp_echo_checksum_uses_full_addresses() {
        let mut icmp = vec![128, 0, 0, 0, 0, 1, 0, 1, b'p', b'i', b'n', b'g'];
        let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, NB));
        let c = checksum::icmpv6_checksum(&s, &d, &icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        let mut id = Vec::new();
        ipv6::Repr { src: s, dst: d, next_header: PROTO_ICMPV6, payload_len: icmp.len() as u16, hop_limit: 64 }
            .emit(&mut id);
        id.extend_from_slice(&icmp);
        let w = to_wire(&id, P, LA, LB, &Nonce::N32([9; 4]), Csum::Complete).unwrap();
        assert!(checksum::verify(&ilnp_addr(LA, NA), &ilnp_addr(LB, NB), 58, &w[48..]));
        let (back, _) = to_identifier(&w, P, Csum::Complete).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn rejects_non_identifier_and_plain() {
        let plain = udp_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), b"x");
        assert_eq!(
            to_wire(&plain, P, LA, LB, &Nonce::N32([0; 4]), Csum::Complete).unwrap_err(),
            Error::NotIdentifierForm
        );
        assert_eq!(to_identifier(&plain, P, Csum::Complete).unwrap_err(), Error::NoNonce);
    }

    #[test]
    fn ptb_translation_and_fallback_signal() {
        let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), &[0u8; 1300]);
        let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 1, 1, 1]), Csum::Complete).unwrap();
        let router: Ipv6Addr = "2001:db8:a::1".parse().unwrap();
        let mk = |t: u8, code: u8, data: u32| {
            let mut body = Vec::new();
            icmpv6::emit_error(t, code, data, &w, &mut body);
            let c = checksum::icmpv6_checksum(&router, &ilnp_addr(LA, NA), &body);
            body[2..4].copy_from_slice(&c.to_be_bytes());
            let mut v = Vec::new();
            ipv6::Repr {
                src: router,
                dst: ilnp_addr(LA, NA),
                next_header: 58,
                payload_len: body.len() as u16,
                hop_limit: 64,
            }
            .emit(&mut v);
            v.extend_from_slice(&body);
            v
        };
        let ptb = mk(icmpv6::TYPE_PACKET_TOO_BIG, 0, 1280);
        let (t, meta) = icmp_error_to_identifier(&ptb, P).unwrap();
        assert!(!meta.rejects_nonce);
        assert_eq!((meta.peer_nid, meta.peer_loc), (NB, LB));
        let tp = ipv6::Packet::new_checked(&t[..]).unwrap();
        assert_eq!(tp.dst(), ilnp_addr(P, NA));
        assert_eq!(u32::from_be_bytes([t[44], t[45], t[46], t[47]]), 1272);
        assert!(checksum::verify(&tp.src(), &tp.dst(), 58, &t[40..]));
        // quoted packet is now identifier form: addresses in P, UDP directly after the header
        assert_eq!(&t[48 + 8..48 + 24], &ilnp_addr(P, NA).octets());
        assert_eq!(t[48 + 6], PROTO_UDP);

        let pp = mk(icmpv6::TYPE_PARAM_PROBLEM, 2, 42);
        assert!(icmp_error_meta(&pp).unwrap().rejects_nonce);
        let pp = mk(icmpv6::TYPE_PARAM_PROBLEM, 2, 40);
        assert!(!icmp_error_meta(&pp).unwrap().rejects_nonce);
    }

    #[test]
    fn unreachable_for_app() {
        let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"x");
        let u = unreachable_to_app(&id, icmpv6::UNREACH_ADDRESS).unwrap();
        let p = ipv6::Packet::new_checked(&u[..]).unwrap();
        assert_eq!((p.src(), p.dst()), (ilnp_addr(P, NB), ilnp_addr(P, NA)));
        assert_eq!(&u[40..42], &[1, 3]);
        assert!(checksum::verify(&p.src(), &p.dst(), 58, &u[40..]));
        assert_eq!(&u[48..], &id[..]);
    }

    #[test]
    fn lu_packet_roundtrip() {
        let lu = LocatorUpdate {
            operation: LuOperation::Advertisement,
            entries: vec![LuEntry { locator: LA, preference: 10, lifetime: 30 }],
        };
        let n = Nonce::N32([5, 6, 7, 8]);
        let v = lu_packet(ilnp_addr(LA, NA), ilnp_addr(LB, NB), &n, &lu).unwrap();
        assert!(is_lu(&v));
        let p = parse_lu_packet(&v).unwrap();
        assert_eq!(p.nonce, Some(n));
        assert_eq!(p.lu, lu);
        let mut bad = v.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(parse_lu_packet(&bad).unwrap_err(), Error::BadChecksum);
    }

    /// Full recomputation under the wire rule, for comparing with the incremental path.
    fn full_wire_checksum(w: &[u8]) -> u16 {
        let p = ipv6::Packet::new_checked(w).unwrap();
        let (proto, off) = ipv6::upper_layer(w).unwrap();
        let field = csum_field(proto).unwrap();
        let mut l4 = w[off..].to_vec();
        l4[field..field + 2].copy_from_slice(&[0, 0]);
        checksum::transport_checksum_wire(&p.src(), &p.dst(), proto, &l4)
    }

    fn l4_csum(w: &[u8]) -> u16 {
        let (proto, off) = ipv6::upper_layer(w).unwrap();
        let f = off + csum_field(proto).unwrap();
        u16::from_be_bytes([w[f], w[f + 1]])
    }

    /// 0x0000 and 0xffff are the same one's-complement value (both verify for TCP).
    fn same_csum(a: u16, b: u16) -> bool {
        a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
    }

    #[test]
    fn incremental_adjustment_matches_full_recomputation() {
        let mut n = 0;
        for seed in 0u32..300 {
            let payload: Vec<u8> = (0..(seed % 97)).map(|i| (i * 31 + seed * 7) as u8).collect();
            let nb = Nid(0x0200_00ff_fe00_0000 | seed as u64);
            for tcp in [false, true] {
                let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, nb));
                let id = if tcp { tcp_packet(s, d, &payload) } else { udp_packet(s, d, &payload) };
                let nonce = if seed % 2 == 0 { Nonce::N32([1, 2, 3, 4]) } else { Nonce::N96([9; 12]) };
                let la = Locator(0x2001_0db8_0000_0000 | seed as u64);
                let w = to_wire(&id, P, la, LB, &nonce, Csum::Complete).unwrap();
                let full = full_wire_checksum(&w);
                let inc = l4_csum(&w);
                if tcp {
                    assert!(same_csum(inc, full), "seed {seed}: incremental {inc:#06x} full {full:#06x}");
                } else {
                    assert_eq!(inc, full, "seed {seed}: UDP must send 0xffff for a computed 0");
                }
                let (back, _) = to_identifier(&w, P, Csum::Complete).unwrap();
                let p = ipv6::Packet::new_checked(&back[..]).unwrap();
                let proto = if tcp { PROTO_TCP } else { PROTO_UDP };
                assert!(checksum::verify(&p.src(), &p.dst(), proto, &back[40..]), "seed {seed}");
                n += 1;
            }
        }
        assert_eq!(n, 600);
    }

    #[test]
    fn partial_checksum_inbound_is_completed() {
        let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"partial in");
        let w = to_wire(&id, P, LA, LB, &Nonce::N32([3; 4]), Csum::Complete).unwrap();
        let mut partial = w.clone();
        partial[48 + 6..48 + 8].copy_from_slice(&[0x12, 0x34]); // junk: Partial ignores the field
        let (back, _) = to_identifier(&partial, P, Csum::Partial).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn existing_extension_headers_stay_after_ours() {
        // identifier packet: IPv6 | Routing(type 0xfe, 8 bytes, segments left 0) | UDP
        let inner = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"ext");
        let mut id = inner[..40].to_vec();
        id[6] = ipv6::PROTO_ROUTING;
        id[4..6].copy_from_slice(&((inner.len() - 40 + 8) as u16).to_be_bytes());
        id.extend_from_slice(&[PROTO_UDP, 0, 0xfe, 0, 0, 0, 0, 0]);
        id.extend_from_slice(&inner[40..]);
        let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
        assert_eq!(w[6], PROTO_DSTOPTS);
        assert_eq!(&w[40..48], &[ipv6::PROTO_ROUTING, 0, 0x8b, 4, 1, 2, 3, 4]);
        assert_eq!(&w[48..56], &[PROTO_UDP, 0, 0xfe, 0, 0, 0, 0, 0]);
        assert_eq!(u16::from_be_bytes([w[4], w[5]]) as usize, w.len() - 40);
        assert_eq!(ipv6::upper_layer(&w).unwrap(), (PROTO_UDP, 56));
        assert!(checksum::verify_transport_wire(&ilnp_addr(LA, NA), &ilnp_addr(LB, NB), 17, &w[56..]));
        let (back, meta) = to_identifier(&w, P, Csum::Complete).unwrap();
        assert_eq!(back, id);
        assert_eq!(meta.proto, PROTO_UDP);
    }

    #[test]
    fn later_fragments_are_not_touched() {
        // IPv6 | Fragment(offset 185, M=0) | 16 bytes of payload that only look like UDP
        let mut id = Vec::new();
        ipv6::Repr {
            src: ilnp_addr(P, NA),
            dst: ilnp_addr(P, NB),
            next_header: ipv6::PROTO_FRAGMENT,
            payload_len: 24,
            hop_limit: 64,
        }
        .emit(&mut id);
        id.extend_from_slice(&[PROTO_UDP, 0, 0x05, 0xc8, 0, 0, 0, 42]); // offset 185 << 3
        id.extend_from_slice(&[0xaa; 16]);
        let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
        assert_eq!(&w[56..], &[0xaa; 16]);
        let (back, _) = to_identifier(&w, P, Csum::Complete).unwrap();
        assert_eq!(back, id);
        // a first fragment (offset 0, M=1) gets the pseudo-header adjustment
        let full = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), &[7; 32]);
        let mut first = full[..40].to_vec();
        first[6] = ipv6::PROTO_FRAGMENT;
        first[4..6].copy_from_slice(&(8u16 + 24).to_be_bytes());
        first.extend_from_slice(&[PROTO_UDP, 0, 0, 1, 0, 0, 0, 42]);
        first.extend_from_slice(&full[40..64]);
        let w = to_wire(&first, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
        let whole = to_wire(&full, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
        assert_eq!(&w[56 + 6..56 + 8], &whole[48 + 6..48 + 8], "same checksum as the unfragmented datagram");
        assert!(to_wire(&first, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Partial).is_err());
    }

    #[test]
    fn inbound_option_errors() {
        let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"opts");
        let w = to_wire(&id, P, LA, LB, &Nonce::N96([5; 12]), Csum::Complete).unwrap();
        assert_eq!(&w[40..44], &[PROTO_UDP, 1, 0x8b, 12]);
        // replace the 96-bit nonce by a 32-bit nonce + an unknown option (type 0x1e, 6 bytes)
        let mut other = w.clone();
        other[42..56].copy_from_slice(&[0x8b, 4, 1, 2, 3, 4, 0x1e, 6, 0, 0, 0, 0, 0, 0]);
        assert_eq!(to_identifier(&other, P, Csum::Complete).unwrap_err(), Error::UnsupportedOptions);
        // two nonces
        let mut two = w.clone();
        two[42..56].copy_from_slice(&[0x8b, 4, 1, 2, 3, 4, 0x8b, 4, 5, 6, 7, 8, 1, 0]);
        assert_eq!(to_identifier(&two, P, Csum::Complete).unwrap_err(), Error::MoreThanOneNonce);
        // nonce of 8 bytes
        let mut bad = w.clone();
        bad[42..56].copy_from_slice(&[0x8b, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 0, 0]);
        assert_eq!(to_identifier(&bad, P, Csum::Complete).unwrap_err(), Error::BadNonceLength(8));
        // nonce after Pad1 + PadN: accepted, the header is stripped
        let mut padded = w.clone();
        padded[42..56].copy_from_slice(&[0, 1, 0, 0x8b, 4, 1, 2, 3, 4, 1, 1, 0, 0, 0]);
        let (back, meta) = to_identifier(&padded, P, Csum::Complete).unwrap();
        assert_eq!(back, id);
        assert_eq!(meta.nonce, Nonce::N32([1, 2, 3, 4]));
    }

    fn error_about(w: &[u8], t: u8, code: u8, data: u32) -> Vec<u8> {
        let router: Ipv6Addr = "2001:db8:a::1".parse().unwrap();
        icmpv6::error_packet(router, ilnp_addr(LA, NA), t, code, data, w)
    }

    #[test]
    fn icmp_error_details() {
        let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), &[1u8; 1400]);
        let w = to_wire(&id, P, LA, LB, &Nonce::N96([2; 12]), Csum::Complete).unwrap();
        // PTB with a 96-bit nonce: MTU reduced by 16
        let (t, _) = icmp_error_to_identifier(&error_about(&w, 2, 0, 1400), P).unwrap();
        assert_eq!(&t[44..48], &1384u32.to_be_bytes());
        assert_eq!(t.len(), 1280 - 16, "the 1280-byte error loses the 16 bytes we strip from its quote");
        // Parameter Problem past our header: pointer moves back by the header length
        let (t, m) = icmp_error_to_identifier(&error_about(&w, 4, 0, 40 + 16 + 4), P).unwrap();
        assert!(!m.rejects_nonce);
        assert_eq!(&t[44..48], &44u32.to_be_bytes());
        // pointer into the fixed header: unchanged
        let (t, _) = icmp_error_to_identifier(&error_about(&w, 4, 0, 7), P).unwrap();
        assert_eq!(&t[44..48], &7u32.to_be_bytes());
        // the nonce-rejection signal
        assert!(quoted_nonce_pointer(&error_about(&w, 4, 2, 42)).is_some());
        assert!(quoted_nonce_pointer(&error_about(&w, 4, 2, 43)).is_none());
        assert!(quoted_nonce_pointer(&error_about(&w, 4, 1, 42)).is_none());
        assert!(quoted_nonce_pointer(&error_about(&w, 1, 0, 42)).is_none());
        // a corrupted error is refused, not re-checksummed
        let mut bad = error_about(&w, 2, 0, 1400);
        bad[100] ^= 0x40;
        assert_eq!(icmp_error_to_identifier(&bad, P).unwrap_err(), Error::BadChecksum);
        // an error about a plain IPv6 packet (no nonce) is not ours
        assert_eq!(icmp_error_to_identifier(&error_about(&id, 2, 0, 1300), P).unwrap_err(), Error::NoNonce);
    }

    #[test]
    fn quoted_echo_checksum_is_translated() {
        let (s, d) = (ilnp_addr(P, NA), ilnp_addr(P, NB));
        let mut icmp = vec![128, 0, 0, 0, 0, 7, 0, 1, b'p', b'i', b'n', b'g'];
        let c = checksum::icmpv6_checksum(&s, &d, &icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        let mut id = Vec::new();
        ipv6::Repr { src: s, dst: d, next_header: PROTO_ICMPV6, payload_len: 12, hop_limit: 64 }.emit(&mut id);
        id.extend_from_slice(&icmp);
        let w = to_wire(&id, P, LA, LB, &Nonce::N32([4; 4]), Csum::Complete).unwrap();
        let (t, _) = icmp_error_to_identifier(&error_about(&w, 3, 0, 0), P).unwrap();
        assert_eq!(&t[48..], &id[..], "the quoted packet is exactly the identifier-form original");
        let udp = udp_packet(s, d, b"quoted udp");
        let w = to_wire(&udp, P, LA, LB, &Nonce::N32([4; 4]), Csum::Complete).unwrap();
        let (t, _) = icmp_error_to_identifier(&error_about(&w, 1, 4, 0), P).unwrap();
        assert_eq!(&t[48..], &udp[..]);
    }

    #[test]
    fn local_error_goes_back_to_the_peer_in_wire_form() {
        // B sends A a UDP datagram; A's stack answers port unreachable on ilnp0
        let (nonce_b, nonce_a) = (Nonce::N32([0xb0, 0xb1, 0xb2, 0xb3]), Nonce::N96([0xa5; 12]));
        let at_b = udp_packet(ilnp_addr(P, NB), ilnp_addr(P, NA), &[3u8; 1400]);
        let wire = to_wire(&at_b, P, LB, LA, &nonce_b, Csum::Complete).unwrap();
        let (at_a, _) = to_identifier(&wire, P, Csum::Complete).unwrap();
        let err = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), 1, 4, 0, &at_a);
        let w = icmp_error_to_wire(&err, P, LA, LB, &nonce_a, &nonce_b).unwrap();
        assert_eq!(w.len(), 1280);
        let wp = ipv6::Packet::new_checked(&w[..]).unwrap();
        assert_eq!((wp.src(), wp.dst()), (ilnp_addr(LA, NA), ilnp_addr(LB, NB)));
        assert_eq!(destopts::find_nonce(&w).unwrap().unwrap().nonce, nonce_a);
        assert!(checksum::verify_icmpv6(&wp.src(), &wp.dst(), &w[56..]));
        // the quote is what B sent, byte for byte, as far as it goes
        assert_eq!(&w[64..], &wire[..1280 - 64]);
        // and B's side matches it to its own nonce and translates it for its stack
        let meta = icmp_error_meta(&w).unwrap();
        assert_eq!((meta.nonce, meta.local_nid, meta.peer_nid, meta.local_loc), (nonce_b, NB, NA, LB));
        let (t, _) = icmp_error_to_identifier(&w, P).unwrap();
        assert_eq!(&t[48..], &at_b[..t.len() - 48]);
        // Parameter Problem pointer past the fixed header moves by the inserted header
        let pp = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), 4, 0, 46, &at_a);
        let w = icmp_error_to_wire(&pp, P, LA, LB, &nonce_a, &nonce_b).unwrap();
        assert_eq!(&w[60..64], &54u32.to_be_bytes());
        // refused: a bad checksum, a quote not in identifier form, not an error
        let mut bad = err.clone();
        bad[60] ^= 1;
        assert_eq!(icmp_error_to_wire(&bad, P, LA, LB, &nonce_a, &nonce_b).unwrap_err(), Error::BadChecksum);
        let foreign = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), 1, 4, 0, &wire);
        assert_eq!(icmp_error_to_wire(&foreign, P, LA, LB, &nonce_a, &nonce_b).unwrap_err(), Error::NotIdentifierForm);
        assert!(icmp_error_to_wire(&at_a, P, LA, LB, &nonce_a, &nonce_b).is_err());
        // found by the fuzzer: a quote that is not IPv6 would give the peer an unmatchable error
        let mut v4 = at_a.clone();
        v4[0] = 0x45;
        let e = icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), 1, 4, 0, &v4);
        assert_eq!(icmp_error_to_wire(&e, P, LA, LB, &nonce_a, &nonce_b).unwrap_err(), Error::NotIpv6);
        for cut in 0..err.len() {
            let _ = icmp_error_to_wire(&err[..cut], P, LA, LB, &nonce_a, &nonce_b);
        }
    }

    #[test]
    fn garbage_never_panics() {
        let id = udp_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), b"abcdefgh");
        let w = to_wire(&id, P, LA, LB, &Nonce::N32([1, 2, 3, 4]), Csum::Complete).unwrap();
        for cut in 0..w.len() {
            let _ = to_identifier(&w[..cut], P, Csum::Complete);
            let _ = icmp_error_to_identifier(&w[..cut], P);
            let _ = parse_lu_packet(&w[..cut]);
            let _ = to_wire(&id[..cut.min(id.len())], P, LA, LB, &Nonce::N32([0; 4]), Csum::Partial);
        }
        for i in 0..w.len() {
            let mut m = w.clone();
            m[i] ^= 0xff;
            let _ = to_identifier(&m, P, Csum::Complete);
            let _ = icmp_error_to_identifier(&m, P);
        }
    }
}
