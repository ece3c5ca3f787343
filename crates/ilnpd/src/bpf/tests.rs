//! Kernel tests of the data path, each in fresh network namespaces (unique
//! names, deleted on drop). They need root; without it they print why and pass.
//!
//! * `attach_detach_and_maps_round_trip`: verifier acceptance, tcx and
//!   clsact+netlink attach/detach, map writes and reads, pinning, and that
//!   shutdown leaves no filter, qdisc or pin behind.
//! * `fast_path_between_two_hosts`: A and B over veth, each with ilnp0 (TUN) and
//!   both programs. UDP from a plain socket on A reaches a socket bound on B's
//!   identifier address; the frame captured on B's uplink has the wire addresses,
//!   the nonce option and an RFC 6744 checksum; punts (miss, bad nonce, unknown
//!   locator, other options, ICMPv6 errors both ways) reach the TUNs; two nonces
//!   and a bad nonce length are dropped; plain IPv6 is not touched.
//! * `fast_path_tcp_with_offloads`: TCP with GSO/checksum offload on the TUNs
//!   (CHECKSUM_PARTIAL super-packets), software checksums at the veths.
//! * `balance_table_and_its_ilcc_flag_in_step`: the ILCC entry's BALANCED flag
//!   follows the balancing table whichever is written first, and the egress
//!   program balances exactly while both are there.
//! * `temporary_nid_sessions_take_the_fast_path`: a session on one of A's temporary
//!   NIDs runs in both fast paths; the NIDs its entry does not use are punted.
//! * `esp_takes_both_fast_paths`: ESP (next header 50) A -> B through both fast
//!   paths, unchanged behind the nonce (issue #44 item 4).
//! * `userspace_mode_steers_only`, `pin_dir_mounts_bpffs_when_needed`.

use super::maps::IlccVal;
use super::*;
use ilnp_core::LocatorState;
use ilnp_core::{BalanceChange, IlccKey, IlccSnapshot, LocalLocator};
use ilnp_wire::ipv6::NextHeader;
use ilnp_wire::test_support as ts;
use ilnp_wire::{ilnp_addr, Nonce};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddrV6, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const P: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;
const L: Locator = Locator(0x2001_0db8_0001_0000);
const NID_A: Nid = Nid(0xa);
const NID_B: Nid = Nid(0xb);
const N_AB: [u8; 4] = [0xa1, 0xb2, 0xc3, 0xd4];
const N_BA: [u8; 12] = [0x5e; 12];

fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if !root || !ip {
        eprintln!("skipped: needs root and iproute2 (root={root}, ip={ip})");
    }
    root && ip
}

fn run(cmd: &[&str]) -> String {
    let out = Command::new(cmd[0]).args(&cmd[1..]).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace with a name unique to this run; deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!("ilnpbpf-{tag}-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        run(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        ns.ip("link set lo up");
        ns
    }
    fn ip(&self, args: &str) -> String {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend(args.split_whitespace());
        run(&v)
    }
    fn exec(&self, args: &str) -> String {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend(args.split_whitespace());
        run(&v)
    }
    /// Moves the calling thread into the namespace (sockets, TUNs, netlink and
    /// interface names then belong to it).
    fn enter(&self) {
        let f = File::open(format!("/run/netns/{}", self.name)).unwrap();
        // SAFETY: f is an open netns file; setns only affects this thread.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns {}", self.name);
    }
    fn ifindex(&self, dev: &str) -> u32 {
        self.enter();
        let c = std::ffi::CString::new(dev).unwrap();
        // SAFETY: c is NUL-terminated.
        let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert!(i != 0, "no {dev} in {}", self.name);
        i
    }
    /// tc state of a device once detached programs are gone: the kernel releases a
    /// tcx link from deferred work after its fd closes, so give it up to 2 s.
    fn tc_state_settled(&self, dev: &str) -> String {
        let mut st = self.tc_state(dev);
        for _ in 0..40 {
            if !st.contains("ilnp_") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            st = self.tc_state(dev);
        }
        st
    }
    /// tc state of a device: tcx programs, netlink filters and qdiscs.
    fn tc_state(&self, dev: &str) -> String {
        self.enter();
        let mut out = String::new();
        for (at, dir) in [(TcAttachType::Ingress, "ingress"), (TcAttachType::Egress, "egress")] {
            let (_, progs) = SchedClassifier::query_tcx(dev, at).unwrap();
            for p in progs {
                out += &format!("tcx {dir}: {}\n", p.name_as_str().unwrap_or("?"));
            }
            out += &run(&["tc", "-n", &self.name, "filter", "show", "dev", dev, dir]);
        }
        out + &run(&["tc", "-n", &self.name, "qdisc", "show", "dev", dev])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Runs f on a fresh thread, so the namespace switches stay off the test harness's threads.
fn on_thread<F: FnOnce() + Send + 'static>(f: F) {
    std::thread::spawn(f).join().unwrap_or_else(|e| std::panic::resume_unwind(e));
}

/// Opens a TUN in the calling thread's namespace. vnet: virtio-net header +
/// checksum and TSO offload, like ilnpd in eBPF mode.
fn open_tun(name: &str, vnet: bool) -> OwnedFd {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: i16,
        _pad: [u8; 22],
    }
    // SAFETY: plain open(2) of a NUL-terminated path.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open /dev/net/tun");
    // SAFETY: fd was just opened and is owned from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq { name: [0; 16], flags: 0x0001 | 0x1000, _pad: [0; 22] }; // IFF_TUN | IFF_NO_PI
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    if vnet {
        req.flags |= 0x4000; // IFF_VNET_HDR
    }
    // SAFETY: TUNSETIFF takes a struct ifreq, which IfReq lays out.
    assert_eq!(unsafe { libc::ioctl(fd.as_raw_fd(), 0x4004_54ca, &mut req) }, 0, "TUNSETIFF");
    if vnet {
        // TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6; SAFETY: TUNSETOFFLOAD takes an integer.
        assert_eq!(unsafe { libc::ioctl(fd.as_raw_fd(), 0x4004_54d0, 0x01 | 0x02 | 0x04) }, 0, "TUNSETOFFLOAD");
    }
    fd
}

/// One packet from a non-blocking fd (TUN or packet socket), waiting up to `t`.
fn read_packet(fd: &OwnedFd, t: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + t;
    let mut buf = vec![0u8; 65536];
    loop {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        let n = if n < 0 {
            // a TUN fd is not a socket
            // SAFETY: as above.
            unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }
        } else {
            n
        };
        if n > 0 {
            buf.truncate(n as usize);
            return Some(buf);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads until a packet matches (or `t` passes).
fn wait_packet(fd: &OwnedFd, t: Duration, pred: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    let deadline = Instant::now() + t;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match read_packet(fd, left) {
            Some(p) if pred(&p) => return Some(p),
            Some(_) => {}
            None => return None,
        }
    }
    None
}

/// AF_PACKET socket on dev seeing every frame, before tc ingress runs (cooked: starts at IPv6).
fn capture(dev_index: u32) -> OwnedFd {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, proto as i32) };
    assert!(fd >= 0, "AF_PACKET socket");
    // SAFETY: fd was just created and is owned from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; zero is a valid start.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = dev_index as i32;
    let len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
    // SAFETY: sll is a valid sockaddr_ll of that length.
    let rc = unsafe { libc::bind(fd.as_raw_fd(), (&sll as *const libc::sockaddr_ll).cast(), len) };
    assert_eq!(rc, 0, "bind AF_PACKET");
    fd
}

fn snapshot(peer: Nid, tx: Nonce, rx: Option<Nonce>) -> IlccSnapshot {
    IlccSnapshot {
        nid: peer,
        local_loc: L,
        remote_loc: L,
        remote_locs: vec![L],
        nonce_tx: tx,
        nonce_rx: rx,
        full_address_checksum: false,
        remote_v4: None,
        local_nid: None,
    }
}

fn local_locs(ifindex: u32, state: LocatorState) -> Vec<LocalLocator> {
    vec![LocalLocator { loc: L, ifindex, pref: 0, lifetime_s: u32::MAX, state, has_router: true, deprecated: false }]
}

fn stat(dp: &Datapath, name: &str) -> u64 {
    dp.stats().unwrap().into_iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no counter {name}")).1
}

fn nonzero(dp: &Datapath) -> Vec<(&'static str, u64)> {
    dp.stats().unwrap().into_iter().filter(|(_, v)| *v > 0).collect()
}

/// The fast path's entry for `peer` talking to our stable NID.
fn read_ilcc(dp: &Datapath, peer: Nid) -> Option<IlccVal> {
    read_ilcc_key(dp, IlccKey::stable(peer))
}

fn read_ilcc_key(dp: &Datapath, key: IlccKey) -> Option<IlccVal> {
    dp.ilcc().unwrap().get(&maps::ilcc_map_key(key), 0).ok()
}

