//! The core's entry into `local.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::event::{Event, Outcome};
use crate::ilcc::{self, IlccKey};
use crate::local::LocalUpdate;
use crate::locator::LocalLocator;
use crate::machine::Core;
use ilnp_wire::Locator;
use std::time::Instant;

impl Core {
    /// The kernel's view of our locators changed. Sends Locator Updates listing all
    /// valid locators to every correspondent when the valid set changes
    /// (RFC 6743 §2, RFC 6740 §6).
    pub fn set_local_locators(&mut self, now: Instant, locs: Vec<LocalLocator>) -> Vec<Action> {
        let update = self.local.set(now, locs);
        let mut out = self.apply_local_update(now, update);
        self.ilcc.tidy();
        self.finish(&mut out);
        out
    }

    pub(crate) fn apply_local_update(&mut self, now: Instant, update: LocalUpdate) -> Vec<Action> {
        let mut out = Vec::new();
        for (locator, quiet) in update.retired {
            self.stats.bump(Outcome::LocalLocatorRetired);
            out.push(Action::Event(Event::LocalLocatorRetired { locator, quiet_ms: quiet.as_millis() as u64 }));
        }
        out.push(Action::LocalLocators(self.local.all().to_vec()));
        let (v4, mut cx) = self.v4_parts();
        v4.locals_changed(&mut cx, now, &mut out);
        if !update.advertised_changed {
            return out;
        }
        out.push(Action::Event(Event::LocalLocatorsChanged {
            locators: self.local.all().iter().map(|l| format!("{}({:?})", l.loc, l.state)).collect(),
        }));
        let best = self.local.best();
        let any_usable = best.is_some();
        let keys: Vec<IlccKey> = self.ilcc.iter().map(|e| e.key()).collect();
        for &key in &keys {
            let Some(e) = self.ilcc.get_mut(&key) else { continue };
            // the source the peer saw us on (an LU still unacked: the one before it)
            let known = e.pending_lu.as_ref().and_then(|p| p.known_local).unwrap_or(e.local_locator);
            // switch to the preferred locator when ours went away or a better one came
            if let Some(b) = best {
                if !self.local.is_usable(e.local_locator) || Some(e.local_locator) == update.old_best {
                    e.local_locator = b;
                }
                // ... of a family the correspondent can be reached in (v4path.rs)
                self.fit_local(key);
            }
            let Some(e) = self.ilcc.get_mut(&key) else { continue };
            // LUs go to established peers only (admission.rs)
            if !any_usable || e.tier == crate::ilcc::Tier::Embryonic {
                continue;
            }
            e.pending_lu = Some(ilcc::PendingLu { known_local: Some(known), ..ilcc::PendingLu::due_now(now) });
            if let Some(s) = e.snapshot() {
                out.push(Action::IlccUpsert(s));
            }
        }
        let keys: Vec<IlccKey> = keys
            .into_iter()
            .filter(|k| self.ilcc.get(k).is_some_and(|e| e.tier == crate::ilcc::Tier::Established))
            .collect();
        out.extend(self.send_due_lus(now, &keys));
        out
    }

    /// A packet arrived on local locator `loc` at `last_rx` (the shell reads the
    /// fast path's per-locator timestamp; packets the core handles count by
    /// themselves). Older reports than what is known are ignored.
    pub fn note_local_activity(&mut self, loc: Locator, last_rx: Instant) {
        self.local.note_activity(loc, last_rx);
    }
}
