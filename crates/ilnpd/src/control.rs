//! Control socket: one JSON object per line each way (docs/control-protocol.md;
//! the types are `ilnp_control`'s). Connections are served by their own tasks,
//! which parse requests and answer bad ones; good requests go to the main loop,
//! which owns the core, over a channel. `monitor` is served here.
//!
//! Who asks: each connection's credentials (SO_PEERCRED, read once at accept)
//! travel with its requests. Root may send anything; members of group `ilnp` (the
//! socket's mode lets them connect) only the read-only requests, and see no nonces
//! (`Request::is_mutating`, `Daemon::handle_request`).

use anyhow::{Context, Result};
use ilnp_control::{Data, Event, Monitoring, Reply, Request};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc, oneshot};

pub use ilnp_control::CONTROL_GROUP;

/// The uid a client is taken for when its credentials cannot be read: not root.
pub const UNKNOWN_UID: u32 = u32::MAX;

/// Clients other than root served at once; one more is told so and closed
/// (`control_refused_busy`). Root is never refused, so group members cannot lock it
/// out; each client holds a descriptor and a task.
pub const MAX_CLIENTS: usize = 64;

/// A request line's length at most (with its newline; real ones are below 2 KiB): a
/// longer one is answered with an error and the connection closed
/// (`control_line_too_long`), so a client cannot make the daemon buffer without end.
pub const MAX_LINE: usize = 64 * 1024;

static REFUSED_BUSY: AtomicU64 = AtomicU64::new(0);
static LINE_TOO_LONG: AtomicU64 = AtomicU64::new(0);

