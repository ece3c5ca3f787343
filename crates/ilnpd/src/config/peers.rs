//! Static peer files: correspondents the initiator can reach before DNS support
//! exists, parsed into the core's `PeerRecord`s. Two file forms:
//!
//! * the seeds' hosts-file form, one peer per line:
//!   `<L64>|<pref>[,<L64>|<pref>...],<NID> <name> [alias...]`
//!   e.g. `2001:0db8:000b:0000|10,0200:00ff:fe00:000d mn`; `#` starts a comment.
//!   The first whitespace-separated word is the I-LV list: one or more `L64|pref`
//!   entries then exactly one NID, comma-separated without spaces; the second word
//!   is the name; further words are aliases (accepted, not used). L64 and NID use the
//!   RFC 6742 presentation form (four 16-bit hex groups; an L64 may also be written
//!   as an IPv6 prefix, `2001:db8:b::/64`); pref is 0-65535, lower preferred.
//!   The same file may hold FreeBSD ILNP6's `/etc/hosts` lines (its libc
//!   `getaddrinfo.c:2510-2543`), so one file serves a site running both:
//!   `LLLL-LLLL-LLLL-LLLL.NNNN+NNNN+NNNN+NNNN name [alias...]`, one locator per line
//!   (several lines with the same NID and name add locators, as FreeBSD registers each
//!   line's I-LV), preference `DEFAULT_LOCATOR_PREF`; like FreeBSD, a locator outside
//!   2000::/3 makes the line "not ILNP" (skipped, not an error), and so do ordinary
//!   hosts lines (`::1 localhost`, `192.0.2.1 name`): the file can be `/etc/hosts`.
//! * TOML: `[[peer]] name = "mn"`, `nid = "0200:00ff:fe00:000d"`,
//!   `locators = [{ l64 = "2001:0db8:000b:0000", pref = 10 }]`.
//!
//! Both forms follow the rules `ilnpctl peer add` follows, from the same functions
//! (`ilnp_wire::unicast`, `ilnp_core::PeerRecord::check_unicast`), with the same
//! words: a unicast NID (not all-zero, not all-ones, group bit clear), locators that
//! are routable /64s. A NID defined twice in one file is an error too.

use ilnp_core::{Locator, Nid, PeerLocator, PeerRecord};
use ilnp_wire::LocatorPref;
use serde::Deserialize;
use std::fmt;

/// A peer-file error: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerFileError {
    pub origin: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for PeerFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.origin, self.line, self.message)
    }
}

impl std::error::Error for PeerFileError {}

/// Parses a locator `L64|pref` token.
fn parse_loc_pref(tok: &str) -> Result<PeerLocator, String> {
    if !tok.contains('|') {
        return Err(format!("{tok:?}: expected L64|pref"));
    }
    let p = LocatorPref::parse(tok, ilnp_core::DEFAULT_LOCATOR_PREF).map_err(|e| e.to_string())?;
    Ok(PeerLocator { loc: p.loc, pref: p.pref })
}

/// The NID's text: any four groups (the rules are `PeerRecord::check_unicast`'s).
fn parse_nid(text: &str) -> Result<Nid, String> {
    text.parse::<Nid>().map_err(|e| format!("nid {e}"))
}

/// Parses the seeds' hosts-file form (the records only).
#[cfg(test)]
pub fn load_hosts_str(text: &str, origin: &str) -> Result<Vec<PeerRecord>, PeerFileError> {
    load_hosts(text, origin).map(|h| h.peers)
}

/// A hosts file: its records, and the NIDs given by FreeBSD ILNP6 lines (a FreeBSD
/// host uses one nonce both ways and reflects ours: `CoreConfig::peer_shared_nonce`).
pub struct Hosts {
    pub peers: Vec<PeerRecord>,
    pub freebsd: Vec<Nid>,
}

