//! Node Identifiers, Locators and the 128-bit addresses made of them (RFC 6740 §3),
//! with their RFC 6742 presentation forms.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4};

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
    /// [`DEFAULT_PORT`]).
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(v) = parse_groups(s) {
            return Ok(Locator(v));
        }
        if let Some(rest) = s.strip_prefix("v4:") {
            return parse_v4_path(rest).map_err(|e| format!("{s:?}: {e}"));
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

/// Nid and Locator in serde as their display text (`0200:00ff:fe00:000d`,
/// `2001:0db8:000b:0000`, `v4:A.B.C.D:PORT`), read back with `FromStr`; map keys too.
#[cfg(feature = "serde")]
mod text_serde {
    use super::{Locator, Nid};

    macro_rules! as_text {
        ($ty:ty) => {
            impl serde::Serialize for $ty {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.collect_str(self)
                }
            }
            impl<'de> serde::Deserialize<'de> for $ty {
                fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                    let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                    s.parse().map_err(serde::de::Error::custom)
                }
            }
        };
    }
    as_text!(Nid);
    as_text!(Locator);
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

// The v4 path's locator (`v4path`): `0004:AABB:CCDD:PPPP`, the 16-bit marker `0x0004`,
// the IPv4 address, the UDP port.

/// The top 16 bits of every v4-path locator.
pub const MARK: u16 = 0x0004;
/// The UDP port ILNPv6-in-UDP is sent to and from unless configured otherwise.
pub const DEFAULT_PORT: u16 = 6740;
impl Locator {
    /// The locator naming the UDP/IPv4 path to `addr`:`port`.
    pub fn v4_path(addr: Ipv4Addr, port: u16) -> Locator {
        Locator((MARK as u64) << 48 | (u32::from(addr) as u64) << 16 | port as u64)
    }

    /// The IPv4 address and UDP port this locator names, if it is a v4 path.
    pub fn as_v4_path(self) -> Option<SocketAddrV4> {
        self.is_v4_path().then(|| SocketAddrV4::new(Ipv4Addr::from((self.0 >> 16) as u32), self.0 as u16))
    }

    pub fn is_v4_path(self) -> bool {
        (self.0 >> 48) as u16 == MARK
    }

    /// Both locators name paths of one family (a packet from one to the other can
    /// be sent: IPv6 to IPv6, UDP/IPv4 to UDP/IPv4).
    pub fn same_family(self, other: Locator) -> bool {
        self.is_v4_path() == other.is_v4_path()
    }
}

/// `A.B.C.D[:PORT]` (after the `v4:` of the presentation form).
fn parse_v4_path(s: &str) -> Result<Locator, String> {
    let (addr, port) = match s.split_once(':') {
        Some((a, p)) => (a, p.parse::<u16>().map_err(|_| format!("port {p:?} is not a number 0-65535"))?),
        None => (s, DEFAULT_PORT),
    };
    let addr: Ipv4Addr = addr.parse().map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
    if addr.is_unspecified() || addr.is_multicast() || addr.is_broadcast() || addr.is_loopback() {
        return Err(format!("{addr} cannot carry a path (unspecified, loopback, multicast or broadcast)"));
    }
    if port == 0 {
        return Err("port 0".to_string());
    }
    Ok(Locator::v4_path(addr, port))
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

    #[test]
    fn encoding_round_trips_and_reads_as_written() {
        let l = Locator::v4_path(Ipv4Addr::new(192, 0, 2, 10), 6740);
        assert_eq!(l.0, 0x0004_c000_020a_1a54);
        assert_eq!(l.as_v4_path(), Some("192.0.2.10:6740".parse().unwrap()));
        assert_eq!(l.to_string(), "v4:192.0.2.10:6740");
        assert_eq!("v4:192.0.2.10:6740".parse::<Locator>(), Ok(l));
        assert_eq!("v4:192.0.2.10".parse::<Locator>(), Ok(l));
        // the four-group form of the same value is the same locator
        assert_eq!("0004:c000:020a:1a54".parse::<Locator>(), Ok(l));
        assert_eq!(Locator::parse_unicast("v4:192.0.2.10:6740"), Ok(l));
        assert!(!Locator(0x2001_0db8_0001_0000).is_v4_path());
        assert!(l.same_family(Locator::v4_path(Ipv4Addr::new(10, 0, 0, 1), 1)));
        assert!(!l.same_family(Locator(0x2001_0db8_0001_0000)));
    }

    #[test]
    fn bad_text_names_the_part() {
        for (s, want) in [
            ("v4:192.0.2.300", "\"192.0.2.300\" is not an IPv4 address"),
            ("v4:192.0.2.1:x", "port \"x\" is not a number"),
            ("v4:127.0.0.1", "cannot carry a path"),
            ("v4:224.0.0.1:5", "cannot carry a path"),
            ("v4:192.0.2.1:0", "port 0"),
        ] {
            let e = s.parse::<Locator>().unwrap_err();
            assert!(e.contains(want) && e.contains(s), "{s}: {e}");
        }
    }
}
