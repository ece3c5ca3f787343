//! The applications: UDP senders (`traffic`: identifier-form datagrams with
//! complete checksums, for the host's core to send) and servers (`listen`, `echo`:
//! what the core delivers to a listened port is counted and, with `echo`,
//! answered). They build datagrams and count; the simulator hands the datagrams to
//! the cores.

use crate::packet::{self, Udp};
use crate::rng::SimRng;
use crate::scenario::{GroupSpec, TrafficSpec};
use crate::time::secs;
use ilnp_wire::{ilnp_addr, Locator, Nid};

/// The identifier prefix every simulated host uses (ilnpd's default).
pub(crate) const ID_PREFIX: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;
/// First client source port (`CLIENT_PORT + host index % 20000`).
const CLIENT_PORT: u16 = 40000;
/// A datagram's payload starts with its sequence number and when it was sent.
const STAMP_LEN: usize = 16;

/// A sender's workload.
struct Traffic {
    target: u32,
    interval: u64,
    size: usize,
    port: u16,
    count: u64,
}

/// One host's applications: its sender (if any) and what they counted.
#[derive(Default)]
pub(crate) struct App {
    traffic: Option<Traffic>,
    pub(crate) sent: u64,
    pub(crate) first_sent: Option<u64>,
    /// echoes received back
    pub(crate) replies: u64,
    pub(crate) first_reply: Option<u64>,
    /// datagrams received on a listened port
    pub(crate) received: u64,
}

impl App {
    /// A host's applications: a sender if its group has `traffic` (`target(t)`:
    /// the host it sends to).
    pub(crate) fn new(t: Option<&TrafficSpec>, target: impl FnOnce(&TrafficSpec) -> u32) -> App {
        let traffic = t.map(|t| Traffic {
            target: target(t),
            interval: secs(1.0 / t.pps).max(1),
            size: t.size,
            port: t.port,
            count: t.count,
        });
        App { traffic, ..App::default() }
    }

    /// The host this one sends to.
    #[inline]
    pub(crate) fn target(&self) -> Option<u32> {
        self.traffic.as_ref().map(|t| t.target)
    }
}

/// When a sender of `t` starts (its spread drawn from the run's stream).
pub(crate) fn first_send(t: &TrafficSpec, rng: &mut SimRng) -> u64 {
    let spread = rng.uniform(0.0, t.start_spread_s);
    secs(t.start_s + spread)
}

/// The applications of every host: each group's listened ports (sorted) and echo,
/// and the buffers datagrams are built in (no allocation per datagram).
pub(crate) struct Apps {
    listen: Vec<Vec<u16>>,
    echo: Vec<bool>,
    payload: Vec<u8>,
    pkt: Vec<u8>,
}

impl Apps {
    pub(crate) fn new(groups: &[GroupSpec]) -> Apps {
        let listen = groups
            .iter()
            .map(|g| {
                let mut l = g.listen.clone();
                l.sort_unstable();
                l
            })
            .collect();
        Apps { listen, echo: groups.iter().map(|g| g.echo).collect(), payload: Vec::new(), pkt: Vec::new() }
    }

    /// True if group `g`'s hosts have a socket on `port`.
    #[inline]
    pub(crate) fn listens(&self, g: u16, port: u16) -> bool {
        self.listen[g as usize].binary_search(&port).is_ok()
    }

    /// Host `h`'s sender sends its next datagram at `now` (to `dst`, its target's
    /// NID): the datagram, and when the next one is due (None: its count is done).
    #[inline]
    pub(crate) fn send(&mut self, h: u32, app: &mut App, src: Nid, dst: Nid, now: u64) -> (&[u8], Option<u64>) {
        let t = app.traffic.as_ref().expect("a sender");
        let seq = app.sent;
        app.sent += 1;
        app.first_sent.get_or_insert(now);
        let sport = CLIENT_PORT + (h % 20000) as u16;
        self.payload.clear();
        self.payload.resize(t.size, 0);
        self.payload[..8].copy_from_slice(&seq.to_be_bytes());
        self.payload[8..STAMP_LEN].copy_from_slice(&now.to_be_bytes());
        packet::udp_into(
            &mut self.pkt,
            ilnp_addr(ID_PREFIX, src),
            ilnp_addr(ID_PREFIX, dst),
            sport,
            t.port,
            &self.payload,
        );
        let again = (t.count == 0 || app.sent < t.count).then_some(now + t.interval);
        (&self.pkt, again)
    }

    /// The host's stack: an identifier-form packet the core delivered to host
    /// `me` of group `g` at `now`. Returns the echo to send, if any.
    #[inline]
    pub(crate) fn receive(&mut self, app: &mut App, g: u16, me: Nid, pkt: &[u8], now: u64) -> Receipt<'_> {
        let Some(u) = Udp::parse(pkt) else {
            return Receipt::None; // the core's Destination Unreachable for the application, etc.
        };
        if self.listens(g, u.dport) {
            app.received += 1;
            if self.echo[g as usize] {
                let (src, dst) = (ilnp_addr(ID_PREFIX, me), ilnp_addr(ID_PREFIX, u.src_nid));
                packet::udp_into(&mut self.pkt, src, dst, u.dport, u.sport, u.payload);
                return Receipt::Echo(&self.pkt);
            }
            return Receipt::Received;
        } else if u.dport >= CLIENT_PORT {
            app.replies += 1;
            if app.first_reply.is_none() {
                app.first_reply = Some(now);
            }
        }
        Receipt::None
    }
}

/// What a server made of a datagram.
pub(crate) enum Receipt<'a> {
    /// not for a listened port
    None,
    /// received on a listened port
    Received,
    /// received, and this is the echo to send
    Echo(&'a [u8]),
}
