//! RFC 6742 DNS resource records for ILNP: NID (104), L32 (105), L64 (106), LP (107).
//! Wire RDATA and presentation (zone-file) form. Preference: lower is preferred.

use crate::addr::{Locator, Nid};
use crate::error::Error;
use core::fmt;
use std::net::Ipv4Addr;

pub const TYPE_NID: u16 = 104;
pub const TYPE_L32: u16 = 105;
pub const TYPE_L64: u16 = 106;
pub const TYPE_LP: u16 = 107;

/// The four types and their mnemonics (one table: records, questions and logs).
pub const RR_TYPES: [(u16, &str); 4] = [(TYPE_NID, "NID"), (TYPE_L32, "L32"), (TYPE_L64, "L64"), (TYPE_LP, "LP")];

/// The mnemonic of an RFC 6742 record type.
pub fn rr_type_name(rr_type: u16) -> Option<&'static str> {
    RR_TYPES.iter().find(|(t, _)| *t == rr_type).map(|(_, n)| *n)
}

/// One ILNP record's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rdata {
    Nid {
        preference: u16,
        nid: Nid,
    },
    L32 {
        preference: u16,
        locator: Ipv4Addr,
    },
    L64 {
        preference: u16,
        locator: Locator,
    },
    /// FQDN of a name holding L32/L64 records (absolute, without the trailing dot stored)
    Lp {
        preference: u16,
        fqdn: String,
    },
}

impl Rdata {
    pub fn rr_type(&self) -> u16 {
        match self {
            Rdata::Nid { .. } => TYPE_NID,
            Rdata::L32 { .. } => TYPE_L32,
            Rdata::L64 { .. } => TYPE_L64,
            Rdata::Lp { .. } => TYPE_LP,
        }
    }

