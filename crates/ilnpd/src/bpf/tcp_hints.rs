//! The RFC 6069 hints (bpf/ilnp_sockops.c): attaching the sock_ops program and
//! reading its ilnp_tcp_rto, and the OS plumbing: this network namespace's
//! cookie (the program's filter) and the cgroup v2 root it is attached to.
//!
//! The root: the first cgroup2 mount in /proc/self/mountinfo; without one (under
//! `ip netns exec`, whose private /sys has none) a cgroup2 filesystem is mounted on a
//! fresh directory, opened and at once lazily unmounted: the open directory is
//! all the attachment needs, and nothing stays mounted whatever happens later.

use super::maps::{TcpCfg, TcpKey, TcpRto};
use super::{map_err, Datapath, MAP_TCP_CFG, MAP_TCP_RTO, PROG_SOCKOPS};
use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, HashMap};
use aya::programs::{CgroupAttachMode, SockOps};
use std::ffi::CString;
use std::fs::File;
use std::net::Ipv6Addr;
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

impl Datapath {
    /// Loads bpf/ilnp_sockops.c and attaches it to the cgroup v2 root, for the TCP
    /// connections of this network namespace only: from then on, connections to
    /// identifier addresses established record their retransmission timeouts in
    /// ilnp_tcp_rto. Detached when the object is dropped (shutdown, exit, crash).
    pub fn attach_tcp_hints(&mut self) -> Result<()> {
        let cookie = netns_cookie()?;
        let m = self.bpf.map_mut(MAP_TCP_CFG).ok_or_else(|| map_err(MAP_TCP_CFG))?;
        Array::<_, TcpCfg>::try_from(m)?.set(0, TcpCfg { netns_cookie: cookie }, 0).context("writing ilnp_tcp_cfg")?;
        let root = cgroup2_root()?;
        let p = self
            .bpf
            .program_mut(PROG_SOCKOPS)
            .ok_or_else(|| anyhow!("the eBPF object has no program {PROG_SOCKOPS}"))?;
        let p: &mut SockOps = p.try_into()?;
        p.load().with_context(|| format!("the verifier rejected {PROG_SOCKOPS}"))?;
        // other namespaces' daemons attach theirs too (each filters by its namespace): aya
        // attaches with a bpf_link (Linux >= 5.7), which always shares the cgroup with
        // other programs and takes no flags (with BPF_F_ALLOW_MULTI the kernel says EINVAL)
        p.attach(root, CgroupAttachMode::Single).context("attaching the sock_ops program to the cgroup v2 root")?;
        self.tcp_hints = true;
        Ok(())
    }

    /// The connections to `remote` whose last retransmission timeout was at or
    /// after `since_ns` (CLOCK_MONOTONIC), at most `max`.
    pub fn tcp_timeouts(&self, remote: Ipv6Addr, since_ns: u64, max: usize) -> Result<Vec<TcpTimeout>> {
        if !self.tcp_hints {
            return Ok(Vec::new());
        }
        let m = self.bpf.map(MAP_TCP_RTO).ok_or_else(|| map_err(MAP_TCP_RTO))?;
        let m: HashMap<_, TcpKey, TcpRto> = HashMap::try_from(m)?;
        let mut out = Vec::new();
        for kv in m.iter() {
            let Ok((k, v)) = kv else { continue }; // an entry evicted while we walk
            if k.remote != remote.octets() || v.ts_ns < since_ns {
                continue;
            }
            out.push(TcpTimeout {
                local: Ipv6Addr::from(k.local),
                remote,
                local_port: k.lport,
                remote_port: k.rport,
                snd_una: v.snd_una,
                retransmits: v.retransmits,
                ts_ns: v.ts_ns,
            });
            if out.len() >= max {
                break;
            }
        }
        Ok(out)
    }
}

/// A TCP connection to an identifier address that timed out (`Datapath::tcp_timeouts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpTimeout {
    pub local: Ipv6Addr,
    pub remote: Ipv6Addr,
    pub local_port: u16,
    pub remote_port: u16,
    /// its oldest unacknowledged sequence number at that timeout
    pub snd_una: u32,
    /// retransmissions before that timeout (its backoff)
    pub retransmits: u32,
    /// when (ns, CLOCK_MONOTONIC)
    pub ts_ns: u64,
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
