//! The core's entry into `nids.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::event::Outcome;
use crate::ilcc::{IlccEntry, IlccKey};
use crate::machine::Core;
use crate::nids::{LocalNids, NidRefused};
use ilnp_wire::Nid;

impl Core {
    /// Whether `nid` is one of ours: the stable NID or a live temporary one.
    pub fn is_local_nid(&self, nid: Nid) -> bool {
        nid == self.cfg.local_nid || self.nids.get(nid).is_some()
    }

    /// The temporary NIDs.
    pub fn temporary_nids(&self) -> &LocalNids {
        &self.nids
    }

    /// Which of our NIDs an entry's correspondent talks to.
    pub fn entry_local_nid(&self, e: &IlccEntry) -> Nid {
        e.local_nid.unwrap_or(self.cfg.local_nid)
    }

    /// How many ILCC entries talk to our NID `nid` (the shell removes an expired
    /// temporary NID's address once none do).
    pub fn sessions_on(&self, nid: Nid) -> usize {
        self.ilcc.iter().filter(|e| self.entry_local_nid(e) == nid).count()
    }

    /// Takes `nid` as a temporary NID. Refused (and counted, `temp_nid_refused`) if
    /// it is not unicast, already ours, or a correspondent's we know of: the
    /// shell draws another (the core's part of the collision check; the shell's is
    /// DAD of `L64:NID` on each uplink).
    pub fn add_temporary_nid(&mut self, nid: Nid) -> Result<(), NidRefused> {
        let refused = if nid.check_unicast().is_err() {
            Some(NidRefused::NotUnicast)
        } else if self.is_local_nid(nid) {
            Some(NidRefused::Local)
        } else if self.ilcc.knows(nid) || self.peers.contains_key(&nid) {
            Some(NidRefused::Correspondent)
        } else {
            None
        };
        if let Some(r) = refused {
            self.stats.bump(Outcome::TempNidRefused);
            return Err(r);
        }
        self.nids.add(nid);
        self.stats.bump(Outcome::TempNidAdded);
        Ok(())
    }

    /// New sessions should no longer use `nid`; its sessions go on. False if it is
    /// not a temporary NID of ours.
    pub fn deprecate_temporary_nid(&mut self, nid: Nid) -> bool {
        self.nids.deprecate(nid)
    }

    /// `nid` is no longer ours: its sessions end (their entries are removed, the
    /// fast path told), and a packet to it is from now on one to an unknown NID.
    /// Returns how many sessions ended; None if it was not a temporary NID.
    pub fn remove_temporary_nid(&mut self, nid: Nid, out: &mut Vec<Action>) -> Option<usize> {
        if !self.nids.remove(nid) {
            return None;
        }
        let gone: Vec<IlccKey> = self.ilcc.iter().filter(|e| e.local_nid == Some(nid)).map(|e| e.key()).collect();
        for key in &gone {
            if self.ilcc.remove(key).is_some() {
                out.push(Action::IlccRemove(*key));
            }
        }
        self.stats.bump(Outcome::TempNidRemoved);
        Some(gone.len())
    }
}