// ------------------------------------------------------------------ test 1

#[test]
fn attach_detach_and_maps_round_trip() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let ns = Netns::new("attach");
        ns.ip("link add veth0 type veth peer name veth1");
        ns.ip("tuntap add dev ilnp0 mode tun");
        for d in ["veth0", "veth1", "ilnp0"] {
            ns.ip(&format!("link set {d} up"));
        }
        let tun = ns.ifindex("ilnp0");
        let up = ns.ifindex("veth0");

        // pins on a private bpffs mount, removed at the end
        let mnt = tempfile::tempdir().unwrap();
        run(&["mount", "-t", "bpf", "bpf", mnt.path().to_str().unwrap()]);
        struct Umount(PathBuf);
        impl Drop for Umount {
            fn drop(&mut self) {
                let _ = Command::new("umount").arg(&self.0).status();
            }
        }
        let _umount = Umount(mnt.path().to_path_buf());
        let pin_dir = mnt.path().join("ilnp");

        for kind in [AttachKind::Tcx, AttachKind::Netlink] {
            ns.enter();
            let cfg = DatapathConfig {
                mode: Mode::Ebpf,
                ilnp0_ifindex: tun,
                id_prefix: P,
                local_nid: NID_A,
                ilcc_max_entries: 1024,
                admit_socket: false,
                pin_dir: (kind == AttachKind::Tcx).then(|| pin_dir.clone()),
                v4_port: None,
            };
            let mut dp = Datapath::load_with(&cfg, kind).expect("load + verifier");
            let st = ns.tc_state("ilnp0");
            assert!(st.contains("ilnp_egress"), "{kind:?}: egress not attached:\n{st}");
            assert_eq!(st.contains("clsact"), kind == AttachKind::Netlink, "{kind:?}:\n{st}");
            dp.attach_uplink(up).unwrap();
            dp.attach_uplink(up).unwrap(); // idempotent
            let st = ns.tc_state("veth0");
            assert_eq!(st.lines().filter(|l| l.contains("ilnp_ingress")).count(), 1, "{kind:?}: ingress once:\n{st}");
            dp.detach_uplink(up).unwrap();
            let st = ns.tc_state_settled("veth0");
            assert!(!st.contains("ilnp_ingress") && !st.contains("clsact"), "{kind:?}: after detach:\n{st}");
            dp.attach_uplink(up).unwrap();

            // map round trips
            let cfgv: CfgVal = Array::try_from(dp.bpf.map(MAP_CFG).unwrap()).unwrap().get(&0, 0).unwrap();
            assert_eq!(cfgv.id_prefix, P.to_bytes());
            assert_eq!((cfgv.local_nid, cfgv.ilnp0_ifindex, cfgv.mode), (NID_A.to_bytes(), tun, 0));
            let s = snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)));
            dp.upsert_peer(&s).unwrap();
            let v = read_ilcc(&dp, NID_B).expect("entry written");
            assert_eq!(v, IlccVal::from_snapshot(&s, None));
            assert_eq!(dp.peer_counters().unwrap(), vec![(IlccKey::stable(NID_B), PeerCounters::default())]);
            // the bounded sweep visits every entry once, 2 per call, then says it ended
            let more: Vec<Nid> = (1..=4u64).map(|i| Nid(0x0200_0000_0000_7000 + i)).collect();
            for n in &more {
                dp.upsert_peer(&snapshot(*n, Nonce::N32(N_AB), None)).unwrap();
            }
            let (mut seen, mut cursor, mut calls) = (Vec::new(), None, 0);
            loop {
                let (got, next) = dp.peer_counters_from(cursor, 2).unwrap();
                assert!(got.len() <= 2);
                seen.extend(got.into_iter().map(|(k, _)| k.remote));
                calls += 1;
                cursor = next;
                if cursor.is_none() {
                    break;
                }
            }
            seen.sort();
            let mut want = more.clone();
            want.push(NID_B);
            want.sort();
            assert_eq!((seen, calls), (want, 3));
            for n in &more {
                dp.remove_peer(IlccKey::stable(*n)).unwrap();
            }
            dp.remove_peer(IlccKey::stable(NID_B)).unwrap();
            dp.remove_peer(IlccKey::stable(NID_B)).unwrap(); // absent is fine
            assert!(read_ilcc(&dp, NID_B).is_none());
            dp.set_local_locators(&local_locs(up, LocatorState::Active)).unwrap();
            dp.set_local_locators(&[]).unwrap();
            let stats = dp.stats().unwrap();
            assert_eq!(stats.len(), REASONS.len());
            if kind == AttachKind::Tcx {
                for m in MAP_NAMES {
                    assert!(pin_dir.join(format!("maps-{}", layout_id(1024))).join(m).exists(), "{m} not pinned");
                }
            }
            dp.shutdown().unwrap();
            for dev in ["ilnp0", "veth0"] {
                let st = ns.tc_state_settled(dev);
                assert!(!st.contains("ilnp_") && !st.contains("clsact"), "{kind:?}: left behind on {dev}:\n{st}");
            }
            assert!(!pin_dir.exists(), "pin directory left behind");
        }
        // the ILCC survives a restart through the pins (a crash: no shutdown)
        ns.enter();
        let cfg = DatapathConfig {
            mode: Mode::Userspace,
            ilnp0_ifindex: tun,
            id_prefix: P,
            local_nid: NID_A,
            ilcc_max_entries: 16,
            admit_socket: false,
            pin_dir: Some(pin_dir.clone()),
            v4_port: None,
        };
        let mut dp = Datapath::load_with(&cfg, AttachKind::Tcx).unwrap();
        dp.attach_uplink(up).unwrap();
        dp.upsert_peer(&snapshot(NID_B, Nonce::N32(N_AB), None)).unwrap();
        drop(dp);
        // the pinned tcx links keep both programs attached with no process behind them
        assert!(ns.tc_state_settled("ilnp0").contains("ilnp_egress"), "egress link died with the process");
        assert!(ns.tc_state_settled("veth0").contains("ilnp_ingress"), "ingress link died with the process");
        assert!(pin_dir.join(format!("link_egress_{tun}")).exists());
        let maps16 = pin_dir.join(format!("maps-{}", layout_id(16)));
        assert!(maps16.join(MAP_ILCC).exists());
        let mut dp = Datapath::load_with(&cfg, AttachKind::Tcx).unwrap();
        dp.attach_uplink(up).unwrap();
        assert!(read_ilcc(&dp, NID_B).is_some(), "pinned ILCC not reused");
        // adopted, not attached a second time
        let st = ns.tc_state("veth0");
        assert_eq!(st.lines().filter(|l| l.contains("ilnp_ingress")).count(), 1, "ingress once after adoption:\n{st}");
        drop(dp);
        // an upgrade with another map layout (here: another ILCC bound): the old
        // maps are replaced, not reused; the links are adopted
        let cfg17 = DatapathConfig { ilcc_max_entries: 17, ..cfg.clone() };
        assert_ne!(layout_id(16), layout_id(17));
        let mut dp = Datapath::load_with(&cfg17, AttachKind::Tcx).unwrap();
        dp.attach_uplink(up).unwrap();
        assert!(read_ilcc(&dp, NID_B).is_none(), "pins of another layout reused");
        assert!(!maps16.exists(), "old layout's maps left behind");
        let st = ns.tc_state("veth0");
        assert_eq!(st.lines().filter(|l| l.contains("ilnp_ingress")).count(), 1, "ingress once:\n{st}");
        dp.shutdown().unwrap();
        assert!(!pin_dir.exists(), "pins or links left behind");
        assert!(ns.tc_state_settled("ilnp0").find("ilnp_").is_none());
        assert!(ns.tc_state_settled("veth0").find("ilnp_").is_none());
    });
}

// ------------------------------------------------------------------ test 2

struct Host {
    ns: Netns,
    nid: Nid,
    tun: OwnedFd,
    uplink: u32,
    dp: Datapath,
}

/// Enters `ns` and gives it ilnp0 (P:nid, the identifier route) and a loaded datapath,
/// no uplink attached yet.
fn ilnp0_datapath(ns: &Netns, nid: Nid, vnet: bool, mode: Mode) -> (OwnedFd, Datapath) {
    ns.enter();
    let tun = open_tun("ilnp0", vnet);
    ns.exec("sysctl -qw net.ipv6.conf.ilnp0.forwarding=1");
    ns.ip("link set ilnp0 mtu 1484 up"); // uplink 1500 - 16 (96-bit nonce)
    ns.ip(&format!("addr add {}/128 dev ilnp0 nodad", ilnp_addr(P, nid)));
    ns.ip(&format!("route add {}/64 dev ilnp0", ilnp_addr(P, Nid(0))));
    let cfg = DatapathConfig {
        mode,
        ilnp0_ifindex: ns.ifindex("ilnp0"),
        id_prefix: P,
        local_nid: nid,
        ilcc_max_entries: 64,
        admit_socket: false,
        pin_dir: None,
        v4_port: None,
    };
    (tun, Datapath::load(&cfg).unwrap())
}

