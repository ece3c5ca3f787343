//! What ilnpd changes on the host, as data: start-up's steps (`Step`, in the order
//! they are taken), one list of the changes they made (`HostChanges`), each entry
//! carrying what undoes it, the instance lock (the first change), and the fault
//! injection that tests the undo of every step (`ILNPD_FAIL_AT`, asked by the list as
//! each step ends: `HostChanges::done`).
//!
//! Start-up pushes an entry as each change is made (`Daemon::start`, `setup`); a
//! failed start (`Undo::Rollback`), a clean stop (`Undo::Stop`) and a handover
//! (`Undo::Handover`) pop the same list, last change first, so a new host change goes
//! in one place with its undo beside it. A start that fails at step k undoes what
//! steps 1..k changed and leaves the host as it found it.
//!
//! An entry adopted from an earlier ilnpd (crashed or handed over: its ilnp0, lock
//! file, pinned data path, state file, sysctls, addresses, directories) is marked
//! `adopted`: it was there before this start, so a failed start leaves it for the
//! next attempt; a clean stop undoes it too (with the values from before that
//! earlier run).

use super::Daemon;
use crate::state::Created;
use crate::tun::Tun;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::net::Ipv6Addr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

ilnp_wire::named_enum! {
    /// The steps of start-up that change the host (or claim something on it), in the
    /// order they are taken; `Change::step` says which step makes each change on the
    /// list. docs/architecture.md § "Start-up and stop" lists what each one changes
    /// and how it is undone.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Step {
        /// the instance lock beside the control socket
        Lock = "lock",
        /// the resolver proxy's sockets (`[dns]`): bound before anything changes
        DnsListen = "dns-listen",
        /// the metrics endpoint's sockets (`[metrics]`), likewise
        MetricsListen = "metrics-listen",
        /// the v4 path's UDP port (`[ipv4]`), likewise
        V4Listen = "v4-listen",
        /// ilnp0 created (or an earlier run's adopted)
        Tun = "tun",
        /// ilnp0's sysctls, MTU, up, identifier address and route
        TunConfig = "tun-config",
        /// `ignore_routes_with_linkdown` on the uplinks
        UplinkSysctls = "uplink-sysctls",
        /// eBPF maps (pinned), tc programs on ilnp0 and the uplinks, sock_ops on the cgroup root
        Datapath = "datapath",
        /// `L64:NID` addresses on the uplinks
        Locators = "locators",
        /// the state file, written before anything else can go wrong
        StateFile = "state-file",
        /// the control socket
        ControlSocket = "control-socket",
        /// the dynamic update of our L64 records (`[dns.update]`)
        DnsUpdate = "dns-update",
    }
}

/// The environment variable that makes start-up fail right after the named step,
/// as if that step had failed: how the tests check that every step is undone.
pub const FAIL_AT_ENV: &str = "ILNPD_FAIL_AT";

/// Where start-up is told to fail (`ILNPD_FAIL_AT`), if anywhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct FaultPlan(Option<Step>);

impl FaultPlan {
    /// An unknown step name is an error that lists the steps (so a test can ask for them).
    pub fn from_env() -> Result<FaultPlan> {
        let Some(v) = std::env::var_os(FAIL_AT_ENV) else { return Ok(FaultPlan(None)) };
        let v = v.to_string_lossy();
        match Step::from_name(&v) {
            Some(s) => {
                tracing::warn!("{FAIL_AT_ENV}={v}: start-up will fail after step {v} (a test of the rollback)");
                Ok(FaultPlan(Some(s)))
            }
            None => {
                let names: Vec<&str> = Step::ALL.iter().map(|s| s.as_str()).collect();
                bail!("{FAIL_AT_ENV}: {v:?} is not a start-up step; the steps are: {}", names.join(" "))
            }
        }
    }

    /// Called after each step: an error if this is where start-up is to fail.
    pub fn after(&self, step: Step) -> Result<()> {
        match self.0 {
            Some(s) if s == step => Err(anyhow!("start-up step {}: failing on request ({FAIL_AT_ENV})", s.as_str())),
            _ => Ok(()),
        }
    }
}

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

