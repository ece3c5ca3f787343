//! Keeps the egress program's next-hop cache (`ilnp_nh_cache`, bpf/ilnp_maps.h)
//! valid: a new generation in `ilnp_route_gen` for every kernel change that can
//! change a `bpf_fib_lookup` answer, seen on rtnetlink from a thread of its own.

use anyhow::{Context, Result};

/// The rtnetlink groups whose events can change what `bpf_fib_lookup` answers for
/// a wire packet: links (up/down, MTU), neighbours (resolved or not), IPv6
/// addresses, routes, policy rules, per-interface settings (forwarding) and
/// nexthop objects. Every event on them invalidates the fast path's next-hop
/// cache (bpf/ilnp_maps.h, ilnp_nh_cache).
const ROUTE_WATCH_GROUPS: [u32; 7] = [
    libc::RTNLGRP_LINK,
    libc::RTNLGRP_NEIGH,
    libc::RTNLGRP_IPV6_IFADDR,
    libc::RTNLGRP_IPV6_ROUTE,
    libc::RTNLGRP_IPV6_RULE,
    libc::RTNLGRP_IPV6_NETCONF,
    libc::RTNLGRP_NEXTHOP,
];

/// A thread of its own that calls `on_change` for every rtnetlink event of
/// `ROUTE_WATCH_GROUPS` and for every receive error (ENOBUFS: events were lost).
/// Not on the daemon's event loop, so a busy slow path does not delay it; the
/// callback only writes one map entry. `on_change` runs once before `spawn`
/// returns, after the subscription: no change after that call goes unseen.
/// Dropping the watch stops the thread (within `ROUTE_WATCH_POLL`) and drops
/// `on_change` there.
pub struct RouteWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const ROUTE_WATCH_POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl RouteWatch {
    pub fn spawn(mut on_change: impl FnMut() + Send + 'static) -> Result<RouteWatch> {
        use netlink_sys::{protocols::NETLINK_ROUTE, Socket};
        use std::os::fd::AsRawFd;
        use std::sync::atomic::Ordering;
        let mut sock = Socket::new(NETLINK_ROUTE).context("opening a netlink socket for route events")?;
        sock.bind(&netlink_sys::SocketAddr::new(0, 0)).context("binding the route event socket")?;
        for g in ROUTE_WATCH_GROUPS {
            sock.add_membership(g).with_context(|| format!("subscribing to rtnetlink group {g}"))?;
        }
        // a burst (a link going down takes its routes and neighbours) fits; an
        // overrun is an error from recv, which invalidates as well
        let _ = sock.set_rx_buf_sz(1 << 20);
        let tv = libc::timeval { tv_sec: 0, tv_usec: ROUTE_WATCH_POLL.as_micros() as libc::suseconds_t };
        // SAFETY: a valid socket fd and a timeval that outlives the call.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error()).context("setting the route event socket's timeout");
        }
        on_change();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ilnp-route-watch".into())
            .spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !flag.load(Ordering::Relaxed) {
                    // SAFETY: buf is writable for its length for the call's duration.
                    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
                    if n < 0 {
                        let e = std::io::Error::last_os_error();
                        if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                            continue;
                        }
                    }
                    on_change();
                }
            })
            .context("starting the route event thread")?;
        Ok(RouteWatch { stop, thread: Some(thread) })
    }
}

impl Drop for RouteWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