    pub fn type_name(&self) -> &'static str {
        rr_type_name(self.rr_type()).expect("every Rdata's type is in RR_TYPES")
    }

    /// Parses the RDATA of a record of type `rr_type`.
    pub fn parse(rr_type: u16, rdata: &[u8]) -> Result<Rdata, Error> {
        if rdata.len() < 2 {
            return Err(Error::Truncated);
        }
        let preference = u16::from_be_bytes([rdata[0], rdata[1]]);
        let body = &rdata[2..];
        let exact = |n: usize| if body.len() == n { Ok(()) } else { Err(Error::Malformed("RDATA length")) };
        match rr_type {
            TYPE_NID => {
                exact(8)?;
                Ok(Rdata::Nid { preference, nid: Nid::from_bytes(body.try_into().map_err(|_| Error::Truncated)?) })
            }
            TYPE_L64 => {
                exact(8)?;
                Ok(Rdata::L64 {
                    preference,
                    locator: Locator::from_bytes(body.try_into().map_err(|_| Error::Truncated)?),
                })
            }
            TYPE_L32 => {
                exact(4)?;
                Ok(Rdata::L32 { preference, locator: Ipv4Addr::new(body[0], body[1], body[2], body[3]) })
            }
            TYPE_LP => Ok(Rdata::Lp { preference, fqdn: parse_name(body)? }),
            _ => Err(Error::Malformed("not an ILNP record type")),
        }
    }

    /// Emits the RDATA (LP's name uncompressed, as RFC 6742 requires).
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        match self {
            Rdata::Nid { preference, nid } => {
                out.extend_from_slice(&preference.to_be_bytes());
                out.extend_from_slice(&nid.to_bytes());
            }
            Rdata::L64 { preference, locator } => {
                out.extend_from_slice(&preference.to_be_bytes());
                out.extend_from_slice(&locator.to_bytes());
            }
            Rdata::L32 { preference, locator } => {
                out.extend_from_slice(&preference.to_be_bytes());
                out.extend_from_slice(&locator.octets());
            }
            Rdata::Lp { preference, fqdn } => {
                out.extend_from_slice(&preference.to_be_bytes());
                if let Err(e) = emit_name(fqdn, out) {
                    out.truncate(out.len() - 2);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Parses the presentation form of the RDATA (`<pref> <value>`), e.g.
    /// `NID` + `10 0014:4fff:ff20:ee64`. Errors name the bad token.
    pub fn from_presentation(type_name: &str, text: &str) -> Result<Rdata, String> {
        let mut it = text.split_whitespace();
        let p = it.next().ok_or_else(|| format!("{type_name}: missing preference"))?;
        let preference: u16 = p
            .parse()
            .ok()
            .filter(|_| p.bytes().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| format!("{type_name}: preference {p:?} is not 0-65535"))?;
        let v = it.next().ok_or_else(|| format!("{type_name}: missing value after preference {p}"))?;
        if let Some(extra) = it.next() {
            return Err(format!("{type_name}: unexpected {extra:?}"));
        }
        match type_name.to_ascii_uppercase().as_str() {
            "NID" => Ok(Rdata::Nid { preference, nid: v.parse().map_err(|e| format!("NID: {e}"))? }),
            "L64" => {
                // presentation form is exactly four groups; a prefix form is not allowed here
                let g: Vec<&str> = v.split(':').collect();
                if g.len() != 4 || v.contains("::") {
                    return Err(format!("L64: {v:?}: expected four colon-separated 16-bit hex groups"));
                }
                Ok(Rdata::L64 { preference, locator: v.parse().map_err(|e| format!("L64: {e}"))? })
            }
            "L32" => {
                // RFC 6742's example writes 10.1.02.0: leading zeros are allowed
                let parts: Vec<&str> = v.split('.').collect();
                if parts.len() != 4 {
                    return Err(format!("L32: {v:?} is not a dotted quad"));
                }
                let mut b = [0u8; 4];
                for (i, x) in parts.iter().enumerate() {
                    b[i] = x
                        .parse()
                        .ok()
                        .filter(|_| !x.is_empty() && x.len() <= 3 && x.bytes().all(|c| c.is_ascii_digit()))
                        .ok_or_else(|| format!("L32: {v:?}: {x:?} is not 0-255"))?;
                }
                Ok(Rdata::L32 { preference, locator: Ipv4Addr::from(b) })
            }
            "LP" => {
                let name = v.trim_end_matches('.');
                if name.is_empty()
                    || name.split('.').any(|l| l.is_empty() || l.len() > 63 || !l.bytes().all(presentable))
                    || name.len() > 253
                {
                    return Err(format!("LP: {v:?} is not a domain name"));
                }
                Ok(Rdata::Lp { preference, fqdn: name.to_string() })
            }
            other => Err(format!("{other:?} is not an ILNP record type (NID, L32, L64, LP)")),
        }
    }
}

impl fmt::Display for Rdata {
    /// Presentation form of the RDATA.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rdata::Nid { preference, nid } => write!(f, "{preference} {nid}"),
            Rdata::L64 { preference, locator } => write!(f, "{preference} {}", locator.groups()),
            Rdata::L32 { preference, locator } => write!(f, "{preference} {locator}"),
            Rdata::Lp { preference, fqdn } => write!(f, "{preference} {fqdn}."),
        }
    }
}

/// Uncompressed domain name in wire form → dotted text (no trailing dot).
fn parse_name(b: &[u8]) -> Result<String, Error> {
    let mut labels = Vec::new();
    let mut i = 0;
    loop {
        let len = *b.get(i).ok_or(Error::Truncated)? as usize;
        if len == 0 {
            if i + 1 != b.len() {
                return Err(Error::Malformed("bytes after the LP name"));
            }
            break;
        }
        if len > 63 {
            return Err(Error::Malformed("LP name compressed or label too long"));
        }
        let l = b.get(i + 1..i + 1 + len).ok_or(Error::Truncated)?;
        if !l.iter().all(|&c| presentable(c)) {
            return Err(Error::Malformed("LP label with a dot, space or non-ASCII byte"));
        }
        labels.push(String::from_utf8_lossy(l).into_owned());
        i += 1 + len;
        // i bytes of labels + the root byte: at most 255 (RFC 1035 §3.1)
        if i + 1 > 255 {
            return Err(Error::Malformed("LP name longer than 255 bytes"));
        }
    }
    if labels.is_empty() {
        return Err(Error::Malformed("LP name is the root"));
    }
    Ok(labels.join("."))
}

