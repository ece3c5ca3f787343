//! `#[repr(C)]` mirrors of bpf/ilnp_maps.h, and their conversion from the core's
//! types. The test `layout_matches_c_header` compiles a probe against the header
//! and fails on any size, offset or reason-name difference.

use aya::Pod;
use ilnp_core::{BalanceTable, IlccSnapshot, LocalLocator, LocatorState, Nid};

pub const MAX_REMOTE_LOCS: usize = 8;
pub const NONCE_MAX: usize = 12;
/// `ILNP_PLAIN_PEERS_MAX`: fallback peers the fast path punts (checked against the header)
#[cfg(test)]
pub const PLAIN_PEERS_MAX: usize = 4096;

/// `enum ilnp_mode`
pub const MODE_EBPF: u32 = 0;
pub const MODE_USERSPACE: u32 = 1;

/// `struct ilnp_cfg` (ilnp_cfg[0]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CfgVal {
    pub id_prefix: [u8; 8],
    pub local_nid: [u8; 8],
    pub ilnp0_ifindex: u32,
    pub mode: u32,
    pub flags: u32,
    /// the v4 path's UDP port, network order (`to_be`); 0 = `[ipv4]` off
    pub v4_port: u16,
    pub _pad: u16,
}

/// `struct ilnp_ilcc_key` (the key of ilnp_ilcc and ilnp_balance): the remote NID,
/// then ours (0 = the stable one), wire order (ilnp-core's `IlccKey`).
pub type IlccMapKey = [u8; 16];

/// The map key of an ILCC entry.
pub fn ilcc_map_key(k: ilnp_core::IlccKey) -> IlccMapKey {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&k.remote.to_bytes());
    if let Some(l) = k.local {
        b[8..].copy_from_slice(&l.to_bytes());
    }
    b
}

/// The ILCC entry of a map key.
pub fn ilcc_key_of(b: IlccMapKey) -> ilnp_core::IlccKey {
    let half = |i: usize| Nid::from_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    ilnp_core::IlccKey { remote: half(0), local: (b[8..] != [0u8; 8]).then(|| half(8)) }
}

/// `struct ilnp_ilcc_val` (value of ilnp_ilcc, key `IlccMapKey`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IlccVal {
    pub local_loc: [u8; 8],
    pub remote_loc: [u8; 8],
    pub remote_locs: [[u8; 8]; MAX_REMOTE_LOCS],
    pub nonce_tx: [u8; NONCE_MAX],
    pub nonce_tx_len: u8,
    pub nonce_rx_len: u8,
    pub n_remote_locs: u8,
    pub flags: u8,
    pub nonce_rx: [u8; NONCE_MAX],
    pub _pad: [u8; 4],
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    /// `remote_loc` is a v4 path: where its packets go (the peer's NAT, or the
    /// locator's own address and port), network order; port 0 = none
    pub remote_v4_addr: [u8; 4],
    pub remote_v4_port: u16,
    pub _pad2: [u8; 2],
    /// which of our NIDs the peer talks to (wire order); all zero: the stable one
    pub local_nid: [u8; 8],
}

/// `struct ilnp_local_val` (value of ilnp_locals, key = local locator).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalVal {
    pub state: u32,
    pub ifindex: u32,
    /// default router behind `ifindex` (network order); all zero: none
    pub router: [u8; 16],
    /// CLOCK_MONOTONIC ns of the last packet the ingress program delivered on this
    /// locator (written by the program only, kept on update); 0: none
    pub last_rx_ns: u64,
}

pub const BAL_MAX_PAIRS: usize = 16;
pub const BAL_SLOTS: usize = 256;

/// `struct ilnp_bal_pair`
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BalPair {
    pub local_loc: [u8; 8],
    pub remote_loc: [u8; 8],
}