/// One ILNP host: uplink `dev` with L:nid, ilnp0 with P:nid, both programs.
fn host(ns: Netns, nid: Nid, dev: &str, vnet: bool) -> Host {
    host_mode(ns, nid, dev, vnet, Mode::Ebpf)
}

fn host_mode(ns: Netns, nid: Nid, dev: &str, vnet: bool, mode: Mode) -> Host {
    ns.ip(&format!("addr add {}/64 dev {dev} nodad", ilnp_addr(L, nid)));
    ns.ip(&format!("link set {dev} up"));
    let (tun, mut dp) = ilnp0_datapath(&ns, nid, vnet, mode);
    let uplink = ns.ifindex(dev);
    dp.attach_uplink(uplink).unwrap();
    dp.set_local_locators(&local_locs(uplink, LocatorState::Active)).unwrap();
    Host { ns, nid, tun, uplink, dp }
}

fn udp_send(h: &Host, to: Nid, port: u16, msg: &[u8]) {
    h.ns.enter();
    let s = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(P, h.nid), 0, 0, 0)).unwrap();
    s.send_to(msg, SocketAddrV6::new(ilnp_addr(P, to), port, 0, 0)).unwrap();
}

fn is_udp_to(p: &[u8], dst: Ipv6Addr) -> bool {
    p.len() > 40 && p[0] >> 4 == 6 && p[24..40] == dst.octets()
}

/// A raw wire packet A -> B with the given DestOpts header and an 8-byte UDP header.
fn send_raw(h: &Host, to: Nid, destopts: &[u8]) {
    h.ns.enter();
    let p = ts::with_destopts(ilnp_addr(L, h.nid), ilnp_addr(L, to), destopts, &[0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0]);
    let s =
        socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::RAW, Some(socket2::Protocol::from(255))).unwrap();
    let dst: std::net::SocketAddr = SocketAddrV6::new(ilnp_addr(L, to), 0, 0, 0).into();
    s.send_to(&p, &dst.into()).unwrap();
}

/// `send_raw` from `from` to `to` (at `at`), which must reach `at`'s TUN in wire form:
/// punted to ilnpd, not delivered by the fast path.
fn punted(from: &Host, at: &Host, to: Nid, destopts: &[u8]) {
    send_raw(from, to, destopts);
    assert!(
        wait_packet(&at.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(L, to))).is_some(),
        "not punted to the TUN; {:?}",
        nonzero(&at.dp)
    );
}

fn wait_stat(dp: &Datapath, name: &str, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let v = stat(dp, name);
        if v >= at_least || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A and B on one veth link, each with the eBPF data path and an ILCC entry for the
/// other (A sends with a 32-bit nonce, B with a 96-bit one).
fn peered_hosts() -> (Host, Host) {
    let (na, nb) = (Netns::new("a"), Netns::new("b"));
    na.ip(&format!("link add a0 type veth peer name b0 netns {}", nb.name));
    let mut a = host(na, NID_A, "a0", false);
    let mut b = host(nb, NID_B, "b0", false);
    a.dp.upsert_peer(&snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)))).unwrap();
    b.dp.upsert_peer(&snapshot(NID_A, Nonce::N96(N_BA), Some(Nonce::N32(N_AB)))).unwrap();
    (a, b)
}

