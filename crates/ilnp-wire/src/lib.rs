//! ILNPv6 wire formats (RFC 6740–6744): zero-copy views and builders.
//!
//! Everything that knows a byte offset lives in this crate; protocol decisions
//! live in `ilnp-core`.

use core::fmt;
use std::net::Ipv6Addr;

/// The shared impls of a newtype over a u8 protocol number (`ipv6::NextHeader`,
/// `icmpv6::Icmpv6Type`): `name()` for the known values, `From` both ways, `Debug`
/// as `Type::CONST(n)` and `Display` as the name (or the number).
macro_rules! named_u8 {
    ($ty:ident { $($konst:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The value's name, for the values this crate knows.
            pub fn name(self) -> Option<&'static str> {
                Some(match self {
                    $(Self::$konst => $name,)+
                    _ => return None,
                })
            }

            fn const_name(self) -> Option<&'static str> {
                Some(match self {
                    $(Self::$konst => stringify!($konst),)+
                    _ => return None,
                })
            }
        }

        impl From<u8> for $ty {
            fn from(v: u8) -> Self {
                $ty(v)
            }
        }

        impl From<$ty> for u8 {
            fn from(v: $ty) -> u8 {
                v.0
            }
        }

        impl core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.const_name() {
                    Some(n) => write!(f, concat!(stringify!($ty), "::{}({})"), n, self.0),
                    None => write!(f, concat!(stringify!($ty), "({})"), self.0),
                }
            }
        }

        impl core::fmt::Display for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}", self.0),
                }
            }
        }
    };
}

pub mod checksum;
pub mod classify;
pub mod destopts;
pub mod icmpv6;
pub mod ipv6;
pub mod l4;
pub mod rdata;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod translate;
pub mod unicast;
pub mod v4path;

pub use classify::{classify, ClassifyError, Packet};
pub use unicast::{LocatorError, LocatorPref, LocatorPrefError, NidError};

/// Why a packet or record could not be parsed or built. Parsers never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Truncated,
    NotIpv6,
    Malformed(&'static str),
    MoreThanOneNonce,
    BadNonceLength(u8),
    NoNonce,
    UnsupportedOptions,
    NotIdentifierForm,
    BadChecksum,
    LuNoLocators,
    LuLengthMismatch {
        num_locs: u8,
        len: usize,
    },
    UnknownLuOperation {
        code: u8,
        operation: u8,
    },
    /// a nonce option running past the end of its header: FreeBSD ILNP6 reflects a
    /// 96-bit nonce in an 8-byte header (`ilnp6_nonce_output_mbuf` sets
    /// `ip6d_len = 0`), so only 4 of the 12 nonce bytes are on the wire
    NonceOverrun,
}

impl Error {
    /// Stable snake_case name, used as the counter / drop reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::NotIpv6 => "not_ipv6",
            Error::Malformed(_) => "malformed",
            Error::MoreThanOneNonce => "drop_multi_nonce",
            Error::BadNonceLength(_) => "bad_nonce_length",
            Error::NoNonce => "no_nonce",
            Error::UnsupportedOptions => "unsupported_options",
            Error::NotIdentifierForm => "not_identifier_form",
            Error::BadChecksum => "bad_checksum",
            Error::LuNoLocators => "lu_no_locators",
            Error::LuLengthMismatch { .. } => "lu_length_mismatch",
            Error::UnknownLuOperation { .. } => "lu_unknown_operation",
            Error::NonceOverrun => "nonce_overrun",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => write!(f, "truncated packet"),
            Error::NotIpv6 => write!(f, "not an IPv6 packet"),
            Error::Malformed(w) => write!(f, "malformed: {w}"),
            Error::MoreThanOneNonce => write!(f, "more than one nonce option (authentication failed)"),
            Error::BadNonceLength(l) => write!(f, "nonce option of {l} bytes (want 4 or 12)"),
            Error::NoNonce => write!(f, "no nonce option"),
            Error::UnsupportedOptions => write!(f, "destination options other than the nonce"),
            Error::NotIdentifierForm => write!(f, "addresses are not in the identifier prefix"),
            Error::BadChecksum => write!(f, "bad ICMPv6 checksum"),
            Error::LuNoLocators => write!(f, "Locator Update with Num of Locs = 0"),
            Error::LuLengthMismatch { num_locs, len } => {
                write!(f, "Locator Update says {num_locs} locators but is {len} bytes long")
            }
            Error::UnknownLuOperation { code, operation } => {
                write!(f, "Locator Update with code {code} operation {operation}")
            }
            Error::NonceOverrun => write!(f, "nonce option runs past its Destination Options header"),
        }
    }
}

