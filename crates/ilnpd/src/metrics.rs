//! The metrics endpoint (`[metrics]`, off by default): OpenMetrics text on
//! `GET /metrics` for Prometheus. The HTTP side runs in its own tasks; each scrape
//! asks the main loop, which owns the core and the data path, for the text (the
//! same numbers `ilnpctl stats`, `status` and `ilcc show` report, read at that
//! moment). Histograms are kept here, fed by the daemon as things happen.
//!
//! Cardinality is bounded: drop and event counters have one series per reason
//! (a fixed list), locators one per local locator, and peers only the `top_peers`
//! busiest (by bytes; 0 = none).

use anyhow::{Context, Result};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Configuration (`[metrics]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    pub listen: Vec<SocketAddr>,
    /// per-peer series for this many peers, the busiest by bytes
    pub top_peers: usize,
}

/// A scrape waiting for the main loop's text.
pub struct Scrape {
    pub reply: oneshot::Sender<String>,
}

/// The histograms the daemon feeds (shared with the registry built per scrape).
#[derive(Clone)]
pub struct Histograms {
    /// a Locator Update's first transmission → its ack, retransmissions included:
    /// how long a correspondent took to learn a move
    pub lu_handshake: Histogram,
    /// round trips of Locator Updates acked at their first transmission (Karn)
    pub lu_rtt: Histogram,
    /// TUN read → core → actions carried out, per slow-path packet
    pub slow_path: Histogram,
}

impl Default for Histograms {
    fn default() -> Self {
        // 0.1 ms .. 6.5 s: a LAN round trip to a WAN handoff with retries
        let lu = || Histogram::new(exponential_buckets(0.0001, 2.0, 17));
        Histograms { lu_handshake: lu(), lu_rtt: lu(), slow_path: Histogram::new(exponential_buckets(1e-6, 2.0, 16)) }
    }
}

/// The text's content type (OpenMetrics 1.0, which Prometheus asks for first).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds every `listen` address (before the daemon changes anything: a busy port
/// is a clean start failure) and serves them; scrapes arrive on the receiver.
pub fn start(cfg: &MetricsConfig) -> Result<mpsc::Receiver<Scrape>> {
    let (tx, rx) = mpsc::channel(8);
    let mut listeners = Vec::new();
    for a in &cfg.listen {
        let l = std::net::TcpListener::bind(a).with_context(|| format!("metrics listen: {a}"))?;
        l.set_nonblocking(true)?;
        listeners.push(tokio::net::TcpListener::from_std(l)?);
    }
    for l in listeners {
        tokio::spawn(accept(l, tx.clone()));
    }
    tracing::info!("metrics: OpenMetrics on {:?} (GET /metrics)", cfg.listen);
    Ok(rx)
}

async fn accept(l: tokio::net::TcpListener, tx: mpsc::Sender<Scrape>) {
    loop {
        let (s, _) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("metrics: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |r| serve(r, tx.clone()));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .serve_connection(hyper_util::rt::TokioIo::new(s), svc);
            if let Err(e) = conn.await {
                tracing::debug!("metrics: connection: {e}");
            }
        });
    }
}

async fn serve(r: Request<Incoming>, tx: mpsc::Sender<Scrape>) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |code: StatusCode, ctype: &str, body: String| {
        let mut resp = Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = code;
        if let Ok(v) = ctype.parse() {
            resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        Ok(resp)
    };
    if r.uri().path() != "/metrics" {
        return reply(StatusCode::NOT_FOUND, "text/plain", "ilnpd serves /metrics only\n".into());
    }
    if r.method() != hyper::Method::GET && r.method() != hyper::Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET /metrics\n".into());
    }
    let (otx, orx) = oneshot::channel();
    if tx.send(Scrape { reply: otx }).await.is_err() {
        return reply(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "ilnpd is stopping\n".into());
    }
    match tokio::time::timeout(Duration::from_secs(5), orx).await {
        Ok(Ok(text)) => reply(StatusCode::OK, CONTENT_TYPE, text),
        _ => reply(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "ilnpd did not answer in 5 s\n".into()),
    }
}
