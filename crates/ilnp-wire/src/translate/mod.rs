//! Packet translation between the identifier form (what applications and the
//! kernel's transport see on `ilnp0`: `P::NID` addresses) and the wire form
//! (`L64:NID` addresses + the Nonce Destination Option), plus the ILNP packets
//! the daemon originates (Locator Updates, errors for applications).
//!
//! * [`data`]: data packets, identifier form ⇄ wire form (`to_wire`, `to_identifier`).
//! * [`icmp_error`]: ICMPv6 errors about wire-form packets, both directions.
//! * [`plain`]: data packets, identifier form ⇄ plain IPv6 (the fallback for a
//!   correspondent that does not speak ILNPv6: no nonce, full-address checksums).
//! * [`build`]: packets the node originates (LU, nonce-only, errors for the
//!   application) and the LU packet parser.
//!
//! Every public item is re-exported here (`translate::to_wire`...).
//!
//! Transport checksums: both forms differ only in the upper 64 bits of the
//! addresses; the wire rule zeroes them (RFC 6744 §3), so a complete checksum is
//! adjusted incrementally (RFC 1624). A partial checksum (virtio NEEDS_CSUM) is
//! completed from scratch. ICMPv6 checksums cover full addresses and are adjusted
//! incrementally too (a corrupt one stays corrupt).

pub mod build;
pub mod data;
pub mod icmp_error;
pub mod plain;
#[cfg(test)]
mod tests;

pub use build::{lu_packet, nonce_only_packet, unreachable_to_app};
pub use data::{to_wire, to_wire_rule, WireMeta};
pub use icmp_error::{quoted_nonce, QuotedMeta};
pub use plain::{from_plain, to_plain, PlainMeta};

use crate::checksum::{self, ChecksumRule};
use crate::ipv6::NextHeader;
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

/// The NIDs of a packet whose two addresses are both in identifier form
/// (`id_prefix::NID`); anything else is `NotIdentifierForm`.
fn identifier_nids(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    id_prefix: crate::addr::Locator,
) -> Result<(crate::addr::Nid, crate::addr::Nid), crate::error::Error> {
    let ((sl, sn), (dl, dn)) = (crate::addr::split_addr(src), crate::addr::split_addr(dst));
    if sl != id_prefix || dl != id_prefix {
        return Err(crate::error::Error::NotIdentifierForm);
    }
    Ok((sn, dn))
}

/// The addresses `proto`'s checksum covers in one form: the wire form's transport
/// rule zeroes the locators (RFC 6744 §3); ICMPv6, and everything in the
/// identifier form, covers the full addresses.
fn pseudo_addrs(proto: NextHeader, src: Ipv6Addr, dst: Ipv6Addr, wire: bool) -> (Ipv6Addr, Ipv6Addr) {
    pseudo_addrs_rule(proto, src, dst, wire.then_some(ChecksumRule::Rfc6741))
}

/// `pseudo_addrs` for a form: `None` the identifier form (full addresses), `Some(rule)`
/// the wire form under a correspondent's transport checksum rule.
fn pseudo_addrs_rule(
    proto: NextHeader,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    wire: Option<ChecksumRule>,
) -> (Ipv6Addr, Ipv6Addr) {
    if wire == Some(ChecksumRule::Rfc6741) && proto != NextHeader::ICMPV6 {
        (checksum::nid_only(&src), checksum::nid_only(&dst))
    } else {
        (src, dst)
    }
}

/// Adjusts the complete checksum field at `at` (of protocol `proto`) for a change
/// of the pseudo-header addresses from `old` to `new` (RFC 1624). UDP's "no
/// checksum" zero is left alone, and a computed zero is sent as 0xffff. A field
/// beyond the buffer (a cut quote) is left alone.
fn adjust_checksum(buf: &mut [u8], at: usize, proto: NextHeader, old: (Ipv6Addr, Ipv6Addr), new: (Ipv6Addr, Ipv6Addr)) {
    let Some(field) = checksum::read_field(buf, at) else { return };
    if proto == NextHeader::UDP && field == 0 {
        return;
    }
    let v = checksum::update(field, checksum::addr_pair_sum(&old.0, &old.1), checksum::addr_pair_sum(&new.0, &new.1));
    checksum::write_field(buf, at, if proto == NextHeader::UDP && v == 0 { 0xffff } else { v });
}
