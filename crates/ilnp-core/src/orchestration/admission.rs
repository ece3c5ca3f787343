//! The core's entry into `admission.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::admission::{AdmissionCx, AdmissionState, TierCounts};
use crate::ilcc::Tier;
use crate::machine::Core;
use ilnp_wire::translate::WireMeta;
use std::time::Instant;

/// The core's entry points into admission: each lends the sub-machine the state
/// it needs.
impl Core {
    /// The admission state and the rest of the core's state it works on.
    pub(crate) fn admission_parts(&mut self) -> (&mut AdmissionState, AdmissionCx<'_>) {
        let cx = AdmissionCx {
            cfg: &self.cfg,
            ilcc: &mut self.ilcc,
            stats: &mut self.stats,
            local: &self.local,
            rng: &mut *self.rng,
        };
        (&mut self.admission, cx)
    }

    /// A verified-format packet from `meta.src_nid`, which has no entry. Creates
    /// the responder's entry in the tier the policy says (evicting the oldest
    /// embryonic one if that tier is full) and sends the hello if the budget
    /// allows. Returns false (counted) if no entry could be made.
    pub(crate) fn admit_responder(&mut self, now: Instant, meta: &WireMeta, out: &mut Vec<Action>) -> bool {
        let nid = meta.src_nid;
        let listed_pref =
            self.peers.get(&nid).and_then(|p| p.record.locators.iter().find(|l| l.loc == meta.src_loc)).map(|l| l.pref);
        let (admission, mut cx) = self.admission_parts();
        let Some(admitted) = admission.admit_responder(&mut cx, now, meta, listed_pref, out) else { return false };
        if let Some(p) = self.peers.get_mut(&nid) {
            p.non_ilnp = false;
        }
        // it speaks ILNPv6 after all (or again)
        self.fallback.end(&mut self.stats, nid, out);
        let (admission, mut cx) = self.admission_parts();
        admission.greet_responder(&mut cx, now, meta, admitted, out);
        true
    }

    /// Entries per tier and the bounds.
    pub fn tier_counts(&self) -> TierCounts {
        TierCounts {
            established: self.ilcc.count(Tier::Established),
            embryonic: self.ilcc.count(Tier::Embryonic),
            max_established: self.cfg.ilcc_max_entries,
            max_embryonic: self.cfg.ilcc_embryonic_max,
        }
    }
}
