//! Attaching the tc programs: tcx links on kernels >= 6.6, else a clsact qdisc and
//! a netlink filter. Remembers which clsact qdiscs it created, to delete exactly those.
//!
//! A tcx link lives as long as a file descriptor or a bpffs pin refers to it. With
//! a pin directory each link is pinned (`link_<ingress|egress>_<ifindex>`), so the
//! programs stay attached when ilnpd dies without cleaning up (crash, `kill -9`),
//! and the next ilnpd adopts the pinned link, swapping in its own program
//! atomically (`bpf_link_update`: no packet sees the hook empty). Without a pin
//! directory the link dies with the process, as before.

use anyhow::{anyhow, Context, Result};
use aya::programs::links::{FdLink, LinkOrder, PinnedLink};
use aya::programs::tc::{self, NlOptions, SchedClassifierLink, SchedClassifierLinkId, TcAttachOptions};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::util::KernelVersion;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcHeader, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttachKind {
    Tcx,
    Netlink,
}

impl AttachKind {
    pub(crate) fn detect() -> AttachKind {
        match KernelVersion::current() {
            Ok(v) if v >= KernelVersion::new(6, 6, 0) => AttachKind::Tcx,
            _ => AttachKind::Netlink,
        }
    }
}

/// One program attached to one interface.
pub(crate) struct Attachment {
    pub ifindex: u32,
    link: Link,
    /// we added the clsact qdisc (netlink attach only) and delete it on detach
    pub qdisc_created: bool,
}

enum Link {
    /// owned by the program (aya): detached through it
    Owned(SchedClassifierLinkId),
    /// a tcx link pinned at `path`: detached by removing the pin and closing the fd
    Pinned { _fd: FdLink, path: PathBuf },
}

/// The pin file of a link in the pin directory.
pub(crate) fn link_pin(dir: &Path, ifindex: u32, at: TcAttachType) -> PathBuf {
    let what = if at == TcAttachType::Ingress { "ingress" } else { "egress" };
    dir.join(format!("link_{what}_{ifindex}"))
}

/// Takes a link from the program, pins it at `path` if it is not pinned there yet.
fn keep_pinned(prog: &mut SchedClassifier, id: SchedClassifierLinkId, path: &Path, fresh: bool) -> Result<Link> {
    let link = prog.take_link(id).context("taking the tcx link")?;
    let fd = FdLink::try_from(link).map_err(|e| anyhow!("the tcx link is not an fd link: {e}"))?;
    let fd = if fresh {
        FdLink::from(fd.pin(path).with_context(|| format!("pinning the tcx link at {}", path.display()))?)
    } else {
        fd
    };
    Ok(Link::Pinned { _fd: fd, path: path.to_path_buf() })
}

/// A link a previous ilnpd pinned at `path` now runs `prog` (atomic replace).
fn adopt(prog: &mut SchedClassifier, path: &Path) -> Result<Link> {
    let fd: FdLink = PinnedLink::from_pin(path).map_err(|e| anyhow!("opening {}: {e}", path.display()))?.into();
    let link = SchedClassifierLink::try_from(fd).map_err(|e| anyhow!("{} is not a tcx link: {e}", path.display()))?;
    let id = prog.attach_to_link(link).with_context(|| format!("replacing the program of {}", path.display()))?;
    keep_pinned(prog, id, path, false)
}

pub(crate) fn ifname(ifindex: u32) -> Result<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(anyhow!("no interface with index {ifindex}: {}", io::Error::last_os_error()));
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into buf.
    Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