/// Parses the seeds' hosts-file form, FreeBSD ILNP6's lines among it.
pub fn load_hosts(text: &str, origin: &str) -> Result<Hosts, PeerFileError> {
    let mut out = Vec::new();
    let mut seen: Vec<(Nid, usize)> = Vec::new();
    let mut freebsd_lines: Vec<Nid> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let err = |m: String| PeerFileError { origin: origin.to_string(), line: i + 1, message: m };
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let ilv = words.next().unwrap_or("");
        if ilv.parse::<std::net::IpAddr>().is_ok() {
            continue; // an ordinary hosts line
        }
        let name = words.next().ok_or_else(|| err(format!("{ilv:?}: missing host name after the I-LV")))?;
        if let Some(parsed) = freebsd_ilv(ilv) {
            let Some((loc, nid)) = parsed.map_err(err)? else { continue };
            let pl = PeerLocator { loc, pref: ilnp_core::DEFAULT_LOCATOR_PREF };
            if let Some(r) = out.iter_mut().find(|r: &&mut PeerRecord| r.nid == nid && r.name == name) {
                if freebsd_lines.contains(&nid) {
                    if !r.locators.iter().any(|l| l.loc == loc) {
                        r.locators.push(pl);
                    }
                    continue;
                }
            }
            let r = PeerRecord { name: name.to_string(), nid, locators: vec![pl] };
            r.check_unicast().map_err(|e| err(e.to_string()))?;
            check_once(nid, &seen).map_err(err)?;
            seen.push((nid, i + 1));
            freebsd_lines.push(nid);
            out.push(r);
            continue;
        }
        let mut toks: Vec<&str> = ilv.split(',').collect();
        let last = toks.pop().unwrap_or("");
        if last.contains('|') {
            return Err(err(format!("{ilv:?}: no NID (want L64|pref,...,NID)")));
        }
        if toks.is_empty() {
            return Err(err(format!("{ilv:?}: no locator (want L64|pref,...,NID)")));
        }
        let mut locators = Vec::new();
        for tok in toks {
            if !tok.contains('|') {
                return Err(err(format!("{tok:?}: expected L64|pref (the NID comes last)")));
            }
            locators.push(parse_loc_pref(tok).map_err(err)?);
        }
        let nid = parse_nid(last).map_err(err)?;
        let r = PeerRecord { name: name.to_string(), nid, locators };
        r.check_unicast().map_err(|e| err(e.to_string()))?;
        check_once(nid, &seen).map_err(err)?;
        seen.push((nid, i + 1));
        out.push(r);
    }
    Ok(Hosts { peers: out, freebsd: freebsd_lines })
}

/// FreeBSD ILNP6's I-LV word, `LLLL-LLLL-LLLL-LLLL.NNNN+NNNN+NNNN+NNNN`: None if the
/// word is not in that form; `Ok(None)` for a locator outside 2000::/3 (FreeBSD takes
/// only those for ILNP, `getaddrinfo.c:2536`); else the locator and NID, by the
/// `ilnp_wire::unicast` rules (the NID's are `PeerRecord::check_unicast`'s).
fn freebsd_ilv(word: &str) -> Option<Result<Option<(Locator, Nid)>, String>> {
    let (l, n) = word.split_once('.')?;
    let groups = |s: &str, sep: char| {
        let g: Vec<&str> = s.split(sep).collect();
        (g.len() == 4 && g.iter().all(|x| (1..=4).contains(&x.len()) && x.chars().all(|c| c.is_ascii_hexdigit())))
            .then(|| g.iter().map(|x| format!("{x:0>4}")).collect::<Vec<_>>().join(":"))
    };
    let (l64, nid) = (groups(l, '-')?, groups(n, '+')?);
    Some((|| {
        let loc = Locator::parse_unicast(&l64).map_err(|e| format!("{word:?}: l64 {e}"))?;
        if loc.0 >> 61 != 0b001 {
            return Ok(None);
        }
        let nid = parse_nid(&nid).map_err(|e| format!("{word:?}: {e}"))?;
        Ok(Some((loc, nid)))
    })())
}

