//! Kernel plumbing over rtnetlink: links, addresses, routes, and the event stream
//! that tells us when locators change.

use anyhow::{anyhow, Context, Result};
use futures::stream::TryStreamExt;
use futures::StreamExt;
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage, AddressScope, CacheInfo};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RoutePreference, RouteType,
};
use netlink_packet_route::AddressFamily;
use rtnetlink::{Handle, LinkUnspec, RouteMessageBuilder};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub struct Netlink {
    pub handle: Handle,
}

#[derive(Debug, Clone)]
pub struct Link {
    pub name: String,
    pub index: u32,
    pub mac: Option<[u8; 6]>,
    pub mtu: u32,
    pub up: bool,
}

/// One IPv6 address the kernel reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr6 {
    pub ifindex: u32,
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
    pub global: bool,
    pub tentative: bool,
    /// seconds; u32::MAX = forever
    pub valid_lft: u32,
    /// preferred lifetime over (IFA_F_DEPRECATED, or a preferred lifetime of 0)
    pub deprecated: bool,
    /// Duplicate Address Detection found another node with it (IFA_F_DADFAILED)
    pub dadfailed: bool,
}

fn link_from_msg(m: &LinkMessage) -> Link {
    let mut l = Link {
        name: String::new(),
        index: m.header.index,
        mac: None,
        mtu: 1500,
        up: m.header.flags.contains(LinkFlags::Up) && m.header.flags.contains(LinkFlags::LowerUp),
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name = n.clone(),
            LinkAttribute::Mtu(v) => l.mtu = *v,
            LinkAttribute::Address(b) if b.len() == 6 => l.mac = Some([b[0], b[1], b[2], b[3], b[4], b[5]]),
            _ => {}
        }
    }
    l
}

impl Netlink {
    /// Opens a netlink connection (driven by a spawned task).
    pub fn connect() -> Result<Netlink> {
        let (conn, handle, _) = rtnetlink::new_connection().context("opening a netlink socket")?;
        tokio::spawn(conn);
        Ok(Netlink { handle })
    }

    pub async fn link(&self, name: &str) -> Result<Link> {
        let h = self.handle.clone();
        let mut s = h.link().get().match_name(name.to_string()).execute();
        match s.try_next().await {
            Ok(Some(m)) => Ok(link_from_msg(&m)),
            Ok(None) | Err(_) => Err(anyhow!("interface {name:?}: no such interface")),
        }
    }

    pub async fn link_by_index(&self, index: u32) -> Result<Link> {
        let h = self.handle.clone();
        let mut s = h.link().get().match_index(index).execute();
        s.try_next().await?.map(|m| link_from_msg(&m)).ok_or_else(|| anyhow!("ifindex {index}: no such interface"))
    }