#[test]
fn fast_path_between_two_hosts() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let (a, mut b) = peered_hosts();

        // UDP A -> B through both fast paths
        b.ns.enter();
        let cap = capture(b.uplink);
        let rx = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(P, NID_B), 5555, 0, 0)).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        assert!(b.dp.local_last_rx().unwrap().is_empty(), "no packet yet: no receive stamp");
        let sent_ns = monotonic_ns();
        udp_send(&a, NID_B, 5555, b"hello over ilnp");
        let mut buf = [0u8; 100];
        let (n, from) = rx.recv_from(&mut buf).unwrap_or_else(|e| {
            let mut seen = Vec::new();
            while let Some(p) = read_packet(&cap, Duration::from_millis(100)).filter(|_| seen.len() < 8) {
                seen.push(p.iter().take(64).map(|b| format!("{b:02x}")).collect::<String>());
            }
            panic!(
                "datagram not delivered on B's identifier address ({e}); A: {:?}; B: {:?}; B's uplink saw: {seen:#?}",
                nonzero(&a.dp),
                nonzero(&b.dp)
            )
        });
        assert_eq!(&buf[..n], b"hello over ilnp");
        assert_eq!(from.ip(), std::net::IpAddr::V6(ilnp_addr(P, NID_A)), "source shown as A's identifier address");
        assert_eq!(stat(&a.dp, "egress_fast"), 1);
        assert_eq!(stat(&a.dp, "egress_neigh"), 1, "first packet resolved its next hop via redirect_neigh");
        assert_eq!(stat(&b.dp, "ingress_fast"), 1);
        // the delivery stamped B's local locator (CLOCK_MONOTONIC as of the last tick,
        // at most one tick behind: 10 ms at HZ=100, the slowest tick Linux has): the
        // soft-handoff quiet period's input; rewriting the locator table keeps the stamp
        let stamps = b.dp.local_last_rx().unwrap();
        assert_eq!(stamps.len(), 1, "{stamps:?}");
        assert_eq!(stamps[0].0, L);
        assert!(stamps[0].1 + 10_000_000 >= sent_ns && stamps[0].1 <= monotonic_ns(), "{stamps:?} sent at {sent_ns}");
        b.dp.set_local_locators(&local_locs(b.uplink, LocatorState::Active)).unwrap();
        assert_eq!(b.dp.local_last_rx().unwrap(), stamps);
        assert!(a.dp.local_last_rx().unwrap().is_empty(), "A received nothing");

        // what B's uplink saw: wire addresses, the nonce, an RFC 6744 checksum
        let wire = wait_packet(&cap, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(L, NID_B)) && p[6] == 60)
            .expect("captured the wire packet");
        assert_eq!(wire[8..24], ilnp_addr(L, NID_A).octets(), "source L:NID_A");
        assert_eq!(
            &wire[40..56],
            &[17, 1, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4, 0x1e, 6, 0, 0, 0, 0, 0, 0],
            "DestOpts: UDP next, nonce first, the filler option (header byte 12 zero: \
             ilnp_wire::destopts::GSO_DOFF_BYTE)"
        );
        // every Linux receiver's option parser takes it (issue #46 item 1)
        assert_eq!(ts::linux_tlv::check_packet(&wire), Ok(()), "{:02x?}", &wire[40..56]);
        assert_eq!(u16::from_be_bytes([wire[4], wire[5]]) as usize, wire.len() - 40, "payload length");
        let upper = &wire[56..];
        let (src, dst) = (ilnp_addr(L, NID_A), ilnp_addr(L, NID_B));
        assert!(
            ilnp_wire::checksum::verify_transport_wire(&src, &dst, NextHeader::UDP, upper),
            "RFC 6744 UDP checksum"
        );
        let c = a.dp.peer_counters().unwrap();
        assert_eq!((c[0].1.tx_pkts, c[0].1.tx_bytes), (1, wire.len() as u64));
        assert_eq!(b.dp.peer_counters().unwrap()[0].1.rx_pkts, 1);
        // and B -> A, B's 96-bit nonce: the egress's other layout, through Linux's parser
        a.ns.enter();
        let rx_a = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(P, NID_A), 5555, 0, 0)).unwrap();
        udp_send(&b, NID_A, 5555, b"hello back");
        let back = wait_packet(&cap, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(L, NID_A)) && p[6] == 60)
            .expect("captured B's wire packet");
        assert_eq!(&back[40..44], &[17, 1, 0x8b, 12]);
        assert_eq!(&back[44..56], &N_BA);
        assert_eq!(ts::linux_tlv::check_packet(&back), Ok(()), "{:02x?}", &back[40..56]);
        drop(rx_a);

        // egress miss: identifier packet to the TUN unchanged
        udp_send(&a, Nid(0xc), 5555, b"to nobody");
        let p = wait_packet(&a.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(P, Nid(0xc))));
        assert!(p.expect("punted to A's TUN")[6] == 17);
        assert_eq!(stat(&a.dp, "egress_punt_miss"), 1);

        // ingress miss and bad nonce: the wire packet reaches B's TUN
        b.dp.remove_peer(IlccKey::stable(NID_A)).unwrap();
        udp_send(&a, NID_B, 5555, b"unknown peer");
        let p = wait_packet(&b.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(L, NID_B)));
        assert_eq!(p.expect("punted to B's TUN")[40..44], [17, 1, 0x8b, 4]);
        assert_eq!(stat(&b.dp, "ingress_punt_miss"), 1);
        b.dp.upsert_peer(&snapshot(NID_A, Nonce::N96(N_BA), Some(Nonce::N32([9, 9, 9, 9])))).unwrap();
        udp_send(&a, NID_B, 5555, b"bad nonce");
        assert!(wait_packet(&b.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(L, NID_B))).is_some());
        assert_eq!(stat(&b.dp, "ingress_punt_bad_nonce"), 1);
        // a source locator the entry does not list: ilnpd's to learn (with the right nonce)
        let mut s = snapshot(NID_A, Nonce::N96(N_BA), Some(Nonce::N32(N_AB)));
        s.remote_locs = vec![Locator(0x2001_0db8_0002_0000)];
        s.remote_loc = s.remote_locs[0];
        b.dp.upsert_peer(&s).unwrap();
        udp_send(&a, NID_B, 5555, b"new locator");
        assert!(wait_packet(&b.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(L, NID_B))).is_some());
        assert_eq!(stat(&b.dp, "ingress_punt_src_loc"), 1);
        b.dp.upsert_peer(&snapshot(NID_A, Nonce::N96(N_BA), Some(Nonce::N32(N_AB)))).unwrap();

        // two nonces: dropped; nonce of length 5: dropped; neither reaches B's TUN
        send_raw(&a, NID_B, &[17, 1, 0x8b, 4, 1, 2, 3, 4, 0x8b, 4, 1, 2, 3, 4, 0, 0]);
        assert_eq!(wait_stat(&b.dp, "ingress_drop_multi_nonce", 1), 1);
        send_raw(&a, NID_B, &[17, 1, 0x8b, 5, 1, 2, 3, 4, 5, 1, 4, 0, 0, 0, 0, 0]);
        assert_eq!(wait_stat(&b.dp, "ingress_drop_malformed", 1), 1);
        // PadN before the nonce is still the fast path's; another option is ilnpd's
        send_raw(&a, NID_B, &[17, 1, 1, 2, 0, 0, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4, 1, 2, 0, 0]);
        assert_eq!(wait_stat(&b.dp, "ingress_fast", 2), 2, "PadN then nonce");
        send_raw(&a, NID_B, &[17, 1, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4, 0x3e, 2, 0, 0, 1, 2, 0, 0]);
        assert_eq!(wait_stat(&b.dp, "ingress_punt_options", 1), 1);
        // the 32-bit layout of builds before issue #46 (PadN of 6) in the one-load form,
        // and the filler elsewhere in the walk: the fast path's, as ilnp_wire's find_nonce
        send_raw(&a, NID_B, &[17, 1, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4, 1, 6, 0, 0, 0, 0, 0, 0]);
        assert_eq!(wait_stat(&b.dp, "ingress_fast", 3), 3, "the old PadN layout");
        send_raw(&a, NID_B, &[17, 1, 0x1e, 0, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4, 0x1e, 2, 9, 9, 1, 0]);
        assert_eq!(wait_stat(&b.dp, "ingress_fast", 4), 4, "filler, nonce, filler, PadN");
        assert_eq!(stat(&b.dp, "ingress_punt_options"), 1);
        // plain IPv6 to B's locator address is never touched
        let before: u64 = b.dp.stats().unwrap().iter().map(|(_, v)| v).sum();
        b.ns.enter();
        let plain = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(L, NID_B), 6666, 0, 0)).unwrap();
        plain.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        a.ns.enter();
        UdpSocket::bind(SocketAddrV6::new(ilnp_addr(L, NID_A), 0, 0, 0))
            .unwrap()
            .send_to(b"plain", SocketAddrV6::new(ilnp_addr(L, NID_B), 6666, 0, 0))
            .unwrap();
        assert_eq!(plain.recv(&mut buf).unwrap(), 5);
        assert_eq!(b.dp.stats().unwrap().iter().map(|(_, v)| v).sum::<u64>(), before);

        // B's kernel answers a datagram to a closed port with an ICMPv6 error in
        // identifier form: B's egress leaves it to ilnpd (it must translate the quote)
        udp_send(&a, NID_B, 5556, b"closed port");
        let err = wait_packet(&b.tun, Duration::from_secs(1), |p| p.len() > 48 && p[6] == 58 && p[40] == 1);
        assert_eq!(err.expect("ICMPv6 error punted to B's TUN")[24..40], ilnp_addr(P, NID_A).octets());
        assert_eq!(stat(&b.dp, "egress_punt_icmp_error"), 1);
        // a plain ICMPv6 error on the wire quoting one of our nonce packets: ingress punts it
        a.ns.enter();
        let icmp =
            socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::RAW, Some(socket2::Protocol::ICMPV6)).unwrap();
        let mut q = vec![1u8, 3, 0, 0, 0, 0, 0, 0]; // Destination Unreachable, address unreachable
        let udp8 = [0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0];
        q.extend_from_slice(&ts::with_nonce(
            ilnp_addr(L, NID_B),
            ilnp_addr(L, Nid(0xd)),
            &Nonce::N32([1, 2, 3, 4]),
            NextHeader::UDP,
            &udp8,
        ));
        let dst: std::net::SocketAddr = SocketAddrV6::new(ilnp_addr(L, NID_B), 0, 0, 0).into();
        icmp.send_to(&q, &dst.into()).unwrap();
        let p = wait_packet(&b.tun, Duration::from_secs(1), |p| {
            p.len() > 48 && p[6] == 58 && p[24..40] == ilnp_addr(L, NID_B).octets()
        });
        assert_eq!(p.expect("wire ICMPv6 error punted to B's TUN")[40], 1);
        assert_eq!(stat(&b.dp, "ingress_punt_icmp_error"), 1);

        drop(rx);
        a.dp.shutdown().unwrap();
        b.dp.shutdown().unwrap();
        for (ns, up) in [(&a.ns, "a0"), (&b.ns, "b0")] {
            for dev in ["ilnp0", up] {
                let st = ns.tc_state_settled(dev);
                assert!(!st.contains("ilnp_") && !st.contains("clsact"), "left behind on {dev}:\n{st}");
            }
        }
    });
}

/// TCP both ways through the fast paths with offloads on: the TUNs take GSO
/// super-packets with CHECKSUM_PARTIAL, the programs adjust the pseudo-header
/// seed; the veths compute the final checksums in software (tx off), so B's
/// and A's stacks verify every segment's checksum, wire-to-identifier included.
#[test]
fn fast_path_tcp_with_offloads() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let (na, nb) = (Netns::new("ta"), Netns::new("tb"));
        na.ip(&format!("link add a0 type veth peer name b0 netns {}", nb.name));
        na.exec("ethtool -K a0 tx off");
        nb.exec("ethtool -K b0 tx off");
        let mut a = host(na, NID_A, "a0", true);
        let mut b = host(nb, NID_B, "b0", true);
        a.dp.upsert_peer(&snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)))).unwrap();
        b.dp.upsert_peer(&snapshot(NID_A, Nonce::N96(N_BA), Some(Nonce::N32(N_AB)))).unwrap();

        b.ns.enter();
        let l = TcpListener::bind(SocketAddrV6::new(ilnp_addr(P, NID_B), 7777, 0, 0)).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut v = Vec::new();
            s.read_to_end(&mut v).unwrap();
            s.write_all(&(v.len() as u64).to_be_bytes()).unwrap();
            v
        });
        a.ns.enter();
        let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 7 + i / 1000) as u8).collect();
        let mut c = TcpStream::connect_timeout(
            &SocketAddrV6::new(ilnp_addr(P, NID_B), 7777, 0, 0).into(),
            Duration::from_secs(3),
        )
        .expect("TCP handshake through both fast paths");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(&data).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut n = [0u8; 8];
        c.read_exact(&mut n).unwrap();
        assert_eq!(u64::from_be_bytes(n), data.len() as u64);
        assert!(server.join().unwrap() == data, "bytes arrived intact");
        let (ea, ib) = (stat(&a.dp, "egress_fast"), stat(&b.dp, "ingress_fast"));
        let gso = a.dp.peer_counters().unwrap()[0].1;
        eprintln!(
            "A egress_fast={ea} (bytes {}), B ingress_fast={ib}, B egress_fast={}",
            gso.tx_bytes,
            stat(&b.dp, "egress_fast")
        );
        assert!(ea > 0 && ib >= ea, "fast path carried the session");
        assert!(gso.tx_bytes / ea > 1500, "A sent GSO super-packets through the fast path");
        for (h, r) in [(&a, "egress_drop_error"), (&b, "ingress_drop_error")] {
            assert_eq!(stat(&h.dp, r), 0);
        }
        let _ = (&a.tun, &b.tun);
        a.dp.shutdown().unwrap();
        b.dp.shutdown().unwrap();
    });
}