/// `struct ilnp_balance_val` (value of ilnp_balance, key `IlccMapKey`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BalanceVal {
    /// per-packet position: the program increments it; kept on update
    pub seq: u64,
    pub flow_seed: u64,
    /// `enum ilnp_policy` (`Policy::code`)
    pub policy: u32,
    pub n_slots: u16,
    pub n_pairs: u8,
    pub _pad: u8,
    pub pairs: [BalPair; BAL_MAX_PAIRS],
    pub slots: [u8; BAL_SLOTS],
}

impl BalanceVal {
    /// The map value for the core's table; a live entry's position (`old`) is kept,
    /// a new one starts where the core's counter stands.
    pub fn from_table(t: &BalanceTable, old: Option<&BalanceVal>) -> BalanceVal {
        let mut v = BalanceVal {
            seq: old.map_or(t.seq, |o| o.seq),
            flow_seed: t.flow_seed,
            policy: t.policy.code(),
            n_slots: t.slots.len().min(BAL_SLOTS) as u16,
            n_pairs: t.pairs.len().min(BAL_MAX_PAIRS) as u8,
            _pad: 0,
            pairs: [BalPair::default(); BAL_MAX_PAIRS],
            slots: [0; BAL_SLOTS],
        };
        for (d, (l, r)) in v.pairs.iter_mut().zip(&t.pairs) {
            *d = BalPair { local_loc: l.to_bytes(), remote_loc: r.to_bytes() };
        }
        for (d, s) in v.slots.iter_mut().zip(&t.slots) {
            *d = *s;
        }
        v
    }
}

/// `struct ilnp_plain_peer_val` (value of ilnp_plain_peers, key = remote NID).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlainPeerVal {
    pub remote_loc: [u8; 8],
}

/// `struct ilnp_answer_hint_val` (value of ilnp_answer_hints, key = remote NID):
/// where the last packet from a NID without an entry came from, which the ingress
/// program passed up with no socket to take it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnswerHintVal {
    pub remote_loc: [u8; 8],
    pub local_loc: [u8; 8],
    pub ts_ns: u64,
    pub nonce: [u8; NONCE_MAX],
    pub nonce_len: u8,
    pub _pad: [u8; 3],
    /// a v4 path's packet: its outer IPv4 source and UDP port (network order; port 0 = IPv6)
    pub remote_v4_addr: [u8; 4],
    pub remote_v4_port: u16,
    pub _pad2: [u8; 2],
}

/// `struct ilnp_tcp_cfg`: the RFC 6069 hints' sock_ops program (bpf/ilnp_sockops.c)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpCfg {
    pub netns_cookie: u64,
}

/// `struct ilnp_tcp_key`: a TCP connection to an identifier address (ports host order)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpKey {
    pub local: [u8; 16],
    pub remote: [u8; 16],
    pub lport: u16,
    pub rport: u16,
    pub _pad: u32,
}

/// `struct ilnp_tcp_rto`: the connection's last retransmission timeout
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpRto {
    pub ts_ns: u64,
    pub snd_una: u32,
    pub retransmits: u32,
}

/// `ILNP_TCP_RTO_MAX` (checked against the header)
#[cfg(test)]
pub const TCP_RTO_MAX: usize = 4096;

/// `ILNP_ANSWER_HINTS_MAX` (checked against the header)
#[cfg(test)]
pub const ANSWER_HINTS_MAX: usize = 4096;

/// `ILNP_LOCAL_RX_GRAIN_NS` (checked against the header; ilnpd only reads the stamps)
#[cfg(test)]
pub const LOCAL_RX_GRAIN_NS: u64 = 10_000_000;

// SAFETY: plain old data made of integers and byte arrays; every hole is an
// explicit `_pad` field, so there is no uninitialised byte and any bit pattern is valid.
unsafe impl Pod for CfgVal {}
unsafe impl Pod for IlccVal {}
unsafe impl Pod for LocalVal {}
unsafe impl Pod for BalanceVal {}
unsafe impl Pod for PlainPeerVal {}
unsafe impl Pod for AnswerHintVal {}
unsafe impl Pod for TcpCfg {}
unsafe impl Pod for TcpKey {}
unsafe impl Pod for TcpRto {}

