//! The state file: what a restarted ilnpd needs to carry on where a crashed one
//! stopped. The core's part is `ilnp_core::CoreSnapshot` (what is kept is the
//! core's decision); this file adds the shell's own (addresses it added, sysctls to
//! put back) and does the I/O: JSON, written to a temporary file and renamed over
//! the old one (a crash mid-write leaves the old file or the new one, never half),
//! read once at start. A file that does not parse is ignored with a warning naming
//! it: the daemon starts without the old sessions rather than not at all.

use anyhow::{Context, Result};
use ilnp_core::CoreSnapshot;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::Ipv6Addr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bumped when the shell's part changes meaning (the core's has its own version).
pub const STATE_FORMAT: u32 = 1;

/// A change is written this long after it happened (a burst of changes, one write)...
pub const DEBOUNCE: Duration = Duration::from_millis(50);
/// ...and at most this often (a packet storm creating entries: a few writes a second)...
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);
/// ...and never more than 1 / (1 + this) of the time: a write is O(entries) on the
/// daemon's thread (0.5 s and more at 10^5-10^6 entries), so at a fixed interval a storm
/// of new peers would leave the daemon nothing but writing.
pub const IDLE_PER_WRITE_TIME: u32 = 9;

/// When the state file is next due: `dirty` = out of date since, `last` = when the
/// last write started and how long it took.
pub fn next_write(dirty: Instant, last: Option<(Instant, Duration)>) -> Instant {
    let debounced = dirty + DEBOUNCE;
    match last {
        None => debounced,
        Some((at, took)) => debounced.max(at + took + MIN_INTERVAL.max(took * IDLE_PER_WRITE_TIME)),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    pub format: u32,
    pub core: CoreSnapshot,
    /// L64:NID addresses ilnpd added on uplinks (ifindex, address): removed on a clean stop
    pub added: Vec<(u32, Ipv6Addr)>,
    /// uplink sysctls ilnpd changed, with the value to put back on a clean stop
    pub saved_sysctls: Vec<(String, String)>,
    /// directories and the bpffs mount ilnpd created (pin and control-socket
    /// directories): a clean stop removes them if empty, also after a crash
    #[serde(default)]
    pub created: Created,
}

/// Directories (outermost first) and a bpffs mount an ilnpd created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Created {
    pub dirs: Vec<PathBuf>,
    pub bpffs: Option<PathBuf>,
}

impl Created {
    pub fn merge(&mut self, dirs: &[PathBuf], bpffs: Option<&PathBuf>) {
        for d in dirs {
            if !self.dirs.contains(d) {
                self.dirs.push(d.clone());
            }
        }
        if self.bpffs.is_none() {
            self.bpffs = bpffs.cloned();
        }
    }

    /// Removes the directories that are empty (innermost first), then unmounts
    /// the bpffs if nothing is left on it.
    pub fn remove(&self) {
        let mut dirs = self.dirs.clone();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            let _ = std::fs::remove_dir(d);
        }
        if let Some(m) = &self.bpffs {
            crate::bpf::unmount_if_empty(m);
        }
    }
}

/// The file at `path`, if there is one and it is good; otherwise None, after a
/// warning that names the file and what is wrong with it.
pub fn load(path: &Path) -> Option<StateFile> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!("state file {}: {e}: ignored, starting without the previous sessions", path.display());
            return None;
        }
    };
    match parse(&text) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(
                "state file {}: {e:#}: ignored (corrupt or truncated), starting without the previous sessions",
                path.display()
            );
            None
        }
    }
}

pub fn parse(text: &[u8]) -> Result<StateFile> {
    let s: StateFile = serde_json::from_slice(text).context("not a state file")?;
    if s.format != STATE_FORMAT {
        anyhow::bail!("format {} (this build reads {STATE_FORMAT})", s.format);
    }
    Ok(s)
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tmp");
    PathBuf::from(p)
}