/// A pin directory under /sys/fs/bpf without bpffs there (as under `ip netns
/// exec`): prepare mounts it, remove unmounts it. In a private mount namespace.
#[test]
fn pin_dir_mounts_bpffs_when_needed() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        // SAFETY: unshare/mount only change this thread's mount namespace (made private first).
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare(CLONE_NEWNS)");
            let root = c"/";
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            assert_eq!(libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), flags, std::ptr::null()), 0);
            libc::umount2(c"/sys/fs/bpf".as_ptr(), libc::MNT_DETACH); // whatever was there
        }
        let default = Path::new("/sys/fs/bpf");
        if !default.is_dir() {
            eprintln!("skipped: no /sys/fs/bpf directory");
            return;
        }
        assert!(!pin::is_bpffs(default));
        let dir = default.join(format!("ilnp-test-{}", std::process::id()));
        let pins = Pins::prepare(&dir).unwrap();
        assert!(pin::is_bpffs(default) && dir.is_dir());
        pins.remove(MAP_NAMES).unwrap();
        assert!(!dir.exists(), "pin directory removed");
        assert!(!pin::is_bpffs(default), "bpffs unmounted");
    });
}

/// userspace mode: the programs only steer; ILNP packets both ways reach the TUN untranslated.
#[test]
fn userspace_mode_steers_only() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let (na, nb) = (Netns::new("ua"), Netns::new("ub"));
        na.ip(&format!("link add a0 type veth peer name b0 netns {}", nb.name));
        let mut a = host(na, NID_A, "a0", false);
        let mut b = host_mode(nb, NID_B, "b0", false, Mode::Userspace);
        a.dp.upsert_peer(&snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)))).unwrap();
        b.dp.upsert_peer(&snapshot(NID_A, Nonce::N96(N_BA), Some(Nonce::N32(N_AB)))).unwrap();
        udp_send(&a, NID_B, 5555, b"to a userspace host");
        let p = wait_packet(&b.tun, Duration::from_secs(2), |p| is_udp_to(p, ilnp_addr(L, NID_B)));
        assert_eq!(p.expect("wire packet on B's TUN")[40..44], [17, 1, 0x8b, 4]);
        assert_eq!((stat(&b.dp, "ingress_punt_userspace"), stat(&b.dp, "ingress_fast")), (1, 0));
        udp_send(&b, NID_A, 5555, b"from a userspace host");
        assert!(wait_packet(&b.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(P, NID_A))).is_some());
        assert_eq!((stat(&b.dp, "egress_punt_userspace"), stat(&b.dp, "egress_fast")), (1, 0));
        a.dp.shutdown().unwrap();
        b.dp.shutdown().unwrap();
    });
}

// ------------------------------------------------------------------ two uplinks

/// A multihomed host M (uplinks m2 with locator L2 and m3 with L3, one router
/// each in namespace R; the main table prefers m2's default route): every packet
/// leaves through the uplink of its source locator, whatever the main table
/// prefers; with no route via that uplink, through the ordinary route, counted.
#[test]
fn fast_path_leaves_through_the_source_locators_uplink() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        const L2: Locator = Locator(0x2001_0db8_0002_0000);
        const L3: Locator = Locator(0x2001_0db8_0003_0000);
        const LB: Locator = Locator(0x2001_0db8_000b_0000);
        let (nm, nr) = (Netns::new("mh"), Netns::new("mhr"));
        for (m, r, l) in [("m2", "r2", L2), ("m3", "r3", L3)] {
            nm.ip(&format!("link add {m} type veth peer name {r} netns {}", nr.name));
            nm.ip(&format!("addr add {}/64 dev {m} nodad", ilnp_addr(l, NID_A)));
            nr.ip(&format!("addr add {}/64 dev {r} nodad", ilnp_addr(l, Nid(1))));
            nm.ip(&format!("link set {m} up"));
            nr.ip(&format!("link set {r} up"));
        }
        // the main table's choice: m2 (the lower metric)
        nm.ip(&format!("-6 route add default via {} dev m2 metric 100", ilnp_addr(L2, Nid(1))));
        nm.ip(&format!("-6 route add default via {} dev m3 metric 200", ilnp_addr(L3, Nid(1))));
        let (tun, mut dp) = ilnp0_datapath(&nm, NID_A, false, Mode::Ebpf);
        let (m2, m3) = (nm.ifindex("m2"), nm.ifindex("m3"));
        dp.attach_uplink(m2).unwrap();
        dp.attach_uplink(m3).unwrap();
        let loc = |loc, ifindex| LocalLocator {
            loc,
            ifindex,
            pref: 0,
            lifetime_s: u32::MAX,
            state: LocatorState::Active,
            has_router: true,
            deprecated: false,
        };
        dp.set_local_locators(&[loc(L2, m2), loc(L3, m3)]).unwrap();
        let routers = |v: &[(u32, Locator)]| v.iter().map(|(i, l)| (*i, ilnp_addr(*l, Nid(1)))).collect();
        dp.set_uplink_routers(&routers(&[(m2, L2), (m3, L3)])).unwrap();
        let (cap2, cap3) = (capture(m2), capture(m3));
        let mut h = Host { ns: nm, nid: NID_A, tun, uplink: m2, dp };
        let from =
            |l: Locator| move |p: &[u8]| is_udp_to(p, ilnp_addr(LB, NID_B)) && p[8..24] == ilnp_addr(l, NID_A).octets();
        let entry = |local_loc| IlccSnapshot {
            nid: NID_B,
            local_loc,
            remote_loc: LB,
            remote_locs: vec![LB],
            nonce_tx: Nonce::N32(N_AB),
            nonce_rx: Some(Nonce::N32(N_AB)),
            full_address_checksum: false,
            remote_v4: None,
            local_nid: None,
        };
        let sent = |h: &Host, cap: &OwnedFd, other: &OwnedFd, l: Locator, what: &str| {
            udp_send(h, NID_B, 5555, what.as_bytes());
            let p = wait_packet(cap, Duration::from_secs(2), from(l));
            assert!(p.is_some(), "{what}: not seen on its uplink; stats {:?}", nonzero(&h.dp));
            let o = wait_packet(other, Duration::from_millis(200), from(l));
            assert!(o.is_none(), "{what}: seen on the other uplink");
        };

        // source L2: out of m2, the main table's choice
        h.dp.upsert_peer(&entry(L2)).unwrap();
        sent(&h, &cap2, &cap3, L2, "from L2");
        assert_eq!((stat(&h.dp, "egress_via_router"), stat(&h.dp, "egress_fib_fallback")), (0, 0));
        // source L3: out of m3 via its router, though the main table prefers m2;
        // the router's neighbour entry is not resolved yet on the first packet
        h.dp.upsert_peer(&entry(L3)).unwrap();
        sent(&h, &cap3, &cap2, L3, "from L3");
        sent(&h, &cap3, &cap2, L3, "from L3 again");
        assert_eq!(stat(&h.dp, "egress_via_router"), 2);
        assert_eq!(stat(&h.dp, "egress_fast"), 3);
        // m3's router is gone: the packet from L3 takes the main route (m2), counted
        h.ns.ip(&format!("-6 route del default via {} dev m3", ilnp_addr(L3, Nid(1))));
        h.dp.set_uplink_routers(&routers(&[(m2, L2)])).unwrap();
        sent(&h, &cap2, &cap3, L3, "from L3 without a router on m3");
        assert_eq!((stat(&h.dp, "egress_via_router"), stat(&h.dp, "egress_fib_fallback")), (2, 1));
        // no route at all: punted to ilnpd, not sent
        h.ns.ip(&format!("-6 route del default via {} dev m2", ilnp_addr(L2, Nid(1))));
        udp_send(&h, NID_B, 5555, b"no route");
        assert!(wait_packet(&h.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(P, NID_B))).is_some());
        assert_eq!(stat(&h.dp, "egress_punt_fib"), 1);
        assert_eq!(stat(&h.dp, "egress_fast"), 4);
        let _ = h.uplink;
        let dp = h.dp;
        dp.shutdown().unwrap();
    });
}

// ------------------------------------------------------------------ next-hop cache

/// AF_PACKET socket on dev with the link-layer header (SOCK_RAW): frames start
/// with the Ethernet destination, so the next hop a frame went to shows.
fn capture_l2(dev_index: u32) -> OwnedFd {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto as i32) };
    assert!(fd >= 0, "AF_PACKET socket");
    // SAFETY: fd was just created and is owned from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain data; zero is a valid start.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = dev_index as i32;
    let len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
    // SAFETY: sll is a valid sockaddr_ll of that length.
    let rc = unsafe { libc::bind(fd.as_raw_fd(), (&sll as *const libc::sockaddr_ll).cast(), len) };
    assert_eq!(rc, 0, "bind AF_PACKET");
    fd
}

