"""The three roles of RFC 6275, one process each, run in a namespace:

    python3 -m ilnp_lab.mipv6.node ha --home-if eth-mn --ha 2001:db8:2::1 --prefix 2001:db8:2::/64
    python3 -m ilnp_lab.mipv6.node mn --home-if eth-r2 --hoa 2001:db8:2::100 --ha 2001:db8:2::1 [--cn ADDR]
    python3 -m ilnp_lab.mipv6.node cn --addr 2001:db8:a::c

Home agent (§10): a BU with the H flag from a care-of address (HAO) -> sequence check in the
binding cache -> for a new binding, DAD for the home address on the home link (one NS, then
RetransTimer 1 s: the ~1 s in the thesis's MIPv6 handoffs) -> proxy NDP for the home address,
an ip6ip6 tunnel to the care-of address and a host route into it -> BA (RH2) to the care-of
address. Mobile node (§11): the home link's carrier going down (the link-layer trigger) or an RA
from a foreign router with the home link gone (movement detection) -> a care-of address on the
foreign link (the kernel's SLAAC; if the home link went first, as soon as that address leaves
DAD) -> BU to the HA (retransmitted from 1.5 s, doubling) -> on the BA: the home address on
the tunnel, default route into it (bidirectional tunnelling); with a CN and route optimisation,
return routability (HoTI through the tunnel, CoTI direct), BU to the CN authenticated with Kbm,
on its BA the xfrm ro states (HAO out, RH2 in) and a direct route. Correspondent (§9): HoT/CoT
from Kcn and nonces, BU verified (nonce indices, authenticator, sequence), binding cache, xfrm
ro states (RH2 out, HAO in), BA with its own authenticator. Every step is a JSON event line on
stdout (wall clock, one for all namespaces).
Returning home (§11.5.5): the home prefix's RA on the home link -> the data plane back on the
home link, BU with lifetime 0 from the home address -> the HA deletes the binding, proxy NDP,
host route and tunnel (§10.3.2) and answers -> the MN's unsolicited NA; with RO a home test and a
BU with lifetime 0 delete the CN's binding (§11.7.2, §9.5.3). A later move registers afresh.
Not done: BRR, binding refresh, retransmitting HoTI/CoTI, IPsec (the seeds ran without it).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import select
import signal
import socket
import sys
import time

from . import binding, kernel, mh, rr
from .rtnl import IFA_F_HOMEADDRESS, IFA_F_NODAD, Rtnl, addresses
from .xfrm import Xfrm
from .kernel import Log, ip


class HomeAgent:
    def __init__(self, a):
        self.a, self.log = a, Log("ha")
        self.prefix = ipaddress.IPv6Network(a.prefix)
        self.cache = binding.BindingCache()
        self.tunnels: dict[str, str] = {}
        self.endpoints: dict[str, tuple[str, bool]] = {}
        self.nl = Rtnl()
        # tunnel devices made at start-up, down, given a care-of address by a BU: creating one
        # costs 0.5-1.8 s under the VM's TCG emulation (UMIP's ioctl on real hardware: ~ms),
        # which would be the emulator's time in the handoff, not Mobile IPv6's
        for i in range(a.tunnel_pool):
            self.nl.tunnel(f"mip6h{i}", a.ha, "::", up=False)
            self.endpoints[f"mip6h{i}"] = ("::", False)
        kernel.sysctl("net.ipv6.conf.all.forwarding", 1)
        kernel.sysctl(f"net.ipv6.conf.{a.home_if}.proxy_ndp", 1)
        kernel.xfrm_wildrecv("hao", mh.BU)
        self.mh, self.tx = kernel.mh_socket(), kernel.raw_sender()
        self.home_idx = socket.if_nametoindex(a.home_if)

    def run(self) -> None:
        self.log("ready", ha=self.a.ha, home_if=self.a.home_if)
        while True:
            data, src, dst, coa_hao = kernel.recv_mh(self.mh)
            try:
                m = mh.Message.decode(data)
            except mh.MHError as e:
                self.log("malformed", src=src, error=str(e))
                continue
            if m.type == mh.BU:
                self.on_bu(m, src, coa_hao)

    def on_bu(self, m: mh.Message, hoa: str, coa_hao: str | None) -> None:
        alt = m.option(mh.OPT_ALT_COA)
        coa = alt.value()["coa"] if alt else coa_hao
        t = self.log("bu_rx", hoa=hoa, coa=coa, seq=m.seq, lifetime=m.lifetime * 4, flags=m.flags)
        if coa is None or coa == hoa or m.lifetime == 0:
            self.deregister(m, hoa, t)
            return
        status, lifetime = mh.BA_ACCEPTED, min(m.lifetime * 4, binding.HOME_REG_LIFETIME)
        if not m.flags & mh.BU_H:
            status = mh.BA_NOT_HA_FOR_MN
        elif ipaddress.IPv6Address(hoa) not in self.prefix:
            status = mh.BA_NOT_HOME_SUBNET
        elif not self.cache.check_seq(hoa, m.seq):
            status = mh.BA_SEQ_OUT_OF_WINDOW
        elif self.cache.lookup(hoa) is None:
            # §10.3.1: DAD for the home address on the home link before the first BA
            t0 = self.log("dad_start", hoa=hoa)
            lis = kernel.dad_start(self.a.home_if, hoa)
            until = time.monotonic() + binding.DAD_RETRANS_TIMER
            free = kernel.dad_wait(lis, hoa, until)
            self.log("dad_done", hoa=hoa, free=free, ms=round((time.time() - t0) * 1e3, 1))
            if not free:
                status = mh.BA_DAD_FAILED
        seq = m.seq
        if status == mh.BA_ACCEPTED:
            self.cache.update(hoa, coa, m.seq, lifetime, True)
            idx = self.tunnel_for(hoa, coa, up=True)
            self.nl.route(hoa, 128, idx)
            self.nl.proxy(self.home_idx, hoa)
            self.log("tunnel", hoa=hoa, coa=coa, dev=self.tunnels[hoa])
        elif status == mh.BA_SEQ_OUT_OF_WINDOW:
            seq, lifetime = self.cache.last_seq(hoa), 0
        ba = mh.ba(status, seq, lifetime if status == 0 else 0)
        kernel.send_raw(self.tx, mh.Packet(ba, self.a.ha, coa, rh2=hoa).bytes())
        self.log("ba_tx", hoa=hoa, coa=coa, status=status, seq=seq, ms=round((time.time() - t) * 1e3, 1))


    def deregister(self, m: mh.Message, hoa: str, t: float) -> None:
        """§10.3.2, primary care-of address de-registration (the MN back home, §11.5.5: a BU with
        the H flag, lifetime 0, from the home address, no HAO): refused with status 133 without a
        home registration for it, 135 for an old sequence number; else the binding cache entry
        deleted, proxy NDP for the home address stopped (§10.4.1), the tunnel's host route
        removed and the tunnel down, and the BA (lifetime 0) sent to the home address on the
        home link, no RH2 (the care-of address is the home address)."""
        b = self.cache.lookup(hoa)
        seq, status = m.seq, mh.BA_ACCEPTED
        if not m.flags & mh.BU_H or b is None or not b.home_reg:
            status = mh.BA_NOT_HA_FOR_MN
        elif not self.cache.check_seq(hoa, m.seq):
            status, seq = mh.BA_SEQ_OUT_OF_WINDOW, self.cache.last_seq(hoa)
        else:
            self.cache.update(hoa, hoa, m.seq, 0, True)  # lifetime 0: the entry deleted
            name = self.tunnels[hoa]
            idx = socket.if_nametoindex(name)
            self.nl.proxy(self.home_idx, hoa, delete=True)
            self.nl.route(hoa, 128, idx, delete=True)
            self.nl.link_up(idx, False)
            self.endpoints[name] = (self.endpoints[name][0], False)
            self.log("deregistered", hoa=hoa, dev=name)
        kernel.send_raw(self.tx, mh.Packet(mh.ba(status, seq, 0), self.a.ha, hoa).bytes())
        self.log("ba_tx", hoa=hoa, coa=hoa, status=status, seq=seq, ms=round((time.time() - t) * 1e3, 1))

    def tunnel_for(self, hoa: str, coa: str, up: bool) -> int:
        """The home address's ip6ip6 tunnel to `coa` (made, or moved; netlink only when it changes)."""
        name = self.tunnels.setdefault(hoa, f"mip6h{len(self.tunnels)}")
        if self.endpoints.get(name) != (coa, up):
            self.endpoints[name] = (coa, up)
            return self.nl.tunnel(name, self.a.ha, coa, up=up)
        return socket.if_nametoindex(name)


