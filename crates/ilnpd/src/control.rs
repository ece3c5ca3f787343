//! Control socket: one JSON object per line each way (docs/architecture.md).
//! Connections are served by their own tasks; requests go to the main loop,
//! which owns the core, over a channel.

use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc, oneshot};

/// A request for the main loop, with where to send the answer.
pub struct Request {
    pub body: Value,
    pub reply: oneshot::Sender<Value>,
}

/// Binds the socket (replacing a stale one) and serves it in the background.
/// The daemon removes the socket file on exit.
pub fn start(path: &Path, tx: mpsc::Sender<Request>, events: broadcast::Sender<String>) -> Result<()> {
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

async fn serve(s: UnixStream, tx: mpsc::Sender<Request>, events: broadcast::Sender<String>) {
    let (r, mut w) = s.into_split();
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let body: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = w
                    .write_all(format!("{}\n", json!({"ok": false, "error": format!("bad JSON: {e}")})).as_bytes())
                    .await;
                continue;
            }
        };
        if body.get("cmd").and_then(Value::as_str) == Some("monitor") {
            let mut rx = events.subscribe();
            let _ = w.write_all(format!("{}\n", json!({"ok": true, "data": "monitoring"})).as_bytes()).await;
            loop {
                match rx.recv().await {
                    Ok(ev) => {
                        if w.write_all(format!("{ev}\n").as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let _ = w.write_all(format!("{}\n", json!({"event": "lagged", "missed": n})).as_bytes()).await;
                    }
                    Err(_) => return,
                }
            }
        }
        let (otx, orx) = oneshot::channel();
        if tx.send(Request { body, reply: otx }).await.is_err() {
            return;
        }
        let reply = orx.await.unwrap_or_else(|_| json!({"ok": false, "error": "daemon is shutting down"}));
        if w.write_all(format!("{reply}\n").as_bytes()).await.is_err() {
            return;
        }
    }
}