fn route_gen_value(dp: &Datapath) -> u64 {
    let m: Array<_, u64> = Array::try_from(dp.bpf.map(MAP_ROUTE_GEN).unwrap()).unwrap();
    m.get(&0, 0).unwrap()
}

/// Waits until the route watch wrote a generation other than `old`; returns it
/// and how long it took.
fn wait_new_gen(dp: &Datapath, old: u64) -> (u64, Duration) {
    let t = Instant::now();
    loop {
        let g = route_gen_value(dp);
        if g != old {
            return (g, t.elapsed());
        }
        assert!(t.elapsed() < Duration::from_secs(2), "no new generation 2 s after a route change");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The next-hop cache (ilnp_nh_cache) serves repeated packets (egress_nh_hit)
/// and is invalidated by the kernel's changes as the route watch sees them:
/// the first packet after a route is replaced goes to the new router, after a
/// route moves to another uplink it leaves there, after an MTU change it is
/// judged against the new MTU; off (0) once the watch is gone.
#[test]
fn next_hop_cache_follows_route_changes() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        const L2: Locator = Locator(0x2001_0db8_0002_0000);
        const L3: Locator = Locator(0x2001_0db8_0003_0000);
        const LB: Locator = Locator(0x2001_0db8_000b_0000);
        const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 0x11];
        const MAC2: [u8; 6] = [2, 0, 0, 0, 0, 0x22];
        const MAC3: [u8; 6] = [2, 0, 0, 0, 0, 0x33];
        let (nm, nr) = (Netns::new("nh"), Netns::new("nhr"));
        // no link-local addresses, so no DAD or ND of their own: the events the
        // watch sees are this test's changes (fewer spurious misses)
        for n in [&nm, &nr] {
            n.exec("sysctl -qw net.ipv6.conf.default.addr_gen_mode=1");
        }
        for (m, r, l) in [("m2", "r2", L2), ("m3", "r3", L3)] {
            nm.ip(&format!("link add {m} type veth peer name {r} netns {}", nr.name));
            nm.ip(&format!("addr add {}/64 dev {m} nodad", ilnp_addr(l, NID_A)));
            nm.ip(&format!("link set {m} up"));
            nr.ip(&format!("link set {r} up"));
        }
        let mac = |m: [u8; 6]| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        let (r1, r2, r3) = (ilnp_addr(L2, Nid(1)), ilnp_addr(L2, Nid(2)), ilnp_addr(L3, Nid(1)));
        for (a, m, dev) in [(r1, MAC1, "m2"), (r2, MAC2, "m2"), (r3, MAC3, "m3")] {
            nm.ip(&format!("-6 neigh add {a} lladdr {} dev {dev} nud permanent", mac(m)));
        }
        let dst = format!("{}/64", ilnp_addr(LB, Nid(0)));
        nm.ip(&format!("-6 route add {dst} via {r1} dev m2"));
        let (tun, mut dp) = ilnp0_datapath(&nm, NID_A, false, Mode::Ebpf);
        let (m2, m3) = (nm.ifindex("m2"), nm.ifindex("m3"));
        dp.attach_uplink(m2).unwrap();
        // L2 on m2 with no router known: the main table decides, also off m2 (fallback)
        let l2 = LocalLocator {
            loc: L2,
            ifindex: m2,
            pref: 0,
            lifetime_s: u32::MAX,
            state: LocatorState::Active,
            has_router: true,
            deprecated: false,
        };
        dp.set_local_locators(&[l2]).unwrap();
        dp.upsert_peer(&IlccSnapshot {
            nid: NID_B,
            local_loc: L2,
            remote_loc: LB,
            remote_locs: vec![LB],
            nonce_tx: Nonce::N32(N_AB),
            nonce_rx: Some(Nonce::N32(N_AB)),
            full_address_checksum: false,
            remote_v4: None,
            local_nid: None,
        })
        .unwrap();
        let (cap2, cap3) = (capture_l2(m2), capture_l2(m3));
        let h = Host { ns: nm, nid: NID_A, tun, uplink: m2, dp };
        let to_b = |p: &[u8]| p.len() > 54 && p[12..14] == [0x86, 0xdd] && p[38..54] == ilnp_addr(LB, NID_B).octets();
        let sent = |cap: &OwnedFd, to: [u8; 6], len: usize, what: &str| {
            udp_send(&h, NID_B, 5555, &vec![7u8; len]);
            let p = wait_packet(cap, Duration::from_secs(2), to_b);
            let p = p.unwrap_or_else(|| panic!("{what}: not sent there; stats {:?}", nonzero(&h.dp)));
            assert_eq!(p[0..6], to, "{what}: to the wrong next hop");
        };

        // cache off until a watch writes a generation: every packet looked up
        assert_eq!(route_gen_value(&h.dp), 0);
        sent(&cap2, MAC1, 100, "before the watch");
        assert_eq!((stat(&h.dp, "egress_nh_hit"), stat(&h.dp, "egress_nh_miss")), (0, 0));
        let watch = RouteWatch::spawn({
            let mut g = h.dp.route_gen().unwrap();
            move || g.bump()
        })
        .unwrap();
        let g0 = route_gen_value(&h.dp);
        assert_ne!(g0, 0, "the watch writes a generation before it returns");
        for i in 0..3 {
            sent(&cap2, MAC1, 100, &format!("cached {i}"));
        }
        let (hit0, miss0) = (stat(&h.dp, "egress_nh_hit"), stat(&h.dp, "egress_nh_miss"));
        assert!(hit0 >= 1 && miss0 >= 1 && hit0 + miss0 == 3, "hits {hit0}, misses {miss0}");

        // another router on the same link: the first packet after the change goes there
        h.ns.ip(&format!("-6 route replace {dst} via {r2} dev m2"));
        let (g1, took1) = wait_new_gen(&h.dp, g0);
        sent(&cap2, MAC2, 100, "router replaced");
        sent(&cap2, MAC2, 100, "router replaced, cached");
        assert!(stat(&h.dp, "egress_nh_miss") > miss0, "the change made a miss");
        assert!(stat(&h.dp, "egress_nh_hit") + stat(&h.dp, "egress_nh_miss") == 5);

        // the route moves to m3: out of m3 (the main table's uplink; L2's has no router)
        h.ns.ip(&format!("-6 route replace {dst} via {r3} dev m3"));
        let (g2, took2) = wait_new_gen(&h.dp, g1);
        sent(&cap3, MAC3, 100, "route on m3");
        assert_eq!(stat(&h.dp, "egress_fib_fallback"), 1);

        // a smaller MTU on m3: a packet that fitted before is now the helper's FRAG_NEEDED
        sent(&cap3, MAC3, 1300, "1300 bytes at MTU 1500");
        h.ns.ip("link set m3 mtu 1280");
        let (_, took3) = wait_new_gen(&h.dp, g2);
        let punts = stat(&h.dp, "egress_punt_fib");
        udp_send(&h, NID_B, 5555, &[7u8; 1300]);
        let p = wait_packet(&h.tun, Duration::from_secs(2), |p| is_udp_to(p, ilnp_addr(P, NID_B)));
        assert!(p.is_some(), "too big for m3's new MTU: punted to the TUN");
        assert_eq!(stat(&h.dp, "egress_punt_fib"), punts + 1);
        sent(&cap3, MAC3, 100, "small after the MTU change");
        eprintln!("new generation after: route replaced {took1:?}, moved {took2:?}, MTU {took3:?}");

        // the watch gone: cache off again
        drop(watch);
        assert_eq!(route_gen_value(&h.dp), 0);
        let hits = stat(&h.dp, "egress_nh_hit");
        sent(&cap3, MAC3, 100, "after the watch");
        assert_eq!(stat(&h.dp, "egress_nh_hit"), hits);
        let dp = h.dp;
        dp.shutdown().unwrap();
    });
}

