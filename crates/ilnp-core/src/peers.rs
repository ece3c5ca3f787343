//! Static peer database records: correspondents the initiator can reach before DNS
//! support exists. The core takes `PeerRecord`s; the files they come from are
//! ilnpd's configuration (`ilnpd::config::peers`).
//!
//! Every way a record comes in (peer files, `ilnpctl peer add`) checks it with
//! [`PeerRecord::check`] (or [`PeerRecord::check_unicast`] where this host's NID is
//! not known yet); the NID and locator rules themselves are ilnp-wire's `unicast`.

use crate::event::ser_display;
use core::fmt;
use ilnp_wire::{Locator, Nid};
use ilnp_wire::{LocatorError, NidError};
use serde::Serialize;
use std::time::Instant;

/// One correspondent: its NID and locators with preferences (lower preferred).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeerRecord {
    pub name: String,
    #[serde(serialize_with = "ser_display")]
    pub nid: Nid,
    pub locators: Vec<PeerLocator>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PeerLocator {
    #[serde(rename = "l64", serialize_with = "ser_display")]
    pub loc: Locator,
    pub pref: u16,
}

/// Why a peer record was refused; the text names the field and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerError {
    /// the NID cannot identify one node (ilnp-wire's rules)
    Nid(NidError),
    /// a locator cannot say where a node is (ilnp-wire's rules)
    Locator(LocatorError),
    /// a peer needs somewhere to send to
    NoLocators,
    /// our own NID: a packet to it would be for us
    OwnNid(Nid),
    /// our identifier prefix: it names no network, it never leaves this host
    IdentifierPrefix(Locator),
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerError::Nid(e) => write!(f, "nid {e}"),
            PeerError::Locator(e) => write!(f, "l64 {e}"),
            PeerError::NoLocators => write!(f, "no locators"),
            PeerError::OwnNid(n) => write!(f, "nid {n}: this host's own NID; a peer is another node"),
            PeerError::IdentifierPrefix(l) => write!(
                f,
                "l64 {l}: this host's identifier prefix, not a locator (identifier addresses never reach the wire)"
            ),
        }
    }
}

impl std::error::Error for PeerError {}

impl PeerRecord {
    /// What can be checked without knowing this host: a unicast NID (ilnp-wire
    /// `Nid::check_unicast`), at least one locator, each routable
    /// (`Locator::check_unicast`). The peer files use this at load.
    pub fn check_unicast(&self) -> Result<(), PeerError> {
        self.nid.check_unicast().map_err(PeerError::Nid)?;
        if self.locators.is_empty() {
            return Err(PeerError::NoLocators);
        }
        for l in &self.locators {
            l.loc.check_unicast().map_err(PeerError::Locator)?;
        }
        Ok(())
    }

    /// [`PeerRecord::check_unicast`], and not this host: not our own NID, no locator
    /// equal to our identifier prefix.
    pub fn check(&self, local_nid: Nid, id_prefix: Locator) -> Result<(), PeerError> {
        self.check_unicast()?;
        if self.nid == local_nid {
            return Err(PeerError::OwnNid(self.nid));
        }
        if let Some(l) = self.locators.iter().find(|l| l.loc == id_prefix) {
            return Err(PeerError::IdentifierPrefix(l.loc));
        }
        Ok(())
    }
}

/// Where a peer record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerSource {
    /// peer file or `ilnpctl peer add`
    Static,
    /// a DNS answer (NID + L64/LP records)
    Dns,
}

/// Static peer plus what we learned about it.
#[derive(Clone, Debug, Serialize)]
pub struct PeerInfo {
    #[serde(flatten)]
    pub record: PeerRecord,
    /// the peer answered our nonce with a Parameter Problem (RFC 6744 §6)
    pub non_ilnp: bool,
    pub source: PeerSource,
    /// DNS records: when the record stops feeding new sessions (`dns.rs`)
    #[serde(skip)]
    pub expires: Option<Instant>,
    /// DNS records: the TTL of the answer
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<u32>,
    /// our last Locator Update to this peer was never acknowledged and nothing
    /// nonce-verified came back since: DNS may re-target the session (`dns.rs`)
    #[serde(skip)]
    pub lu_failed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Nid = Nid(0x0200_00ff_fe00_000c);
    const ID_PREFIX: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;