/// `ILNP_REASONS` in bpf/ilnp_maps.h, in enum order (index = `enum ilnp_reason`).
pub const REASONS: &[&str] = &[
    "egress_fast",
    "egress_neigh",
    "egress_punt_userspace",
    "egress_punt_proto",
    "egress_punt_icmp_error",
    "egress_punt_src",
    "egress_punt_miss",
    "egress_punt_local_loc",
    "egress_punt_fib",
    "egress_drop_error",
    "egress_via_router",
    "egress_fib_fallback",
    "egress_balanced",
    "egress_nh_hit",
    "egress_nh_miss",
    "ingress_fast",
    "ingress_punt_userspace",
    "ingress_punt_lu",
    "ingress_punt_icmp_error",
    "ingress_punt_proto",
    "ingress_punt_options",
    "ingress_punt_miss",
    "ingress_punt_nonce_unknown",
    "ingress_punt_bad_nonce",
    "ingress_punt_src_loc",
    "ingress_punt_dst_loc",
    "ingress_drop_multi_nonce",
    "ingress_drop_malformed",
    "ingress_drop_error",
    "ingress_punt_plain_peer",
    "ingress_admit_socket",
    "ingress_no_socket",
    "ingress_punt_fragment",
    "ingress_drop_nonce_overrun",
    "egress_punt_csum_rule",
    "ingress_punt_csum_rule",
    "egress_punt_v4",
    "egress_v4",
    "egress_punt_v4_mtu",
    "ingress_v4",
    "ingress_punt_v4_path",
    "ingress_punt_v4_no_decap",
    "ingress_punt_v4_plain",
    "egress_route_xmit",
    "egress_route_pass_gso",
    "egress_route_pass_nh",
    "ingress_v4_admit_socket",
    "ingress_v4_no_socket",
    "ingress_v4_via_ilnp0",
    "ingress_punt_v4_echo_reply",
    "ingress_punt_temp_nid",
    "ingress_punt_other_nid",
];

/// `ILNP_UPLINK_F_NO_IPV6` (value of ilnp_uplinks): the uplink has IPv6 disabled
pub const UPLINK_F_NO_IPV6: u32 = 1;
/// `ILNP_UPLINKS_MAX`
#[cfg(test)]
pub const UPLINKS_MAX: usize = 256;
/// `ILNP_CFG_F_ADMIT_SOCKET` (ilnp_cfg.flags)
pub const CFG_F_ADMIT_SOCKET: u32 = 1;
/// `ILNP_ILCC_F_FULL_CSUM` (ilnp_ilcc_val.flags)
pub const ILCC_F_FULL_CSUM: u8 = 1;
/// `ILNP_ILCC_F_BALANCED`: ilnp_balance holds a table for the peer (set by `Datapath`, not the snapshot)
pub const ILCC_F_BALANCED: u8 = 2;

/// `enum ilnp_loc_state`
pub fn state_code(s: LocatorState) -> u32 {
    match s {
        LocatorState::Valid => 0,
        LocatorState::Active => 1,
        LocatorState::Aged => 2,
        LocatorState::Expired => 3,
    }
}

impl LocalVal {
    /// `router`: the default router behind the locator's uplink, if it has one.
    /// `old`: the entry being replaced, whose receive stamp is kept.
    pub fn from_core(l: &LocalLocator, router: Option<std::net::Ipv6Addr>, old: Option<&LocalVal>) -> LocalVal {
        LocalVal {
            state: state_code(l.state),
            ifindex: l.ifindex,
            router: router.map(|r| r.octets()).unwrap_or_default(),
            last_rx_ns: old.map_or(0, |o| o.last_rx_ns),
        }
    }
}