    pub async fn set_link_up(&self, index: u32, mtu: u32) -> Result<()> {
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(index).mtu(mtu).up().build())
            .execute()
            .await
            .with_context(|| format!("setting ifindex {index} up with mtu {mtu}"))
    }

    /// All IPv6 addresses on the host (this namespace).
    pub async fn addresses(&self) -> Result<Vec<Addr6>> {
        let mut out = Vec::new();
        let mut s = self.handle.address().get().execute();
        while let Some(m) = s.try_next().await? {
            if m.header.family != AddressFamily::Inet6 {
                continue;
            }
            let mut addr = None;
            let mut flags = AddressFlags::empty();
            let mut valid_lft = u32::MAX;
            let mut preferred_lft = u32::MAX;
            for a in &m.attributes {
                match a {
                    AddressAttribute::Address(IpAddr::V6(v)) => addr = Some(*v),
                    AddressAttribute::Flags(f) => flags = *f,
                    AddressAttribute::CacheInfo(c) => (valid_lft, preferred_lft) = (c.ifa_valid, c.ifa_preferred),
                    _ => {}
                }
            }
            if let Some(addr) = addr {
                out.push(Addr6 {
                    ifindex: m.header.index,
                    addr,
                    prefix_len: m.header.prefix_len,
                    global: m.header.scope == AddressScope::Universe,
                    tentative: flags.contains(AddressFlags::Tentative),
                    valid_lft,
                    deprecated: flags.contains(AddressFlags::Deprecated) || preferred_lft == 0,
                    dadfailed: flags.contains(AddressFlags::Dadfailed),
                });
            }
        }
        Ok(out)
    }

    /// The IPv4 addresses that can carry a v4 path (`[ipv4]`): on `ifindex`es,
    /// global or private (a NAT's inside), not loopback or link-local (169.254/16),
    /// with their valid lifetime (DHCP leases; seconds, u32::MAX = forever).
    pub async fn addresses4(&self) -> Result<Vec<(u32, Ipv4Addr, u32)>> {
        let mut out = Vec::new();
        let mut s = self.handle.address().get().execute();
        while let Some(m) = s.try_next().await.context("dumping IPv4 addresses")? {
            if m.header.family != AddressFamily::Inet {
                continue;
            }
            let mut addr = None;
            let mut valid_lft = u32::MAX;
            for a in &m.attributes {
                match a {
                    AddressAttribute::Local(IpAddr::V4(v)) => addr = Some(*v),
                    AddressAttribute::Address(IpAddr::V4(v)) if addr.is_none() => addr = Some(*v),
                    AddressAttribute::CacheInfo(c) => valid_lft = c.ifa_valid,
                    _ => {}
                }
            }
            if let Some(a) = addr.filter(|a| !a.is_loopback() && !a.is_link_local() && !a.is_unspecified()) {
                out.push((m.header.index, a, valid_lft));
            }
        }
        Ok(out)
    }

    /// Interfaces with an IPv4 default route in the main table.
    pub async fn default_routes4(&self) -> Result<BTreeSet<u32>> {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        let mut s = self.handle.route().get(m).execute();
        let mut out = BTreeSet::new();
        while let Some(m) = s.try_next().await.context("dumping IPv4 routes")? {
            if m.header.destination_prefix_length != 0 || m.header.kind != RouteType::Unicast {
                continue;
            }
            let table = m
                .attributes
                .iter()
                .find_map(|a| if let RouteAttribute::Table(t) = a { Some(*t) } else { None })
                .unwrap_or(u32::from(m.header.table));
            if table != u32::from(RouteHeader::RT_TABLE_MAIN) {
                continue;
            }
            for a in &m.attributes {
                match a {
                    RouteAttribute::Oif(i) => {
                        out.insert(*i);
                    }
                    RouteAttribute::MultiPath(hops) => out.extend(hops.iter().map(|h| h.interface_index)),
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    /// Adds `addr/len` without DAD (the identifier address on ilnp0: the NID is
    /// ours; waiting 1–2 s for DAD is what the seeds measured as lost handoff time).
    /// Returns false if the address was already there (not ours to remove on exit).
    pub async fn add_address(&self, index: u32, addr: Ipv6Addr, len: u8) -> Result<bool> {
        self.add_address_with(index, addr, len, AddressFlags::Nodad, None).await
    }

    /// Adds `L64:NID/64` on an uplink so Neighbour Discovery answers for it, without
    /// touching what plain IPv6 on the host does:
    /// * deprecated (preferred lifetime 0, valid forever): RFC 6724 rule 3 ("avoid
    ///   deprecated addresses") puts it behind the host's own address of the same
    ///   prefix, so sockets that let the kernel choose (an unbound UDP server's
    ///   reply, a client's connect) never pick it. Without it Linux breaks the tie
    ///   of equal prefix matches by list order, newest first: ours won.
    ///   A deprecated address is still a full local address for receiving, and
    ///   Neighbour Discovery answers for it; ilnpd's own packets name their source.
    /// * no prefix route (IFA_F_NOPREFIXROUTE): the /64 is already on-link through
    ///   the address or RA that made it a locator; adding a permanent prefix route
    ///   for ours would merge into that route and strip an RA route's expiry.
    /// * no DAD: the NID is ours on every locator (see `add_address`).
    ///
    /// Returns false if the address was already there: e.g. the kernel's own SLAAC
    /// address when the NID is the EUI-64 of the MAC, left exactly as it is.
    pub async fn add_uplink_address(&self, index: u32, addr: Ipv6Addr) -> Result<bool> {
        let flags = AddressFlags::Nodad | AddressFlags::Noprefixroute;
        let mut lft = CacheInfo::default(); // non_exhaustive: no struct literal
        lft.ifa_preferred = 0;
        lft.ifa_valid = u32::MAX;
        self.add_address_with(index, addr, 64, flags, Some(lft)).await
    }

    /// Adds or replaces `addr/len` on `index` without DAD and with these lifetimes
    /// (seconds, u32::MAX forever): a temporary identifier address on ilnp0, or one
    /// it deprecates (preferred 0: RFC 6724 rule 3 keeps new connects off it, its
    /// sockets go on), `[privacy]`. `noprefixroute`: the identifier route is ours.
    pub async fn set_address_lifetimes(
        &self,
        index: u32,
        addr: Ipv6Addr,
        len: u8,
        preferred: u32,
        valid: u32,
    ) -> Result<()> {
        let mut lft = CacheInfo::default(); // non_exhaustive: no struct literal
        lft.ifa_preferred = preferred;
        lft.ifa_valid = valid;
        let mut req = self.handle.address().add(index, IpAddr::V6(addr), len).replace();
        req.message_mut().attributes.push(AddressAttribute::Flags(AddressFlags::Nodad | AddressFlags::Noprefixroute));
        req.message_mut().attributes.push(AddressAttribute::CacheInfo(lft));
        req.execute().await.map_err(|e| anyhow!("setting {addr}/{len} on ifindex {index}: {e}"))
    }

    /// `add_uplink_address` with Duplicate Address Detection: a temporary NID's
    /// `L64:NID` (`[privacy]`), whose collision with another node's address on the
    /// link DAD finds (`Addr6::dadfailed`).
    pub async fn add_uplink_address_dad(&self, index: u32, addr: Ipv6Addr) -> Result<bool> {
        let mut lft = CacheInfo::default(); // non_exhaustive: no struct literal
        lft.ifa_preferred = 0;
        lft.ifa_valid = u32::MAX;
        self.add_address_with(index, addr, 64, AddressFlags::Noprefixroute, Some(lft)).await
    }

    async fn add_address_with(
        &self,
        index: u32,
        addr: Ipv6Addr,
        len: u8,
        flags: AddressFlags,
        lifetimes: Option<CacheInfo>,
    ) -> Result<bool> {
        let mut req = self.handle.address().add(index, IpAddr::V6(addr), len);
        req.message_mut().attributes.push(AddressAttribute::Flags(flags));
        if let Some(l) = lifetimes {
            req.message_mut().attributes.push(AddressAttribute::CacheInfo(l));
        }
        match req.execute().await {
            Ok(()) => Ok(true),
            Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::EEXIST => Ok(false),
            Err(e) => Err(anyhow!("adding {addr}/{len} to ifindex {index}: {e}")),
        }
    }

    pub async fn del_address(&self, index: u32, addr: Ipv6Addr, len: u8) -> Result<()> {
        let mut m = AddressMessage::default();
        m.header.family = AddressFamily::Inet6;
        m.header.index = index;
        m.header.prefix_len = len;
        m.attributes.push(AddressAttribute::Address(IpAddr::V6(addr)));
        match self.handle.address().del(m).execute().await {
            Ok(()) => Ok(()),
            Err(rtnetlink::Error::NetlinkError(e))
                if e.raw_code() == -libc::EADDRNOTAVAIL || e.raw_code() == -libc::ENODEV =>
            {
                Ok(())
            }
            Err(e) => Err(anyhow!("removing {addr}/{len} from ifindex {index}: {e}")),
        }
    }

    /// Sets the route to prefix/len on `index` to send through `prog` (an lwt
    /// xmit program: its fd and name), or to plain (None), replacing the route
    /// there is (`ip route replace ... encap bpf xmit fd F name N`).
    pub async fn set_id_route(
        &self,
        prefix: Ipv6Addr,
        len: u8,
        index: u32,
        prog: Option<(std::os::fd::BorrowedFd<'_>, &str)>,
    ) -> Result<()> {
        use netlink_packet_route::route::{RouteLwEnCapType, RouteLwTunnelEncap};
        use netlink_packet_utils::nla::DefaultNla;
        use netlink_packet_utils::Emitable;
        use std::os::fd::AsRawFd;
        // include/uapi/linux/lwtunnel.h
        const LWT_BPF_XMIT: u16 = 3;
        const LWT_BPF_PROG_FD: u16 = 1;
        const LWT_BPF_PROG_NAME: u16 = 2;
        let mut r =
            RouteMessageBuilder::<Ipv6Addr>::new().destination_prefix(prefix, len).output_interface(index).build();
        if let Some((fd, name)) = prog {
            let mut cname = name.as_bytes().to_vec();
            cname.push(0);
            let inner = [
                DefaultNla::new(LWT_BPF_PROG_FD, (fd.as_raw_fd() as u32).to_ne_bytes().to_vec()),
                DefaultNla::new(LWT_BPF_PROG_NAME, cname),
            ];
            let mut buf = vec![0u8; inner.as_slice().buffer_len()];
            inner.as_slice().emit(&mut buf);
            r.attributes.push(RouteAttribute::EncapType(RouteLwEnCapType::Bpf));
            r.attributes
                .push(RouteAttribute::Encap(vec![RouteLwTunnelEncap::Other(DefaultNla::new(LWT_BPF_XMIT, buf))]));
        }
        let what = if prog.is_some() { "through the lwt program" } else { "plain" };
        self.handle
            .route()
            .add(r)
            .replace()
            .execute()
            .await
            .map_err(|e| anyhow!("setting route {prefix}/{len} dev ifindex {index} {what}: {e}"))
    }

    /// `dst/128 dev index src src` (replacing one there is): the source the kernel
    /// gives new connections to `dst`, whatever its source selection would take
    /// (`[privacy]`: a correspondent stays on the NID of ours its session uses).
    pub async fn pin_source(&self, dst: Ipv6Addr, index: u32, src: Ipv6Addr) -> Result<()> {
        let r = RouteMessageBuilder::<Ipv6Addr>::new()
            .destination_prefix(dst, 128)
            .output_interface(index)
            .pref_source(src)
            .build();
        self.handle.route().add(r).replace().execute().await.map_err(|e| anyhow!("route {dst}/128 src {src}: {e}"))
    }

    pub async fn unpin_source(&self, dst: Ipv6Addr, index: u32) -> Result<()> {
        let r = RouteMessageBuilder::<Ipv6Addr>::new().destination_prefix(dst, 128).output_interface(index).build();
        match self.handle.route().del(r).execute().await {
            Ok(()) => Ok(()),
            Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::ESRCH => Ok(()),
            Err(e) => Err(anyhow!("removing route {dst}/128: {e}")),
        }
    }

    pub async fn add_route(&self, prefix: Ipv6Addr, len: u8, index: u32) -> Result<()> {
        let r = RouteMessageBuilder::<Ipv6Addr>::new().destination_prefix(prefix, len).output_interface(index).build();
        match self.handle.route().add(r).execute().await {
            Ok(()) => Ok(()),
            Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::EEXIST => Ok(()),
            Err(e) => Err(anyhow!("adding route {prefix}/{len} dev ifindex {index}: {e}")),
        }
    }
}

/// The kernel's RTA_PREF value as the RFC 4191 router preference. Reserved (10,
/// "invalid") is treated as medium, as RFC 4191 §2.2 says a receiver must.
fn router_pref(p: &RoutePreference) -> ilnp_core::RouterPreference {
    match p {
        RoutePreference::High => ilnp_core::RouterPreference::High,
        RoutePreference::Low => ilnp_core::RouterPreference::Low,
        _ => ilnp_core::RouterPreference::Medium,
    }
}

fn gateway6(attrs: &[RouteAttribute]) -> Option<Ipv6Addr> {
    attrs.iter().find_map(|a| match a {
        RouteAttribute::Gateway(RouteAddress::Inet6(g)) => Some(*g),
        _ => None,
    })
}

/// A default route's next hop: its interface, the router preference and the
/// router's address (none for a default route without a gateway).
type DefaultHop = (u32, ilnp_core::RouterPreference, Option<Ipv6Addr>);

/// Interfaces with an IPv6 default route in the main table in `m`, with the route's
/// router preference (RA-learned routes carry the RA's; static ones are medium)
/// and the router's address.
fn default_route_ifaces(m: &RouteMessage) -> Vec<DefaultHop> {
    if m.header.address_family != AddressFamily::Inet6
        || m.header.destination_prefix_length != 0
        || m.header.kind != RouteType::Unicast
    {
        return Vec::new();
    }
    let mut table = u32::from(m.header.table);
    let mut pref = ilnp_core::RouterPreference::Medium;
    let mut out = Vec::new();
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Preference(p) => pref = router_pref(p),
            RouteAttribute::Oif(i) => out.push((*i, gateway6(&m.attributes))),
            RouteAttribute::MultiPath(hops) => {
                out.extend(hops.iter().map(|h| (h.interface_index, gateway6(&h.attributes))))
            }
            _ => {}
        }
    }
    if table != u32::from(RouteHeader::RT_TABLE_MAIN) {
        return Vec::new();
    }
    out.into_iter().map(|(i, g)| (i, pref, g)).collect()
}

impl Netlink {
    /// Per interface with an IPv6 default route (others are absent): the best
    /// router preference among them, and the address of the router of the first
    /// route with that preference that has one.
    pub async fn default_routers(&self) -> Result<BTreeMap<u32, (ilnp_core::RouterPreference, Option<Ipv6Addr>)>> {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet6;
        let mut s = self.handle.route().get(m).execute();
        let mut out: BTreeMap<u32, (ilnp_core::RouterPreference, Option<Ipv6Addr>)> = BTreeMap::new();
        while let Some(m) = s.try_next().await.context("dumping IPv6 routes")? {
            for (i, p, g) in default_route_ifaces(&m) {
                let e = out.entry(i).or_insert((p, g));
                if p > e.0 || (p == e.0 && e.1.is_none()) {
                    *e = (p, g);
                }
            }
        }
        Ok(out)
    }
}

/// A stream that yields whenever an IPv6 address, a link or an IPv6 route changes
/// (routes: the RA's default route appears, goes, or changes preference); with
/// `ipv4` (the v4 path is on) also IPv4 addresses and routes.
pub fn subscribe(ipv4: bool) -> Result<futures::channel::mpsc::UnboundedReceiver<()>> {
    use netlink_sys::{AsyncSocket, SocketAddr};
    let (mut conn, _handle, mut messages) = rtnetlink::new_connection().context("opening a netlink event socket")?;
    let groups = (1 << (libc::RTNLGRP_LINK - 1))
        | (1 << (libc::RTNLGRP_IPV6_IFADDR - 1))
        | (1 << (libc::RTNLGRP_IPV6_PREFIX - 1))
        | (1 << (libc::RTNLGRP_IPV6_ROUTE - 1))
        | if ipv4 { (1 << (libc::RTNLGRP_IPV4_IFADDR - 1)) | (1 << (libc::RTNLGRP_IPV4_ROUTE - 1)) } else { 0 };
    conn.socket_mut()
        .socket_mut()
        .bind(&SocketAddr::new(0, groups))
        .context("subscribing to address/link/route events")?;
    tokio::spawn(conn);
    let (tx, rx) = futures::channel::mpsc::unbounded();
    tokio::spawn(async move {
        while messages.next().await.is_some() {
            if tx.unbounded_send(()).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_core::RouterPreference;
    use netlink_packet_route::route::RouteNextHop;

    fn route(len: u8, attrs: Vec<RouteAttribute>) -> RouteMessage {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet6;
        m.header.destination_prefix_length = len;
        m.header.table = RouteHeader::RT_TABLE_MAIN;
        m.header.kind = RouteType::Unicast;
        m.attributes = attrs;
        m
    }

    #[test]
    fn default_routes_with_router_preference() {
        use RouteAttribute::*;
        let gw: Ipv6Addr = "fe80::1".parse().unwrap();
        let ra_low = route(0, vec![Oif(3), Preference(RoutePreference::Low), Gateway(RouteAddress::Inet6(gw))]);
        assert_eq!(default_route_ifaces(&ra_low), vec![(3, RouterPreference::Low, Some(gw))]);
        let ra_high = route(0, vec![Preference(RoutePreference::High), Oif(4)]);
        assert_eq!(default_route_ifaces(&ra_high), vec![(4, RouterPreference::High, None)]);
        // static route without RTA_PREF, reserved value: medium (RFC 4191 §2.2)
        assert_eq!(default_route_ifaces(&route(0, vec![Oif(5)])), vec![(5, RouterPreference::Medium, None)]);
        let reserved = route(0, vec![Oif(5), Preference(RoutePreference::Invalid)]);
        assert_eq!(default_route_ifaces(&reserved), vec![(5, RouterPreference::Medium, None)]);
        // multipath: every next hop's interface and router
        let gw2: Ipv6Addr = "fe80::2".parse().unwrap();
        let hop = |i, g: Option<Ipv6Addr>| {
            let mut h = RouteNextHop::default();
            h.interface_index = i;
            h.attributes = g.map(|g| vec![Gateway(RouteAddress::Inet6(g))]).unwrap_or_default();
            h
        };
        let mp = route(0, vec![MultiPath(vec![hop(6, Some(gw)), hop(7, Some(gw2))])]);
        assert_eq!(
            default_route_ifaces(&mp),
            vec![(6, RouterPreference::Medium, Some(gw)), (7, RouterPreference::Medium, Some(gw2))]
        );
        // not a default route, another table, an unreachable default: none
        assert!(default_route_ifaces(&route(64, vec![Oif(3)])).is_empty());
        assert!(default_route_ifaces(&route(0, vec![Oif(3), Table(100)])).is_empty());
        let mut unreach = route(0, vec![Oif(1)]);
        unreach.header.kind = RouteType::Unreachable;
        assert!(default_route_ifaces(&unreach).is_empty());
    }
}