/// Atomic replace: write `path.tmp`, fsync, rename over `path`.
pub fn save(path: &Path, s: &StateFile) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = tmp_path(path);
    let bytes = serde_json::to_vec(s).context("serialising the state")?;
    let mut f = match create_tmp(&tmp) {
        // left by a write that died half-way (or planted): removed (a symlink itself,
        // never what it points to), then made afresh
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp).with_context(|| format!("removing the leftover {}", tmp.display()))?;
            create_tmp(&tmp)
        }
        r => r,
    }
    .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(&bytes).with_context(|| format!("writing {}", tmp.display()))?;
    f.sync_data().with_context(|| format!("syncing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// A new file, 0600 (it holds every session's nonces, RFC 6744: as secret as the
/// sessions): O_CREAT|O_EXCL and O_NOFOLLOW, so a symlink or a file someone put at
/// the path is never written through.
fn create_tmp(tmp: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(tmp)
}

/// A clean stop: nothing to adopt next time.
pub fn remove(path: &Path) {
    for p in [path.to_path_buf(), tmp_path(path)] {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("removing state file {}: {e}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_debounced_spaced_and_bounded_to_a_tenth_of_the_time() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // first change: 50 ms later
        assert_eq!(next_write(t0, None), t0 + ms(50));
        // a cheap write 10 ms long: the next one 250 ms after it ended
        assert_eq!(next_write(t0 + ms(20), Some((t0, ms(10)))), t0 + ms(260));
        // a change long after: only debounced
        assert_eq!(next_write(t0 + ms(5000), Some((t0, ms(10)))), t0 + ms(5050));
        // a write that took 800 ms (10^6 entries): 7.2 s idle after it, 10 % of the time
        assert_eq!(next_write(t0 + ms(900), Some((t0, ms(800)))), t0 + ms(800 + 7200));
    }

    fn sample() -> StateFile {
        StateFile {
            format: STATE_FORMAT,
            core: CoreSnapshot {
                version: ilnp_core::SNAPSHOT_VERSION,
                local_nid: 0x0200_00ff_fe00_000a,
                entries: vec![],
                non_ilnp: vec![7],
                fallback: vec![],
                dns_peers: vec![],
                temporary_nids: vec![],
            },
            added: vec![(3, "2001:db8:1::200:ff:fe00:a".parse().unwrap())],
            saved_sysctls: vec![("/proc/sys/net/ipv6/conf/e/ignore_routes_with_linkdown".into(), "0".into())],
            created: Created { dirs: vec!["/sys/fs/bpf/ilnp".into()], bpffs: Some("/sys/fs/bpf".into()) },
        }
    }

    #[test]
    fn round_trip_through_an_atomic_write() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/ilnpd.state");
        save(&p, &sample()).unwrap();
        assert!(!tmp_path(&p).exists(), "temporary file renamed away");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the nonces are readable by others: {mode:o}");
        assert_eq!(load(&p), Some(sample()));
        remove(&p);
        assert!(!p.exists());
        assert_eq!(load(&p), None, "no file: nothing to restore");
    }

    /// A symlink (or a leftover file) at the temporary path is never written
    /// through: the link is replaced, its target keeps its bytes.
    #[test]
    fn the_temporary_file_never_follows_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ilnpd.state");
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, tmp_path(&p)).unwrap();
        let e = create_tmp(&tmp_path(&p)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        save(&p, &sample()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "written through the symlink");
        assert!(std::fs::symlink_metadata(tmp_path(&p)).is_err(), "temporary file renamed away");
        assert_eq!(load(&p), Some(sample()));
        // a leftover regular temporary file (a write that died): replaced as well
        std::fs::write(tmp_path(&p), "half a write").unwrap();
        save(&p, &sample()).unwrap();
        assert_eq!(load(&p), Some(sample()));
    }

    #[test]
    fn corrupt_truncated_or_foreign_files_are_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.state");
        let good = serde_json::to_vec(&sample()).unwrap();
        for bad in [&good[..good.len() / 2], b"\x00\xff garbage", b"", b"{\"format\":2}"] {
            std::fs::write(&p, bad).unwrap();
            assert_eq!(load(&p), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let mut other = sample();
        other.format = 9;
        std::fs::write(&p, serde_json::to_vec(&other).unwrap()).unwrap();
        assert!(parse(&std::fs::read(&p).unwrap()).unwrap_err().to_string().contains("format 9"));
    }
}
