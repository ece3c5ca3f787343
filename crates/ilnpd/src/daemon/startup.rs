//! Start-up's steps (`Daemon::start`; each change goes on `host_changes`'s list
//! with its undo), the instance lock that keeps two daemons off one set of
//! files, and the fault injection that tests the undo of every step.
//!
//! A start that fails at step k undoes steps 1..k and leaves the host as it found
//! it. What an earlier ilnpd left for adoption (a persistent ilnp0, pinned maps and
//! links, the state file, the addresses and sysctls it recorded) was there before
//! this start, so a failed adoption leaves it too, for the next attempt.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

ilnp_wire::named_enum! {
    /// The steps of start-up that change the host (or claim something on it), in the
    /// order they are taken. docs/architecture.md § "Start-up and stop" lists what
    /// each one changes and how it is undone.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// Tells systemd (`Type=notify`, $NOTIFY_SOCKET) that start-up is complete: the data
/// path is attached and the control socket answers, so units ordered after ilnpd
/// find it working. Without a service manager, nothing.
pub fn notify_ready() {
    if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]) {
        tracing::warn!("telling systemd we are ready: {e}");
    }
}

/// Tells systemd the daemon is stopping (a clean stop or a handover).
pub fn notify_stopping() {
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
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
}
