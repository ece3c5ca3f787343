//! The core's entry into `timers.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::event::{Event, Outcome};
use crate::machine::Core;
use std::time::Instant;

impl Core {
    /// The next instant `handle_timeout` has work: an LU (re)transmission, a remote
    /// locator's lifetime end, an entry's idle deadline, or the end of a soft-handoff
    /// quiet period. O(1) in the number of ILCC entries.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.ilcc.next_deadline(),
            self.local.next_retirement(),
            self.challenges.next_deadline(),
            self.v4.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Due work at `now`. A shell with a fast path feeds `note_local_activity` first,
    /// so a quiet period ends on what really arrived.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_timeout_into(now, &mut out);
        out
    }

    /// `handle_timeout` into a buffer of the caller's (cleared first), as
    /// `handle_inbound_into`.
    pub fn handle_timeout_into(&mut self, now: Instant, out: &mut Vec<Action>) {
        out.clear();
        // a quiet period ended: the same rule as for a change the shell reports; the
        // LU leaves here
        if let Some(update) = self.local.reevaluate(now) {
            out.extend(self.apply_local_update(now, update));
        }
        let due = self.ilcc.take_due(now);
        out.extend(self.send_due_lus(now, &due));
        let mut aged = Vec::new();
        for key in &due {
            let Some(e) = self.ilcc.get_mut(key) else { continue };
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
        let idle = self.cfg.idle_timeout;
        for key in due {
            if !self.ilcc.get(&key).is_some_and(|e| e.is_idle(now, idle)) {
                continue;
            }
            self.ilcc.remove(&key);
            self.stats.bump(Outcome::IlccIdleExpired);
            out.push(Action::IlccRemove(key));
            out.push(Action::Event(Event::PeerRemoved { nid: key.remote, reason: "idle" }));
        }
        // peer-restart challenges nobody answered (`challenge.rs`)
        self.challenges.due(&self.ilcc, &mut self.stats, now, out);
        let (v4, mut cx) = self.v4_parts();
        v4.due(&mut cx, now, out);
        self.ilcc.tidy();
        self.finish(out);
    }
}