impl Change {
    /// The start-up step that makes this change (`None`: an earlier run's
    /// directories, made by no step of this one).
    pub fn step(&self) -> Option<Step> {
        Some(match self {
            Change::Lock(_) => Step::Lock,
            Change::Tun => Step::Tun,
            Change::Sysctl { .. } => Step::UplinkSysctls,
            Change::Datapath => Step::Datapath,
            Change::Addresses { .. } => Step::Locators,
            Change::StateFile(_) => Step::StateFile,
            Change::ControlSocket(_) => Step::ControlSocket,
            Change::DnsUpdate => Step::DnsUpdate,
            Change::Created(_) => return None,
        })
    }
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

/// The applied changes, oldest first, and how far start-up has come.
pub(super) struct HostChanges {
    entries: Vec<Entry>,
    /// where start-up is told to fail
    fault: FaultPlan,
    /// the last step taken
    taken: Option<Step>,
}

impl HostChanges {
    pub fn new(fault: FaultPlan) -> HostChanges {
        HostChanges { entries: Vec::new(), fault, taken: None }
    }

    /// A change just made (`adopted`: found from an earlier run). This run makes a
    /// change no later than its step (the state file is written ahead, before its
    /// own step).
    pub fn push(&mut self, change: Change, adopted: bool) {
        debug_assert!(
            adopted || change.step() > self.taken,
            "{:?} made after its step (taken: {:?})",
            change.step(),
            self.taken
        );
        self.entries.push(Entry { change, adopted });
    }

    /// Step `step` is complete: the steps come in `Step`'s order, and this is where
    /// an injected fault (`ILNPD_FAIL_AT`) fails start-up as if the step had failed.
    pub fn done(&mut self, step: Step) -> Result<()> {
        debug_assert!(Some(step) > self.taken, "step {step} after {:?}", self.taken);
        self.taken = Some(step);
        self.fault.after(step)
    }

    /// What an earlier run left and this one takes over without changing: older
    /// than anything this run did, so it goes under every entry (undone last).
    pub fn push_under(&mut self, change: Change) {
        self.entries.insert(0, Entry { change, adopted: true });
    }

    /// The sysctls changed and their values to put back, oldest first (the state
    /// file's `saved_sysctls`).
    pub fn sysctls(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter_map(|e| match &e.change {
                Change::Sysctl { path, old } => Some((path.clone(), old.clone())),
                _ => None,
            })
            .collect()
    }

    /// A sysctl whose write failed: nothing to put back.
    pub fn forget_sysctl(&mut self, p: &str, v: &str) {
        self.entries.retain(|e| !matches!(&e.change, Change::Sysctl { path, old } if path == p && old == v));
    }

    /// The instance lock, while held.
    pub fn lock(&self) -> Option<&InstanceLock> {
        self.entries.iter().find_map(|e| match &e.change {
            Change::Lock(l) => Some(l),
            _ => None,
        })
    }

    /// The directories and mount earlier runs created (adopted).
    pub fn adopted_created(&self) -> Created {
        let mut c = Created::default();
        for e in &self.entries {
            if let Change::Created(x) = &e.change {
                c.merge(&x.dirs, x.bpffs.as_ref());
            }
        }
        c
    }

