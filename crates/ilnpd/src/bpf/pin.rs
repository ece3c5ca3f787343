//! The pin directory: on a bpf filesystem (mounted at /sys/fs/bpf if it is not,
//! as under `ip netns exec`), holding one file per map so a restarted ilnpd finds
//! its ILCC again. Cleaned up by `Datapath::shutdown`.

use anyhow::{anyhow, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const BPF_FS_MAGIC: u32 = 0xcafe_4a11;
const BPFFS_DEFAULT: &str = "/sys/fs/bpf";

pub(crate) struct Pins {
    pub dir: PathBuf,
    /// where the maps are pinned (`use_layout`)
    pub maps: PathBuf,
    mounted: Option<PathBuf>,
    /// directories this run created, outermost first (removed again if empty)
    created: Vec<PathBuf>,
    /// the maps were pinned by an earlier ilnpd (its sessions are being adopted)
    pub adopted: bool,
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| anyhow!("{} contains a NUL byte", p.display()))
}

pub(crate) fn is_bpffs(p: &Path) -> bool {
    let Ok(c) = cpath(p) else { return false };
    // SAFETY: statfs writes into the zeroed struct we pass; c is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as u32 == BPF_FS_MAGIC }
}

fn mount_bpffs(at: &Path) -> Result<()> {
    let target = cpath(at)?;
    let src = CString::new("bpf").unwrap();
    // SAFETY: all pointers are valid NUL-terminated strings; no data argument.
    let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), src.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("mount -t bpf bpf {}", at.display()));
    }
    Ok(())
}

impl Pins {
    pub(crate) fn prepare(dir: &Path) -> Result<Pins> {
        let dir = if dir.is_absolute() { dir.to_path_buf() } else { std::env::current_dir()?.join(dir) };
        let existing = dir.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/")).to_path_buf();
        let mut mounted = None;
        if !is_bpffs(&existing) {
            let default = Path::new(BPFFS_DEFAULT);
            if dir.starts_with(default) && default.is_dir() && !is_bpffs(default) {
                mount_bpffs(default)?;
                tracing::warn!(
                    "mounted a bpf filesystem at {BPFFS_DEFAULT}: if this process has a private mount namespace \
                     (ip netns exec), the pins go with it and a crash is not survived; mount bpffs in the host \
                     namespace and point pin_dir there"
                );
                mounted = Some(default.to_path_buf());
            } else {
                return Err(anyhow!(
                    "pin directory {} is not on a bpf filesystem (mount one: mount -t bpf bpf {})",
                    dir.display(),
                    BPFFS_DEFAULT
                ));
            }
        }
        let created: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|a| !a.exists())
            .map(Path::to_path_buf)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if let Err(e) = std::fs::create_dir_all(&dir) {
            let dotted = created.iter().any(|d| d.file_name().is_some_and(|n| n.to_string_lossy().contains('.')));
            let hint = if dotted { " (bpffs refuses names with a dot: choose a pin_dir without one)" } else { "" };
            let err = anyhow!("creating pin directory {}: {e}{hint}", dir.display());
            Pins { maps: dir.clone(), dir, mounted, created, adopted: false }.remove(&[]).ok();
            return Err(err);
        }
        Ok(Pins { maps: dir.clone(), dir, mounted, created, adopted: false })
    }

    /// The maps of layout `id` are pinned in `maps-<id>/` (bpffs holds BPF objects
    /// and directories, no plain files, so the layout is in the name). Map
    /// directories of another layout (an upgrade changed the maps) are removed,
    /// logged, so the maps are created afresh; link pins stay (their programs are
    /// replaced anyway).
    pub(crate) fn use_layout(&mut self, id: &str) -> Result<()> {
        let want = format!("maps-{id}");
        let entries =
            std::fs::read_dir(&self.dir).with_context(|| format!("reading pin directory {}", self.dir.display()))?;
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("maps-") || name == want {
                continue;
            }
            let old = e.path();
            tracing::warn!(
                "pin directory {}: maps of layout {} differ from this build's {id}: replaced (the old daemon's sessions are lost)",
                self.dir.display(),
                &name[5..]
            );
            for f in std::fs::read_dir(&old).into_iter().flatten().filter_map(|f| f.ok()) {
                std::fs::remove_file(f.path()).with_context(|| format!("removing stale pin {}", f.path().display()))?;
            }
            std::fs::remove_dir(&old).with_context(|| format!("removing {}", old.display()))?;
        }
        self.maps = self.dir.join(want);
        self.adopted = self.maps.is_dir();
        std::fs::create_dir_all(&self.maps).with_context(|| format!("creating {}", self.maps.display()))
    }

    /// Removes the given pinned maps, then the directory and the mount if ours.
    pub(crate) fn remove(self, names: &[&str]) -> Result<()> {
        let mut first_err = None;
        for n in names {
            match std::fs::remove_file(self.maps.join(n)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    first_err.get_or_insert(anyhow!("unpinning {}: {e}", self.maps.join(n).display()));
                }
            }
        }
        if self.maps != self.dir {
            let _ = std::fs::remove_dir(&self.maps);
        }
        // link pins and clsact markers of uplinks this run did not detach (an earlier run's)
        if let Ok(d) = std::fs::read_dir(&self.dir) {
            for e in d.filter_map(|e| e.ok()) {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("link_") {
                    let _ = std::fs::remove_file(e.path());
                } else if name.starts_with("clsact_") || name.starts_with("qdisc_") {
                    // clsact markers (tc.rs): that filter or qdisc goes too
                    super::tc::remove_leftover(&e.path());
                }
            }
        }
        // also when an earlier run (that crashed) created it; kept if anything else is in it
        let _ = std::fs::remove_dir(&self.dir);
        // and the parents this run created (e.g. /sys/fs/bpf/ilnp), innermost first
        for d in self.created.iter().rev().filter(|d| **d != self.dir) {
            let _ = std::fs::remove_dir(d);
        }
        if let Some(m) = self.mounted {
            unmount_if_empty(&m);
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// What `prepare` created that outlives the process: directories (outermost first)
/// and the bpffs it mounted. Kept in the state file, so that the clean stop of a
/// daemon that adopted them after a crash removes them too.
pub fn created(p: &Pins) -> (Vec<PathBuf>, Option<PathBuf>) {
    (p.created.clone(), p.mounted.clone())
}

/// Unmounts a bpffs that holds nothing but the kernel's preloaded iterators.
pub fn unmount_if_empty(m: &Path) {
    let preload = |n: &std::ffi::OsStr| n == "maps.debug" || n == "progs.debug";
    let empty =
        std::fs::read_dir(m).map(|d| d.filter_map(|e| e.ok()).all(|e| preload(&e.file_name()))).unwrap_or(false);
    if empty && is_bpffs(m) {
        if let Ok(c) = cpath(m) {
            // SAFETY: c is a valid NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}
