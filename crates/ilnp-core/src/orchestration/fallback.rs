//! The core's entry into `fallback.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::fallback::{Fallback, FallbackCx, FallbackReason, Inbound, PeerState};
use crate::machine::Core;
use ilnp_wire::classify::Plain;
use ilnp_wire::translate::Csum;
use ilnp_wire::{Locator, Nid};
use std::time::Instant;

/// The core's entry points into the fallback: each lends the sub-machine the state
/// it needs.
impl Core {
    /// The fallback state and the rest of the core's state it works on.
    pub(crate) fn fallback_parts(&mut self) -> (&mut Fallback, FallbackCx<'_>) {
        let cx = FallbackCx {
            cfg: &self.cfg,
            ilcc: &self.ilcc,
            stats: &mut self.stats,
            local: &self.local,
            rng: &mut *self.rng,
        };
        (&mut self.fallback, cx)
    }

    /// How `nid` is reached.
    pub fn peer_state(&self, nid: Nid) -> PeerState {
        let non_ilnp = self.peers.get(&nid).is_some_and(|p| p.non_ilnp);
        self.fallback.peer_state(nid, non_ilnp)
    }

    /// From now on `nid` is plain IPv6 at `remote:nid`: its ILCC entries go, its
    /// record says it is not ILNPv6-capable.
    pub(crate) fn start_fallback(
        &mut self,
        now: Instant,
        nid: Nid,
        remote: Locator,
        reason: FallbackReason,
        out: &mut Vec<Action>,
    ) {
        for key in self.ilcc.keys_of(nid) {
            self.ilcc.remove(&key);
            out.push(Action::IlccRemove(key));
        }
        if let Some(p) = self.peers.get_mut(&nid) {
            p.non_ilnp = true;
        }
        self.fallback.start(&mut self.stats, now, nid, remote, reason, out);
    }

    /// A plain packet the fast path punted: from a fallback peer → identifier form;
    /// the Echo Reply to a probe → fallback. False: not a fallback peer's.
    pub(crate) fn fallback_inbound(&mut self, now: Instant, p: &Plain<'_>, csum: Csum, out: &mut Vec<Action>) -> bool {
        let (fallback, mut cx) = self.fallback_parts();
        match fallback.inbound(&mut cx, p, csum, out) {
            Inbound::NotOurs => false,
            Inbound::Taken => true,
            Inbound::ProbeAnswered { nid, remote } => {
                self.start_fallback(now, nid, remote, FallbackReason::NoAnswer, out);
                true
            }
        }
    }
}
