//! Timers: LU retransmissions, remote locator lifetimes, idle ILCC entries and the
//! end of soft-handoff quiet periods.

use crate::event::{Event, Outcome};
use crate::{Action, Core};
use std::time::Instant;

impl Core {
    /// The next instant `handle_timeout` has work: an LU (re)transmission, a remote
    /// locator's lifetime end, an entry's idle deadline, or the end of a soft-handoff
    /// quiet period.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let lu = self.ilcc.iter().filter_map(|e| e.pending_lu.as_ref().map(|p| p.next_at)).min();
        let idle = self.ilcc.iter().map(|e| e.last_used + self.cfg.idle_timeout).min();
        let expiry = self.ilcc.iter().filter_map(|e| e.next_expiry()).min();
        [lu, idle, expiry, self.local.next_retirement()].into_iter().flatten().min()
    }

    /// Due work at `now`. A shell with a fast path feeds `note_local_activity` first,
    /// so a quiet period ends on what really arrived.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        // a quiet period ended: the same rule as for a change the shell reports; the
        // LU leaves here
        if let Some(update) = self.local.reevaluate(now) {
            out.extend(self.apply_local_update(now, update));
        }
        out.extend(self.send_due_lus(now));
        let mut aged = Vec::new();
        for e in self.ilcc.iter_mut() {
            if e.next_expiry().is_some_and(|t| t <= now) {
                let before = e.best_remote().map(|r| r.loc);
                let locs = e.age_locators(now);
                if !locs.is_empty() && e.best_remote().map(|r| r.loc) != before {
                    out.extend(e.snapshot().map(Action::IlccUpsert));
                }
                aged.extend(locs.into_iter().map(|l| (e.nid, l)));
            }
        }
        for (nid, locator) in aged {
            self.stats.bump(Outcome::RemoteLocatorAged);
            out.push(Action::Event(Event::RemoteLocatorAged { nid, locator }));
        }
        for nid in self.ilcc.idle(now, self.cfg.idle_timeout) {
            self.ilcc.remove(&nid);
            self.stats.bump(Outcome::IlccIdleExpired);
            out.push(Action::IlccRemove(nid));
            out.push(Action::Event(Event::PeerRemoved { nid, reason: "idle" }));
        }
        out
    }
}