/// A peer is defined once per file.
fn check_once(nid: Nid, seen: &[(Nid, usize)]) -> Result<(), String> {
    if let Some((_, l)) = seen.iter().find(|(n, _)| *n == nid) {
        return Err(format!("nid {nid} already defined at line {l}"));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    #[serde(default)]
    peer: Vec<toml::Spanned<TomlPeer>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TomlPeer {
    pub name: String,
    pub nid: String,
    pub locators: Vec<TomlLocator>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TomlLocator {
    pub l64: String,
    #[serde(default = "default_pref")]
    pub pref: u16,
}

fn default_pref() -> u16 {
    ilnp_core::DEFAULT_LOCATOR_PREF
}

impl TomlPeer {
    /// Validates one `[[peer]]` table (also used by ilnpd for peers inline in its config).
    pub fn to_record(&self) -> Result<PeerRecord, String> {
        let err = |e: String| format!("peer {:?}: {e}", self.name);
        let nid = parse_nid(&self.nid).map_err(err)?;
        let locators = self
            .locators
            .iter()
            .map(|l| {
                Locator::parse_unicast(&l.l64)
                    .map(|loc| PeerLocator { loc, pref: l.pref })
                    .map_err(|e| err(format!("l64 {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let r = PeerRecord { name: self.name.clone(), nid, locators };
        r.check_unicast().map_err(|e| err(e.to_string()))?;
        Ok(r)
    }
}

/// Parses the TOML form.
pub fn load_toml_str(text: &str, origin: &str) -> Result<Vec<PeerRecord>, PeerFileError> {
    let f: TomlFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1).unwrap_or(0);
        PeerFileError { origin: origin.to_string(), line, message: e.message().to_string() }
    })?;
    let mut out = Vec::new();
    let mut seen: Vec<(Nid, usize)> = Vec::new();
    for p in &f.peer {
        // semantic errors name the line where the peer's table starts
        let line = text[..p.span().start.min(text.len())].matches('\n').count() + 1;
        let err = |message: String| PeerFileError { origin: origin.to_string(), line, message };
        let r = p.get_ref().to_record().map_err(err)?;
        check_once(r.nid, &seen).map_err(|m| err(format!("peer {:?}: {m}", r.name)))?;
        seen.push((r.nid, line));
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_form() {
        let t = "# peers\n2001:0db8:000b:0000|10,2001:0db8:000c:0000|20,0200:00ff:fe00:000d mn mobile\n\n\
                 2001:0db8:000a:0000|5,0200:00ff:fe00:000c cn # the correspondent\n";
        let p = load_hosts_str(t, "hosts").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].name, "mn");
        assert_eq!(p[0].nid, Nid(0x0200_00ff_fe00_000d));
        assert_eq!(p[0].locators[1], PeerLocator { loc: Locator(0x2001_0db8_000c_0000), pref: 20 });
        assert_eq!(p[1].locators[0].pref, 5);
    }

    #[test]
    fn freebsd_hosts_lines_beside_ours() {
        // one /etc/hosts for a site running both: FreeBSD's I-LV lines, ours, ordinary ones
        let t = "127.0.0.1 localhost\n::1 localhost\n2001:db8::53 ns\n\
                 2001-0db8-000a-0000.0211+22ff+fe33+4455 fbsd fbsd.example\n\
                 2001-db8-b-0.211+22ff+fe33+4455 fbsd\n\
                 fd00-0-0-1.0211+22ff+fe33+0001 ula # not ILNP to FreeBSD: skipped\n\
                 2001:0db8:000b:0000|10,0200:00ff:fe00:000d mn\n";
        let p = load_hosts_str(t, "hosts").unwrap();
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!((p[0].name.as_str(), p[0].nid), ("fbsd", Nid(0x0211_22ff_fe33_4455)));
        let locs: Vec<_> = p[0].locators.iter().map(|l| (l.loc, l.pref)).collect();
        assert_eq!(
            locs,
            [
                (Locator(0x2001_0db8_000a_0000), ilnp_core::DEFAULT_LOCATOR_PREF),
                (Locator(0x2001_0db8_000b_0000), ilnp_core::DEFAULT_LOCATOR_PREF)
            ]
        );
        assert_eq!(p[1].name, "mn");
        // the unicast rules are the same: the group bit, an all-zero NID
        let e = load_hosts_str("2001-0db8-000a-0000.0300+00ff+fe00+000d x\n", "h").unwrap_err();
        assert!(e.message.contains("group (g) bit"), "{e}");
        let e = load_hosts_str("2001-0db8-000a-0000.0+0+0+0 x\n", "h").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        // the same NID in both forms, or under two names, is defined twice
        let e = load_hosts_str(
            "2001-0db8-000a-0000.0211+22ff+fe33+4455 a\n2001-0db8-000b-0000.0211+22ff+fe33+4455 b\n",
            "h",
        )
        .unwrap_err();
        assert!(e.message.contains("line 1"), "{e}");
        let e = load_hosts_str(
            "2001:0db8:000b:0000|10,0211:22ff:fe33:4455 a\n2001-0db8-000a-0000.0211+22ff+fe33+4455 a\n",
            "h",
        )
        .unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        // not the FreeBSD form (a word without '.', five groups): our grammar's errors
        assert!(load_hosts_str("2001-0db8-000a-0000-1.0211+22ff+fe33+4455 x\n", "h").is_err());
    }

    #[test]
    fn hosts_errors_name_line_and_token() {
        let e = load_hosts_str("\n2001:0db8:000b:0000|x,0200:00ff:fe00:000d mn\n", "h").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("\"x\""), "{e}");
        let e = load_hosts_str("2001:0db8:000b:0000|10 mn\n", "h").unwrap_err();
        assert!(e.message.contains("no NID"), "{e}");
        let e = load_hosts_str("0200:00ff:fe00:000d mn\n", "h").unwrap_err();
        assert!(e.message.contains("no locator"), "{e}");
        let e = load_hosts_str("2001:db8::|10,0200:00ff:fe00:000d\n", "h").unwrap_err();
        assert!(e.message.contains("missing host name"), "{e}");
        // the NID must come last, exactly once
        let e = load_hosts_str("0200:00ff:fe00:000d,2001:0db8:000b:0000|10 mn\n", "h").unwrap_err();
        assert!(e.message.contains("no NID"), "{e}");
        let e = load_hosts_str("2001:0db8:000b:0000|10,0200:00ff:fe00:000c,0200:00ff:fe00:000d mn\n", "h").unwrap_err();
        assert!(e.message.contains("\"0200:00ff:fe00:000c\"") && e.message.contains("NID comes last"), "{e}");
        let e = load_hosts_str("2001:0db8:000b:0000|99999,0200:00ff:fe00:000d mn\n", "h").unwrap_err();
        assert!(e.message.contains("\"99999\""), "{e}");
        let e = load_hosts_str("2001:0db8:000b:0000|10,0300:00ff:fe00:000d mn\n", "h").unwrap_err();
        assert!(e.message.contains("group (g) bit"), "{e}");
        let two =
            "2001:0db8:000b:0000|10,0200:00ff:fe00:000d mn\n# x\n2001:0db8:000c:0000|10,0200:00ff:fe00:000d mn2\n";
        let e = load_hosts_str(two, "hosts").unwrap_err();
        assert_eq!((e.line, e.to_string().starts_with("hosts:3:")), (3, true), "{e}");
        assert!(e.message.contains("line 1"), "{e}");
    }

    #[test]
    fn toml_form() {
        let t = "[[peer]]\nname = \"mn\"\nnid = \"0200:00ff:fe00:000d\"\nlocators = [{ l64 = \"2001:db8:b::/64\", pref = 7 }]\n";
        let p = load_toml_str(t, "p.toml").unwrap();
        assert_eq!(p[0].locators[0], PeerLocator { loc: Locator(0x2001_0db8_000b_0000), pref: 7 });
        let e =
            load_toml_str("[[peer]]\nname = \"mn\"\nnid = \"1\"\nlocators = []\nextra = 1\n", "p.toml").unwrap_err();
        assert!(e.message.contains("extra") && e.line == 5, "{e}");
        let e = load_toml_str(
            "[[peer]]\nname = \"mn\"\nnid = \"0300:0000:0000:0001\"\nlocators = [{l64=\"2001:db8::/64\"}]\n",
            "p",
        )
        .unwrap_err();
        assert!(e.message.contains("group (g) bit") && e.line == 1, "{e}");
        let two = "[[peer]]\nname = \"a\"\nnid = \"0200:00ff:fe00:000d\"\nlocators = [{l64=\"2001:db8::/64\"}]\n\n\
                   [[peer]]\nname = \"b\"\nnid = \"0200:00ff:fe00:000d\"\nlocators = [{l64=\"2001:db8::/64\"}]\n";
        let e = load_toml_str(two, "p").unwrap_err();
        assert!(e.line == 6 && e.message.contains("already defined at line 1"), "{e}");
    }
}