    fn rec(nid: u64, locs: &[u64]) -> PeerRecord {
        PeerRecord {
            name: "mn".into(),
            nid: Nid(nid),
            locators: locs.iter().map(|&l| PeerLocator { loc: Locator(l), pref: 10 }).collect(),
        }
    }

    #[test]
    fn a_good_peer_passes() {
        let r = rec(0x0200_00ff_fe00_000d, &[0x2001_0db8_000b_0000, 0x2001_0db8_000c_0000]);
        assert_eq!(r.check_unicast(), Ok(()));
        assert_eq!(r.check(ME, ID_PREFIX), Ok(()));
    }

    #[test]
    fn nid_rules_come_from_the_wire_crate() {
        let l = &[0x2001_0db8_000b_0000];
        let e = rec(0x0300_0000_0000_0001, l).check(ME, ID_PREFIX).unwrap_err();
        assert_eq!(e, PeerError::Nid(NidError::Group(Nid(0x0300_0000_0000_0001))));
        assert_eq!(
            e.to_string(),
            "nid 0300:0000:0000:0001: the group (g) bit is set; a unicast NID needs g = 0 (RFC 6740 §3.1.2)"
        );
        assert_eq!(rec(0, l).check_unicast(), Err(PeerError::Nid(NidError::Zero)));
        assert_eq!(rec(u64::MAX, l).check_unicast(), Err(PeerError::Nid(NidError::AllOnes)));
    }

    #[test]
    fn locator_rules_come_from_the_wire_crate() {
        let n = 0x0200_00ff_fe00_000d;
        let e = rec(n, &[0x2001_0db8_000b_0000, 0xff02 << 48]).check_unicast().unwrap_err();
        assert_eq!(e, PeerError::Locator(LocatorError::Multicast(Locator(0xff02 << 48))));
        assert!(e.to_string().starts_with("l64 ff02:0000:0000:0000: a multicast prefix"), "{e}");
        assert_eq!(
            rec(n, &[0xfe80 << 48]).check_unicast(),
            Err(PeerError::Locator(LocatorError::LinkLocal(Locator(0xfe80 << 48))))
        );
        assert_eq!(rec(n, &[0]).check_unicast(), Err(PeerError::Locator(LocatorError::Unspecified)));
        assert_eq!(rec(n, &[]).check_unicast(), Err(PeerError::NoLocators));
    }

    #[test]
    fn our_own_nid_is_not_a_peer() {
        let r = rec(ME.0, &[0x2001_0db8_000b_0000]);
        assert_eq!(r.check_unicast(), Ok(()), "only the host knows its NID");
        let e = r.check(ME, ID_PREFIX).unwrap_err();
        assert_eq!(e, PeerError::OwnNid(ME));
        assert_eq!(e.to_string(), "nid 0200:00ff:fe00:000c: this host's own NID; a peer is another node");
    }

    #[test]
    fn our_identifier_prefix_is_not_a_locator() {
        let r = rec(0x0200_00ff_fe00_000d, &[0x2001_0db8_000b_0000, ID_PREFIX.0]);
        assert_eq!(r.check_unicast(), Ok(()));
        let e = r.check(ME, ID_PREFIX).unwrap_err();
        assert_eq!(e, PeerError::IdentifierPrefix(ID_PREFIX));
        assert!(e.to_string().starts_with("l64 fd69:6c6e:7000:0000: this host's identifier prefix"), "{e}");
        // another host's identifier prefix may be a routed ULA here
        assert_eq!(r.check(ME, Locator(0xfd00_0000_0000_0000)), Ok(()));
    }
}