/// Issue #25/#42 in the programs: our own nonce reflected is never vouched for by
/// the fast path (ilnpd judges it: only a shared-nonce peer's reply), a 96-bit nonce
/// cut short by FreeBSD's reflection is
/// dropped with its own reason, a known peer's fragments (nonce after the Fragment
/// header) go to ilnpd, and a full-address checksum peer is punted both ways.
#[test]
fn shared_nonce_overrun_fragments_and_checksum_rule() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let (mut a, b) = peered_hosts();
        // B reflects A's own nonce (tx of A's entry): punted, not delivered
        send_raw(&b, NID_A, &[17, 0, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4]);
        assert_eq!(wait_stat(&a.dp, "ingress_punt_bad_nonce", 1), 1, "{:?}", nonzero(&a.dp));
        assert_eq!(stat(&a.dp, "ingress_fast"), 0);
        // a third value is ilnpd's to judge too
        send_raw(&b, NID_A, &[17, 0, 0x8b, 4, 1, 2, 3, 4]);
        assert_eq!(wait_stat(&a.dp, "ingress_punt_bad_nonce", 2), 2);
        // FreeBSD's 96-bit reflection: an 8-byte header, the option claims 14
        send_raw(&b, NID_A, &[17, 0, 0x8b, 12, 0x5e, 0x5e, 0x5e, 0x5e]);
        assert_eq!(wait_stat(&a.dp, "ingress_drop_nonce_overrun", 1), 1);
        assert_eq!(stat(&a.dp, "ingress_drop_malformed"), 0);
        // a fragment from the known peer (Fragment header first): punted
        b.ns.enter();
        let frag = [60, 0, 0, 1, 0, 0, 0, 7, 17, 0, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4, 0x30, 0x39, 0x30, 0x39];
        let p = ts::ipv6_packet(ilnp_addr(L, NID_B), ilnp_addr(L, NID_A), NextHeader::FRAGMENT, &frag);
        let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::RAW, Some(socket2::Protocol::from(255)))
            .unwrap();
        let dst: std::net::SocketAddr = SocketAddrV6::new(ilnp_addr(L, NID_A), 0, 0, 0).into();
        s.send_to(&p, &dst.into()).unwrap();
        assert_eq!(wait_stat(&a.dp, "ingress_punt_fragment", 1), 1);
        // full-address checksum peer: punted both ways, the right nonce notwithstanding
        let mut full = snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)));
        full.full_address_checksum = true;
        a.dp.upsert_peer(&full).unwrap();
        assert_eq!(read_ilcc(&a.dp, NID_B).unwrap().flags, maps::ILCC_F_FULL_CSUM);
        udp_send(&a, NID_B, 5555, b"full-address");
        assert_eq!(wait_stat(&a.dp, "egress_punt_csum_rule", 1), 1, "{:?}", nonzero(&a.dp));
        let mut d = vec![17, 1, 0x8b, 12];
        d.extend_from_slice(&N_BA);
        send_raw(&b, NID_A, &d);
        assert_eq!(wait_stat(&a.dp, "ingress_punt_csum_rule", 1), 1, "{:?}", nonzero(&a.dp));
        a.dp.shutdown().unwrap();
        b.dp.shutdown().unwrap();
    });
}

/// A raw ESP packet (next header 50: SPI, sequence number, bytes standing for the
/// ciphertext) from h's identifier address to `to`'s.
fn esp_send(h: &Host, to: Nid, esp: &[u8]) {
    h.ns.enter();
    let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::RAW, Some(socket2::Protocol::from(50))).unwrap();
    let src: std::net::SocketAddr = SocketAddrV6::new(ilnp_addr(P, h.nid), 0, 0, 0).into();
    s.bind(&src.into()).unwrap();
    let dst: std::net::SocketAddr = SocketAddrV6::new(ilnp_addr(P, to), 0, 0, 0).into();
    s.send_to(esp, &dst.into()).unwrap();
}

/// Issue #44 item 4: ESP goes through both fast paths like UDP, untouched behind the
/// nonce (RFC 4303: no checksum over the addresses, so nothing to fix); the old
/// programs punted it (egress_punt_proto, ingress_punt_proto).
#[test]
fn esp_takes_both_fast_paths() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let (a, b) = peered_hosts();
        b.ns.enter();
        let cap = capture(b.uplink);
        let rx =
            socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::RAW, Some(socket2::Protocol::from(50))).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut esp = vec![0x10, 0x00, 0xca, 0xfe, 0, 0, 0, 1];
        esp.extend((0..64u8).map(|i| i.wrapping_mul(37)));
        esp_send(&a, NID_B, &esp);
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 200];
        let (n, from) = rx.recv_from(&mut buf).unwrap_or_else(|e| {
            panic!("ESP not delivered on B ({e}); A: {:?}; B: {:?}", nonzero(&a.dp), nonzero(&b.dp))
        });
        // SAFETY: recv_from initialised the first n bytes.
        let got: Vec<u8> = buf[..n].iter().map(|b| unsafe { b.assume_init() }).collect();
        assert_eq!(got, esp, "ESP delivered unchanged");
        assert_eq!(from.as_socket_ipv6().map(|s| *s.ip()), Some(ilnp_addr(P, NID_A)), "from A's identifier address");
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "egress_punt_proto")), (1, 0), "{:?}", nonzero(&a.dp));
        assert_eq!((stat(&b.dp, "ingress_fast"), stat(&b.dp, "ingress_punt_proto")), (1, 0), "{:?}", nonzero(&b.dp));
        let wire = wait_packet(&cap, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(L, NID_B)) && p[6] == 60)
            .expect("captured the wire packet");
        assert_eq!(wire[8..24], ilnp_addr(L, NID_A).octets(), "source L:NID_A");
        assert_eq!(&wire[40..48], &[50, 1, 0x8b, 4, 0xa1, 0xb2, 0xc3, 0xd4], "DestOpts: ESP next, A's nonce");
        assert_eq!(&wire[56..], &esp[..], "the ESP header and payload untouched");
        a.dp.shutdown().unwrap();
        b.dp.shutdown().unwrap();
    });
}

#[test]
fn balance_table_and_its_ilcc_flag_in_step() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let (mut a, b) = peered_hosts();
        b.ns.enter();
        let rx = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(P, NID_B), 5556, 0, 0)).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut buf = [0u8; 64];
        let mut send = |a: &Host, msg: &[u8]| {
            udp_send(a, NID_B, 5556, msg);
            let (n, _) = rx.recv_from(&mut buf).unwrap_or_else(|e| panic!("{msg:?} not delivered ({e})"));
            assert_eq!(&buf[..n], msg);
        };
        let flags = |a: &Host| read_ilcc(&a.dp, NID_B).unwrap().flags;
        // no table: no flag, the ILCC's pair
        send(&a, b"failover");
        assert_eq!(flags(&a), 0);
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "egress_balanced")), (1, 0));
        // a table (per-packet over the one pair): the flag follows it, and the program uses it
        let t =
            ilnp_core::balance::build_table(IlccKey::stable(NID_B), ilnp_core::Policy::PerPacket, &[((L, L), 1)], 7);
        a.dp.set_balance(&BalanceChange::Upsert(t.clone())).unwrap();
        assert_eq!(flags(&a), maps::ILCC_F_BALANCED);
        send(&a, b"balanced");
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "egress_balanced")), (2, 1));
        // rewriting the entry (a locator change) keeps it, with the other flags
        let mut full = snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)));
        full.full_address_checksum = true;
        a.dp.upsert_peer(&full).unwrap();
        assert_eq!(flags(&a), maps::ILCC_F_BALANCED | maps::ILCC_F_FULL_CSUM);
        a.dp.upsert_peer(&snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)))).unwrap();
        assert_eq!(flags(&a), maps::ILCC_F_BALANCED);
        // the table without the flag (the moment between the two writes of a removal):
        // the program does not look it up
        a.dp.set_balanced_flag(IlccKey::stable(NID_B), false).unwrap();
        send(&a, b"flag cleared");
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "egress_balanced")), (3, 1));
        a.dp.set_balanced_flag(IlccKey::stable(NID_B), true).unwrap();
        // removed: the flag goes first, then the table; the ILCC's pair again
        a.dp.set_balance(&BalanceChange::Remove(IlccKey::stable(NID_B))).unwrap();
        assert_eq!(flags(&a), 0);
        assert!(
            a.dp.balance_mut().unwrap().get(&maps::ilcc_map_key(IlccKey::stable(NID_B)), 0).is_err(),
            "table removed"
        );
        send(&a, b"failover again");
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "egress_balanced")), (4, 1));
        // a table written before the entry: the entry is written with the flag
        a.dp.remove_peer(IlccKey::stable(NID_B)).unwrap();
        a.dp.set_balance(&BalanceChange::Upsert(t)).unwrap();
        assert!(read_ilcc(&a.dp, NID_B).is_none());
        a.dp.upsert_peer(&snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)))).unwrap();
        assert_eq!(flags(&a), maps::ILCC_F_BALANCED);
        send(&a, b"balanced again");
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "egress_balanced")), (5, 2));
        a.dp.shutdown().unwrap();
        b.dp.shutdown().unwrap();
    });
}

// ------------------------------------------------------------------ temporary NIDs

/// One of A's temporary NIDs (issue #44 item 2, `[privacy]`).
const NID_T: Nid = Nid(0x1c3d_5e7f_8091_a2b4);

