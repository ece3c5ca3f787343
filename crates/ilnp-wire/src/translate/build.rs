//! Packets the node originates: Locator Updates and their acks, nonce-only
//! packets, Destination Unreachable for a local application (received LUs are
//! parsed by `classify`). ICMPv6 messages are emitted by `icmpv6::Repr`, the
//! IPv6 + nonce layout by `destopts::packet`.

use crate::destopts::{self, Nonce};
use crate::error::Error;
use crate::icmpv6::{self, LocatorUpdate};
use crate::ipv6;
use std::net::Ipv6Addr;

/// An ICMPv6 Destination Unreachable for a local application, quoting its
/// identifier-form packet `orig` (from orig's destination to orig's source), so a
/// connecting socket fails at once instead of hanging.
pub fn unreachable_to_app(orig: &[u8], code: u8) -> Result<Vec<u8>, Error> {
    let p = ipv6::Packet::new_checked(orig)?;
    Ok(icmpv6::error_packet(p.dst(), p.src(), icmpv6::Icmpv6Type::DEST_UNREACH, code, 0, p.packet_bytes()))
}

/// A complete wire-form Locator Update packet: IPv6 + DestOpts(nonce) + ICMPv6 LU,
/// ICMPv6 checksum over the full addresses (RFC 6743 §2).
pub fn lu_packet(src: Ipv6Addr, dst: Ipv6Addr, nonce: &Nonce, lu: &LocatorUpdate) -> Result<Vec<u8>, Error> {
    lu.packet(src, dst, nonce)
}

/// A wire-form packet carrying only our nonce (Next Header = No Next Header):
/// how a responder tells the initiator its nonce when the session has nothing
/// else to send back (RFC 6741 §13.1), so that later Locator Updates verify.
pub fn nonce_only_packet(src: Ipv6Addr, dst: Ipv6Addr, nonce: &Nonce) -> Vec<u8> {
    destopts::packet(src, dst, 64, Some(nonce), ipv6::NextHeader::NONE, &[])
}