impl IlccVal {
    /// The map value for `s`, keeping the fast path's counters from `old`.
    /// More than eight accepted remote locators: the active one and the first
    /// seven others are kept (the rest are punted to ilnpd, which accepts them).
    pub fn from_snapshot(s: &IlccSnapshot, old: Option<&IlccVal>) -> IlccVal {
        let mut v =
            IlccVal { local_loc: s.local_loc.to_bytes(), remote_loc: s.remote_loc.to_bytes(), ..Default::default() };
        if let Some(o) = old {
            (v.tx_pkts, v.tx_bytes, v.rx_pkts, v.rx_bytes) = (o.tx_pkts, o.tx_bytes, o.rx_pkts, o.rx_bytes);
        }
        let locs = std::iter::once(s.remote_loc).chain(s.remote_locs.iter().copied().filter(|l| *l != s.remote_loc));
        for (i, l) in locs.take(MAX_REMOTE_LOCS).enumerate() {
            v.remote_locs[i] = l.to_bytes();
            v.n_remote_locs = i as u8 + 1;
        }
        let tx = s.nonce_tx.as_bytes();
        v.nonce_tx[..tx.len()].copy_from_slice(tx);
        v.nonce_tx_len = tx.len() as u8;
        if let Some(rx) = s.nonce_rx {
            v.nonce_rx[..rx.len()].copy_from_slice(rx.as_bytes());
            v.nonce_rx_len = rx.len() as u8;
        }
        if s.full_address_checksum {
            v.flags |= ILCC_F_FULL_CSUM;
        }
        if let Some(to) = s.remote_v4.filter(|_| s.remote_loc.is_v4_path()) {
            v.remote_v4_addr = to.ip().octets();
            v.remote_v4_port = to.port().to_be();
        }
        if let Some(n) = s.local_nid {
            v.local_nid = n.to_bytes();
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_wire::{Locator, Nid, Nonce};
    use std::collections::HashMap;
    use std::mem::{offset_of, size_of};
    use std::process::Command;

    const PROBE: &str = r#"#include <stdio.h>
#include <stddef.h>
#include "ilnp_maps.h"
#define S(t) printf("sizeof." #t " %zu\n", sizeof(struct t));
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(struct t, f));
#define R(id, name) printf("reason." name " %d\n", ILNP_R_##id);
int main(void) {
  S(ilnp_cfg) S(ilnp_ilcc_key) S(ilnp_ilcc_val) S(ilnp_local_val) S(ilnp_balance_val) S(ilnp_bal_pair)
  O(ilnp_balance_val, seq) O(ilnp_balance_val, flow_seed) O(ilnp_balance_val, policy) O(ilnp_balance_val, n_slots)
  O(ilnp_balance_val, n_pairs) O(ilnp_balance_val, _pad) O(ilnp_balance_val, pairs) O(ilnp_balance_val, slots)
  O(ilnp_bal_pair, local_loc) O(ilnp_bal_pair, remote_loc)
  printf("const.ILNP_BAL_MAX_PAIRS %d\nconst.ILNP_BAL_SLOTS %d\n", ILNP_BAL_MAX_PAIRS, ILNP_BAL_SLOTS);
  printf("const.ILNP_POLICY_FAILOVER %d\nconst.ILNP_POLICY_PER_FLOW %d\nconst.ILNP_POLICY_PER_PACKET %d\n", ILNP_POLICY_FAILOVER, ILNP_POLICY_PER_FLOW, ILNP_POLICY_PER_PACKET);
  S(ilnp_plain_peer_val) O(ilnp_plain_peer_val, remote_loc)
  printf("const.ILNP_PLAIN_PEERS_MAX %d\n", ILNP_PLAIN_PEERS_MAX);
  S(ilnp_answer_hint_val) O(ilnp_answer_hint_val, remote_loc) O(ilnp_answer_hint_val, local_loc)
  O(ilnp_answer_hint_val, ts_ns) O(ilnp_answer_hint_val, nonce) O(ilnp_answer_hint_val, nonce_len)
  O(ilnp_answer_hint_val, _pad) O(ilnp_answer_hint_val, remote_v4_addr) O(ilnp_answer_hint_val, remote_v4_port)
  O(ilnp_answer_hint_val, _pad2)
  printf("const.ILNP_UPLINKS_MAX %d\nconst.ILNP_UPLINK_F_NO_IPV6 %d\n", ILNP_UPLINKS_MAX, ILNP_UPLINK_F_NO_IPV6);
  printf("const.ILNP_ANSWER_HINTS_MAX %d\n", ILNP_ANSWER_HINTS_MAX);
  S(ilnp_tcp_cfg) O(ilnp_tcp_cfg, netns_cookie) S(ilnp_tcp_key) O(ilnp_tcp_key, local) O(ilnp_tcp_key, remote)
  O(ilnp_tcp_key, lport) O(ilnp_tcp_key, rport) O(ilnp_tcp_key, _pad) S(ilnp_tcp_rto) O(ilnp_tcp_rto, ts_ns)
  O(ilnp_tcp_rto, snd_una) O(ilnp_tcp_rto, retransmits)
  printf("const.ILNP_TCP_RTO_MAX %d\n", ILNP_TCP_RTO_MAX);
  O(ilnp_cfg, id_prefix) O(ilnp_cfg, local_nid) O(ilnp_cfg, ilnp0_ifindex) O(ilnp_cfg, mode)
  O(ilnp_cfg, flags) O(ilnp_cfg, v4_port) O(ilnp_cfg, _pad)
  O(ilnp_ilcc_val, local_loc) O(ilnp_ilcc_val, remote_loc) O(ilnp_ilcc_val, remote_locs)
  O(ilnp_ilcc_val, nonce_tx) O(ilnp_ilcc_val, nonce_tx_len) O(ilnp_ilcc_val, nonce_rx_len)
  O(ilnp_ilcc_val, n_remote_locs) O(ilnp_ilcc_val, flags) O(ilnp_ilcc_val, nonce_rx) O(ilnp_ilcc_val, _pad)
  O(ilnp_ilcc_val, tx_pkts) O(ilnp_ilcc_val, tx_bytes) O(ilnp_ilcc_val, rx_pkts) O(ilnp_ilcc_val, rx_bytes)
  O(ilnp_ilcc_val, remote_v4_addr) O(ilnp_ilcc_val, remote_v4_port) O(ilnp_ilcc_val, _pad2)
  O(ilnp_ilcc_val, local_nid)
  O(ilnp_local_val, state) O(ilnp_local_val, ifindex) O(ilnp_local_val, router) O(ilnp_local_val, last_rx_ns)
  printf("const.ILNP_LOCAL_RX_GRAIN_NS %llu\n", ILNP_LOCAL_RX_GRAIN_NS);
  ILNP_REASONS(R)
  printf("const.ILNP_R_MAX %d\nconst.ILNP_MAX_REMOTE_LOCS %d\nconst.ILNP_NONCE_MAX %d\n", ILNP_R_MAX, ILNP_MAX_REMOTE_LOCS, ILNP_NONCE_MAX);
  printf("const.ILNP_MODE_EBPF %d\nconst.ILNP_MODE_USERSPACE %d\n", ILNP_MODE_EBPF, ILNP_MODE_USERSPACE);
  printf("const.ILNP_CFG_F_ADMIT_SOCKET %d\n", ILNP_CFG_F_ADMIT_SOCKET);
  printf("const.ILNP_ILCC_F_FULL_CSUM %d\nconst.ILNP_ILCC_F_BALANCED %d\n", ILNP_ILCC_F_FULL_CSUM, ILNP_ILCC_F_BALANCED);
  printf("const.ILNP_LOC_VALID %d\nconst.ILNP_LOC_ACTIVE %d\nconst.ILNP_LOC_AGED %d\nconst.ILNP_LOC_EXPIRED %d\n", ILNP_LOC_VALID, ILNP_LOC_ACTIVE, ILNP_LOC_AGED, ILNP_LOC_EXPIRED);
  return 0;
}
"#;

    /// What the C compiler says about bpf/ilnp_maps.h: "name value" lines.
    fn c_layout() -> HashMap<String, usize> {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("probe.c");
        let bin = dir.path().join("probe");
        std::fs::write(&src, PROBE).unwrap();
        let hdr = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bpf");
        let out = Command::new("cc").args(["-Wall", "-Werror", "-I", hdr]).arg(&src).arg("-o").arg(&bin).output();
        let out = out.expect("a host C compiler (cc) is needed to check the map layout");
        assert!(out.status.success(), "probe does not compile:\n{}", String::from_utf8_lossy(&out.stderr));
        let out = Command::new(&bin).output().unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split_once(' ').unwrap())
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn layout_matches_c_header() {
        let c = c_layout();
        let mut rust: Vec<(String, usize)> = vec![
            ("sizeof.ilnp_cfg", size_of::<CfgVal>()),
            ("sizeof.ilnp_ilcc_key", size_of::<IlccMapKey>()),
            ("sizeof.ilnp_ilcc_val", size_of::<IlccVal>()),
            ("sizeof.ilnp_local_val", size_of::<LocalVal>()),
            ("sizeof.ilnp_balance_val", size_of::<BalanceVal>()),
            ("sizeof.ilnp_bal_pair", size_of::<BalPair>()),
            ("ilnp_balance_val.seq", offset_of!(BalanceVal, seq)),
            ("ilnp_balance_val.flow_seed", offset_of!(BalanceVal, flow_seed)),
            ("ilnp_balance_val.policy", offset_of!(BalanceVal, policy)),
            ("ilnp_balance_val.n_slots", offset_of!(BalanceVal, n_slots)),
            ("ilnp_balance_val.n_pairs", offset_of!(BalanceVal, n_pairs)),
            ("ilnp_balance_val._pad", offset_of!(BalanceVal, _pad)),
            ("ilnp_balance_val.pairs", offset_of!(BalanceVal, pairs)),
            ("ilnp_balance_val.slots", offset_of!(BalanceVal, slots)),
            ("ilnp_bal_pair.local_loc", offset_of!(BalPair, local_loc)),
            ("ilnp_bal_pair.remote_loc", offset_of!(BalPair, remote_loc)),
            ("const.ILNP_BAL_MAX_PAIRS", BAL_MAX_PAIRS),
            ("const.ILNP_BAL_SLOTS", BAL_SLOTS),
            ("const.ILNP_POLICY_FAILOVER", ilnp_core::Policy::Failover.code() as usize),
            ("const.ILNP_POLICY_PER_FLOW", ilnp_core::Policy::PerFlow.code() as usize),
            ("const.ILNP_POLICY_PER_PACKET", ilnp_core::Policy::PerPacket.code() as usize),
            ("sizeof.ilnp_plain_peer_val", size_of::<PlainPeerVal>()),
            ("ilnp_plain_peer_val.remote_loc", offset_of!(PlainPeerVal, remote_loc)),
            ("const.ILNP_PLAIN_PEERS_MAX", PLAIN_PEERS_MAX),
            ("sizeof.ilnp_answer_hint_val", size_of::<AnswerHintVal>()),
            ("ilnp_answer_hint_val.remote_loc", offset_of!(AnswerHintVal, remote_loc)),
            ("ilnp_answer_hint_val.local_loc", offset_of!(AnswerHintVal, local_loc)),
            ("ilnp_answer_hint_val.ts_ns", offset_of!(AnswerHintVal, ts_ns)),
            ("ilnp_answer_hint_val.nonce", offset_of!(AnswerHintVal, nonce)),
            ("ilnp_answer_hint_val.nonce_len", offset_of!(AnswerHintVal, nonce_len)),
            ("ilnp_answer_hint_val._pad", offset_of!(AnswerHintVal, _pad)),
            ("ilnp_answer_hint_val.remote_v4_addr", offset_of!(AnswerHintVal, remote_v4_addr)),
            ("ilnp_answer_hint_val.remote_v4_port", offset_of!(AnswerHintVal, remote_v4_port)),
            ("ilnp_answer_hint_val._pad2", offset_of!(AnswerHintVal, _pad2)),
            ("const.ILNP_UPLINKS_MAX", UPLINKS_MAX),
            ("const.ILNP_UPLINK_F_NO_IPV6", UPLINK_F_NO_IPV6 as usize),
            ("const.ILNP_ANSWER_HINTS_MAX", ANSWER_HINTS_MAX),
            ("sizeof.ilnp_tcp_cfg", size_of::<TcpCfg>()),
            ("ilnp_tcp_cfg.netns_cookie", offset_of!(TcpCfg, netns_cookie)),
            ("sizeof.ilnp_tcp_key", size_of::<TcpKey>()),
            ("ilnp_tcp_key.local", offset_of!(TcpKey, local)),
            ("ilnp_tcp_key.remote", offset_of!(TcpKey, remote)),
            ("ilnp_tcp_key.lport", offset_of!(TcpKey, lport)),
            ("ilnp_tcp_key.rport", offset_of!(TcpKey, rport)),
            ("ilnp_tcp_key._pad", offset_of!(TcpKey, _pad)),
            ("sizeof.ilnp_tcp_rto", size_of::<TcpRto>()),
            ("ilnp_tcp_rto.ts_ns", offset_of!(TcpRto, ts_ns)),
            ("ilnp_tcp_rto.snd_una", offset_of!(TcpRto, snd_una)),
            ("ilnp_tcp_rto.retransmits", offset_of!(TcpRto, retransmits)),
            ("const.ILNP_TCP_RTO_MAX", TCP_RTO_MAX),
            ("ilnp_cfg.id_prefix", offset_of!(CfgVal, id_prefix)),
            ("ilnp_cfg.local_nid", offset_of!(CfgVal, local_nid)),
            ("ilnp_cfg.ilnp0_ifindex", offset_of!(CfgVal, ilnp0_ifindex)),
            ("ilnp_cfg.mode", offset_of!(CfgVal, mode)),
            ("ilnp_cfg.flags", offset_of!(CfgVal, flags)),
            ("ilnp_cfg.v4_port", offset_of!(CfgVal, v4_port)),
            ("ilnp_cfg._pad", offset_of!(CfgVal, _pad)),
            ("ilnp_ilcc_val.local_loc", offset_of!(IlccVal, local_loc)),
            ("ilnp_ilcc_val.remote_loc", offset_of!(IlccVal, remote_loc)),
            ("ilnp_ilcc_val.remote_locs", offset_of!(IlccVal, remote_locs)),
            ("ilnp_ilcc_val.nonce_tx", offset_of!(IlccVal, nonce_tx)),
            ("ilnp_ilcc_val.nonce_tx_len", offset_of!(IlccVal, nonce_tx_len)),
            ("ilnp_ilcc_val.nonce_rx_len", offset_of!(IlccVal, nonce_rx_len)),
            ("ilnp_ilcc_val.n_remote_locs", offset_of!(IlccVal, n_remote_locs)),
            ("ilnp_ilcc_val.flags", offset_of!(IlccVal, flags)),
            ("ilnp_ilcc_val.nonce_rx", offset_of!(IlccVal, nonce_rx)),
            ("ilnp_ilcc_val._pad", offset_of!(IlccVal, _pad)),
            ("ilnp_ilcc_val.tx_pkts", offset_of!(IlccVal, tx_pkts)),
            ("ilnp_ilcc_val.tx_bytes", offset_of!(IlccVal, tx_bytes)),
            ("ilnp_ilcc_val.rx_pkts", offset_of!(IlccVal, rx_pkts)),
            ("ilnp_ilcc_val.rx_bytes", offset_of!(IlccVal, rx_bytes)),
            ("ilnp_ilcc_val.remote_v4_addr", offset_of!(IlccVal, remote_v4_addr)),
            ("ilnp_ilcc_val.remote_v4_port", offset_of!(IlccVal, remote_v4_port)),
            ("ilnp_ilcc_val._pad2", offset_of!(IlccVal, _pad2)),
            ("ilnp_ilcc_val.local_nid", offset_of!(IlccVal, local_nid)),
            ("ilnp_local_val.state", offset_of!(LocalVal, state)),
            ("ilnp_local_val.ifindex", offset_of!(LocalVal, ifindex)),
            ("ilnp_local_val.router", offset_of!(LocalVal, router)),
            ("ilnp_local_val.last_rx_ns", offset_of!(LocalVal, last_rx_ns)),
            ("const.ILNP_LOCAL_RX_GRAIN_NS", LOCAL_RX_GRAIN_NS as usize),
            ("const.ILNP_R_MAX", REASONS.len()),
            ("const.ILNP_CFG_F_ADMIT_SOCKET", CFG_F_ADMIT_SOCKET as usize),
            ("const.ILNP_ILCC_F_FULL_CSUM", ILCC_F_FULL_CSUM as usize),
            ("const.ILNP_ILCC_F_BALANCED", ILCC_F_BALANCED as usize),
            ("const.ILNP_MAX_REMOTE_LOCS", MAX_REMOTE_LOCS),
            ("const.ILNP_NONCE_MAX", NONCE_MAX),
            ("const.ILNP_MODE_EBPF", MODE_EBPF as usize),
            ("const.ILNP_MODE_USERSPACE", MODE_USERSPACE as usize),
            ("const.ILNP_LOC_VALID", state_code(LocatorState::Valid) as usize),
            ("const.ILNP_LOC_ACTIVE", state_code(LocatorState::Active) as usize),
            ("const.ILNP_LOC_AGED", state_code(LocatorState::Aged) as usize),
            ("const.ILNP_LOC_EXPIRED", state_code(LocatorState::Expired) as usize),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        rust.extend(REASONS.iter().enumerate().map(|(i, n)| (format!("reason.{n}"), i)));
        for (k, v) in &rust {
            assert_eq!(c.get(k), Some(v), "{k}: C says {:?}, Rust says {v}", c.get(k));
        }
        assert_eq!(c.len(), rust.len(), "the C header has fields or reasons the Rust mirror lacks");
    }

    #[test]
    fn snapshot_to_map_value() {
        let l = |v: u64| Locator(v);
        let mut s = IlccSnapshot {
            nid: Nid(0x1122_3344_5566_7788),
            local_loc: l(0x2001_0db8_0000_0001),
            remote_loc: l(5),
            remote_locs: (1..=10).map(l).collect(),
            nonce_tx: Nonce::N32([1, 2, 3, 4]),
            nonce_rx: None,
            full_address_checksum: false,
            remote_v4: None,
            local_nid: None,
        };
        let old = IlccVal { tx_pkts: 7, rx_bytes: 9, ..Default::default() };
        let v = IlccVal::from_snapshot(&s, Some(&old));
        assert_eq!((v.tx_pkts, v.rx_bytes), (7, 9), "counters survive an update");
        assert_eq!(v.local_loc, [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1]);
        assert_eq!(v.n_remote_locs, 8);
        assert_eq!(v.remote_locs[0], l(5).to_bytes(), "the active locator is always kept");
        assert_eq!(v.remote_locs[1..5], [1, 2, 3, 4].map(|x| l(x).to_bytes()));
        assert_eq!(v.remote_locs[5], l(6).to_bytes());
        assert_eq!((v.nonce_tx_len, &v.nonce_tx[..4], v.nonce_rx_len), (4, &[1, 2, 3, 4][..], 0));
        s.nonce_rx = Some(Nonce::N96([9; 12]));
        let v = IlccVal::from_snapshot(&s, None);
        assert_eq!((v.nonce_rx_len, v.nonce_rx), (12, [9; 12]));
        assert_eq!(v.flags, 0, "RFC 6741 rule: the fast path translates");
        s.full_address_checksum = true;
        assert_eq!(IlccVal::from_snapshot(&s, None).flags, ILCC_F_FULL_CSUM, "full-address rule: punted");
        assert_eq!(v.local_nid, [0; 8], "the stable NID: 0");
        s.local_nid = Some(Nid(0x0a0b_0c0d_0e0f_1011));
        assert_eq!(IlccVal::from_snapshot(&s, None).local_nid, [10, 11, 12, 13, 14, 15, 16, 17], "a temporary NID");
    }
}
