//! Control socket: one JSON object per line each way (docs/control-protocol.md;
//! the types are `ilnp_control`'s). Connections are served by their own tasks,
//! which parse requests and answer bad ones; good requests go to the main loop,
//! which owns the core, over a channel. `monitor` is served here.

use anyhow::{Context, Result};
use ilnp_control::{Data, Event, Monitoring, Reply, Request};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc, oneshot};

/// The group that may use the control socket besides root (socket mode 0660).
pub const CONTROL_GROUP: &str = "ilnp";

/// A request for the main loop, with where to send the answer.
pub struct Pending {
    pub req: Request,
    pub reply: oneshot::Sender<Reply>,
}

/// Binds the socket (replacing a stale one) and serves it in the background.
/// The daemon removes the socket file on exit. `events` carries monitor lines.
pub fn start(path: &Path, tx: mpsc::Sender<Pending>, events: broadcast::Sender<String>) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            anyhow::bail!("control_socket: {} is in use: another ilnpd is running", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
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
    tokio::spawn(async move {
        loop {
            match l.accept().await {
                Ok((s, _)) => {
                    tokio::spawn(serve(s, tx.clone(), events.clone()));
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

async fn serve(s: UnixStream, tx: mpsc::Sender<Pending>, events: broadcast::Sender<String>) {
    let (r, mut w) = s.into_split();
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
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
        if tx.send(Pending { req, reply: otx }).await.is_err() {
            return;
        }
        let reply = orx.await.unwrap_or_else(|_| Reply::Err("daemon is shutting down".into()));
        if w.write_all(reply.to_line().as_bytes()).await.is_err() {
            return;
        }
    }
}
