//! Which NIDs and locators can name one node and where it is: the rules a peer's
//! identity must follow wherever it is typed (ilnpd's config file, its peer files,
//! `ilnpctl peer add`). One home, so every entry point refuses the same inputs with
//! the same words. What needs the local node's state (its own NID, its identifier
//! prefix) is `ilnp_core::PeerRecord::check`.
//!
//! Values are named in their canonical form (`0300:0000:0000:0001`); text that does
//! not parse is quoted as written.

use crate::addr::{Locator, Nid};
use core::fmt;
use std::net::Ipv6Addr;

/// Why a NID cannot identify one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NidError {
    /// not `xxxx:xxxx:xxxx:xxxx`; the parser's message, quoting the text
    Syntax(String),
    /// the Subnet-Router anycast interface identifier (RFC 4291 §2.6.1)
    Zero,
    /// every bit set, the group bit among them
    AllOnes,
    /// the g bit (RFC 6740 §3.1.2, RFC 4291 App. A) marks a group identifier
    Group(Nid),
}

impl fmt::Display for NidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NidError::Syntax(m) => f.write_str(m),
            NidError::Zero => write!(
                f,
                "{}: the all-zero NID is the Subnet-Router anycast identifier (RFC 4291 §2.6.1), not a node",
                Nid(0)
            ),
            NidError::AllOnes => write!(f, "{}: the all-ones NID names no single node", Nid(u64::MAX)),
            NidError::Group(n) => {
                write!(f, "{n}: the group (g) bit is set; a unicast NID needs g = 0 (RFC 6740 §3.1.2)")
            }
        }
    }
}

impl std::error::Error for NidError {}

impl Nid {
    /// The NID if it can identify one node: not zero, not all-ones, g bit clear.
    pub fn check_unicast(self) -> Result<Nid, NidError> {
        match self.0 {
            0 => Err(NidError::Zero),
            u64::MAX => Err(NidError::AllOnes),
            _ if self.is_group() => Err(NidError::Group(self)),
            _ => Ok(self),
        }
    }

    /// Parses `xxxx:xxxx:xxxx:xxxx` and checks it with [`Nid::check_unicast`].
    pub fn parse_unicast(s: &str) -> Result<Nid, NidError> {
        s.parse::<Nid>().map_err(NidError::Syntax)?.check_unicast()
    }
}

/// Why a locator cannot say where a node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocatorError {
    /// neither `xxxx:xxxx:xxxx:xxxx` nor an IPv6 /64 prefix; the parser's message,
    /// quoting the text
    Syntax(String),
    /// an IPv6 prefix with a length other than /64 (text, length as written)
    PrefixLength { text: String, len: String },
    /// `::/64`: the prefix of the unspecified and loopback addresses
    Unspecified,
    /// in ff00::/8
    Multicast(Locator),
    /// in fe80::/10
    LinkLocal(Locator),
}

impl fmt::Display for LocatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocatorError::Syntax(m) => f.write_str(m),
            LocatorError::PrefixLength { text, len } => {
                write!(f, "{text:?}: prefix length /{len}; a locator is a /64 prefix (the upper 64 bits of an address)")
            }
            LocatorError::Unspecified => write!(
                f,
                "{}: the all-zero locator is the prefix of the unspecified and loopback addresses (::/64), not a network",
                Locator(0)
            ),
            LocatorError::Multicast(l) => write!(f, "{l}: a multicast prefix (ff00::/8), not a locator"),
            LocatorError::LinkLocal(l) => {
                write!(f, "{l}: a link-local prefix (fe80::/10); a locator must be reachable beyond one link")
            }
        }
    }
}

impl std::error::Error for LocatorError {}

impl Locator {
    /// The locator if packets can be routed to it: not ::/64 (unspecified,
    /// loopback), not multicast (ff00::/8), not link-local (fe80::/10).
    pub fn check_unicast(self) -> Result<Locator, LocatorError> {
        let hi16 = (self.0 >> 48) as u16;
        if self.0 == 0 {
            Err(LocatorError::Unspecified)
        } else if hi16 >> 8 == 0xff {
            Err(LocatorError::Multicast(self))
        } else if hi16 & 0xffc0 == 0xfe80 {
            Err(LocatorError::LinkLocal(self))
        } else {
            Ok(self)
        }
    }

