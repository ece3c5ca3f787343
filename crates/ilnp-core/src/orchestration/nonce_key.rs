//! The core's entry into `nonce_key.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::admission_terms::AnswerHint;
use crate::machine::Core;
use ilnp_wire::{Locator, Nid, Nonce};
use std::time::Instant;

impl Core {
    /// Our nonce for the entry we open to `nid` if a stateless answer to it may have
    /// carried one (`NonceKey::answered`).
    pub(crate) fn answered_nonce(
        &mut self,
        now: Instant,
        nid: Nid,
        locators: &[Locator],
        hint: Option<AnswerHint>,
    ) -> Option<Nonce> {
        self.admission.key.answered(&self.cfg, &mut *self.rng, now, nid, locators, hint)
    }
}