    /// A start that failed before the daemon existed: only the lock and ilnp0
    /// (`tun`, still the caller's) can be on the list.
    pub fn rollback_early(mut self, tun: &mut Option<Tun>) {
        while let Some(Entry { change, adopted }) = self.entries.pop() {
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

/// One daemon per control socket: an exclusive `flock` on `<control socket>.lock`
/// (with the holder's pid inside, for the error), taken before anything else. A
/// second ilnpd with the same control socket (two network namespaces, one /run)
/// stops there, having touched nothing of the first one's. The kernel drops the lock
/// when its holder dies, so a crashed daemon's successor gets it.
pub struct InstanceLock {
    file: File,
    path: PathBuf,
    /// the lock file was there before (a crashed ilnpd's): a failed start leaves it
    existed: bool,
    /// the directory we created for it (removed on release if empty)
    created_dir: Option<PathBuf>,
}

pub fn lock_path(control_socket: &Path) -> PathBuf {
    let mut p = control_socket.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

impl InstanceLock {
    pub fn acquire(control_socket: &Path) -> Result<InstanceLock> {
        let path = lock_path(control_socket);
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let created_dir = if dir.exists() {
            None
        } else {
            std::fs::create_dir_all(dir).with_context(|| format!("control_socket: creating {}", dir.display()))?;
            Some(dir.to_path_buf())
        };
        let release_dir = |created: &Option<PathBuf>| {
            if let Some(d) = created {
                let _ = std::fs::remove_dir(d);
            }
        };
        let existed = path.exists();
        let mut file = match std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)
        {
            Ok(f) => f,
            Err(e) => {
                release_dir(&created_dir);
                return Err(e).with_context(|| format!("control_socket: opening the instance lock {}", path.display()));
            }
        };
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                bail!(
                    "control_socket: {} is in use: another ilnpd (pid {}) is running with it; give each \
                     instance its own control_socket (nothing was changed)",
                    control_socket.display(),
                    pid.trim()
                );
            }
            return Err(e).with_context(|| format!("control_socket: locking {}", path.display()));
        }
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = writeln!(file, "{}", std::process::id());
        Ok(InstanceLock { file, path, existed, created_dir })
    }

    /// A stop: removes the lock file (still holding the lock, so no one else has
    /// it), then the directory if we created it and it is empty.
    pub fn release(self) {
        let _ = std::fs::remove_file(&self.path);
        self.release_dir();
    }

    /// A failed start: removes the lock file only if this start created it.
    pub fn release_rollback(self) {
        if !self.existed {
            let _ = std::fs::remove_file(&self.path);
        }
        self.release_dir();
    }

    fn release_dir(self) {
        drop(self.file);
        if let Some(d) = &self.created_dir {
            let _ = std::fs::remove_dir(d);
        }
    }

    /// The lock file was a crashed ilnpd's (a failed start leaves it).
    pub fn adopted(&self) -> bool {
        self.existed
    }

    /// The directory created for the lock, if any (recorded in the state file).
    pub fn created_dir(&self) -> Option<&PathBuf> {
        self.created_dir.as_ref()
    }

    /// Leaves the lock file (its content is only a pid) for the next ilnpd; the
    /// kernel releases the lock itself when the process exits.
    pub fn keep_for_successor(self) {
        drop(self.file);
    }
}

impl Daemon {
    /// Pops every change, last first, undoing each as `how` says.
    pub(super) async fn undo_changes(&mut self, how: Undo) {
        while let Some(Entry { change, adopted }) = self.changes.entries.pop() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_instance_is_refused_and_removes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let sock = d.path().join("run/ilnpd.sock");
        let first = InstanceLock::acquire(&sock).unwrap();
        std::fs::write(&sock, b"").unwrap(); // stands for the first one's socket
        let e = format!("{:#}", InstanceLock::acquire(&sock).err().expect("second refused"));
        assert!(e.contains("in use") && e.contains(&std::process::id().to_string()), "{e}");
        assert!(sock.exists() && lock_path(&sock).exists(), "the refused one removed the first one's files");
        std::fs::remove_file(&sock).unwrap();
        first.release();
        assert!(!lock_path(&sock).exists());
        assert!(!d.path().join("run").exists(), "the directory it created is gone");
        InstanceLock::acquire(&sock).unwrap().release();
    }

    #[test]
    fn fault_plan_names_every_step() {
        let names: Vec<&str> = Step::ALL.iter().map(|s| s.as_str()).collect();
        let mut sorted = names.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), Step::ALL.len(), "{names:?}");
        let p = FaultPlan(Some(Step::Datapath));
        assert!(p.after(Step::Tun).is_ok());
        assert!(p.after(Step::Datapath).unwrap_err().to_string().contains("datapath"));
    }

    #[test]
    fn the_list_takes_the_steps_in_order_and_fails_where_told() {
        // start-up's order: every step done once, the changes pushed during their step
        let mut c = HostChanges::new(FaultPlan(Some(Step::ControlSocket)));
        for &s in Step::ALL {
            match s {
                Step::UplinkSysctls => c.push(Change::Sysctl { path: "p".into(), old: "0".into() }, false),
                Step::StateFile => c.push(Change::StateFile("s".into()), false),
                Step::ControlSocket => c.push(Change::ControlSocket("c".into()), false),
                _ => {}
            }
            let r = c.done(s);
            assert_eq!(r.is_err(), s == Step::ControlSocket, "{s}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("control-socket") && e.to_string().contains(FAIL_AT_ENV), "{e}");
                break;
            }
        }
        let steps: Vec<Option<Step>> = c.entries.iter().map(|e| e.change.step()).collect();
        assert_eq!(steps, [Some(Step::UplinkSysctls), Some(Step::StateFile), Some(Step::ControlSocket)]);
        assert_eq!(c.sysctls(), [("p".to_string(), "0".to_string())]);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "after")]
    fn a_step_out_of_order_is_a_bug() {
        let mut c = HostChanges::new(FaultPlan::default());
        c.done(Step::Datapath).unwrap();
        let _ = c.done(Step::Tun);
    }
}
