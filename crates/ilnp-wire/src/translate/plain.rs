//! Data packets: identifier form ⇄ plain IPv6, for a correspondent that does not
//! speak ILNPv6 (the transparent fallback). The addresses become the peer's
//! `L64:NID` and ours, no Destination Options header is added or expected, and the
//! transport checksum covers the full addresses in both forms (ordinary IPv6), so
//! only the address change is adjusted.

use super::data::fix_upper_checksum;
use super::{identifier_nids, Csum};
use crate::addr::{ilnp_addr, split_addr, Locator, Nid};
use crate::error::Error;
use crate::ipv6;

/// The endpoints of a plain packet from a fallback correspondent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainMeta {
    pub src_loc: Locator,
    pub src_nid: Nid,
    pub dst_loc: Locator,
    pub dst_nid: Nid,
}

/// Identifier form → plain IPv6 `src_loc:NID → dst_loc:NID` (no nonce).
pub fn to_plain(
    pkt: &[u8],
    id_prefix: Locator,
    src_loc: Locator,
    dst_loc: Locator,
    csum: Csum,
) -> Result<Vec<u8>, Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let (sn, dn) = identifier_nids(p.src(), p.dst(), id_prefix)?;
    rewrite(p.packet_bytes(), src_loc, sn, dst_loc, dn, csum)
}

/// Plain IPv6 `L64:NID → L64:NID` → identifier form `P::NID → P::NID`.
pub fn from_plain(pkt: &[u8], id_prefix: Locator, csum: Csum) -> Result<(Vec<u8>, PlainMeta), Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    let (src_loc, src_nid) = split_addr(p.src());
    let (dst_loc, dst_nid) = split_addr(p.dst());
    let out = rewrite(p.packet_bytes(), id_prefix, src_nid, id_prefix, dst_nid, csum)?;
    Ok((out, PlainMeta { src_loc, src_nid, dst_loc, dst_nid }))
}

fn rewrite(bytes: &[u8], sl: Locator, sn: Nid, dl: Locator, dn: Nid, csum: Csum) -> Result<Vec<u8>, Error> {
    let mut out = bytes.to_vec();
    let (old_src, old_dst) = {
        let mut q = ipv6::Packet::new_checked(&mut out[..]).map_err(|_| Error::Truncated)?;
        let old = (q.src(), q.dst());
        q.set_src(ilnp_addr(sl, sn));
        q.set_dst(ilnp_addr(dl, dn));
        old
    };
    fix_upper_checksum(&mut out, old_src, old_dst, false, false, csum)?;
    Ok(out)
}
