//! What ilnpd changed on the host, as data: one list of changes in the order they
//! were made, each entry carrying what undoes it. Start-up pushes an entry as each
//! change is made (`Daemon::start`, `setup`); a failed start (`Undo::Rollback`), a
//! clean stop (`Undo::Stop`) and a handover (`Undo::Handover`) pop the same list,
//! last change first, so a new host change goes in one place with its undo beside it.
//!
//! An entry adopted from an earlier ilnpd (crashed or handed over: its ilnp0, lock
//! file, pinned data path, state file, sysctls, addresses, directories) is marked
//! `adopted`: a failed start leaves it for the next attempt, a clean stop undoes it
//! too (with the values from before that earlier run).

use super::startup::InstanceLock;
use super::Daemon;
use crate::state::Created;
use crate::tun::Tun;
use std::collections::BTreeSet;
use std::net::Ipv6Addr;
use std::path::PathBuf;

/// One change to the host, with what its undo needs.
pub(super) enum Change {
    /// the instance lock beside the control socket (adopted: its file was a crashed run's)
    Lock(InstanceLock),
    /// ilnp0 (its sysctls, MTU, address and route go with it); the device is
    /// `Daemon::tun` (adopted: an earlier run's persistent ilnp0)
    Tun,
    /// the state file (adopted: the earlier run's)
    StateFile(PathBuf),
    /// a sysctl set, with the value to put back (also the state file's record)
    Sysctl { path: String, old: String },
    /// the data path, `Daemon::dp`: maps, programs and links (adopted: pinned by an
    /// earlier run, which keeps running)
    Datapath,
    /// the `L64:NID` addresses on the uplinks, `Daemon::added` (which follows the
    /// locators at run time); `found`: those the earlier run added
    Addresses { found: BTreeSet<(u32, Ipv6Addr)> },
    /// the control socket's file
    ControlSocket(PathBuf),
    /// the dynamic update of our L64 records (its task ends with it)
    DnsUpdate,
    /// directories and the bpffs mount an earlier run created (always adopted)
    Created(Created),
}

pub(super) struct Entry {
    change: Change,
    adopted: bool,
}

/// How the list is popped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Undo {
    /// a failed start: undo what this start changed, leave what it adopted
    Rollback,
    /// a clean stop: undo everything, adopted entries too
    Stop,
    /// SIGUSR2: leave everything for the next ilnpd (which adopts it) but the
    /// control socket; the lock file stays, the kernel drops the lock at exit
    Handover,
}

/// The applied changes, oldest first.
#[derive(Default)]
pub(super) struct HostChanges(Vec<Entry>);

impl HostChanges {
    /// A change just made (`adopted`: found from an earlier run).
    pub fn push(&mut self, change: Change, adopted: bool) {
        self.0.push(Entry { change, adopted });
    }

    /// What an earlier run left and this one takes over without changing: older
    /// than anything this run did, so it goes under every entry (undone last).
    pub fn push_under(&mut self, change: Change) {
        self.0.insert(0, Entry { change, adopted: true });
    }

    /// The sysctls changed and their values to put back, oldest first (the state
    /// file's `saved_sysctls`).
    pub fn sysctls(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter_map(|e| match &e.change {
                Change::Sysctl { path, old } => Some((path.clone(), old.clone())),
                _ => None,
            })
            .collect()
    }

    /// A sysctl whose write failed: nothing to put back.
    pub fn forget_sysctl(&mut self, p: &str, v: &str) {
        self.0.retain(|e| !matches!(&e.change, Change::Sysctl { path, old } if path == p && old == v));
    }

    /// The instance lock, while held.
    pub fn lock(&self) -> Option<&InstanceLock> {
        self.0.iter().find_map(|e| match &e.change {
            Change::Lock(l) => Some(l),
            _ => None,
        })
    }

    /// The directories and mount earlier runs created (adopted).
    pub fn adopted_created(&self) -> Created {
        let mut c = Created::default();
        for e in &self.0 {
            if let Change::Created(x) = &e.change {
                c.merge(&x.dirs, x.bpffs.as_ref());
            }
        }
        c
    }