    /// Parses a locator as people write it — `2001:0db8:000b:0000` (RFC 6742),
    /// `2001:db8:b::` or `2001:db8:b::/64` — refusing any other prefix length, then
    /// checks it with [`Locator::check_unicast`].
    pub fn parse_unicast(s: &str) -> Result<Locator, LocatorError> {
        let text = match s.rsplit_once('/') {
            Some((addr, len)) if len != "64" && !addr.is_empty() && addr.parse::<Ipv6Addr>().is_ok() => {
                return Err(LocatorError::PrefixLength { text: s.to_string(), len: len.to_string() });
            }
            Some((addr, "64")) if addr.split(':').count() == 4 && !addr.contains("::") => addr,
            _ => s,
        };
        // a syntax error quotes the whole text
        let loc = text.parse::<Locator>().or_else(|_| s.parse::<Locator>()).map_err(LocatorError::Syntax)?;
        loc.check_unicast()
    }
}

/// A locator and its preference as typed (lower preferred, RFC 6742 §2.3):
/// `L64|PREF` (the seeds' hosts files), `L64/PREF` (RFC 6742 form only: four
/// groups), `PREFIX/64/PREF`, or `L64` / `PREFIX/64` alone (preference `default_pref`).
/// `text` is the locator as written (`2001:db8:b::/64`), `loc` its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatorPref {
    pub text: String,
    pub loc: Locator,
    pub pref: u16,
}

/// Why a `L64[/PREF]` or `L64|PREF` argument was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocatorPrefError {
    /// the locator part
    Locator(LocatorError),
    /// the preference part: (whole argument, preference text)
    Pref(String, String),
    /// not one of the forms
    Form(String),
}

impl fmt::Display for LocatorPrefError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocatorPrefError::Locator(e) => write!(f, "l64 {e}"),
            LocatorPrefError::Pref(arg, p) => write!(f, "{arg:?}: preference {p:?} is not a number 0-65535"),
            LocatorPrefError::Form(arg) => {
                write!(f, "{arg:?}: expected L64[/PREF] or L64|PREF, e.g. 2001:0db8:000b:0000/10 or 2001:db8:b::/64/10")
            }
        }
    }
}

impl std::error::Error for LocatorPrefError {}

