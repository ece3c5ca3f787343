//! The core's entry into `v4path.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::ilcc::{IlccKey, RemoteLocator};
use crate::locator::LocatorState;
use crate::machine::Core;
use crate::v4path::{V4Cx, V4Paths};
use ilnp_wire::translate::Csum;

use std::net::SocketAddrV4;
use std::time::Instant;

impl Core {
    /// The v4 paths and the rest of the core's state they work on.
    pub(crate) fn v4_parts(&mut self) -> (&mut V4Paths, V4Cx<'_>) {
        let cx = V4Cx {
            cfg: &self.cfg,
            ilcc: &mut self.ilcc,
            stats: &mut self.stats,
            rng: &mut *self.rng,
            local: &self.local,
            peers: &self.peers,
        };
        (&mut self.v4, cx)
    }

    /// A UDP datagram that arrived on the v4 path's port from `from`: its payload,
    /// a wire-form ILNPv6 packet, is handled as a punted packet is, and the path it
    /// came on is learned or checked.
    pub fn handle_inbound_v4(&mut self, now: Instant, pkt: &[u8], csum: Csum, from: SocketAddrV4) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_inbound_v4_into(now, pkt, csum, from, &mut out);
        out
    }

    /// `handle_inbound_v4` into a buffer of the caller's (cleared first).
    pub fn handle_inbound_v4_into(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        from: SocketAddrV4,
        out: &mut Vec<Action>,
    ) {
        self.v4.rx_via = Some(from);
        self.handle_inbound_into(now, pkt, csum, out);
        self.v4.rx_via = None;
    }

    /// Moves the entry `key`'s source locator to one of a family its locators have. When none
    /// of ours reaches any of theirs (we are on an IPv4-only network, and the entry
    /// only knows the IPv6 locator the session began on), the peer record's other
    /// locators are added first (a static peer's or DNS's v4 path: the responder's
    /// entry starts with the initiator's source locator alone).
    pub(crate) fn fit_local(&mut self, key: IlccKey) {
        let Some(e) = self.ilcc.get_mut(&key) else { return };
        if self.local.fitting(e.local_locator, &e.remote_locators).is_none() {
            let max = self.cfg.max_remote_locators.max(1);
            for l in self.peers.get(&key.remote).map(|p| p.record.locators.as_slice()).unwrap_or_default() {
                if e.remote_locators.len() < max && !e.has_remote(l.loc) {
                    e.remote_locators.push(RemoteLocator::new(l.loc, l.pref, LocatorState::Valid, None));
                }
            }
        }
        if let Some(l) = self.local.fitting(e.local_locator, &e.remote_locators) {
            e.local_locator = l;
        }
    }
}