/// Label bytes we present without escapes (host names need no more).
fn presentable(c: u8) -> bool {
    c.is_ascii_graphic() && c != b'.' && c != b'\\'
}

fn emit_name(name: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    let start = out.len();
    for l in name.trim_end_matches('.').split('.') {
        if l.is_empty() || l.len() > 63 {
            out.truncate(start);
            return Err(Error::Malformed("LP label empty or longer than 63"));
        }
        if !l.bytes().all(presentable) {
            out.truncate(start);
            return Err(Error::Malformed("LP label with a space, backslash or non-ASCII byte"));
        }
        out.push(l.len() as u8);
        out.extend_from_slice(l.as_bytes());
    }
    out.push(0);
    if out.len() - start > 255 {
        out.truncate(start);
        return Err(Error::Malformed("LP name longer than 255 bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6742_examples_presentation_and_wire() {
        let n = Rdata::from_presentation("NID", "10 0014:4fff:ff20:ee64").unwrap();
        let mut v = Vec::new();
        n.emit(&mut v).unwrap();
        assert_eq!(v, [0, 10, 0x00, 0x14, 0x4f, 0xff, 0xff, 0x20, 0xee, 0x64]);
        assert_eq!(Rdata::parse(TYPE_NID, &v).unwrap(), n);
        assert_eq!(n.to_string(), "10 0014:4fff:ff20:ee64");

        let l = Rdata::from_presentation("L64", "10 2001:0DB8:1140:1000").unwrap();
        let mut v = Vec::new();
        l.emit(&mut v).unwrap();
        assert_eq!(v, [0, 10, 0x20, 0x01, 0x0d, 0xb8, 0x11, 0x40, 0x10, 0x00]);
        assert_eq!(l.to_string(), "10 2001:0db8:1140:1000");

        let l32 = Rdata::from_presentation("L32", "10 10.1.02.0").unwrap();
        let mut v = Vec::new();
        l32.emit(&mut v).unwrap();
        assert_eq!(v, [0, 10, 10, 1, 2, 0]);

        let lp = Rdata::from_presentation("LP", "10 l64-subnet1.example.com.").unwrap();
        let mut v = Vec::new();
        lp.emit(&mut v).unwrap();
        assert_eq!(&v[..3], &[0, 10, 11]);
        assert_eq!(*v.last().unwrap(), 0);
        assert_eq!(Rdata::parse(TYPE_LP, &v).unwrap(), lp);
        assert_eq!(lp.to_string(), "10 l64-subnet1.example.com.");
    }

    #[test]
    fn presentation_errors_name_the_token() {
        let e = Rdata::from_presentation("L64", "2001:0DB8:8140:8000").unwrap_err();
        assert!(e.contains("preference"), "{e}"); // RFC 6742 §3's example omits it: still required
        let e = Rdata::from_presentation("L64", "10 2001:db8::1").unwrap_err();
        assert!(e.contains("2001:db8::1"), "{e}");
        let e = Rdata::from_presentation("NID", "x 0014:4fff:ff20:ee64").unwrap_err();
        assert!(e.contains("\"x\""), "{e}");
        let e = Rdata::from_presentation("L32", "10 10.1.300.0").unwrap_err();
        assert!(e.contains("300"), "{e}");
        assert!(Rdata::from_presentation("AAAA", "10 ::1").is_err());
        // signs and stray tokens are refused, and named
        let e = Rdata::from_presentation("L32", "+10 10.1.2.0").unwrap_err();
        assert!(e.contains("\"+10\""), "{e}");
        let e = Rdata::from_presentation("L32", "10 10.+1.2.0").unwrap_err();
        assert!(e.contains("\"+1\""), "{e}");
        let e = Rdata::from_presentation("L32", "10 10.1.2.0 extra").unwrap_err();
        assert!(e.contains("extra"), "{e}");
        let e = Rdata::from_presentation("NID", "10 +fff:0:0:0").unwrap_err();
        assert!(e.contains("+fff"), "{e}");
        let e = Rdata::from_presentation("L64", "10").unwrap_err();
        assert!(e.contains("missing value"), "{e}");
        let e = Rdata::from_presentation("LP", "10 a..b.").unwrap_err();
        assert!(e.contains("a..b."), "{e}");
        assert!(Rdata::from_presentation("LP", "10 .").is_err(), "root is not a locator pointer");
        assert!(Rdata::from_presentation("LP", &format!("10 {}.", "a".repeat(64))).is_err());
        assert!(Rdata::from_presentation("NID", "").unwrap_err().contains("missing preference"));
        assert!(Rdata::from_presentation("NID", "70000 0:0:0:1").unwrap_err().contains("70000"));
        // lower-case type names are accepted
        assert_eq!(Rdata::from_presentation("nid", "1 0:0:0:1").unwrap(), Rdata::Nid { preference: 1, nid: Nid(1) });
    }

    #[test]
    fn wire_errors() {
        assert_eq!(Rdata::parse(TYPE_NID, &[0]).unwrap_err(), Error::Truncated);
        assert!(Rdata::parse(TYPE_NID, &[0, 1, 2]).is_err());
        assert!(Rdata::parse(TYPE_LP, &[0, 1, 0xc0, 0x0c]).is_err(), "compressed LP name");
        assert!(Rdata::parse(TYPE_LP, &[0, 1, 3, b'a']).is_err());
        // found by the fuzzer: a 256-byte name (254 bytes of labels + root was the limit off by one)
        let mut long = vec![0, 1];
        for _ in 0..85 {
            long.extend_from_slice(&[2, b't', b'0']);
        }
        long.extend_from_slice(&[0]);
        assert_eq!(long.len() - 2, 256);
        assert_eq!(Rdata::parse(TYPE_LP, &long).unwrap_err(), Error::Malformed("LP name longer than 255 bytes"));
        long.truncate(long.len() - 4);
        long.extend_from_slice(&[1, b'x', 0]);
        assert_eq!(long.len() - 2, 255);
        let r = Rdata::parse(TYPE_LP, &long).unwrap();
        let mut v = Vec::new();
        r.emit(&mut v).unwrap();
        assert_eq!(v, long);
        // found by the fuzzer: a label holding a dot or a NUL cannot round-trip through text
        assert!(Rdata::parse(TYPE_LP, &[0x12, 0x23, 2, 0, b'.', 0]).is_err());
        // an LP built in code with a name that cannot be sent is refused, nothing written
        let mut v = vec![9];
        assert!(Rdata::Lp { preference: 1, fqdn: "a b.example".into() }.emit(&mut v).is_err());
        assert!(Rdata::Lp { preference: 1, fqdn: vec!["x".repeat(60); 5].join(".") }.emit(&mut v).is_err());
        assert_eq!(v, [9]);
        // L32 and L64 round trips through both forms
        for (t, text) in [("L32", "65535 255.0.10.1"), ("L64", "0 ffff:0000:0001:abcd")] {
            let r = Rdata::from_presentation(t, text).unwrap();
            assert_eq!(r.to_string(), text);
            let mut w = Vec::new();
            r.emit(&mut w).unwrap();
            assert_eq!(Rdata::parse(r.rr_type(), &w).unwrap(), r);
        }
        for len in 0..40 {
            let v: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            for t in [TYPE_NID, TYPE_L32, TYPE_L64, TYPE_LP, 1] {
                let _ = Rdata::parse(t, &v);
            }
        }
    }
}