class MobileNode:
    def __init__(self, a):
        self.a, self.log = a, Log("mn")
        self.bul = binding.BindingUpdateList()
        self.coa: str | None = None
        self.away = False
        self.registered = False
        self.returning = False  # §11.5.5: the deregistration BU sent, its BA not yet in
        self.ro_active = False
        self.router: dict[int, str] = {}   # ifindex -> router link-local from its RA
        self.prefixes: dict[int, list[str]] = {}
        self.rr: dict = {}
        kernel.xfrm_wildrecv("route2", None)
        self.mh, self.tx = kernel.mh_socket(), kernel.raw_sender()
        self.ra = kernel.icmp6_socket([134])
        self.nl = kernel.link_socket()
        self.rtnl, self.xfrm = Rtnl(), Xfrm()
        self.home_via: str | None = None
        self.home_lladdr: bytes | None = None  # the home router's (the HA's) link-layer address, from its RA
        self.home_idx = socket.if_nametoindex(a.home_if)
        # the tunnel to the HA exists from the start, down (UMIP makes it at start-up too); a
        # move gives it the care-of address as its local end
        self.tnl = self.rtnl.tunnel("mip6mn", a.hoa, a.ha, up=False)

    def run(self) -> None:
        self.log("ready", hoa=self.a.hoa, ha=self.a.ha)
        while True:
            timeout = 0.05
            r = select.select([self.mh, self.ra, self.nl], [], [], timeout)[0]
            if self.nl in r:
                for idx, up in kernel.link_events(self.nl):
                    if idx == self.home_idx and not up and not self.away:
                        self.log("link_down", iface=self.a.home_if)  # the link-layer trigger
                        self.away, self.coa = True, None
                        self.handoff()
            if self.ra in r:
                self.on_ra(*kernel.recv_icmp6(self.ra))
            if self.mh in r:
                self.on_mh(*kernel.recv_mh(self.mh))
            if self.away and not self.coa and self.router and self.care_of():
                self.handoff()  # the new link's address left DAD after its RA (a hard move): register now
            for peer in list(self.bul.entries):
                if self.bul.due(peer):
                    self.send_bu(peer, retransmit=True)
            if self.rr_due():
                self.send_rr(retransmit=True)

    def on_ra(self, data: bytes, src: str, idx: int) -> None:
        ra = kernel.parse_ra(data)
        new = [p["prefix"] for p in ra["prefixes"] if p["prefix"] not in self.prefixes.get(idx, [])]
        self.router[idx] = src
        self.prefixes.setdefault(idx, []).extend(new)
        if ra["lladdr"] and idx == self.home_idx:
            self.home_lladdr = ra["lladdr"]
        home = ipaddress.IPv6Network(self.a.home_prefix)
        if idx == self.home_idx and self.away and any(ipaddress.IPv6Network(p["prefix"]) == home for p in ra["prefixes"]):
            self.return_home()  # §11.5.1: the home subnet prefix on-link again
            return
        if new:
            self.log("ra_new_prefix", iface=socket.if_indextoname(idx), prefixes=new, home_agent=ra["home_agent"])
            if self.away and not self.coa:
                self.handoff()

    def care_of(self) -> tuple[str, int] | None:
        """A global address of a foreign link we heard an RA on (SLAAC made it), not tentative."""
        home = ipaddress.IPv6Network(self.a.home_prefix)
        for addr, idx, scope, flags in addresses():
            if (idx in self.router and idx != self.home_idx and scope == 0
                    and ipaddress.IPv6Address(addr) not in home and not flags & 0x40):  # IFA_F_TENTATIVE
                return addr, idx
        return None

    def handoff(self) -> None:
        c = self.care_of()
        if c is None:
            self.log("no_care_of_address_yet")
            return
        self.coa, self.coa_idx = c
        self.rr = {}  # a home test of the last return home, if still unanswered: moot
        self.log("movement_detected", coa=self.coa, iface=socket.if_indextoname(self.coa_idx))
        if self.home_via:  # the default route return_home put on the home link (gone with it if it went down)
            self.rtnl.route("::", 0, self.home_idx, via=self.home_via, metric=1, delete=True)
            self.home_via = None
        # BUs and the tunnel reach the HA over the new link, not through the tunnel; the home
        # address moves to the tunnel device, flagged as one (the kernel's RH2 check)
        self.rtnl.route(self.a.ha, 128, self.coa_idx, via=self.router[self.coa_idx])
        self.tnl = self.rtnl.tunnel("mip6mn", self.coa, self.a.ha)
        self.rtnl.addr(False, self.home_idx, self.a.hoa, 64)
        self.rtnl.addr(True, self.tnl, self.a.hoa, 128, IFA_F_HOMEADDRESS | IFA_F_NODAD)
        self.log("home_address_moved", dev="mip6mn")
        # what leaves from the care-of address (BU, CoTI) goes out of its link, never into the tunnel
        self.tx_direct = kernel.raw_sender()
        self.tx_direct.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, socket.if_indextoname(self.coa_idx).encode())
        self.send_bu(self.a.ha)

    def send_bu(self, peer: str, retransmit: bool = False) -> None:
        home_reg = peer == self.a.ha
        # at home (§11.5.5) the care-of address is the home address: lifetime 0, sent from the
        # home address without the HAO (a node at home uses none) and without an alternate CoA
        home = self.coa == self.a.hoa
        if retransmit:
            e = self.bul.retransmitted(peer)
        else:
            e = self.bul.sent(peer, self.a.hoa, self.coa, 0 if home else self.a.lifetime if home_reg else 60,
                              home_reg, first_reg=not self.registered)
        if home_reg:
            m = mh.bu(e.seq, e.lifetime, mh.BU_A | mh.BU_H, [] if home else [mh.alt_coa(self.coa)])
        else:
            m = mh.bu(e.seq, min(e.lifetime, rr.MAX_RR_BINDING_LIFETIME), mh.BU_A,
                      [mh.nonce_indices(self.rr["hni"], self.rr["cni"]), mh.auth_data(bytes(12))])
            rr.authenticate(m, self.rr["kbm"], self.coa, peer)
        kernel.send_raw(self.tx_direct, mh.Packet(m, self.coa, peer, hao=None if home else self.a.hoa).bytes())
        self.log("bu_tx", peer=peer, seq=e.seq, coa=self.coa, lifetime=e.lifetime, retransmit=retransmit,
                 timeout=e.timeout)

    def return_home(self) -> None:
        """RFC 6275 §11.5.5: the home subnet prefix's RA on the home link. The data plane comes
        back to the home link at once (the tunnel's default route replaced by one through the
        home router, the HA's host route, and with RO the binding's xfrm states and the direct
        route to the CN removed; the home address leaves the tunnel for the home interface, no
        DAD: the HA still defends it), then a BU to the HA with the A and H bits, lifetime 0,
        from the home address (the care-of address = the home address). The home address
        answers Neighbor Solicitations from here on, not only after the BA as §11.5.5 asks: the
        HA needs the MN's link-layer address for its BA, which the RFC lets it take from the
        BU's frame, but a raw MH socket does not show it (the deviation costs nothing here:
        nobody else on the home link asks while the HA still proxies)."""
        self.log("home_link_detected", iface=self.a.home_if, router=self.router[self.home_idx])
        self.away, self.returning = False, True
        if self.coa and self.coa != self.a.hoa:
            self.rtnl.route(self.a.ha, 128, self.coa_idx, via=self.router[self.coa_idx], delete=True)
            if self.ro_active:
                kernel.ro_unbind(self.xfrm, self.a.hoa, self.a.cn, "mn")
                self.rtnl.route(self.a.cn, 128, self.coa_idx, via=self.router[self.coa_idx], src=self.a.hoa,
                                delete=True)
                self.ro_active = False
        self.bul.entries.pop(self.a.cn, None)  # an unanswered BU to the CN from the foreign link: moot
        self.rr = {}  # and a return routability still under way there
        self.home_via = self.router[self.home_idx]
        self.rtnl.route("::", 0, self.home_idx, via=self.home_via, metric=1)  # replaces the tunnel's
        self.rtnl.addr(False, self.tnl, self.a.hoa, 128)
        self.rtnl.addr(True, self.home_idx, self.a.hoa, 64, IFA_F_NODAD)
        if self.home_lladdr:
            # §11.5.5: no Neighbor Solicitation for the HA from the home address while the HA still
            # intercepts it (its NA would go into the tunnel: ~1 s lost in the VM's WAN runs); the
            # HA's link-layer address is its RA's source link-layer address (HA = home router here)
            self.rtnl.neigh(self.home_idx, self.a.ha, self.home_lladdr)
        self.rtnl.link_up(self.tnl, False)
        self.coa, self.coa_idx = self.a.hoa, self.home_idx
        self.tx_direct = kernel.raw_sender()
        self.tx_direct.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.a.home_if.encode())
        self.send_bu(self.a.ha)

    def home_deregistered(self) -> None:
        """§11.5.5 after the HA's BA: the unsolicited Neighbor Advertisement for the home address
        (all-nodes, O set, the link-layer address), and with RO the CN's binding deleted the
        same way (§11.7.2: a BU with lifetime 0 from home, after a home test only: Kbm from the
        home keygen token alone, §5.2.5); a later move registers afresh (first registration)."""
        self.returning, self.registered = False, False
        kernel.unsolicited_na(self.a.home_if, self.a.hoa)
        self.log("home", hoa=self.a.hoa)
        if self.a.cn and self.a.ro:
            self.start_rr(home=True)

    def on_mh(self, data: bytes, src: str, dst: str, _hao) -> None:
        m = mh.Message.decode(data)
        if m.type == mh.BA:
            peer = src
            ok = self.bul.acked(peer, m.seq, m.status, m.lifetime * 4)
            if peer != self.a.ha and ok and not rr.verify(data, self.rr["kbm"], self.coa, peer):
                self.log("ba_bad_authenticator", peer=peer)
                return
            self.log("ba_rx", peer=peer, status=m.status, seq=m.seq, accepted=ok)
            if peer == self.a.ha and self.returning and m.status == mh.BA_NOT_HA_FOR_MN \
                    and self.bul.entries[peer].seq == m.seq:
                self.bul.entries[peer].acked = True  # §10.3.2: no home registration there (never bound): home anyway
                self.home_deregistered()
            elif ok and peer == self.a.ha and self.returning:
                self.home_deregistered()
            elif ok and peer == self.a.ha:
                self.home_registered()
            elif ok and self.coa == self.a.hoa:
                self.log("ro_deregistered", cn=peer)  # the CN deleted its binding (§9.5.3)
            elif ok:
                kernel.ro_binding(self.xfrm, self.a.hoa, peer, self.coa, "mn")
                self.rtnl.route(peer, 128, self.coa_idx, via=self.router[self.coa_idx], src=self.a.hoa)
                self.ro_active = True
                self.log("ro_active", cn=peer)
        elif m.type in (mh.HOT, mh.COT):
            key = "hot" if m.type == mh.HOT else "cot"
            if m.cookie != self.rr.get(key + "i_cookie"):
                self.log("rr_bad_cookie", msg=m.name)
                return
            self.rr[key] = (m.nonce_index, m.token)
            self.log(key + "_rx", index=m.nonce_index)
            if self.rr.get("home") and "hot" in self.rr:  # §5.2.5: a deregistration needs the home token only
                (self.rr["hni"], ht), self.rr["cni"] = self.rr["hot"], 0
                self.rr["kbm"] = rr.kbm(ht, None)
                self.send_bu(self.a.cn)
            elif "hot" in self.rr and "cot" in self.rr:
                (self.rr["hni"], ht), (self.rr["cni"], ct) = self.rr["hot"], self.rr["cot"]
                self.rr["kbm"] = rr.kbm(ht, ct)
                self.send_bu(self.a.cn)

    def home_registered(self) -> None:
        first = not self.registered
        self.registered = True
        self.rtnl.route("::", 0, self.tnl, metric=1)  # bidirectional tunnelling from here on
        self.log("tunnel", coa=self.coa, first=first)
        if self.a.cn and self.a.ro:
            self.start_rr()

    def start_rr(self, home: bool = False) -> None:
        """HoTI from the home address (through the tunnel), CoTI from the care-of address (direct);
        at home (`home`) the HoTI alone, on the home link (§5.2.5, §11.6.1)."""
        self.rr = {"hoti_cookie": os.urandom(8), "coti_cookie": os.urandom(8), "home": home,
                   "timeout": binding.INITIAL_BINDACK_TIMEOUT / 2}
        self.log("rr_start", cn=self.a.cn, home=home)
        self.send_rr()

    def rr_due(self) -> bool:
        """A HoTI / CoTI sent, its answer missing past the timer?"""
        return self.rr.get("sent") is not None and "kbm" not in self.rr \
            and time.monotonic() - self.rr["sent"] >= self.rr["timeout"]

    def send_rr(self, retransmit: bool = False) -> None:
        """The HoTI and (away) CoTI whose answer is still missing; §11.8: retransmitted from
        InitialBindackTimeout (1 s) on, doubling up to MAX_BINDACK_TIMEOUT, the same cookies."""
        self.rr["sent"], self.rr["timeout"] = time.monotonic(), min(self.rr["timeout"] * 2, binding.MAX_BINDACK_TIMEOUT)
        if "hot" not in self.rr:
            kernel.send_raw(self.tx, mh.Packet(mh.hoti(self.rr["hoti_cookie"]), self.a.hoa, self.a.cn).bytes())
        if not self.rr["home"] and "cot" not in self.rr:
            kernel.send_raw(self.tx_direct, mh.Packet(mh.coti(self.rr["coti_cookie"]), self.coa, self.a.cn).bytes())
        if retransmit:
            self.log("rr_retransmit", hoti="hot" not in self.rr, coti=not self.rr["home"] and "cot" not in self.rr,
                     timeout=self.rr["timeout"])