    /// A start that failed before the daemon existed: only the lock and ilnp0
    /// (`tun`, still the caller's) can be on the list.
    pub fn rollback_early(mut self, tun: &mut Option<Tun>) {
        while let Some(Entry { change, adopted }) = self.0.pop() {
            match change {
                Change::Tun => {
                    // a device we created goes with its address and route when it
                    // stops being persistent and its fd closes; an adopted one stays
                    if let Some(t) = tun.take() {
                        if !adopted {
                            let _ = t.set_persist(false);
                        }
                    }
                }
                Change::Lock(l) => l.release_rollback(),
                _ => unreachable!("made after the daemon exists"),
            }
        }
    }
}

impl Daemon {
    /// Pops every change, last first, undoing each as `how` says.
    pub(super) async fn undo_changes(&mut self, how: Undo) {
        while let Some(Entry { change, adopted }) = self.changes.0.pop() {
            // Rollback undoes this run's changes, Stop everything, Handover nothing
            // but the control socket (the next ilnpd adopts the rest)
            let undo = how == Undo::Stop || (how == Undo::Rollback && !adopted);
            match change {
                Change::DnsUpdate => self.dns_update = None,
                Change::ControlSocket(p) => {
                    let _ = std::fs::remove_file(p);
                }
                Change::Addresses { found } if how != Undo::Handover => {
                    let gone: Vec<(u32, Ipv6Addr)> = match how {
                        Undo::Stop => std::mem::take(&mut self.added).into_iter().collect(),
                        _ => self.added.difference(&found).copied().collect(),
                    };
                    for (idx, a) in gone {
                        if let Err(e) = self.nl.del_address(idx, a, 64).await {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                Change::Addresses { .. } => {}
                Change::Datapath => self.undo_datapath(how, adopted),
                Change::Sysctl { path, old } if undo => {
                    if let Err(e) = std::fs::write(&path, &old) {
                        tracing::warn!("restoring {path} to {old}: {e}");
                    }
                }
                Change::Sysctl { .. } => {}
                Change::StateFile(p) if undo => crate::state::remove(&p),
                Change::StateFile(_) => {}
                Change::Tun if undo => {
                    // closing the (no longer persistent) TUN removes ilnp0 with its
                    // address and route
                    if let Err(e) = self.tun.set_persist(false) {
                        tracing::warn!("{e:#}");
                    }
                }
                Change::Tun => {}
                Change::Lock(l) => match how {
                    Undo::Stop => l.release(),
                    Undo::Rollback => l.release_rollback(),
                    Undo::Handover => l.keep_for_successor(),
                },
                Change::Created(c) if how == Undo::Stop => c.remove(),
                Change::Created(_) => {}
            }
        }
    }

    /// The next-hop cache off first (with pinned maps the fast path runs on
    /// without us), then the data path: a stop detaches it (uplinks first: packets
    /// stop being punted to a TUN about to close); a rollback abandons an adopted
    /// one (it keeps running) and detaches its own.
    fn undo_datapath(&mut self, how: Undo, adopted: bool) {
        self.route_watch = None;
        let Some(mut dp) = self.dp.take() else { return };
        match how {
            Undo::Stop => {
                for u in &self.uplinks {
                    if let Err(e) = dp.detach_uplink(u.index) {
                        tracing::warn!("detaching from {}: {e:#}", u.name);
                    }
                }
                if let Err(e) = dp.shutdown() {
                    tracing::warn!("detaching eBPF programs: {e:#}");
                }
            }
            Undo::Rollback => {
                let r = if adopted {
                    dp.abandon()
                } else {
                    for u in &self.uplinks {
                        let _ = dp.detach_uplink(u.index);
                    }
                    dp.shutdown()
                };
                if let Err(e) = r {
                    tracing::warn!("undoing the data path: {e:#}");
                }
            }
            Undo::Handover => {
                if let Err(e) = dp.abandon() {
                    tracing::warn!("leaving the data path: {e:#}");
                }
            }
        }
    }
}
