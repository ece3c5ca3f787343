//! Attaching the tc programs: tcx links on kernels >= 6.6 (they go away with
//! the process, so a crash leaves nothing attached), else a clsact qdisc and a
//! netlink filter. Remembers which clsact qdiscs it created, to delete exactly those.

use anyhow::{anyhow, Context, Result};
use aya::programs::links::LinkOrder;
use aya::programs::tc::{self, NlOptions, SchedClassifierLinkId, TcAttachOptions};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::util::KernelVersion;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcHeader, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;

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
    pub link: SchedClassifierLinkId,
    /// we added the clsact qdisc (netlink attach only) and delete it on detach
    pub qdisc_created: bool,
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

pub(crate) fn attach(
    prog: &mut SchedClassifier,
    kind: AttachKind,
    ifindex: u32,
    at: TcAttachType,
) -> Result<Attachment> {
    let name = ifname(ifindex)?;
    let what = if at == TcAttachType::Ingress { "ingress" } else { "egress" };
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
        Ok(link) => Ok(Attachment { ifindex, link, qdisc_created }),
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
    let r = prog.detach(a.link);
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