impl LocatorPref {
    /// Parses one of the forms above. In `PREFIX/N` (an IPv6 prefix: has `::` or
    /// other than four groups) `N` is a prefix length and must be 64; in
    /// `xxxx:xxxx:xxxx:xxxx/N` it is the preference.
    pub fn parse(arg: &str, default_pref: u16) -> Result<LocatorPref, LocatorPrefError> {
        let pref = |p: &str| p.parse::<u16>().map_err(|_| LocatorPrefError::Pref(arg.to_string(), p.to_string()));
        let (text, pref) = if let Some((l, p)) = arg.split_once('|') {
            (l.to_string(), pref(p)?)
        } else {
            let parts: Vec<&str> = arg.split('/').collect();
            match parts.as_slice() {
                [l] if !l.is_empty() => (l.to_string(), default_pref),
                [l, p] if !l.is_empty() => {
                    let rfc6742 = l.split(':').count() == 4 && !l.contains("::");
                    if rfc6742 {
                        (l.to_string(), pref(p)?)
                    } else {
                        // a prefix length: parse_unicast says if it is not 64
                        (format!("{l}/{p}"), default_pref)
                    }
                }
                [l, n, p] if !l.is_empty() => (format!("{l}/{n}"), pref(p)?),
                _ => return Err(LocatorPrefError::Form(arg.to_string())),
            }
        };
        let loc = Locator::parse_unicast(&text).map_err(LocatorPrefError::Locator)?;
        Ok(LocatorPref { text, loc, pref })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicast_nids() {
        assert_eq!(Nid::parse_unicast("0200:00ff:fe00:000d"), Ok(Nid(0x0200_00ff_fe00_000d)));
        // u = 1 is fine, and so is any NID with g = 0
        assert_eq!(Nid::parse_unicast("0214:4fff:fe20:ee64"), Ok(Nid(0x0214_4fff_fe20_ee64)));
        assert_eq!(Nid::parse_unicast("0:0:0:1"), Ok(Nid(1)));
        assert_eq!(Nid::parse_unicast("fcff:ffff:ffff:ffff"), Ok(Nid(0xfcff_ffff_ffff_ffff)));
    }

    #[test]
    fn group_nid_is_refused_with_the_rfc() {
        let e = Nid::parse_unicast("0300:0000:0000:0001").unwrap_err();
        assert_eq!(e, NidError::Group(Nid(0x0300_0000_0000_0001)));
        assert_eq!(
            e.to_string(),
            "0300:0000:0000:0001: the group (g) bit is set; a unicast NID needs g = 0 (RFC 6740 §3.1.2)"
        );
        assert_eq!(Nid(0x0100_0000_0000_0000).check_unicast(), Err(NidError::Group(Nid(0x0100_0000_0000_0000))));
    }

    #[test]
    fn zero_and_all_ones_nids_are_refused() {
        let z = Nid::parse_unicast("0000:0000:0000:0000").unwrap_err();
        assert_eq!(z, NidError::Zero);
        assert!(z.to_string().starts_with("0000:0000:0000:0000: the all-zero NID"), "{z}");
        assert_eq!(Nid::parse_unicast("0:0:0:0"), Err(NidError::Zero));
        let o = Nid::parse_unicast("ffff:ffff:ffff:ffff").unwrap_err();
        assert_eq!(o, NidError::AllOnes, "all-ones is named as such, not as a group NID");
        assert!(o.to_string().starts_with("ffff:ffff:ffff:ffff: the all-ones NID"), "{o}");
    }

    #[test]
    fn nid_syntax_errors_keep_the_parser_message() {
        let e = Nid::parse_unicast("zz").unwrap_err();
        assert!(matches!(e, NidError::Syntax(_)));
        assert_eq!(e.to_string(), "\"zz\": expected four colon-separated 16-bit hex groups");
    }

    #[test]
    fn unicast_locators() {
        let b = Locator(0x2001_0db8_000b_0000);
        assert_eq!(Locator::parse_unicast("2001:0db8:000b:0000"), Ok(b));
        assert_eq!(Locator::parse_unicast("2001:db8:b::"), Ok(b));
        assert_eq!(Locator::parse_unicast("2001:db8:b::/64"), Ok(b));
        assert_eq!(Locator::parse_unicast("2001:db8:b:0:0:0:0:0/64"), Ok(b));
        assert_eq!(Locator::parse_unicast("2001:0db8:000b:0000/64"), Ok(b), "the RFC 6742 form with its /64");
        // ULA and other global prefixes are locators
        assert_eq!(Locator::parse_unicast("fd00:1::/64"), Ok(Locator(0xfd00_0001_0000_0000)));
        // fec0::/10 (deprecated site-local) is not fe80::/10
        assert_eq!(Locator::parse_unicast("fec0::/64"), Ok(Locator(0xfec0_0000_0000_0000)));
    }

    #[test]
    fn prefix_length_other_than_64_is_refused() {
        let e = Locator::parse_unicast("2001:db8:b::/48").unwrap_err();
        assert_eq!(e, LocatorError::PrefixLength { text: "2001:db8:b::/48".into(), len: "48".into() });
        assert_eq!(
            e.to_string(),
            "\"2001:db8:b::/48\": prefix length /48; a locator is a /64 prefix (the upper 64 bits of an address)"
        );
        assert!(matches!(Locator::parse_unicast("2001:db8:b::/128"), Err(LocatorError::PrefixLength { .. })));
        assert!(matches!(Locator::parse_unicast("2001:db8:b::/0"), Err(LocatorError::PrefixLength { .. })));
        assert!(matches!(Locator::parse_unicast("2001:db8:b::/x"), Err(LocatorError::PrefixLength { .. })));
    }

    #[test]
    fn special_prefixes_are_refused() {
        assert_eq!(Locator::parse_unicast("ff02::/64"), Err(LocatorError::Multicast(Locator(0xff02 << 48))));
        assert_eq!(
            Locator::parse_unicast("ff0e:0:0:1::"),
            Err(LocatorError::Multicast(Locator(0xff0e_0000_0000_0001)))
        );
        assert_eq!(Locator::parse_unicast("fe80::/64"), Err(LocatorError::LinkLocal(Locator(0xfe80 << 48))));
        assert_eq!(
            Locator::parse_unicast("febf:0:0:1::"),
            Err(LocatorError::LinkLocal(Locator(0xfebf_0000_0000_0001)))
        );
        assert_eq!(Locator::parse_unicast("::/64"), Err(LocatorError::Unspecified));
        assert_eq!(Locator::parse_unicast("0000:0000:0000:0000"), Err(LocatorError::Unspecified));
        // the loopback address's locator is the all-zero one; ::1 itself has host bits
        assert!(matches!(Locator::parse_unicast("::1"), Err(LocatorError::Syntax(_))));
        assert_eq!(
            Locator::parse_unicast("ff02::").unwrap_err().to_string(),
            "ff02:0000:0000:0000: a multicast prefix (ff00::/8), not a locator"
        );
        assert_eq!(
            Locator::parse_unicast("fe80::").unwrap_err().to_string(),
            "fe80:0000:0000:0000: a link-local prefix (fe80::/10); a locator must be reachable beyond one link"
        );
        assert!(Locator::parse_unicast("::").unwrap_err().to_string().starts_with("0000:0000:0000:0000: the all-zero"));
    }

    #[test]
    fn locator_syntax_errors_quote_the_text_as_written() {
        let e = Locator::parse_unicast("2001:db8:e::1/64").unwrap_err();
        assert_eq!(e.to_string(), "\"2001:db8:e::1/64\": lower 64 bits of a locator prefix must be zero");
        let e = Locator::parse_unicast("nope").unwrap_err();
        assert!(e.to_string().starts_with("\"nope\": not a locator"), "{e}");
    }

    #[test]
    fn locator_pref_forms() {
        let p = |s: &str| LocatorPref::parse(s, 10).map(|l| (l.text, l.loc.0, l.pref));
        let b = 0x2001_0db8_000b_0000;
        assert_eq!(p("2001:0db8:000b:0000"), Ok(("2001:0db8:000b:0000".into(), b, 10)));
        assert_eq!(p("2001:0db8:000b:0000/20"), Ok(("2001:0db8:000b:0000".into(), b, 20)));
        // four groups: /N is the preference, as documented for ilnpctl
        assert_eq!(p("2001:0db8:000b:0000/64"), Ok(("2001:0db8:000b:0000".into(), b, 64)));
        assert_eq!(p("2001:0db8:000b:0000|7"), Ok(("2001:0db8:000b:0000".into(), b, 7)));
        assert_eq!(p("2001:db8:b::"), Ok(("2001:db8:b::".into(), b, 10)));
        assert_eq!(p("2001:db8:b::/64"), Ok(("2001:db8:b::/64".into(), b, 10)));
        assert_eq!(p("2001:db8:b::/64/5"), Ok(("2001:db8:b::/64".into(), b, 5)));
        assert_eq!(p("2001:db8:b::/64|5"), Ok(("2001:db8:b::/64".into(), b, 5)));
    }

    #[test]
    fn locator_pref_errors() {
        let e = |s: &str| LocatorPref::parse(s, 10).unwrap_err();
        // an IPv6 prefix's /48 is a prefix length, never a preference of 48
        assert_eq!(
            e("2001:db8:b::/48"),
            LocatorPrefError::Locator(LocatorError::PrefixLength { text: "2001:db8:b::/48".into(), len: "48".into() })
        );
        assert!(matches!(e("2001:db8:b::/48/5"), LocatorPrefError::Locator(LocatorError::PrefixLength { .. })));
        assert_eq!(e("2001:0db8:000b:0000/x"), LocatorPrefError::Pref("2001:0db8:000b:0000/x".into(), "x".into()));
        assert!(e("2001:0db8:000b:0000/x").to_string().contains("preference \"x\""));
        assert!(matches!(e("2001:0db8:000b:0000/70000"), LocatorPrefError::Pref(..)));
        assert!(matches!(e("2001:0db8:000b:0000|"), LocatorPrefError::Pref(..)));
        assert!(matches!(e("a/b/c/d"), LocatorPrefError::Form(_)));
        assert!(matches!(e(""), LocatorPrefError::Form(_)));
        assert_eq!(e("ff02::/64/5"), LocatorPrefError::Locator(LocatorError::Multicast(Locator(0xff02 << 48))));
        assert!(e("fe80::|1").to_string().starts_with("l64 fe80:0000:0000:0000: a link-local prefix"));
    }
}
