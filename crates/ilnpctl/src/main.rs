//! ilnpctl — the operator CLI of ilnpd.
//!
//! `ip`-style objects and verbs; every command is one typed request line on the
//! daemon's control socket and one reply line (`ilnp_control`,
//! docs/control-protocol.md). `--json` prints the reply's `data` as the daemon
//! sent it; without it the typed data is rendered as tables for people.

mod show;

use clap::Parser;
use ilnp_control::{Data, PeerLocatorArg, Reply, Request, Spelled};
use ilnpctl::cli::*;
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The request for a command (docs/control-protocol.md). NIDs and locators are
/// checked here with the daemon's own rules (`Request::check`, ilnp-wire's
/// `unicast`), so a typo is reported before the daemon is asked; what needs the
/// daemon's state (its own NID, its identifier prefix) it checks itself.
/// A balancing policy as typed (`ilnp_control::Policy`, the core's, names them).
fn policy(p: &str) -> Result<ilnp_control::Policy, String> {
    p.parse().map_err(|e| format!("policy: {e}"))
}

pub fn request(obj: &Object) -> Result<Request, String> {
    let req = match obj {
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
        Object::Policy { args } => match args.as_slice() {
            [] => Request::PolicyShow,
            [p] => Request::PolicySet { peer: None, policy: policy(p)? },
            [peer, p] => Request::PolicySet { peer: Some(peer.clone()), policy: policy(p)? },
            _ => return Err("policy: at most PEER and POLICY".into()),
        },
        Object::Peer { verb: None | Some(PeerVerb::Show) } => Request::PeerShow,
        Object::Peer { verb: Some(PeerVerb::Add { name, nid, locators }) } => {
            let nid = Spelled::parse(nid)?;
            let locators = locators.iter().map(|a| PeerLocatorArg::parse(a)).collect::<Result<Vec<_>, _>>()?;
            Request::PeerAdd { name: name.clone(), nid, locators }
        }
        Object::Peer { verb: Some(PeerVerb::Del { nid }) } => Request::PeerDel { nid: Spelled::parse(nid)? },
        Object::Stats => Request::Stats,
        Object::Monitor => Request::Monitor,
        Object::Dns { .. } => Request::DnsStatus,
    };
    req.check().map_err(|e| match &req {
        Request::PolicySet { .. } => format!("policy: {e}"),
        _ => e,
    })?;
    Ok(req)
}

/// How a command failed: a message for stderr, or quietly (stdout was closed,
/// as by `| head`: what was wanted has been read).
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    Msg(String),
    StdoutClosed,
}

impl From<String> for Failure {
    fn from(m: String) -> Failure {
        Failure::Msg(m)
    }
}

/// Writes a line to stdout; a closed pipe (EPIPE) ends the command quietly.
fn say(out: &mut impl Write, text: &str) -> Result<(), Failure> {
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(Failure::StdoutClosed),
        Err(e) => Err(Failure::Msg(format!("writing to stdout: {e}"))),
    }
}

/// `5 s`, `0.5 s`.
fn secs(t: Duration) -> String {
    format!("{} s", t.as_secs_f64())
}

/// Why the control socket cannot be reached, in the operator's terms: no such
/// file, not a socket, nobody listening, or not allowed.
fn connect_error(path: &Path, e: &std::io::Error) -> String {
    use std::os::unix::fs::FileTypeExt;
    let p = path.display();
    if let Ok(m) = std::fs::metadata(path) {
        let t = m.file_type();
        if !t.is_socket() {
            let what = if t.is_file() {
                "a regular file"
            } else if t.is_dir() {
                "a directory"
            } else if t.is_fifo() {
                "a FIFO"
            } else if t.is_char_device() || t.is_block_device() {
                "a device"
            } else {
                "not a socket"
            };
            return format!("{p} is not a socket ({what}); ilnpd's control socket is its `control_socket`, by default {DEFAULT_SOCKET}");
        }
    }
    match e.kind() {
        ErrorKind::NotFound => {
            format!("no such file: {p} (ilnpd not running? another daemon's socket: -s PATH)")
        }
        ErrorKind::ConnectionRefused => format!("stale socket {p} (nothing listening: ilnpd not running?)"),
        ErrorKind::PermissionDenied => {
            format!("permission denied on {p}: ilnpctl needs root or membership of the `ilnp` group")
        }
        _ if e.raw_os_error() == Some(20) => format!("{p}: a component of the path is not a directory"),
        _ => format!("cannot connect to ilnpd at {p}: {e}"),
    }
}

