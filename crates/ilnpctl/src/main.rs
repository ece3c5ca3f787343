//! ilnpctl — the operator CLI of ilnpd.
//!
//! `ip`-style objects and verbs; every command is one typed request line on the
//! daemon's control socket and one reply line (`ilnp_control`,
//! docs/control-protocol.md). `--json` prints the reply's `data` as the daemon
//! sent it; without it the typed data is rendered as tables for people.

mod show;

use clap::Parser;
use ilnpctl::cli::*;
use ilnp_control::{Data, PeerLocatorArg, Reply, Request, Spelled};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;

/// Default preference of a locator given without one (as in the peer files).
pub const DEFAULT_PREF: u16 = ilnp_control::DEFAULT_PREF;

/// Splits `L64[/PREF]` (or the hosts-file form `L64|PREF`) into the locator text
/// and its preference. An IPv6 prefix may carry its own `/64`:
/// `2001:db8:b::/64` → (`2001:db8:b::/64`, 10), `2001:db8:b::/64/20` → pref 20,
/// `2001:0db8:000b:0000/20` → pref 20.
pub fn parse_locator_arg(s: &str) -> Result<(String, u16), String> {
    let pref = |p: &str| -> Result<u16, String> {
        p.parse::<u16>().map_err(|_| format!("{s:?}: preference {p:?} is not a number 0-65535"))
    };
    if let Some((l, p)) = s.split_once('|') {
        return Ok((l.to_string(), pref(p)?));
    }
    let parts: Vec<&str> = s.split('/').collect();
    match parts.as_slice() {
        [l] if !l.is_empty() => Ok((l.to_string(), DEFAULT_PREF)),
        [l, p] if !l.is_empty() => {
            // an IPv6 prefix (has "::" or fewer than four groups) followed by /64 is
            // a prefix length, not a preference
            let groups = l.split(':').count();
            if *p == "64" && (l.contains("::") || groups != 4) {
                Ok((format!("{l}/64"), DEFAULT_PREF))
            } else {
                Ok((l.to_string(), pref(p)?))
            }
        }
        [l, "64", p] if !l.is_empty() => Ok((format!("{l}/64"), pref(p)?)),
        _ => Err(format!("{s:?}: expected L64[/PREF], e.g. 2001:0db8:000b:0000/10 or 2001:db8:b::/64/10")),
    }
}

/// The request for a command (docs/control-protocol.md). NIDs and locators are
/// checked here, so a typo is reported before the daemon is asked.
pub fn request(obj: &Object) -> Result<Request, String> {
    Ok(match obj {
        Object::Status => Request::Status,
        Object::Ilcc { verb: None | Some(IlccVerb::Show) } => Request::IlccShow,
        Object::Ilcc { verb: Some(IlccVerb::Flush) } => Request::IlccFlush,
        Object::Locator { verb: None | Some(LocatorVerb::Show) } => Request::LocatorShow,
        Object::Locator { verb: Some(LocatorVerb::Set { dev, key, value }) } => {
            if key != "weight" {
                return Err(format!("locator set {dev}: unknown setting {key:?} (weight)"));
            }
            let weight = value
                .parse::<u32>()
                .map_err(|_| format!("locator set {dev} weight: {value:?} is not a number 0-4294967295"))?;
            Request::LocatorSet { dev: dev.clone(), weight }
        }
        Object::Policy { args } => {
            const POLICIES: [&str; 3] = ["failover", "per-flow", "per-packet"];
            let check = |p: &String| {
                if POLICIES.contains(&p.as_str()) {
                    Ok(p.clone())
                } else {
                    Err(format!("policy: unknown policy {p:?} (failover, per-flow or per-packet)"))
                }
            };
            match args.as_slice() {
                [] => Request::PolicyShow,
                [p] => Request::PolicySet { peer: None, policy: check(p)? },
                [peer, p] => Request::PolicySet { peer: Some(peer.clone()), policy: check(p)? },
                _ => return Err("policy: at most PEER and POLICY".into()),
            }
        }
        Object::Peer { verb: None | Some(PeerVerb::Show) } => Request::PeerShow,
        Object::Peer { verb: Some(PeerVerb::Add { name, nid, locators }) } => {
            let locators = locators
                .iter()
                .map(|a| {
                    let (l64, pref) = parse_locator_arg(a)?;
                    Ok(PeerLocatorArg { l64: Spelled::parse(&l64)?, pref })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Request::PeerAdd { name: name.clone(), nid: Spelled::parse(nid)?, locators }
        }
        Object::Peer { verb: Some(PeerVerb::Del { nid }) } => Request::PeerDel { nid: Spelled::parse(nid)? },
        Object::Stats => Request::Stats,
        Object::Monitor => Request::Monitor,
        Object::Dns { .. } => Request::DnsStatus,
    })
}

/// Opens the control socket, naming the likely cause when that fails.
fn connect(path: &Path) -> Result<UnixStream, String> {
    UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("ilnpd is not running: no control socket at {} (use -s PATH for another)", path.display())
        }
        std::io::ErrorKind::ConnectionRefused => {
            format!("ilnpd is not running at {} (stale socket: connection refused)", path.display())
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("permission denied on {}: run as root or as a member of the socket's group", path.display())
        }
        _ => format!("cannot connect to ilnpd at {}: {e}", path.display()),
    })
}

