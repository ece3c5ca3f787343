//! Data packets: identifier form ⇄ wire form.

use super::{adjust_checksum, identifier_nids, pseudo_addrs_rule, Csum};
use crate::addr::{ilnp_addr, split_addr, Locator, Nid};
use crate::checksum::{self, ChecksumRule};
use crate::destopts::{self, Nonce, NonceHeader};
use crate::error::Error;
use crate::ipv6::{self, NextHeader};
use std::net::Ipv6Addr;

/// What a wire-form ILNPv6 packet said about its endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireMeta {
    pub src_loc: Locator,
    pub src_nid: Nid,
    pub dst_loc: Locator,
    pub dst_nid: Nid,
    pub nonce: Nonce,
    /// upper-layer protocol
    pub proto: NextHeader,
}

/// Rewrites the upper-layer checksum of `pkt` (whose addresses were `old_src/old_dst`
/// and are now those in its header) according to the ILNP rules.
/// `old_wire` / `new_wire`: whether the old / new form is the wire form
/// (transport pseudo-header with locators zeroed).
pub(super) fn fix_upper_checksum(
    pkt: &mut [u8],
    old_src: Ipv6Addr,
    old_dst: Ipv6Addr,
    old_wire: bool,
    new_wire: bool,
    csum: Csum,
) -> Result<(), Error> {
    let rule = |w: bool| w.then_some(ChecksumRule::Rfc6741);
    fix_upper_checksum_rule(pkt, old_src, old_dst, rule(old_wire), rule(new_wire), csum)
}

/// `fix_upper_checksum` with the wire form's rule: `None` = identifier form.
pub(super) fn fix_upper_checksum_rule(
    pkt: &mut [u8],
    old_src: Ipv6Addr,
    old_dst: Ipv6Addr,
    old_wire: Option<ChecksumRule>,
    new_wire: Option<ChecksumRule>,
    csum: Csum,
) -> Result<(), Error> {
    let ul = ipv6::upper_layer_info(pkt)?;
    let (proto, off) = (ul.proto, ul.offset);
    let Some(field) = checksum::field_offset(proto) else { return Ok(()) };
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
    let at = off + field;
    let new = pseudo_addrs_rule(proto, new_src, new_dst, new_wire);
    if csum == Csum::Partial && proto != NextHeader::ICMPV6 {
        // ICMPv6 is adjusted, never recomputed, so a corrupt checksum stays corrupt
        checksum::write_field(pkt, at, 0);
        let c = checksum::compute(&new.0, &new.1, proto, &pkt[off..end]);
        let c = if proto == NextHeader::UDP && c == 0 { 0xffff } else { c };
        checksum::write_field(pkt, at, c);
        return Ok(());
    }
    adjust_checksum(pkt, at, proto, pseudo_addrs_rule(proto, old_src, old_dst, old_wire), new);
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
    to_wire_rule(pkt, id_prefix, src_loc, dst_loc, nonce, csum, ChecksumRule::Rfc6741)
}

/// `to_wire` for a correspondent whose TCP/UDP checksums follow `rule`.
pub fn to_wire_rule(
    pkt: &[u8],
    id_prefix: Locator,
    src_loc: Locator,
    dst_loc: Locator,
    nonce: &Nonce,
    csum: Csum,
    rule: ChecksumRule,
) -> Result<Vec<u8>, Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let (sn, dn) = identifier_nids(p.src(), p.dst(), id_prefix)?;
    let hlen = destopts::header_len(nonce.len());
    let payload = p.payload();
    let new_plen = payload.len() + hlen;
    if new_plen > u16::MAX as usize {
        return Err(Error::Malformed("packet too large for a nonce header"));
    }
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + new_plen);
    out.extend_from_slice(&p.packet_bytes()[..ipv6::HEADER_LEN]);
    destopts::emit_nonce_header(p.next_header(), nonce, &mut out);
    out.extend_from_slice(payload);
    {
        let mut q = ipv6::Packet::new_checked(&mut out[..]).map_err(|_| Error::Truncated)?;
        q.set_payload_len(new_plen as u16);
        q.set_next_header(NextHeader::DSTOPTS);
        q.set_src(ilnp_addr(src_loc, sn));
        q.set_dst(ilnp_addr(dst_loc, dn));
    }
    fix_upper_checksum_rule(&mut out, p.src(), p.dst(), None, Some(rule), csum)?;
    Ok(out)
}