/// A session on a temporary NID runs in both fast paths: A's entry for B uses T
/// (`IlccSnapshot::local_nid`, and the map key ⟨B, T⟩), T is in ilnp_temp_nids, B
/// knows A by T. A's egress translates from T, A's ingress delivers to T. The
/// stable NID with the same correspondent is another entry (⟨B, stable⟩, its own
/// nonces): without it, the slow path's both ways (`egress_punt_miss`,
/// `ingress_punt_miss`); with it, the fast path's too, and neither session's
/// nonce is taken on the other's NID. A packet to T without an entry is the slow
/// path's (`ingress_punt_temp_nid`). Before the key held our NID, B's packets to
/// the stable NID counted `ingress_punt_other_nid` whatever A's entries were.
#[test]
fn temporary_nid_sessions_take_the_fast_path() {
    if !can_run() {
        return;
    }
    on_thread(|| {
        let (mut a, mut b) = peered_hosts();
        a.ns.ip(&format!("addr add {}/128 dev ilnp0 nodad", ilnp_addr(P, NID_T)));
        a.ns.ip(&format!("addr add {}/64 dev a0 nodad", ilnp_addr(L, NID_T))); // its ND on the link
        a.dp.set_temp_nid(NID_T, true).unwrap();
        // the session is T's only (peered_hosts gave A an entry for B and the stable NID)
        a.dp.remove_peer(IlccKey::stable(NID_B)).unwrap();
        let mut s = snapshot(NID_B, Nonce::N32(N_AB), Some(Nonce::N96(N_BA)));
        s.local_nid = Some(NID_T);
        a.dp.upsert_peer(&s).unwrap();
        let key_t = IlccKey { remote: NID_B, local: Some(NID_T) };
        assert_eq!(read_ilcc_key(&a.dp, key_t).unwrap().local_nid, NID_T.to_bytes());
        assert!(read_ilcc(&a.dp, NID_B).is_none(), "no entry for B and the stable NID");
        b.dp.remove_peer(IlccKey::stable(NID_A)).unwrap();
        b.dp.upsert_peer(&snapshot(NID_T, Nonce::N96(N_BA), Some(Nonce::N32(N_AB)))).unwrap();

        // T -> B: A's egress translates from T
        b.ns.enter();
        let rx = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(P, NID_B), 5555, 0, 0)).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        a.ns.enter();
        let on_t = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(P, NID_T), 5556, 0, 0)).unwrap();
        on_t.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        on_t.send_to(b"from T", SocketAddrV6::new(ilnp_addr(P, NID_B), 5555, 0, 0)).unwrap();
        let mut buf = [0u8; 100];
        let (n, from) = rx
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("T -> B not delivered ({e}); A: {:?}; B: {:?}", nonzero(&a.dp), nonzero(&b.dp)));
        assert_eq!((&buf[..n], from.ip()), (&b"from T"[..], std::net::IpAddr::V6(ilnp_addr(P, NID_T))));
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "egress_punt_src")), (1, 0), "{:?}", nonzero(&a.dp));
        assert_eq!(stat(&b.dp, "ingress_fast"), 1, "{:?}", nonzero(&b.dp));

        // B -> T: A's ingress delivers to T, for the entry that uses it
        rx.send_to(b"to T", from).unwrap();
        let (n, from) = on_t
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("B -> T not delivered ({e}); A: {:?}; B: {:?}", nonzero(&a.dp), nonzero(&b.dp)));
        assert_eq!((&buf[..n], from.ip()), (&b"to T"[..], std::net::IpAddr::V6(ilnp_addr(P, NID_B))));
        assert_eq!(stat(&b.dp, "egress_fast"), 1, "{:?}", nonzero(&b.dp));
        assert_eq!((stat(&a.dp, "ingress_fast"), stat(&a.dp, "ingress_punt_temp_nid")), (1, 0), "{:?}", nonzero(&a.dp));
        let c = a.dp.peer_counters().unwrap();
        assert_eq!((c[0].0, c[0].1.tx_pkts, c[0].1.rx_pkts), (key_t, 1, 1));

        // the stable NID to B, with no entry for that pair yet: the slow path's
        // (ilnp-core makes the entry), not carried under T's
        udp_send(&a, NID_B, 5555, b"from the stable NID");
        assert!(wait_packet(&a.tun, Duration::from_secs(1), |p| is_udp_to(p, ilnp_addr(P, NID_B))).is_some());
        assert_eq!((stat(&a.dp, "egress_punt_miss"), stat(&a.dp, "egress_punt_src")), (1, 0), "{:?}", nonzero(&a.dp));
        // B to A's stable NID with the nonce of its session with T, from B's locator:
        // no entry for that pair: punted, not delivered
        let mut d = vec![17, 1, 0x8b, 12];
        d.extend_from_slice(&N_BA);
        punted(&b, &a, NID_A, &d);
        assert_eq!((stat(&a.dp, "ingress_punt_miss"), stat(&a.dp, "ingress_fast")), (1, 1), "{:?}", nonzero(&a.dp));
        // the entry ⟨B, stable⟩ with nonces of its own, on both sides: both sessions
        // are the fast path's at once, each on its own NID with its own nonces
        const N_AB0: [u8; 4] = [0x0a, 0x0b, 0x0c, 0x0d];
        const N_BA0: [u8; 12] = [0x6f; 12];
        a.dp.upsert_peer(&snapshot(NID_B, Nonce::N32(N_AB0), Some(Nonce::N96(N_BA0)))).unwrap();
        b.dp.upsert_peer(&snapshot(NID_A, Nonce::N96(N_BA0), Some(Nonce::N32(N_AB0)))).unwrap();
        a.ns.enter();
        let on_a = UdpSocket::bind(SocketAddrV6::new(ilnp_addr(P, NID_A), 5557, 0, 0)).unwrap();
        on_a.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        on_a.send_to(b"from A", SocketAddrV6::new(ilnp_addr(P, NID_B), 5555, 0, 0)).unwrap();
        let (n, from_a) = rx.recv_from(&mut buf).unwrap_or_else(|e| panic!("A -> B not delivered ({e})"));
        assert_eq!((&buf[..n], from_a.ip()), (&b"from A"[..], std::net::IpAddr::V6(ilnp_addr(P, NID_A))));
        rx.send_to(b"to A", from_a).unwrap();
        rx.send_to(b"to T again", SocketAddrV6::new(ilnp_addr(P, NID_T), 5556, 0, 0)).unwrap();
        let (n, _) = on_a.recv_from(&mut buf).unwrap_or_else(|e| panic!("B -> A not delivered ({e})"));
        assert_eq!(&buf[..n], b"to A");
        let (n, _) = on_t.recv_from(&mut buf).unwrap_or_else(|e| panic!("B -> T not delivered ({e})"));
        assert_eq!(&buf[..n], b"to T again");
        assert_eq!((stat(&a.dp, "egress_fast"), stat(&a.dp, "ingress_fast")), (2, 3), "{:?}", nonzero(&a.dp));
        assert_eq!(stat(&b.dp, "egress_fast"), 3, "{:?}", nonzero(&b.dp));
        // T's session nonce on the stable NID's entry (and the other way): a bad
        // nonce there, punted, never delivered
        punted(&b, &a, NID_A, &d);
        assert_eq!(
            (stat(&a.dp, "ingress_punt_bad_nonce"), stat(&a.dp, "ingress_fast")),
            (1, 3),
            "{:?}",
            nonzero(&a.dp)
        );
        let mut d0 = vec![17, 1, 0x8b, 12];
        d0.extend_from_slice(&N_BA0);
        punted(&b, &a, NID_T, &d0);
        assert_eq!(
            (stat(&a.dp, "ingress_punt_bad_nonce"), stat(&a.dp, "ingress_fast")),
            (2, 3),
            "{:?}",
            nonzero(&a.dp)
        );
        a.dp.remove_peer(IlccKey::stable(NID_B)).unwrap();
        // an off-path spoofer of B (B's locator and NID, a guessed nonce) to T: the fast path
        // that now delivers to T checks the nonce first: punted for ilnpd to judge, never delivered
        let mut forged = d.clone();
        forged[4] ^= 0x5a;
        punted(&b, &a, NID_T, &forged);
        assert_eq!(
            (stat(&a.dp, "ingress_punt_bad_nonce"), stat(&a.dp, "ingress_fast")),
            (3, 3),
            "{:?}",
            nonzero(&a.dp)
        );
        // to T from a correspondent without an entry: the slow path's
        a.dp.remove_peer(key_t).unwrap();
        punted(&b, &a, NID_T, &d);
        assert_eq!(stat(&a.dp, "ingress_punt_temp_nid"), 1);
        // T no longer ours: its packets are not looked at
        a.dp.set_temp_nid(NID_T, false).unwrap();
        let before = a.dp.stats().unwrap();
        send_raw(&b, NID_T, &d);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(a.dp.stats().unwrap(), before);

        drop((rx, on_t, on_a));
        a.dp.shutdown().unwrap();
        b.dp.shutdown().unwrap();
    });
}