class Correspondent:
    def __init__(self, a):
        self.a, self.log = a, Log("cn")
        self.rr = rr.Correspondent()
        self.cache = binding.BindingCache()
        kernel.xfrm_wildrecv("hao", mh.BU)
        self.mh, self.tx, self.xfrm = kernel.mh_socket(), kernel.raw_sender(), Xfrm()

    def run(self) -> None:
        self.log("ready", addr=self.a.addr)
        while True:
            data, src, dst, coa = kernel.recv_mh(self.mh)
            m = mh.Message.decode(data)
            if m.type == mh.HOTI:
                i, tok = self.rr.home_token(src)
                kernel.send_raw(self.tx, mh.Packet(mh.hot(i, m.cookie, tok), self.a.addr, src).bytes())
                self.log("hot_tx", hoa=src, index=i)
            elif m.type == mh.COTI:
                i, tok = self.rr.careof_token(src)
                kernel.send_raw(self.tx, mh.Packet(mh.cot(i, m.cookie, tok), self.a.addr, src).bytes())
                self.log("cot_tx", coa=src, index=i)
            elif m.type == mh.BU:
                self.on_bu(data, m, src, coa)

    def on_bu(self, data: bytes, m: mh.Message, hoa: str, coa: str | None) -> None:
        ni = m.option(mh.OPT_NONCE_IDX)
        # §9.5.1: without a HAO the home address is the source and so is the care-of address:
        # the MN at home deleting its binding (§11.7.2, care-of address = home address)
        coa = coa or hoa
        if ni is None or m.option(mh.OPT_AUTH) is None:
            self.log("bu_refused", hoa=hoa, why="no nonce indices or authorization data")
            return
        v = ni.value()
        key, status = self.rr.kbm_for(hoa, coa, v["home_nonce_index"], v["careof_nonce_index"])
        if key is not None and not rr.verify(data, key, coa, self.a.addr):
            self.log("bu_refused", hoa=hoa, why="authenticator")
            return
        seq = m.seq
        if key is not None:
            status = self.cache.update(hoa, coa, m.seq, min(m.lifetime * 4, rr.MAX_RR_BINDING_LIFETIME), False)
            if status == mh.BA_SEQ_OUT_OF_WINDOW:
                seq = self.cache.last_seq(hoa)
        self.log("bu_rx", hoa=hoa, coa=coa, seq=m.seq, status=status)
        dereg = coa == hoa or m.lifetime == 0
        if status == mh.BA_ACCEPTED and dereg:
            kernel.ro_unbind(self.xfrm, self.a.addr, hoa, "cn")  # §9.5.3: the entry deleted, RH2 out and HAO in go
            self.log("deregistered", hoa=hoa)
        elif status == mh.BA_ACCEPTED:
            kernel.ro_binding(self.xfrm, self.a.addr, hoa, coa, "cn")
        if m.flags & mh.BU_A or status:
            ba = mh.ba(status, seq, m.lifetime * 4 if status == 0 else 0, options=[mh.auth_data(bytes(12))])
            if key is not None:
                rr.authenticate(ba, key, coa, self.a.addr)
            kernel.send_raw(self.tx, mh.Packet(ba, self.a.addr, coa, rh2=None if coa == hoa else hoa).bytes())
            self.log("ba_tx", hoa=hoa, coa=coa, status=status)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ilnp_lab.mipv6.node", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    h = sub.add_parser("ha")
    h.add_argument("--home-if", required=True)
    h.add_argument("--ha", required=True, help="the home agent's address on the home link")
    h.add_argument("--prefix", required=True, help="the home prefix")
    h.add_argument("--tunnel-pool", type=int, default=1, help="tunnel devices made at start-up")
    m = sub.add_parser("mn")
    m.add_argument("--home-if", required=True)
    m.add_argument("--home-prefix", required=True)
    m.add_argument("--hoa", required=True)
    m.add_argument("--ha", required=True)
    m.add_argument("--cn", help="a correspondent for route optimisation")
    m.add_argument("--ro", action="store_true")
    m.add_argument("--lifetime", type=float, default=binding.HOME_REG_LIFETIME)
    c = sub.add_parser("cn")
    c.add_argument("--addr", required=True)
    a = p.parse_args(argv)
    why = kernel.refusal()
    if why:
        print(f"ilnp_lab.mipv6: {why}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    {"ha": HomeAgent, "mn": MobileNode, "cn": Correspondent}[a.role](a).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