/// The connection-level counters (`ilnpctl stats`' core, the metrics' daemon_events).
pub fn counters() -> [(&'static str, u64); 2] {
    [
        ("control_refused_busy", REFUSED_BUSY.load(Ordering::Relaxed)),
        ("control_line_too_long", LINE_TOO_LONG.load(Ordering::Relaxed)),
    ]
}

/// A request for the main loop, with who sent it and where to send the answer.
pub struct Pending {
    pub req: Request,
    /// the client's uid (SO_PEERCRED); [`UNKNOWN_UID`] if it could not be read
    pub uid: u32,
    pub reply: oneshot::Sender<Reply>,
}

/// Binds the socket (replacing a stale one) and serves it in the background.
/// The daemon removes the socket file on exit. `events` carries monitor lines.
pub fn start(path: &Path, tx: mpsc::Sender<Pending>, events: broadcast::Sender<String>) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    clear_stale(path)?;
    let l = UnixListener::bind(path).with_context(|| format!("binding control socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    // members of the `ilnp` group (the package creates it) use ilnpctl without root
    match nix::unistd::Group::from_name(CONTROL_GROUP) {
        Ok(Some(g)) => {
            if let Err(e) = nix::unistd::chown(path, None, Some(g.gid)) {
                tracing::warn!("control socket {}: giving it to group {CONTROL_GROUP}: {e}", path.display());
            }
        }
        Ok(None) => tracing::debug!("no group {CONTROL_GROUP}: the control socket is for root only"),
        Err(e) => tracing::warn!("looking up group {CONTROL_GROUP}: {e}"),
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
    tokio::spawn(async move {
        loop {
            match l.accept().await {
                Ok((s, _)) => {
                    let uid = match s.peer_cred() {
                        Ok(c) => c.uid(),
                        Err(e) => {
                            tracing::debug!(
                                "control socket: reading the client's credentials: {e}: taken for not root"
                            );
                            UNKNOWN_UID
                        }
                    };
                    let slot = if uid == 0 {
                        None
                    } else {
                        match slots.clone().try_acquire_owned() {
                            Ok(p) => Some(p),
                            Err(_) => {
                                REFUSED_BUSY.fetch_add(1, Ordering::Relaxed);
                                tokio::spawn(refuse_busy(s));
                                continue;
                            }
                        }
                    };
                    let (tx, events) = (tx.clone(), events.clone());
                    tokio::spawn(async move {
                        serve(s, uid, tx, events).await;
                        drop(slot);
                    });
                }
                Err(e) => {
                    tracing::warn!("control socket accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(())
}

/// Makes way for the socket: nothing there, or a socket no daemon listens on
/// (removed). Anything else at the path (a file, a directory, a symlink, even to a
/// socket: looked at without following it) is refused, naming the path: start-up
/// never deletes what it did not create.
fn clear_stale(path: &Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("control_socket: looking at {}", path.display())),
    };
    let kind = meta.file_type();
    if !kind.is_socket() {
        let what = if kind.is_symlink() {
            "a symbolic link"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_file() {
            "a regular file"
        } else {
            "not a socket"
        };
        anyhow::bail!(
            "control_socket: {} exists and is {what}, not a socket: not removing it (move it away or set control_socket to another path)",
            path.display()
        );
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        anyhow::bail!("control_socket: {} is in use: another ilnpd is running", path.display());
    }
    std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))
}

/// One line saying why, then the connection closes (at most a second's wait for a
/// client that does not read).
async fn refuse_busy(mut s: UnixStream) {
    let why = format!("{MAX_CLIENTS} clients other than root are connected: try again later");
    let line = Reply::Err(why).to_line();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), s.write_all(line.as_bytes())).await;
}

/// What the client sent next.
enum Line {
    /// a request line without its end (`\n` or `\r\n`)
    Text(String),
    /// it closed, or reading failed
    Closed,
    /// no newline within [`MAX_LINE`] bytes
    TooLong,
}

async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> Line {
    buf.clear();
    let n = match r.take(MAX_LINE as u64).read_until(b'\n', buf).await {
        Ok(0) | Err(_) => return Line::Closed,
        Ok(n) => n,
    };
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    } else if n == MAX_LINE {
        return Line::TooLong;
    }
    Line::Text(String::from_utf8_lossy(buf).into_owned())
}

async fn serve(s: UnixStream, uid: u32, tx: mpsc::Sender<Pending>, events: broadcast::Sender<String>) {
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        let line = match next_line(&mut r, &mut buf).await {
            Line::Text(l) => l,
            Line::Closed => return,
            Line::TooLong => {
                LINE_TOO_LONG.fetch_add(1, Ordering::Relaxed);
                let why = format!("request line longer than {MAX_LINE} bytes: closing the connection");
                let _ = w.write_all(Reply::Err(why).to_line().as_bytes()).await;
                return;
            }
        };
        let req = match Request::from_line(&line) {
            Ok(r) => r,
            Err(e) => {
                if w.write_all(Reply::Err(e.to_string()).to_line().as_bytes()).await.is_err() {
                    return;
                }
                continue;
            }
        };
        if req == Request::Monitor {
            let mut rx = events.subscribe();
            let _ = w.write_all(Reply::Ok(Data::Monitoring(Monitoring)).to_line().as_bytes()).await;
            loop {
                let out = match rx.recv().await {
                    Ok(line) => line,
                    Err(broadcast::error::RecvError::Lagged(n)) => Event::Lagged { missed: n }.to_line(),
                    Err(_) => return,
                };
                if w.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
        let (otx, orx) = oneshot::channel();
        if tx.send(Pending { req, uid, reply: otx }).await.is_err() {
            return;
        }
        let reply = orx.await.unwrap_or_else(|_| Reply::Err("daemon is shutting down".into()));
        if w.write_all(reply.to_line().as_bytes()).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ilnpd-control-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test(flavor = "current_thread")]
    async fn request_lines_are_bounded() {
        let mut buf = Vec::new();
        let text = |l: Line| match l {
            Line::Text(t) => t,
            Line::Closed => "<closed>".into(),
            Line::TooLong => "<too long>".into(),
        };
        let mut r = BufReader::new(&b"{\"cmd\":\"status\"}\r\nlast"[..]);
        assert_eq!(text(next_line(&mut r, &mut buf).await), r#"{"cmd":"status"}"#);
        assert_eq!(text(next_line(&mut r, &mut buf).await), "last", "a last line without newline");
        assert_eq!(text(next_line(&mut r, &mut buf).await), "<closed>");
        let just = [vec![b'x'; MAX_LINE - 1], b"\n".to_vec()].concat();
        let mut r = BufReader::new(&just[..]);
        assert_eq!(text(next_line(&mut r, &mut buf).await).len(), MAX_LINE - 1);
        let long = vec![b'x'; 10 * MAX_LINE];
        let mut r = BufReader::new(&long[..]);
        assert_eq!(text(next_line(&mut r, &mut buf).await), "<too long>");
        assert!(buf.len() <= MAX_LINE, "buffered {}", buf.len());
    }

    #[test]
    fn start_up_removes_a_stale_socket_and_nothing_else() {
        let d = dir("stale");
        // nothing there: fine
        clear_stale(&d.join("none")).unwrap();
        // a socket nobody listens on: removed
        let sock = d.join("s");
        drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
        clear_stale(&sock).unwrap();
        assert!(std::fs::symlink_metadata(&sock).is_err(), "the stale socket is still there");
        // a regular file, a directory, a symlink (to a stale socket, too): kept, refused by name
        let file = d.join("f");
        std::fs::write(&file, "keep me").unwrap();
        let sub = d.join("d");
        std::fs::create_dir(&sub).unwrap();
        let target = d.join("t");
        drop(std::os::unix::net::UnixListener::bind(&target).unwrap());
        let link = d.join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for (p, what) in [(&file, "a regular file"), (&sub, "a directory"), (&link, "a symbolic link")] {
            let e = clear_stale(p).unwrap_err().to_string();
            assert!(e.contains(&p.display().to_string()) && e.contains(what) && e.contains("not a socket"), "{e}");
            assert!(std::fs::symlink_metadata(p).is_ok(), "{} was removed", p.display());
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
        assert!(std::fs::symlink_metadata(&target).is_ok(), "the link's target was removed");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
