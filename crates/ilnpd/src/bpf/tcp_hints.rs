//! OS plumbing of the RFC 6069 hints (bpf/ilnp_sockops.c): this network namespace's
//! cookie (the program's filter) and the cgroup v2 root it is attached to.
//!
//! The root: the first cgroup2 mount in /proc/self/mountinfo; without one (under
//! `ip netns exec`, whose private /sys has none) a cgroup2 filesystem is mounted on a
//! fresh directory, opened and at once lazily unmounted: the open directory is
//! all the attachment needs, and nothing stays mounted whatever happens later.

use anyhow::{anyhow, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// SO_NETNS_COOKIE (Linux 5.14; not in the libc crate we use)
const SO_NETNS_COOKIE: libc::c_int = 71;

/// The cookie of the network namespace this process runs in (what
/// bpf_get_netns_cookie returns for its sockets).
pub(crate) fn netns_cookie() -> Result<u64> {
    let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::DGRAM, None)?;
    let mut v: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: v and len are valid for the kernel to write 8 bytes and a length
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, SO_NETNS_COOKIE, (&mut v as *mut u64).cast(), &mut len)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("getsockopt(SO_NETNS_COOKIE) (Linux >= 5.14)");
    }
    Ok(v)
}

/// The mount point of the first cgroup2 filesystem in a mountinfo text.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mount_point = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(mount_point))
    })
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| anyhow!("NUL in {}", p.display()))
}

/// An open directory of the cgroup v2 root (see the module comment).
pub(crate) fn cgroup2_root() -> Result<File> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").context("/proc/self/mountinfo")?;
    if let Some(p) = cgroup2_mount(&info) {
        return File::open(&p).with_context(|| format!("opening {}", p.display()));
    }
    let dir = std::env::temp_dir().join(format!("ilnpd-cgroup2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (src, target) = (CString::new("cgroup2").expect("no NUL"), cpath(&dir)?);
    // SAFETY: NUL-terminated strings; no data argument
    let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), src.as_ptr(), 0, std::ptr::null()) };
    let r = if rc == 0 {
        let f = File::open(&dir).with_context(|| format!("opening {}", dir.display()));
        // SAFETY: as above
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        f
    } else {
        Err(std::io::Error::last_os_error()).with_context(|| format!("mount -t cgroup2 cgroup2 {}", dir.display()))
    };
    let _ = std::fs::remove_dir(&dir);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup2_mount_is_found_among_v1_ones() {
        let info = "35 24 0:30 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs ro,mode=755\n\
                    36 35 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                    37 35 0:32 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2_mount(info), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(cgroup2_mount("36 35 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"), None);
    }

    #[test]
    fn netns_cookie_is_stable_and_nonzero() {
        let a = netns_cookie().unwrap();
        assert_ne!(a, 0);
        assert_eq!(a, netns_cookie().unwrap());
    }
}
