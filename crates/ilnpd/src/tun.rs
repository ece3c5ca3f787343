//! The `ilnp0` TUN device. In eBPF mode it is opened with IFF_VNET_HDR and
//! checksum/TSO offloads so the kernel's TCP builds large GSO packets for it (the
//! tc egress program translates them without ever reaching the TUN queue); the
//! slow path then sees a virtio-net header in front of every packet.

use crate::netlink::Netlink;
use anyhow::{bail, Context, Result};
use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::unix::AsyncFd;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETPERSIST: libc::c_ulong = 0x4004_54cb;
const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;
const IFF_VNET_HDR: i16 = 0x4000;
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
const TUN_F_TSO6: libc::c_ulong = 0x04;

/// struct virtio_net_hdr (10 bytes, little-endian on this host).
pub const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: i16,
    _pad: [u8; 22],
}

/// What the virtio-net header said about a packet read from the TUN.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// the transport checksum field holds only the pseudo-header sum
    pub needs_csum: bool,
    /// non-zero: a GSO super-packet
    pub gso_type: u8,
    /// the whole virtio-net header, for segmentation (crate::gso)
    pub vnet_hdr: [u8; VNET_HDR_LEN],
}

pub struct Tun {
    fd: AsyncFd<OwnedFd>,
    pub name: String,
    pub vnet: bool,
}

impl Tun {
    pub fn create(name: &str, offloads: bool) -> Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            bail!("tun_name: {name:?} must be 1-15 characters");
        }
        // SAFETY: plain open(2) of a device node; the fd is owned below.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error()).context("opening /dev/net/tun");
        }
        // SAFETY: raw is a fresh valid fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags: IFF_TUN | IFF_NO_PI, _pad: [0; 22] };
        if offloads {
            req.flags |= IFF_VNET_HDR;
        }
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF takes a struct ifreq; IfReq has its layout.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EBUSY) {
                bail!("tun_name: TUN device {name} is in use (another ilnpd?)");
            }
            return Err(e).with_context(|| format!("creating TUN device {name}"));
        }
        if offloads {
            let f = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
            // SAFETY: TUNSETOFFLOAD takes an unsigned long by value.
            if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, f) } < 0 {
                return Err(std::io::Error::last_os_error()).context("enabling TUN offloads");
            }
        }
        // SAFETY: `fd` is an owned, open, non-blocking descriptor that AsyncFd keeps
        // open for as long as it is registered.
        let fd = unsafe { AsyncFd::register(fd)? };
        Ok(Tun { fd, name: name.to_string(), vnet: offloads })
    }

    /// Reads one packet into `buf`; returns (offset of the IPv6 header, length, meta).
    /// A persistent device outlives the process (a crash, `kill -9`): the kernel
    /// keeps ilnp0 with its identifier address and route, so sockets bound to it
    /// and the fast path on it keep working, and the next ilnpd opens it again
    /// (`create` on an existing persistent device attaches to it). A clean exit
    /// turns persistence off first, so closing the fd removes the device.
    /// ilnp0's sysctls, MTU, link state, identifier address (`my_id`) and the
    /// identifier prefix's route to it (start-up's Step::TunConfig). Returns its ifindex.
    pub async fn configure(&self, nl: &Netlink, mtu: u32, my_id: Ipv6Addr, id_prefix: Ipv6Addr) -> Result<u32> {
        let tl = nl.link(&self.name).await?;
        // forwarding on ilnp0 only: bpf_fib_lookup() refuses to route for an
        // interface without it; packets are still never forwarded between
        // interfaces (that needs net.ipv6.conf.all.forwarding).
        for (k, v) in
            [("accept_dad", "0"), ("accept_ra", "0"), ("autoconf", "0"), ("addr_gen_mode", "1"), ("forwarding", "1")]
        {
            let p = format!("/proc/sys/net/ipv6/conf/{}/{k}", self.name);
            // forwarding: only if ilnp0 did not get it from `default` (writing it to a
            // device purges the namespace's RA-learned default routes: start-up's Step::Tun)
            if k == "forwarding" && std::fs::read_to_string(&p).is_ok_and(|x| x.trim() == v) {
                continue;
            }
            let _ = std::fs::write(&p, v);
        }
        nl.set_link_up(tl.index, mtu).await?;
        nl.add_address(tl.index, my_id, 128).await?;
        nl.add_route(id_prefix, 64, tl.index).await?;
        Ok(tl.index)
    }

    pub fn set_persist(&self, on: bool) -> Result<()> {
        // SAFETY: TUNSETPERSIST takes an int by value.
        if unsafe { libc::ioctl(self.fd.get_ref().as_raw_fd(), TUNSETPERSIST, libc::c_ulong::from(on)) } < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("TUNSETPERSIST {on} on {}", self.name));
        }
        Ok(())
    }

    pub async fn recv(&self, buf: &mut [u8]) -> Result<(usize, usize, PacketMeta)> {
        loop {
            let mut guard = self.fd.readable().await?;
            // SAFETY: reading into a valid mutable buffer of buf.len() bytes.
            let n = unsafe { libc::read(self.fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    guard.clear_ready();
                    continue;
                }
                return Err(e.into());
            }
            let n = n as usize;
            if !self.vnet {
                return Ok((0, n, PacketMeta::default()));
            }
            if n < VNET_HDR_LEN {
                continue;
            }
            let mut vnet_hdr = [0u8; VNET_HDR_LEN];
            vnet_hdr.copy_from_slice(&buf[..VNET_HDR_LEN]);
            let meta = PacketMeta { needs_csum: buf[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0, gso_type: buf[1], vnet_hdr };
            return Ok((VNET_HDR_LEN, n - VNET_HDR_LEN, meta));
        }
    }

    /// Writes one complete packet (checksum complete, no GSO) towards the kernel.
    pub fn send(&self, pkt: &[u8]) -> Result<()> {
        let mut v;
        let data = if self.vnet {
            v = Vec::with_capacity(VNET_HDR_LEN + pkt.len());
            v.extend_from_slice(&[0u8; VNET_HDR_LEN]);
            v.extend_from_slice(pkt);
            &v[..]
        } else {
            pkt
        };
        // SAFETY: writing a valid buffer.
        let n = unsafe { libc::write(self.fd.get_ref().as_raw_fd(), data.as_ptr().cast(), data.len()) };
        if n < 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("writing to {}", self.name));
        }
        Ok(())
    }
}