/// Wire form → identifier form (`Data::to_identifier`): strip our DestOpts header,
/// rewrite both addresses into the identifier prefix, fix checksums. Of a checked
/// packet whose nonce header `nh` holds only the nonce.
pub(crate) fn identifier_form(
    p: &ipv6::Packet<&[u8]>,
    nh: &NonceHeader,
    id_prefix: Locator,
    csum: Csum,
    rule: ChecksumRule,
) -> Result<(Vec<u8>, WireMeta), Error> {
    let (src_loc, src_nid) = split_addr(p.src());
    let (dst_loc, dst_nid) = split_addr(p.dst());
    let body = p.payload().get(nh.header_len..).ok_or(Error::Truncated)?;
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + body.len());
    out.extend_from_slice(&p.packet_bytes()[..ipv6::HEADER_LEN]);
    out.extend_from_slice(body);
    {
        let mut q = ipv6::Packet::new_quoted(&mut out[..])?;
        q.set_payload_len(body.len() as u16);
        q.set_next_header(nh.next_header);
        q.set_src(ilnp_addr(id_prefix, src_nid));
        q.set_dst(ilnp_addr(id_prefix, dst_nid));
    }
    let (proto, _) = ipv6::upper_layer(&out)?;
    fix_upper_checksum_rule(&mut out, p.src(), p.dst(), Some(rule), None, csum)?;
    Ok((out, WireMeta { src_loc, src_nid, dst_loc, dst_nid, nonce: nh.nonce, proto }))
}

/// A first fragment whose nonce header `nh` follows the Fragment header → identifier
/// form: the header stays (its length is part of the fragmentable part, so removing
/// it would shift every later fragment's offset), its options become padding the
/// kernel skips after reassembly (`destopts::fill`: Linux refuses a PadN over 7
/// bytes, a 16-byte header's 14); addresses and checksum as `identifier_form`.
pub(crate) fn identifier_form_padded(
    p: &ipv6::Packet<&[u8]>,
    nh: &NonceHeader,
    id_prefix: Locator,
    csum: Csum,
    rule: ChecksumRule,
) -> Result<(Vec<u8>, WireMeta), Error> {
    let (src_loc, src_nid) = split_addr(p.src());
    let (dst_loc, dst_nid) = split_addr(p.dst());
    let mut out = p.packet_bytes().to_vec();
    // the header starts 2 bytes before its first option; the nonce option is its first
    // or follows pads: pad everything after the two header bytes
    let hdr = ipv6::HEADER_LEN + ipv6::FRAGMENT_HEADER_LEN;
    let opts = out.get_mut(hdr + 2..hdr + nh.header_len).ok_or(Error::Truncated)?;
    destopts::fill(opts);
    {
        let mut q = ipv6::Packet::new_checked(&mut out[..])?;
        q.set_src(ilnp_addr(id_prefix, src_nid));
        q.set_dst(ilnp_addr(id_prefix, dst_nid));
    }
    let proto = ipv6::upper_layer_info(&out)?.proto;
    fix_upper_checksum_rule(&mut out, p.src(), p.dst(), Some(rule), None, csum)?;
    Ok((out, WireMeta { src_loc, src_nid, dst_loc, dst_nid, nonce: nh.nonce, proto }))
}

/// A later fragment (no transport header, no nonce) → identifier form: addresses only.
pub(crate) fn later_fragment_identifier_form(p: &ipv6::Packet<&[u8]>, id_prefix: Locator) -> Result<Vec<u8>, Error> {
    let (_, src_nid) = split_addr(p.src());
    let (_, dst_nid) = split_addr(p.dst());
    let mut out = p.packet_bytes().to_vec();
    let mut q = ipv6::Packet::new_checked(&mut out[..])?;
    q.set_src(ilnp_addr(id_prefix, src_nid));
    q.set_dst(ilnp_addr(id_prefix, dst_nid));
    Ok(out)
}
