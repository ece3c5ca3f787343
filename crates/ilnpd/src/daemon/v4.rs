//! The v4 path's socket (`[ipv4]`, docs/architecture.md § IPv4 and NAT): one UDP
//! socket on the configured port carries ILNPv6 packets to and from correspondents
//! reached over IPv4. The core decides what goes where (`Action::SendV4`,
//! `Core::handle_inbound_v4`); this is only the I/O.

use super::counters::ShellCounter;
use super::Daemon;
use anyhow::{Context, Result};
use ilnp_wire::translate::Csum;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Instant;
use tokio::net::UdpSocket;

/// Socket buffers of the v4 path: a TCP flow's GSO burst, cut into segments by the
/// sender's slow path, arrives back to back (a 64 KB burst is ~45 datagrams); the
/// default 208 KiB overflowed at 20 Mbit/s (`UdpRcvbufErrors`).
const V4_SOCKET_BUFFER: libc::c_int = 4 << 20;

fn setsockopt_int(s: &socket2::Socket, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> std::io::Result<()> {
    // SAFETY: a valid socket fd and a c_int option value of the right size
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Binds the v4 path's port on every IPv4 address (Step::V4Listen). Packets leave
/// without a UDP checksum and with DF clear so a path
/// with a smaller MTU fragments rather than drops (ilnp0's MTU already leaves
/// room for the 28 bytes of IPv4 and UDP).
pub(super) fn bind(port: u16) -> Result<UdpSocket> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))
        .context("opening the v4 path's UDP socket")?;
    s.set_nonblocking(true)?;
    // IP_PMTUDISC_DONT: let the kernel fragment a datagram larger than the path MTU
    if let Err(e) = setsockopt_int(&s, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_DONT) {
        tracing::warn!("IP_MTU_DISCOVER on the v4 path's socket: {e}");
    }
    // UDP checksum 0, as the fast path sends (RFC 768 allows it; the inner packet has
    // its own): with one, a datagram crossing a veth arrives CHECKSUM_PARTIAL for the
    // outer UDP header, and once the ingress program removes that header the kernel
    // would take the inner checksum for the partial one (bpf/ilnp_ingress.c)
    if let Err(e) = setsockopt_int(&s, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1) {
        tracing::warn!("SO_NO_CHECK on the v4 path's socket: {e}");
    }
    // *BUFFORCE (CAP_NET_ADMIN) goes past net.core.[rw]mem_max; else what the limit allows
    for (force, plain, what) in
        [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, "receive"), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, "send")]
    {
        if setsockopt_int(&s, libc::SOL_SOCKET, force, V4_SOCKET_BUFFER).is_err() {
            if let Err(e) = setsockopt_int(&s, libc::SOL_SOCKET, plain, V4_SOCKET_BUFFER) {
                tracing::warn!("the v4 path's {what} buffer: {e}");
            }
        }
    }
    let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    s.bind(&addr.into()).with_context(|| format!("[ipv4] port: binding UDP {addr} (another program has it?)"))?;
    UdpSocket::from_std(s.into()).context("registering the v4 path's socket")
}

impl Daemon {
    /// A datagram on the v4 path's port: its payload is a wire-form ILNPv6 packet.
    pub(super) fn on_v4_datagram(&mut self, pkt: &[u8], from: SocketAddr) {
        let SocketAddr::V4(from) = from else { return };
        self.on_v4_payload(pkt, from, Csum::Complete);
    }

    /// A whole UDP/IPv4 datagram from the TUN: one the ingress program punted
    /// (redirected to ilnp0 outer header and all; the kernel completed or left
    /// partial its inner checksum as `csum` says, and cut GSO packets on the way).
    pub(super) fn on_tun_v4(&mut self, pkt: &[u8], csum: Csum) {
        match ilnp_wire::v4path::parse_udp4(pkt) {
            Some((from, _, payload)) => self.on_v4_payload(payload, from, csum),
            None => self.bump(ShellCounter::V4NotIlnp),
        }
    }

    fn on_v4_payload(&mut self, pkt: &[u8], from: SocketAddrV4, csum: Csum) {
        if pkt.len() < 40 || pkt[0] >> 4 != 6 {
            self.bump(ShellCounter::V4NotIlnp);
            return;
        }
        let mut out = Vec::new();
        self.core.handle_inbound_v4_into(Instant::now(), pkt, csum, from, &mut out);
        self.run_actions(out);
    }

    /// `Action::SendV4`: the packet as one datagram from our port to `to`.
    pub(super) fn send_v4(&mut self, pkt: &[u8], to: SocketAddrV4) {
        let Some(sock) = self.v4.as_ref() else {
            // no [ipv4]: a peer advertised a v4 path we cannot use
            self.bump(ShellCounter::V4Off);
            return;
        };
        if let Err(e) = sock.try_send_to(pkt, to.into()) {
            self.bump(ShellCounter::SendError);
            tracing::debug!("sending {} bytes to {to} over the v4 path: {e}", pkt.len());
        }
    }
}

/// The next datagram of the v4 path's socket, if there is one (none: never).
pub(super) async fn recv(sock: &Option<UdpSocket>, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
    match sock {
        Some(s) => s.recv_from(buf).await,
        None => futures::future::pending().await,
    }
}
