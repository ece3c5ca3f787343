//! Attaching the tc programs: tcx links on kernels >= 6.6, else a clsact qdisc and
//! a netlink filter. Remembers which clsact qdiscs it created, to delete exactly those.
//!
//! A tcx link lives as long as a file descriptor or a bpffs pin refers to it. With
//! a pin directory each link is pinned (`link_<ingress|egress>_<ifindex>`), so the
//! programs stay attached when ilnpd dies without cleaning up (crash, `kill -9`),
//! and the next ilnpd adopts the pinned link, swapping in its own program
//! atomically (`bpf_link_update`: no packet sees the hook empty). Without a pin
//! directory the link dies with the process, as before.
//!
//! A clsact filter (kernels < 6.6, or `ILNPD_ATTACH=clsact`) lives as long as the qdisc:
//! it outlives the process anyway. Ours sits at a fixed priority and handle
//! (`FILTER_PRIORITY`, `FILTER_HANDLE`), so the next ilnpd finds a crashed one's filter
//! and replaces its program in place (RTM_NEWTFILTER without NLM_F_CREATE: cls_bpf swaps
//! the program under RCU, no packet sees the hook empty) instead of adding a second
//! filter in front of it. With a pin directory, two markers there (bpffs holds
//! directories) say what the crashed run owned: `clsact_<ingress|egress>_<ifindex>`
//! (our filter is attached there) and `qdisc_<ifindex>` (we added the clsact qdisc, so
//! the clean stop of whichever ilnpd adopts it deletes it).

use anyhow::{anyhow, Context, Result};
use aya::programs::links::{FdLink, LinkOrder, PinnedLink};
use aya::programs::tc::{self, NlOptions, SchedClassifierLink, SchedClassifierLinkId, TcAttachOptions};
use aya::programs::Link as _;
use aya::programs::{SchedClassifier, TcAttachType};
use aya::util::KernelVersion;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcHeader, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

/// The priority and handle of our clsact filters ("IL", "ILNP"): fixed, so that a
/// restarted ilnpd finds the filter a crashed one left and replaces its program.
pub(crate) const FILTER_PRIORITY: u16 = 0x494c;
pub(crate) const FILTER_HANDLE: u32 = 0x494c_4e50;
/// Forces the attach kind: `clsact` (the netlink path of kernels < 6.6, on any kernel:
/// for the tests) or `tcx`. Unset: by kernel version.
pub(crate) const ATTACH_ENV: &str = "ILNPD_ATTACH";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttachKind {
    Tcx,
    Netlink,
}