/// Unwraps a `{"ok": .., "data"|"error": ..}` reply: the data as sent.
pub fn reply_data(line: &str) -> Result<Value, String> {
    Reply::envelope(line).map_err(|e| e.to_string())?
}

fn read_line(r: &mut impl BufRead, path: &Path) -> Result<Option<String>, String> {
    let mut line = String::new();
    match r.read_line(&mut line) {
        Ok(0) => Ok(None),
        Ok(_) => Ok(Some(line)),
        Err(e) => Err(format!("reading from {}: {e}", path.display())),
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    let req = request(&cli.object)?;
    let stream = connect(&cli.socket)?;
    let mut w = stream.try_clone().map_err(|e| e.to_string())?;
    w.write_all(req.to_line().as_bytes()).map_err(|e| format!("writing to {}: {e}", cli.socket.display()))?;
    let mut r = BufReader::new(stream);
    let first = read_line(&mut r, &cli.socket)?
        .ok_or_else(|| format!("ilnpd at {} closed the connection without a reply", cli.socket.display()))?;
    let data = reply_data(&first)?;
    if cli.object == Object::Monitor {
        // the first reply confirms the subscription; events follow, one per line
        let mut out = std::io::stdout().lock();
        while let Some(line) = read_line(&mut r, &cli.socket)? {
            let text = if cli.json { line.trim_end().to_string() } else { show::event_line(line.trim_end()) };
            if writeln!(out, "{text}").and_then(|_| out.flush()).is_err() {
                return Ok(()); // stdout closed (e.g. `| head`)
            }
        }
        return Err("ilnpd closed the monitor stream (daemon stopped?)".into());
    }
    let text = if cli.json {
        serde_json::to_string_pretty(&data).unwrap_or_default()
    } else {
        let typed =
            Data::decode(&req, data).map_err(|e| format!("ilnpd sent {} data ilnpctl cannot read: {e}", req.cmd()))?;
        show::render(&cli.object, &typed)
    };
    if !text.is_empty() {
        println!("{text}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ilnpctl: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ilnpctl").chain(args.iter().copied()))
    }

    /// The request line's JSON.
    fn req(args: &[&str]) -> Value {
        serde_json::from_str(&request(&parse(args).unwrap().object).unwrap().to_line()).unwrap()
    }

    #[test]
    fn objects_and_verbs_map_to_commands() {
        assert_eq!(req(&["status"]), json!({"cmd": "status"}));
        assert_eq!(req(&["ilcc", "show"]), json!({"cmd": "ilcc_show"}));
        assert_eq!(req(&["ilcc"]), json!({"cmd": "ilcc_show"}));
        assert_eq!(req(&["ilcc", "flush"]), json!({"cmd": "ilcc_flush"}));
        assert_eq!(req(&["locator", "show"]), json!({"cmd": "locator_show"}));
        assert_eq!(req(&["loc"]), json!({"cmd": "locator_show"}));
        assert_eq!(req(&["peer", "show"]), json!({"cmd": "peer_show"}));
        assert_eq!(
            req(&["peer", "del", "0200:00ff:fe00:000d"]),
            json!({"cmd": "peer_del", "nid": "0200:00ff:fe00:000d"})
        );
        assert_eq!(req(&["stats"]), json!({"cmd": "stats"}));
        assert_eq!(req(&["monitor"]), json!({"cmd": "monitor"}));
        assert_eq!(req(&["policy"]), json!({"cmd": "policy_show"}));
        assert_eq!(req(&["policy", "per-packet"]), json!({"cmd": "policy_set", "peer": null, "policy": "per-packet"}));
        assert_eq!(
            req(&["policy", "cn", "per-flow"]),
            json!({"cmd": "policy_set", "peer": "cn", "policy": "per-flow"})
        );
        assert_eq!(
            req(&["locator", "set", "eth1", "weight", "80"]),
            json!({"cmd": "locator_set", "dev": "eth1", "weight": 80})
        );
        let e = |args: &[&str]| request(&parse(args).unwrap().object).unwrap_err();
        assert!(e(&["policy", "cn", "round-robin"]).contains("\"round-robin\""));
        assert!(e(&["locator", "set", "eth1", "weight", "x1"]).contains("\"x1\""));
        assert!(e(&["locator", "set", "eth1", "pref", "1"]).contains("\"pref\""));
    }

    #[test]
    fn peer_add_with_preferences() {
        let r = req(&[
            "peer",
            "add",
            "mn",
            "0200:00ff:fe00:000d",
            "2001:0db8:000b:0000/20",
            "2001:db8:c::/64",
            "2001:db8:e::/64/5",
        ]);
        assert_eq!(
            r,
            json!({"cmd": "peer_add", "name": "mn", "nid": "0200:00ff:fe00:000d", "locators": [
                {"l64": "2001:0db8:000b:0000", "pref": 20},
                {"l64": "2001:db8:c::/64", "pref": 10},
                {"l64": "2001:db8:e::/64", "pref": 5},
            ]})
        );
    }

    #[test]
    fn bad_nid_or_locator_is_named_before_asking_the_daemon() {
        let e = |args: &[&str]| request(&parse(args).unwrap().object).unwrap_err();
        assert!(e(&["peer", "add", "mn", "zz", "2001:db8:e::"]).starts_with("nid \"zz\""));
        assert!(e(&["peer", "del", "1:2"]).starts_with("nid \"1:2\""));
        let l = e(&["peer", "add", "mn", "0200:00ff:fe00:000d", "2001:db8:e::1/64/5"]);
        assert!(l.starts_with("l64 \"2001:db8:e::1/64\""), "{l}");
    }

    #[test]
    fn locator_argument_forms() {
        assert_eq!(parse_locator_arg("2001:0db8:000b:0000").unwrap(), ("2001:0db8:000b:0000".into(), 10));
        assert_eq!(parse_locator_arg("2001:0db8:000b:0000/64").unwrap(), ("2001:0db8:000b:0000".into(), 64));
        assert_eq!(parse_locator_arg("2001:0db8:000b:0000|7").unwrap(), ("2001:0db8:000b:0000".into(), 7));
        assert_eq!(parse_locator_arg("2001:db8:b::").unwrap(), ("2001:db8:b::".into(), 10));
        assert!(parse_locator_arg("2001:0db8:000b:0000/x").unwrap_err().contains("\"x\""));
        assert!(parse_locator_arg("2001:0db8:000b:0000/70000").is_err());
        assert!(parse_locator_arg("a/b/c/d").is_err());
        assert!(parse_locator_arg("").is_err());
    }

    #[test]
    fn bad_arguments_are_rejected() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["peer", "add", "mn", "0200:00ff:fe00:000d"]).is_err(), "a peer needs a locator");
        assert!(parse(&["peer", "del"]).is_err());
        assert!(parse(&["ilcc", "frob"]).is_err());
        assert!(parse(&["bogus"]).is_err());
    }

    #[test]
    fn global_options() {
        let c = parse(&["-s", "/tmp/x.sock", "--json", "status"]).unwrap();
        assert_eq!(c.socket, PathBuf::from("/tmp/x.sock"));
        assert!(c.json);
        let c = parse(&["ilcc", "show", "--json"]).unwrap();
        assert!(c.json, "--json is accepted after the verb too");
        assert_eq!(parse(&["status"]).unwrap().socket, PathBuf::from(DEFAULT_SOCKET));
    }

    #[test]
    fn replies() {
        assert_eq!(reply_data(r#"{"ok":true,"data":[1]}"#).unwrap(), json!([1]));
        assert_eq!(reply_data(r#"{"ok":false,"error":"no peer"}"#).unwrap_err(), "no peer");
        assert!(reply_data("garbage").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn missing_socket_says_daemon_not_running() {
        let e = connect(Path::new("/nonexistent/ilnpd.sock")).unwrap_err();
        assert!(e.contains("not running") && e.contains("/nonexistent/ilnpd.sock"), "{e}");
    }
}
