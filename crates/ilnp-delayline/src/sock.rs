//! AF_PACKET sockets with virtio_net_hdr, batched with recvmmsg/sendmmsg.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// <linux/if_packet.h> options the libc crate does not name on every version.
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const SOCK_BUF_BYTES: libc::c_int = 32 << 20;

pub struct PacketSock {
    fd: OwnedFd,
    pub name: String,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setopt<T>(fd: RawFd, level: libc::c_int, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: val points to a live T of the size we pass.
    cvt(unsafe {
        libc::setsockopt(fd, level, opt, val as *const T as *const libc::c_void, size_of::<T>() as libc::socklen_t)
    })
    .map(|_| ())
}

impl PacketSock {
    /// Opens a raw packet socket on `name`; errors are prefixed with `flag` (e.g. "--a").
    pub fn open(flag: &str, name: &str) -> Result<PacketSock, String> {
        let ctx = |what: &str, e: io::Error| format!("{flag} {name}: {what}: {e}");
        let cname = CString::new(name).map_err(|_| format!("{flag} {name:?}: invalid interface name"))?;
        // SAFETY: cname is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(format!("{flag} {name}: no such interface ({})", io::Error::last_os_error()));
        }
        // Protocol 0: receive nothing until bind(), so no frames of other interfaces slip in.
        // SAFETY: plain syscall; the result is checked and owned right away.
        let raw = cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
            .map_err(|e| ctx("socket(AF_PACKET) (needs CAP_NET_RAW)", e))?;
        // SAFETY: raw is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        setopt(raw, libc::SOL_PACKET, PACKET_VNET_HDR, &one).map_err(|e| ctx("PACKET_VNET_HDR", e))?;
        setopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &one).map_err(|e| ctx("PACKET_IGNORE_OUTGOING", e))?;
        // Large buffers absorb bursts while the thread is busy sending; FORCE needs CAP_NET_ADMIN.
        for (force, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
            if setopt(raw, libc::SOL_SOCKET, force, &SOCK_BUF_BYTES).is_err() {
                let _ = setopt(raw, libc::SOL_SOCKET, plain, &SOCK_BUF_BYTES);
            }
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid start.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll is a valid sockaddr_ll of the size passed.
        cvt(unsafe {
            libc::bind(
                raw,
                &sll as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map_err(|e| ctx("bind", e))?;
        // SAFETY: packet_mreq is plain data.
        let mut mr: libc::packet_mreq = unsafe { zeroed() };
        mr.mr_ifindex = ifindex as i32;
        mr.mr_type = libc::PACKET_MR_PROMISC as u16;
        setopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).map_err(|e| ctx("PACKET_MR_PROMISC", e))?;
        Ok(PacketSock { fd, name: name.to_string() })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Waits up to `timeout_ns` for input. Returns Ok(true) if readable (or in error state).
    pub fn wait_readable(&self, timeout_ns: u64) -> io::Result<bool> {
        let mut pfd = libc::pollfd { fd: self.raw(), events: libc::POLLIN, revents: 0 };
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: pfd and ts are valid for the call; no signal mask change.
        let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
        }
        Ok(r > 0)
    }

    /// Frames the kernel dropped on this socket since the last call (PACKET_STATISTICS).
    pub fn kernel_drops(&self) -> u64 {
        // SAFETY: tpacket_stats is plain data, len matches.
        let mut st: libc::tpacket_stats = unsafe { zeroed() };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        let r = unsafe {
            libc::getsockopt(
                self.raw(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            st.tp_drops as u64
        } else {
            0
        }
    }
}

/// Fixed receive slots for recvmmsg.
pub struct RxBatch {
    bufs: Vec<Vec<u8>>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

pub struct Received<'a> {
    pub data: &'a [u8],
    pub truncated: bool,
}

impl RxBatch {
    pub fn new(slots: usize, slot_bytes: usize) -> Self {
        let mut bufs: Vec<Vec<u8>> = (0..slots).map(|_| vec![0u8; slot_bytes]).collect();
        let iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr() as *mut libc::c_void, iov_len: b.len() })
            .collect();
        // SAFETY: mmsghdr is plain data; pointers are filled in recv().
        let msgs = (0..slots).map(|_| unsafe { zeroed::<libc::mmsghdr>() }).collect();
        RxBatch { bufs, iovs, msgs }
    }

    /// Non-blocking recvmmsg. Ok(0) when nothing is pending.
    pub fn recv(&mut self, sock: &PacketSock) -> io::Result<usize> {
        for (m, iov) in self.msgs.iter_mut().zip(self.iovs.iter_mut()) {
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_flags = 0;
            m.msg_len = 0;
        }
        // SAFETY: msgs point at iovs which point at bufs, all alive and sized.
        let r = unsafe {
            libc::recvmmsg(
                sock.raw(),
                self.msgs.as_mut_ptr(),
                self.msgs.len() as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        Ok(r as usize)
    }

    pub fn get(&self, i: usize) -> Received<'_> {
        let m = &self.msgs[i];
        let len = (m.msg_len as usize).min(self.bufs[i].len());
        Received { data: &self.bufs[i][..len], truncated: m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 }
    }
}

/// Sends `frames` with sendmmsg. Calls `done(i, Ok|Err)` for each frame in order.
pub fn send_batch(
    sock: &PacketSock,
    frames: &[&[u8]],
    iovs: &mut Vec<libc::iovec>,
    msgs: &mut Vec<libc::mmsghdr>,
    mut done: impl FnMut(usize, Result<(), io::Error>),
) {
    iovs.clear();
    iovs.extend(frames.iter().map(|f| libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() }));
    msgs.clear();
    for iov in iovs.iter_mut() {
        // SAFETY: mmsghdr is plain data.
        let mut m: libc::mmsghdr = unsafe { zeroed() };
        m.msg_hdr.msg_iov = iov;
        m.msg_hdr.msg_iovlen = 1;
        msgs.push(m);
    }
    let mut off = 0;
    while off < msgs.len() {
        // SAFETY: msgs[off..] point at iovs that point at frames, all alive.
        let r = unsafe { libc::sendmmsg(sock.raw(), msgs[off..].as_mut_ptr(), (msgs.len() - off) as u32, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The first frame failed: count it and go on with the rest.
            done(off, Err(e));
            off += 1;
        } else {
            for i in off..off + r as usize {
                done(i, Ok(()));
            }
            off += r as usize;
        }
    }
}

pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is valid; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
