//! The core's entry into `challenge.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::challenge::{ChallengeCx, Challenges};
use crate::machine::Core;
use ilnp_wire::{Locator, Nid, Nonce};
use std::time::Instant;

/// The core's entry points into the peer-restart challenges: each lends the
/// sub-machine the state it needs.
impl Core {
    /// The challenges and the rest of the core's state they work on.
    fn challenge_parts(&mut self) -> (&mut Challenges, ChallengeCx<'_>) {
        let cx = ChallengeCx {
            cfg: &self.cfg,
            ilcc: &mut self.ilcc,
            stats: &mut self.stats,
            local: &self.local,
            rng: &mut *self.rng,
        };
        (&mut self.challenges, cx)
    }

    /// A packet from `nid` with a nonce its entry does not know: challenge the old
    /// peer (`Challenges::bad_nonce`).
    pub(crate) fn challenge_bad_nonce(
        &mut self,
        now: Instant,
        nid: Nid,
        nonce: Nonce,
        src: Locator,
        ident: Vec<u8>,
        out: &mut Vec<Action>,
    ) {
        let (challenges, mut cx) = self.challenge_parts();
        challenges.bad_nonce(&mut cx, now, nid, nonce, src, ident, out);
    }
}