impl std::error::Error for Error {}

/// 64-bit ILNPv6 Node Identifier (lower half of an ILNPv6 address).
/// Held as a host-order integer; on the wire it is big-endian.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Nid(pub u64);

/// 64-bit ILNPv6 Locator (L64, upper half of an ILNPv6 address).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Locator(pub u64);

/// The identifier prefix P (`fd69:6c6e:7000::/64`, "iln" in a unique local prefix) that
/// identifier addresses `P:NID` are in unless ilnpd's `identifier_prefix` says otherwise;
/// also what the tests, the simulator and the fuzz targets use.
pub const DEFAULT_IDENTIFIER_PREFIX: Locator = Locator(0xfd69_6c6e_7000_0000);

/// Four colon-separated groups of four hex digits (RFC 6742 §3 presentation form).
fn fmt_groups(v: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{:04x}:{:04x}:{:04x}:{:04x}", (v >> 48) & 0xffff, (v >> 32) & 0xffff, (v >> 16) & 0xffff, v & 0xffff)
}

/// Parses `xxxx:xxxx:xxxx:xxxx` (exactly four groups, no `::`).
fn parse_groups(s: &str) -> Result<u64, String> {
    let groups: Vec<&str> = s.split(':').collect();
    if groups.len() != 4 || s.contains("::") {
        return Err(format!("{s:?}: expected four colon-separated 16-bit hex groups"));
    }
    let mut v = 0u64;
    for g in groups {
        if g.is_empty() || g.len() > 4 || !g.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("{s:?}: group {g:?} is not 1-4 hex digits"));
        }
        let x = u16::from_str_radix(g, 16).map_err(|_| format!("{s:?}: group {g:?} is not hex"))?;
        v = (v << 16) | x as u64;
    }
    Ok(v)
}

impl Nid {
    /// RFC 4291 modified EUI-64 from a 48-bit MAC: insert ff:fe, invert the u bit.
    pub fn from_mac(mac: [u8; 6]) -> Nid {
        let b = [mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]];
        Nid(u64::from_be_bytes(b))
    }
    pub fn to_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }
    pub fn from_bytes(b: [u8; 8]) -> Nid {
        Nid(u64::from_be_bytes(b))
    }
    /// u bit (RFC 4291 App. A): 1 = universal scope.
    pub fn is_universal(self) -> bool {
        self.to_bytes()[0] & 0x02 != 0
    }
    /// g bit: must be 0 for a unicast NID (RFC 6740 §3.1.2).
    pub fn is_group(self) -> bool {
        self.to_bytes()[0] & 0x01 != 0
    }
}

impl Locator {
    pub fn to_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }
    pub fn from_bytes(b: [u8; 8]) -> Locator {
        Locator(u64::from_be_bytes(b))
    }
    /// The locator as an IPv6 /64 prefix (lower half zero).
    pub fn prefix(self) -> Ipv6Addr {
        ilnp_addr(self, Nid(0))
    }

    /// RFC 6742's four groups, whatever the value (`Display` writes a v4 path as
    /// `v4:A.B.C.D:PORT`; DNS presentation must not).
    pub fn groups(self) -> impl fmt::Display {
        struct G(u64);
        impl fmt::Display for G {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt_groups(self.0, f)
            }
        }
        G(self.0)
    }
}