/// Opens the control socket within `timeout` (None: no limit), naming the likely
/// cause when that fails. (A listener that never accepts can hold `connect`.)
fn connect(path: &Path, timeout: Option<Duration>) -> Result<UnixStream, String> {
    let Some(t) = timeout else {
        return UnixStream::connect(path).map_err(|e| connect_error(path, &e));
    };
    let (tx, rx) = mpsc::channel();
    let p: PathBuf = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(UnixStream::connect(&p));
    });
    match rx.recv_timeout(t) {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(connect_error(path, &e)),
        Err(_) => Err(format!(
            "{} accepts no connection within {} (--timeout): ilnpd stuck, or not ilnpd's socket?",
            path.display(),
            secs(t)
        )),
    }
}

/// Unwraps a `{"ok": .., "data"|"error": ..}` reply: the data as sent.
pub fn reply_data(line: &str) -> Result<Value, String> {
    Reply::envelope(line).map_err(|e| e.to_string())?
}

/// Lines from the daemon, each read before a deadline or without one.
struct Lines<'a> {
    stream: UnixStream,
    path: &'a Path,
    buf: Vec<u8>,
}

impl Lines<'_> {
    /// The next line (None: the daemon closed), waiting at most `timeout` for all
    /// of it.
    fn next(&mut self, timeout: Option<Duration>) -> Result<Option<String>, String> {
        let deadline = timeout.map(|t| (Instant::now() + t, t));
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
            }
            let timed_out = |t: Duration| {
                format!(
                    "no reply from {} within {} (--timeout): ilnpd stuck, or not ilnpd's socket?",
                    self.path.display(),
                    secs(t)
                )
            };
            let wait = match deadline {
                None => None,
                Some((d, t)) => match d.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) {
                    Some(left) => Some(left),
                    None => return Err(timed_out(t)),
                },
            };
            self.stream.set_read_timeout(wait).map_err(|e| format!("{}: {e}", self.path.display()))?;
            match self.stream.read(&mut chunk) {
                Ok(0) if self.buf.is_empty() => return Ok(None),
                Ok(0) => return Ok(Some(String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned())),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(timed_out(deadline.map_or(Duration::ZERO, |(_, t)| t)));
                }
                Err(e) => return Err(format!("reading from {}: {e}", self.path.display())),
            }
        }
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    let req = request(&cli.object)?;
    let timeout = (cli.timeout > 0.0).then(|| Duration::from_secs_f64(cli.timeout));
    let stream = connect(&cli.socket, timeout)?;
    let path = cli.socket.display();
    stream.set_write_timeout(timeout).map_err(|e| format!("{path}: {e}"))?;
    (&stream).write_all(req.to_line().as_bytes()).map_err(|e| format!("writing to {path}: {e}"))?;
    let mut lines = Lines { stream, path: &cli.socket, buf: Vec::new() };
    let first = lines.next(timeout)?.ok_or_else(|| format!("ilnpd at {path} closed the connection without a reply"))?;
    let data = reply_data(&first)?;
    let mut out = std::io::stdout().lock();
    if cli.object == Object::Monitor {
        // the first reply confirms the subscription; events follow, one per line,
        // for as long as they come
        while let Some(line) = lines.next(None)? {
            let text = if cli.json { line.trim_end().to_string() } else { show::event_line(line.trim_end()) };
            say(&mut out, &text)?;
        }
        return Err(Failure::Msg("ilnpd closed the monitor stream (daemon stopped?)".into()));
    }
    let text = if cli.json {
        serde_json::to_string_pretty(&data).unwrap_or_default()
    } else {
        let typed = Data::decode(&req, data)
            .map_err(|e| format!("ilnpd sent {} data ilnpctl cannot read: {e}", req.as_str()))?;
        show::render(&cli.object, &typed)
    };
    if !text.is_empty() {
        say(&mut out, &text)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) | Err(Failure::StdoutClosed) => ExitCode::SUCCESS,
        Err(Failure::Msg(e)) => {
            // stderr may be closed too: nothing more to say then
            let _ = writeln!(std::io::stderr(), "ilnpctl: {e}");
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
    fn peer_add_refuses_before_asking_what_the_daemon_would_refuse() {
        let e = |args: &[&str]| request(&parse(args).unwrap().object).unwrap_err();
        let add = |nid: &str, l64: &str| e(&["peer", "add", "mn", nid, l64]);
        let good = "2001:db8:b::/64";
        assert_eq!(
            add("0300:0000:0000:0001", good),
            "nid 0300:0000:0000:0001: the group (g) bit is set; a unicast NID needs g = 0 (RFC 6740 §3.1.2)"
        );
        assert!(add("0000:0000:0000:0000", good).starts_with("nid 0000:0000:0000:0000: the all-zero NID"));
        assert!(add("ffff:ffff:ffff:ffff", good).starts_with("nid ffff:ffff:ffff:ffff: the all-ones NID"));
        let nid = "0200:00ff:fe00:000d";
        // was taken as preference 48
        assert!(add(nid, "2001:db8:b::/48").starts_with("l64 \"2001:db8:b::/48\": prefix length /48"));
        assert!(add(nid, "2001:db8:b::/48/5").starts_with("l64 \"2001:db8:b::/48\": prefix length /48"));
        assert!(add(nid, "ff02::/64").starts_with("l64 ff02:0000:0000:0000: a multicast prefix"));
        assert!(add(nid, "fe80::/64/1").starts_with("l64 fe80:0000:0000:0000: a link-local prefix"));
        assert!(add(nid, "::/64").starts_with("l64 0000:0000:0000:0000: the all-zero locator"));
        assert!(add(nid, "2001:0db8:000b:0000/x").contains("preference \"x\""));
        assert!(add(nid, "a/b/c/d").contains("expected L64[/PREF]"));
        // the same words as the daemon's (ilnp_control::Request::check)
        let r = Request::PeerAdd {
            name: "mn".into(),
            nid: Spelled::parse("0300:0000:0000:0001").unwrap(),
            locators: vec![PeerLocatorArg::parse(good).unwrap()],
        };
        assert_eq!(
            Request::from_line(&r.to_line()).unwrap_err().to_string(),
            format!("peer_add: {}", add("0300:0000:0000:0001", good))
        );
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
        let d = parse(&["status"]).unwrap();
        assert_eq!((d.socket, d.timeout), (PathBuf::from(DEFAULT_SOCKET), DEFAULT_TIMEOUT_S));
        // anywhere on the line
        let c = parse(&["status", "-s", "/tmp/y.sock", "--timeout", "1.5"]).unwrap();
        assert_eq!((c.socket, c.timeout), (PathBuf::from("/tmp/y.sock"), 1.5));
        let c = parse(&["peer", "show", "--socket", "/tmp/z.sock", "--timeout", "0"]).unwrap();
        assert_eq!((c.socket, c.timeout), (PathBuf::from("/tmp/z.sock"), 0.0));
        assert!(parse(&["--timeout", "-1", "status"]).is_err());
        assert!(parse(&["--timeout", "soon", "status"]).is_err());
        assert!(parse(&["--timeout", "inf", "status"]).is_err());
    }

    fn cli(socket: &Path, timeout: f64) -> Cli {
        let mut c = parse(&["status"]).unwrap();
        c.socket = socket.to_path_buf();
        c.timeout = timeout;
        c
    }

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ilnpctl-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_daemon_that_never_answers_times_out_naming_the_socket() {
        let d = dir("silent");
        let sock = d.join("silent.sock");
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        // accepts, reads nothing, answers nothing
        std::thread::spawn(move || {
            let conn = l.accept();
            std::thread::sleep(Duration::from_secs(3));
            drop(conn);
        });
        let t0 = Instant::now();
        let Err(Failure::Msg(e)) = run(&cli(&sock, 0.3)) else { panic!("no timeout") };
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "{took:?}");
        assert!(e.contains(&sock.display().to_string()) && e.contains("within 0.3 s"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn what_is_at_the_socket_path_is_named() {
        let d = dir("kinds");
        let e = connect(&d.join("none.sock"), None).unwrap_err();
        assert!(e.starts_with("no such file: ") && e.contains("none.sock"), "{e}");
        let file = d.join("file");
        std::fs::write(&file, "x").unwrap();
        let e = connect(&file, Some(Duration::from_secs(1))).unwrap_err();
        assert!(e.contains("is not a socket (a regular file)"), "{e}");
        let e = connect(&d, None).unwrap_err();
        assert!(e.contains("is not a socket (a directory)"), "{e}");
        // a socket file nobody listens on: what a killed daemon leaves
        let stale = d.join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let e = connect(&stale, None).unwrap_err();
        assert!(e.starts_with("stale socket ") && e.contains("nothing listening"), "{e}");
        let e = connect_error(&stale, &std::io::Error::from(ErrorKind::PermissionDenied));
        assert!(e.contains("root or membership of the `ilnp` group"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A stdout whose reader has gone.
    struct ClosedPipe;
    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stdout_ends_quietly() {
        assert_eq!(say(&mut ClosedPipe, "x"), Err(Failure::StdoutClosed));
        let mut v = Vec::new();
        assert_eq!(say(&mut v, "x"), Ok(()));
        assert_eq!(v, b"x\n");
    }

    #[test]
    fn replies() {
        assert_eq!(reply_data(r#"{"ok":true,"data":[1]}"#).unwrap(), json!([1]));
        assert_eq!(reply_data(r#"{"ok":false,"error":"no peer"}"#).unwrap_err(), "no peer");
        assert!(reply_data("garbage").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn missing_socket_says_daemon_not_running() {
        let e = connect(Path::new("/nonexistent/ilnpd.sock"), None).unwrap_err();
        assert!(e.contains("not running") && e.contains("/nonexistent/ilnpd.sock"), "{e}");
    }
}
