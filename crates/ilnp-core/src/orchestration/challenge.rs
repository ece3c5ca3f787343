//! The core's entry into `challenge.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::challenge::{ChallengeCx, Challenges};
use crate::machine::Core;

/// The core's entry points into the peer-restart challenges: each lends the
/// sub-machine the state it needs.
impl Core {
    /// The challenges and the rest of the core's state they work on.
    pub(crate) fn challenge_parts(&mut self) -> (&mut Challenges, ChallengeCx<'_>) {
        let cx = ChallengeCx {
            cfg: &self.cfg,
            ilcc: &mut self.ilcc,
            stats: &mut self.stats,
            local: &self.local,
            rng: &mut *self.rng,
        };
        (&mut self.challenges, cx)
    }
}