impl fmt::Display for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_groups(self.0, f)
    }
}
impl fmt::Debug for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nid({self})")
    }
}
impl fmt::Display for Locator {
    /// RFC 6742's four groups; a v4 path (`v4path`) as `v4:A.B.C.D:PORT`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_v4_path() {
            Some(a) => write!(f, "v4:{a}"),
            None => fmt_groups(self.0, f),
        }
    }
}
impl fmt::Debug for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Locator({self})")
    }
}
impl core::str::FromStr for Nid {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_groups(s).map(Nid)
    }
}
impl core::str::FromStr for Locator {
    type Err = String;
    /// Accepts the RFC 6742 form (`2001:0db8:0001:0000`) or an IPv6 prefix
    /// whose lower 64 bits are zero (`2001:db8:1::` or `2001:db8:1::/64`).
    /// A v4 path is written `v4:A.B.C.D[:PORT]` (`v4path`; the port defaults to
    /// `v4path::DEFAULT_PORT`).
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(v) = parse_groups(s) {
            return Ok(Locator(v));
        }
        if let Some(rest) = s.strip_prefix("v4:") {
            return v4path::parse(rest).map_err(|e| format!("{s:?}: {e}"));
        }
        let addr = s.strip_suffix("/64").unwrap_or(s);
        let a: Ipv6Addr = addr
            .parse()
            .map_err(|_| format!("{s:?}: not a locator (want xxxx:xxxx:xxxx:xxxx or an IPv6 /64 prefix)"))?;
        let (l, n) = split_addr(a);
        if n.0 != 0 {
            return Err(format!("{s:?}: lower 64 bits of a locator prefix must be zero"));
        }
        Ok(l)
    }
}

/// Value of an RFC 6744 Nonce option: 32-bit or 96-bit (both MUST be supported).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Nonce {
    N32([u8; 4]),
    N96([u8; 12]),
}

impl Nonce {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Nonce::N32(b) => b,
            Nonce::N96(b) => b,
        }
    }
    /// Builds a nonce from 4 or 12 bytes; any other length is not a valid nonce.
    pub fn from_slice(b: &[u8]) -> Option<Nonce> {
        match b.len() {
            4 => Some(Nonce::N32(b.try_into().ok()?)),
            12 => Some(Nonce::N96(b.try_into().ok()?)),
            _ => None,
        }
    }
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }
    /// Never true: a nonce has 4 or 12 bytes.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl fmt::Debug for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nonce(0x")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// Compose the 128-bit ILNPv6 address `L64:NID`.
pub fn ilnp_addr(loc: Locator, nid: Nid) -> Ipv6Addr {
    Ipv6Addr::from(((loc.0 as u128) << 64) | nid.0 as u128)
}

/// Split an IPv6 address into (upper 64, lower 64).
pub fn split_addr(a: Ipv6Addr) -> (Locator, Nid) {
    let v = u128::from(a);
    (Locator((v >> 64) as u64), Nid(v as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eui64_from_mac_sets_u_bit_for_universal_mac() {
        // 00:14:4f:20:ee:64 is universally administered (U/L bit 0) → u = 1.
        let n = Nid::from_mac([0x00, 0x14, 0x4f, 0x20, 0xee, 0x64]);
        assert_eq!(n.to_string(), "0214:4fff:fe20:ee64");
        assert!(n.is_universal());
        assert!(!n.is_group());
        // a locally administered MAC (veth) → u = 0
        let n = Nid::from_mac([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
        assert!(!n.is_universal());
    }

    #[test]
    fn addr_roundtrip() {
        let a: Ipv6Addr = "2001:db8:1:2:214:4fff:fe20:ee64".parse().unwrap();
        let (l, n) = split_addr(a);
        assert_eq!(l.to_string(), "2001:0db8:0001:0002");
        assert_eq!(ilnp_addr(l, n), a);
        assert_eq!("2001:db8:1:2::/64".parse::<Locator>().unwrap(), l);
        assert_eq!("2001:0db8:0001:0002".parse::<Locator>().unwrap(), l);
        assert!("2001:db8::1".parse::<Locator>().is_err());
        assert!("1::2:3".parse::<Nid>().is_err());
        // from_str_radix alone would take a sign
        assert!("+fff:0:0:0".parse::<Nid>().is_err());
        assert!("0:0:0:0:0".parse::<Nid>().is_err());
        assert_eq!("0:0:0:1".parse::<Nid>().unwrap(), Nid(1));
    }
}
