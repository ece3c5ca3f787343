//! Translation at the route: bpf/ilnp_route.c's lwt xmit program, loaded with
//! libbpf (aya 0.13 has no lwt program types) from its own object, with the maps
//! of the object aya loaded, so both egress programs share one ILCC, one set of
//! counters and one next-hop cache. The daemon puts it on the identifier
//! prefix's route (`Netlink::set_id_route`); the route holds the program from
//! then on (it outlives this process, as the pinned tc links do).

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::Map;
use aya::Ebpf;
use libbpf_rs::{ObjectBuilder, PrintLevel};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

// libbpf parses the ELF itself (no alignment needed)
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ilnp_route.o"));

/// The program's name (its function), which the route's encap also carries.
pub const PROG_ROUTE: &str = "ilnp_route_xmit";

/// The loaded program: a file descriptor of its own (the libbpf object is gone;
/// the program keeps the maps it uses).
pub struct RouteProg {
    fd: OwnedFd,
}

/// The file descriptor of one of aya's maps, whatever its type.
fn map_fd(m: &Map) -> BorrowedFd<'_> {
    let d = match m {
        Map::Array(d)
        | Map::BloomFilter(d)
        | Map::CpuMap(d)
        | Map::DevMap(d)
        | Map::DevMapHash(d)
        | Map::HashMap(d)
        | Map::LpmTrie(d)
        | Map::LruHashMap(d)
        | Map::PerCpuArray(d)
        | Map::PerCpuHashMap(d)
        | Map::PerCpuLruHashMap(d)
        | Map::PerfEventArray(d)
        | Map::ProgramArray(d)
        | Map::Queue(d)
        | Map::RingBuf(d)
        | Map::SockHash(d)
        | Map::SockMap(d)
        | Map::Stack(d)
        | Map::StackTraceMap(d)
        | Map::Unsupported(d)
        | Map::XskMap(d) => d,
    };
    d.fd().as_fd()
}

/// libbpf's own messages, at our levels (its debug output is the verifier's log).
fn libbpf_log(level: PrintLevel, msg: String) {
    let msg = msg.trim_end();
    match level {
        PrintLevel::Warn => tracing::warn!(target: "ilnpd::bpf::libbpf", "{msg}"),
        PrintLevel::Info => tracing::debug!(target: "ilnpd::bpf::libbpf", "{msg}"),
        PrintLevel::Debug => tracing::trace!(target: "ilnpd::bpf::libbpf", "{msg}"),
    }
}

impl RouteProg {
    /// Loads and verifies the program with `bpf`'s maps (every map the object
    /// declares must be one of them: none is created here).
    pub fn load(bpf: &Ebpf) -> Result<RouteProg> {
        libbpf_rs::set_print(Some((PrintLevel::Debug, libbpf_log)));
        let mut open = ObjectBuilder::default()
            .name("ilnp_route")
            .and_then(|b| b.open_memory(OBJECT))
            .context("opening the lwt object (ilnp_route.o)")?;
        for mut m in open.maps_mut() {
            let name = m.name().to_string_lossy().into_owned();
            // libbpf's internal maps (.rodata, .bss, .kconfig) are the object's own
            if name.contains('.') {
                continue;
            }
            let Some(shared) = bpf.map(&name) else {
                bail!("the lwt object's map {name} is not in the loaded eBPF object");
            };
            m.reuse_fd(map_fd(shared)).with_context(|| format!("sharing map {name} with the lwt program"))?;
        }
        for mut p in open.progs_mut() {
            let ours = p.name() == PROG_ROUTE;
            p.set_autoload(ours);
        }
        let obj = open.load().with_context(|| format!("the verifier rejected {PROG_ROUTE}"))?;
        let prog = obj
            .progs()
            .find(|p| p.name() == PROG_ROUTE)
            .ok_or_else(|| anyhow!("the lwt object has no program {PROG_ROUTE}"))?;
        let fd = prog.as_fd().try_clone_to_owned().context("duplicating the lwt program's fd")?;
        Ok(RouteProg { fd })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// `enum netdev_features` bits (include/linux/netdev_features.h), the first word.
const NETIF_F_HW_CSUM_BIT: u32 = 3;
const NETIF_F_IPV6_CSUM_BIT: u32 = 4;

/// True if a device with these active features would be handed a packet the
/// program sent with a checksum to offload that it may get wrong: the program's
/// room comes from `bpf_skb_change_head`, which leaves the skb's network header
/// 16 bytes behind the real one, so the kernel cannot see the nonce header
/// (`skb_csum_hwoffload_help` falls back to software only for extension headers
/// it sees), and a device that offloads IPv6 checksums by parsing the headers
/// itself (NETIF_F_IPV6_CSUM without NETIF_F_HW_CSUM) is given one. Devices
/// with the generic offload (csum_start/csum_offset: veth, virtio-net, most
/// NICs) or none are safe.
pub fn parses_ipv6_for_csum(active: u32) -> bool {
    active & (1 << NETIF_F_IPV6_CSUM_BIT) != 0 && active & (1 << NETIF_F_HW_CSUM_BIT) == 0
}

/// The first word of `dev`'s active features (ETHTOOL_GFEATURES), in this
/// thread's network namespace.
pub fn active_features(dev: &str) -> Result<u32> {
    #[repr(C)]
    struct GFeatures {
        cmd: u32,
        size: u32,
        // ethtool_get_features_block: available, requested, active, never_changed
        block: [u32; 4],
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut GFeatures,
        _pad: [u8; 16],
    }
    const ETHTOOL_GFEATURES: u32 = 0x3a;
    if dev.len() >= libc::IFNAMSIZ {
        bail!("interface name {dev:?} too long");
    }
    let mut gf = GFeatures { cmd: ETHTOOL_GFEATURES, size: 1, block: [0; 4] };
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: &mut gf, _pad: [0; 16] };
    req.name[..dev.len()].copy_from_slice(dev.as_bytes());
    // SAFETY: socket(2) with constant arguments; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("a socket for SIOCETHTOOL");
    }
    // SAFETY: fd was just created and is owned from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: SIOCETHTOOL takes a struct ifreq whose data points at the command,
    // which IfReq and GFeatures lay out; both outlive the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("ETHTOOL_GFEATURES on {dev}"));
    }
    Ok(gf.block[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_header_parsing_ipv6_checksum_offload_is_refused() {
        let (hw, v6, v4) = (1 << NETIF_F_HW_CSUM_BIT, 1 << NETIF_F_IPV6_CSUM_BIT, 1 << 1);
        assert!(!parses_ipv6_for_csum(0), "no offload: the kernel checksums from csum_start");
        assert!(!parses_ipv6_for_csum(hw), "generic offload");
        assert!(!parses_ipv6_for_csum(hw | v6), "generic wins");
        assert!(parses_ipv6_for_csum(v6));
        assert!(parses_ipv6_for_csum(v6 | v4));
        assert!(!parses_ipv6_for_csum(v4), "IPv4 only: not ours");
    }

    #[test]
    fn loopback_features_are_read() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        // lo offloads checksums generically (NETIF_F_HW_CSUM in LOOPBACK_FEATURES)
        let f = active_features("lo").expect("ETHTOOL_GFEATURES on lo");
        assert!(f & (1 << NETIF_F_HW_CSUM_BIT) != 0, "{f:#x}");
        assert!(active_features("no-such-dev0").is_err());
    }
}
