//! RFC 6069 hints (the core's `Action::NudgeTransport`): a peer came back on
//! another locator, so TCP connections to its identifier address that were timing
//! out (a hard handoff's outage: no acks, exponential backoff) get, written into
//! ilnp0 as if they had arrived, ICMPv6 "no route" errors quoting their oldest
//! unacknowledged segment. Each undoes one backoff step (the kernel's
//! tcp_ld_RTO_revert, called by tcp_v6_err); once the reverted timeout has passed
//! the kernel retransmits at once, one round trip after the LU instead of at the
//! next backed-off timer. The timeouts come from bpf/ilnp_sockops.c.
//!
//! Bounded: the timeouts of the last `WINDOW` only, at most `MAX_CONNECTIONS`
//! connections per nudge and `MAX_PER_CONNECTION` hints each (one per backoff
//! step). A hint the kernel cannot use (the connection acked since, closed, or not
//! in backoff) is ignored by it: the sequence number must be the current snd_una
//! and the connection in backoff.

use super::counters::ShellCounter;
use super::Daemon;
use ilnp_wire::{icmpv6, ilnp_addr, Nid};

/// TCP's largest retransmission timeout (TCP_RTO_MAX): a connection backing off
/// records a timeout at least this often.
const WINDOW_NS: u64 = 120_000_000_000;
/// Connections per nudge: a peer with more timed-out ones gets its first 64.
const MAX_CONNECTIONS: usize = 64;
/// Hints per connection: 2^8 times the base timeout is minutes.
const MAX_PER_CONNECTION: u32 = 8;

impl Daemon {
    pub(super) fn nudge_transport(&mut self, nid: Nid) {
        let Some(dp) = self.dp.as_ref() else { return };
        let remote = ilnp_addr(self.cfg.id_prefix, nid);
        let since = crate::bpf::monotonic_ns().saturating_sub(WINDOW_NS);
        let mut conns = match dp.tcp_timeouts(remote, since, MAX_CONNECTIONS + 1) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("reading TCP timeouts: {e:#}");
                return;
            }
        };
        if conns.len() > MAX_CONNECTIONS {
            conns.truncate(MAX_CONNECTIONS);
            self.bump(ShellCounter::TcpHintCapped);
        }
        for c in conns {
            let hint = icmpv6::tcp_no_route_hint(c.local, c.remote, c.local_port, c.remote_port, c.snd_una);
            // the backoff after that timeout: retransmits before it, plus it
            for _ in 0..c.retransmits.saturating_add(1).min(MAX_PER_CONNECTION) {
                match self.tun.send(&hint) {
                    Ok(_) => self.bump(ShellCounter::TcpHintSent),
                    Err(e) => {
                        self.bump(ShellCounter::DeliverError);
                        tracing::debug!("{e:#}");
                    }
                }
            }
            self.bump(ShellCounter::TcpHintConnections);
            tracing::debug!(
                "TCP hint: [{}]:{} -> [{}]:{} snd_una {} after {} retransmissions",
                c.local,
                c.local_port,
                c.remote,
                c.remote_port,
                c.snd_una,
                c.retransmits
            );
        }
    }
}