/// `pin_dir`: pin a tcx link there (adopting one a previous ilnpd left).
pub(crate) fn attach(
    prog: &mut SchedClassifier,
    kind: AttachKind,
    ifindex: u32,
    at: TcAttachType,
    pin_dir: Option<&Path>,
) -> Result<Attachment> {
    let name = ifname(ifindex)?;
    let what = if at == TcAttachType::Ingress { "ingress" } else { "egress" };
    let pin = pin_dir.filter(|_| kind == AttachKind::Tcx).map(|d| link_pin(d, ifindex, at));
    if let Some(path) = pin.as_deref().filter(|p| p.exists()) {
        match adopt(prog, path) {
            Ok(link) => {
                tracing::info!("adopted the pinned tc {what} link on {name} ({})", path.display());
                return Ok(Attachment { ifindex, link, qdisc_created: false });
            }
            Err(e) => {
                tracing::warn!("{e:#}: replacing it");
                let _ = std::fs::remove_file(path);
            }
        }
    }
    let mut qdisc_created = false;
    let opts = match kind {
        AttachKind::Tcx => TcAttachOptions::TcxOrder(LinkOrder::default()),
        AttachKind::Netlink => {
            match tc::qdisc_add_clsact(&name) {
                Ok(()) => qdisc_created = true,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(e).with_context(|| format!("adding a clsact qdisc to {name}")),
            }
            TcAttachOptions::Netlink(NlOptions::default())
        }
    };
    match prog.attach_with_options(&name, at, opts) {
        Ok(id) => {
            let link = match pin {
                Some(path) => keep_pinned(prog, id, &path, true)?,
                None => Link::Owned(id),
            };
            Ok(Attachment { ifindex, link, qdisc_created })
        }
        Err(e) => {
            if qdisc_created {
                let _ = delete_clsact(ifindex);
            }
            Err(e).with_context(|| format!("attaching the tc {what} program to {name} (ifindex {ifindex})"))
        }
    }
}

/// Detaches; an interface that is already gone is not an error.
pub(crate) fn detach(prog: &mut SchedClassifier, a: Attachment) -> Result<()> {
    let r = match a.link {
        Link::Owned(id) => prog.detach(id),
        Link::Pinned { _fd, path } => {
            // the pin goes first: closing the fd then drops the last reference
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("unpinning {}", path.display())),
            }
            Ok(())
        }
    };
    if a.qdisc_created {
        delete_clsact(a.ifindex)?;
    }
    match r {
        Ok(()) => Ok(()),
        Err(_) if ifname(a.ifindex).is_err() => Ok(()),
        Err(e) => Err(e).with_context(|| format!("detaching from ifindex {}", a.ifindex)),
    }
}

/// `tc qdisc del dev <ifindex> clsact` over rtnetlink; gone already is fine.
pub(crate) fn delete_clsact(ifindex: u32) -> Result<()> {
    let mut msg = TcMessage::default();
    msg.header = TcHeader {
        index: ifindex as i32,
        handle: TcHandle { major: 0xffff, minor: 0 },
        parent: TcHandle::CLSACT,
        ..TcHeader::default()
    };
    msg.attributes.push(TcAttribute::Kind("clsact".into()));
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_ACK;
    let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(RouteNetlinkMessage::DelQueueDiscipline(msg)));
    req.finalize();
    let mut buf = vec![0; req.buffer_len()];
    req.serialize(&mut buf);

    let mut sock = Socket::new(NETLINK_ROUTE).context("rtnetlink socket")?;
    sock.bind_auto().context("binding the rtnetlink socket")?;
    sock.connect(&SocketAddr::new(0, 0)).context("connecting the rtnetlink socket")?;
    sock.send(&buf, 0).context("sending RTM_DELQDISC")?;
    let (reply, _) = sock.recv_from_full().context("reading the RTM_DELQDISC ack")?;
    let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&reply)
        .map_err(|e| anyhow!("bad RTM_DELQDISC reply: {e}"))?;
    if let NetlinkPayload::Error(e) = reply.payload {
        if let Some(code) = e.code {
            let errno = -code.get();
            // ENOENT/EINVAL: no clsact any more; ENODEV: the interface went away
            if ![libc::ENOENT, libc::EINVAL, libc::ENODEV].contains(&errno) {
                return Err(io::Error::from_raw_os_error(errno))
                    .with_context(|| format!("deleting the clsact qdisc of ifindex {ifindex}"));
            }
        }
    }
    Ok(())
}