impl AttachKind {
    pub(crate) fn detect() -> AttachKind {
        match std::env::var(ATTACH_ENV).as_deref() {
            Ok("clsact") => return AttachKind::Netlink,
            Ok("tcx") => return AttachKind::Tcx,
            Ok(v) => tracing::warn!("{ATTACH_ENV}={v:?} ignored: clsact or tcx"),
            Err(_) => {}
        }
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
    /// we added the clsact qdisc (netlink attach only; or the crashed ilnpd whose
    /// filter we adopted did) and delete it on detach
    pub qdisc_created: bool,
    /// the pin directory's markers of this attachment (netlink attach with pins only)
    markers: Vec<PathBuf>,
}

enum Link {
    /// owned by the program (aya): detached through it
    Owned(SchedClassifierLinkId),
    /// a tcx link pinned at `path`: detached by removing the pin and closing the fd
    Pinned { _fd: FdLink, path: PathBuf },
    /// a clsact filter that stays attached when dropped (pin directory: the next
    /// ilnpd adopts it, as a pinned tcx link); detached explicitly
    Kept(ManuallyDrop<SchedClassifierLink>),
}

/// The pin file of a link in the pin directory.
pub(crate) fn link_pin(dir: &Path, ifindex: u32, at: TcAttachType) -> PathBuf {
    let what = if at == TcAttachType::Ingress { "ingress" } else { "egress" };
    dir.join(format!("link_{what}_{ifindex}"))
}

/// The marker of our clsact filter on a hook (a directory in the pin directory).
pub(crate) fn filter_marker(dir: &Path, ifindex: u32, at: TcAttachType) -> PathBuf {
    let what = if at == TcAttachType::Ingress { "ingress" } else { "egress" };
    dir.join(format!("clsact_{what}_{ifindex}"))
}

/// The marker of a clsact qdisc ilnpd added (a directory in the pin directory).
pub(crate) fn qdisc_marker(dir: &Path, ifindex: u32) -> PathBuf {
    dir.join(format!("qdisc_{ifindex}"))
}

fn mark(path: &Path) -> Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            Err(e).with_context(|| format!("creating the marker {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Attaches `prog` as our clsact filter on `name`: replaces the program of the filter
/// a previous ilnpd left at our priority and handle (true: adopted), else adds one.
fn attach_filter(prog: &mut SchedClassifier, name: &str, at: TcAttachType) -> Result<(SchedClassifierLinkId, bool)> {
    let old = SchedClassifierLink::attached(name, at, FILTER_PRIORITY, FILTER_HANDLE)
        .with_context(|| format!("no interface {name}"))?;
    // no NLM_F_CREATE: ENOENT if there is none (the link is consumed, never detached here)
    let replaced = prog.attach_to_link(old);
    if let Ok(id) = replaced {
        return Ok((id, true));
    }
    let opts = NlOptions { priority: FILTER_PRIORITY, handle: FILTER_HANDLE };
    match prog.attach_with_options(name, at, TcAttachOptions::Netlink(opts)) {
        Ok(id) => Ok((id, false)),
        Err(e) => {
            let why = replaced.err().map(|e| format!(" (replacing: {e})")).unwrap_or_default();
            Err(anyhow!("{e}{why}"))
        }
    }
}

/// Removes what a marker of an earlier run left that this run did not take over
/// (an interface no longer configured): its filter, or the qdisc it added.
pub(crate) fn remove_leftover(marker: &Path) {
    let Some(n) = marker.file_name().map(|n| n.to_string_lossy().into_owned()) else { return };
    let ifindex = |s: &str| s.rsplit('_').next().and_then(|i| i.parse::<u32>().ok());
    if let Some(rest) = n.strip_prefix("clsact_") {
        let at = if rest.starts_with("ingress_") { TcAttachType::Ingress } else { TcAttachType::Egress };
        if let Some(name) = ifindex(rest).and_then(|i| ifname(i).ok()) {
            if let Ok(l) = SchedClassifierLink::attached(&name, at, FILTER_PRIORITY, FILTER_HANDLE) {
                let _ = l.detach();
            }
        }
    } else if let Some(i) = n.strip_prefix("qdisc_").and_then(ifindex) {
        let _ = delete_clsact(i);
    }
    let _ = std::fs::remove_dir(marker);
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
                return Ok(Attachment { ifindex, link, qdisc_created: false, markers: Vec::new() });
            }
            Err(e) => {
                tracing::warn!("{e:#}: replacing it");
                let _ = std::fs::remove_file(path);
            }
        }
    }
    if kind == AttachKind::Netlink {
        return attach_clsact(prog, ifindex, &name, at, pin_dir);
    }
    let opts = TcAttachOptions::TcxOrder(LinkOrder::default());
    match prog.attach_with_options(&name, at, opts) {
        Ok(id) => {
            let link = match pin {
                Some(path) => keep_pinned(prog, id, &path, true)?,
                None => Link::Owned(id),
            };
            Ok(Attachment { ifindex, link, qdisc_created: false, markers: Vec::new() })
        }
        Err(e) => Err(e).with_context(|| format!("attaching the tc {what} program to {name} (ifindex {ifindex})")),
    }
}

/// The netlink path: a clsact qdisc (added if missing) and our filter (adopted if a
/// previous ilnpd left it).
fn attach_clsact(
    prog: &mut SchedClassifier,
    ifindex: u32,
    name: &str,
    at: TcAttachType,
    pin_dir: Option<&Path>,
) -> Result<Attachment> {
    let what = if at == TcAttachType::Ingress { "ingress" } else { "egress" };
    let qmark = pin_dir.map(|d| qdisc_marker(d, ifindex));
    let fmark = pin_dir.map(|d| filter_marker(d, ifindex, at));
    let (qdisc_created, qdisc_new) = match tc::qdisc_add_clsact(name) {
        Ok(()) => (true, true),
        // there already: ours if a previous ilnpd marked it as added by it
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => (qmark.as_deref().is_some_and(Path::is_dir), false),
        Err(e) => return Err(e).with_context(|| format!("adding a clsact qdisc to {name}")),
    };
    let undo = |e: anyhow::Error| {
        if qdisc_new {
            let _ = delete_clsact(ifindex);
            if let Some(m) = &qmark {
                let _ = std::fs::remove_dir(m);
            }
        }
        e.context(format!("attaching the tc {what} program to {name} (ifindex {ifindex}, clsact)"))
    };
    let mut markers = Vec::new();
    if qdisc_created {
        if let Some(m) = qmark.clone() {
            mark(&m).map_err(undo)?;
            markers.push(m);
        }
    }
    let (id, adopted) = attach_filter(prog, name, at).map_err(undo)?;
    if adopted {
        tracing::info!(
            "adopted the tc {what} filter on {name} (clsact, prio {FILTER_PRIORITY:#x} handle {FILTER_HANDLE:#x}): \
             its program replaced"
        );
    }
    let link = match fmark {
        Some(m) => {
            mark(&m)?;
            markers.push(m);
            // kept when dropped, as a pinned tcx link: the next ilnpd adopts it
            Link::Kept(ManuallyDrop::new(prog.take_link(id).context("taking the clsact filter's link")?))
        }
        None => Link::Owned(id),
    };
    Ok(Attachment { ifindex, link, qdisc_created, markers })
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
        Link::Kept(l) => ManuallyDrop::into_inner(l).detach(),
    };
    if a.qdisc_created {
        delete_clsact(a.ifindex)?;
    }
    for m in &a.markers {
        let _ = std::fs::remove_dir(m);
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
