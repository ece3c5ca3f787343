//! Loads bpf/ilnp_tc.c (compiled by build.rs), attaches it with tcx, and keeps
//! its maps in step with the core. Map layouts mirror bpf/ilnp_maps.h; the test
//! `layout_matches_c_header` proves they agree.

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, HashMap, PerCpuArray};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader, Pod};
use ilnp_core::{IlccSnapshot, LocalLocator, LocatorState};
use ilnp_wire::{Locator, Nid};

// the ELF parser needs the object 8-byte aligned
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ilnp_tc.o"));

pub const MAX_REMOTE_LOCS: usize = 8;
pub const NONCE_MAX: usize = 12;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CfgVal {
    pub id_prefix: [u8; 8],
    pub local_nid: [u8; 8],
    pub ilnp0_ifindex: u32,
    pub mode: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IlccVal {
    pub local_loc: [u8; 8],
    pub remote_loc: [u8; 8],
    pub remote_locs: [[u8; 8]; MAX_REMOTE_LOCS],
    pub nonce_tx: [u8; NONCE_MAX],
    pub nonce_rx: [u8; NONCE_MAX],
    pub nonce_tx_len: u8,
    pub nonce_rx_len: u8,
    pub n_remote_locs: u8,
    pub flags: u8,
    pub _pad: u32,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalVal {
    pub state: u32,
    pub ifindex: u32,
}

// SAFETY: plain-old-data, every bit pattern valid, no padding holes beyond explicit fields.
unsafe impl Pod for CfgVal {}
unsafe impl Pod for IlccVal {}
unsafe impl Pod for LocalVal {}

/// Names of `enum ilnp_reason`, in order. Snake-case names shared with the core's
/// counters where they mean the same thing (e.g. `bad_nonce`).
pub const REASONS: &[&str] = &[
    "egress_fast",
    "egress_miss",
    "egress_punt",
    "egress_no_uplink",
    "egress_error",
    "egress_neigh",
    "egress_no_route",
    "ingress_fast",
    "punt_miss",
    "punt_lu",
    "punt_nonce_unknown",
    "punt_src_locator",
    "punt_dst_locator",
    "punt_icmp_error",
    "punt_other",
    "bad_nonce",
    "drop_multi_nonce",
    "malformed",
    "ingress_error",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Ebpf,
    Userspace,
}

pub struct DatapathConfig {
    pub mode: Mode,
    pub ilnp0: String,
    pub ilnp0_ifindex: u32,
    pub id_prefix: Locator,
    pub local_nid: Nid,
    pub ilcc_max_entries: u32,
}

/// Fast-path counters of one correspondent.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PeerCounters {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
}

pub struct Datapath {
    bpf: Ebpf,
    uplinks: Vec<(String, aya::programs::tc::SchedClassifierLinkId)>,
}

fn state_code(s: LocatorState) -> u32 {
    match s {
        LocatorState::Valid => 0,
        LocatorState::Active => 1,
        LocatorState::Aged => 2,
        LocatorState::Expired => 3,
    }
}

impl Datapath {
    /// Loads the programs, fills `ilnp_cfg`, attaches the egress program to ilnp0.
    pub fn load(cfg: &DatapathConfig) -> Result<Datapath> {
        let mut bpf = EbpfLoader::new()
            .set_max_entries("ilnp_ilcc", cfg.ilcc_max_entries.max(1))
            .load(OBJECT)
            .context("loading the eBPF object (needs root and a kernel with BPF, BTF and tcx)")?;
        {
            let mut c: Array<_, CfgVal> =
                Array::try_from(bpf.map_mut("ilnp_cfg").ok_or_else(|| anyhow!("no ilnp_cfg map"))?)?;
            let v = CfgVal {
                id_prefix: cfg.id_prefix.to_bytes(),
                local_nid: cfg.local_nid.to_bytes(),
                ilnp0_ifindex: cfg.ilnp0_ifindex,
                mode: if cfg.mode == Mode::Ebpf { 0 } else { 1 },
            };
            c.set(0, v, 0)?;
        }
        for name in ["ilnp_egress", "ilnp_ingress"] {
            let p: &mut SchedClassifier =
                bpf.program_mut(name).ok_or_else(|| anyhow!("no program {name}"))?.try_into()?;
            p.load().with_context(|| format!("verifier rejected {name}"))?;
        }
        let p: &mut SchedClassifier = bpf.program_mut("ilnp_egress").expect("loaded").try_into()?;
        p.attach(&cfg.ilnp0, TcAttachType::Egress)
            .with_context(|| format!("attaching egress program to {}", cfg.ilnp0))?;
        Ok(Datapath { bpf, uplinks: Vec::new() })
    }

    pub fn attach_uplink(&mut self, name: &str) -> Result<()> {
        if self.uplinks.iter().any(|(n, _)| n == name) {
            return Ok(());
        }
        let p: &mut SchedClassifier = self.bpf.program_mut("ilnp_ingress").expect("loaded").try_into()?;
        let id =
            p.attach(name, TcAttachType::Ingress).with_context(|| format!("attaching ingress program to {name}"))?;
        self.uplinks.push((name.to_string(), id));
        Ok(())
    }

    fn ilcc(&mut self) -> Result<HashMap<&mut aya::maps::MapData, [u8; 8], IlccVal>> {
        Ok(HashMap::try_from(self.bpf.map_mut("ilnp_ilcc").ok_or_else(|| anyhow!("no ilnp_ilcc map"))?)?)
    }

    pub fn upsert_peer(&mut self, s: &IlccSnapshot) -> Result<()> {
        let mut m = self.ilcc()?;
        let key = s.nid.to_bytes();
        // keep the fast path's counters across updates
        let mut v = m.get(&key, 0).unwrap_or_default();
        v.local_loc = s.local_loc.to_bytes();
        v.remote_loc = s.remote_loc.to_bytes();
        v.remote_locs = [[0; 8]; MAX_REMOTE_LOCS];
        let n = s.remote_locs.len().min(MAX_REMOTE_LOCS);
        for (i, l) in s.remote_locs.iter().take(n).enumerate() {
            v.remote_locs[i] = l.to_bytes();
        }
        v.n_remote_locs = n as u8;
        v.nonce_tx = [0; NONCE_MAX];
        let tx = s.nonce_tx.as_bytes();
        v.nonce_tx[..tx.len()].copy_from_slice(tx);
        v.nonce_tx_len = tx.len() as u8;
        v.nonce_rx = [0; NONCE_MAX];
        v.nonce_rx_len = 0;
        if let Some(rx) = s.nonce_rx {
            v.nonce_rx[..rx.len()].copy_from_slice(rx.as_bytes());
            v.nonce_rx_len = rx.len() as u8;
        }
        m.insert(key, v, 0).with_context(|| format!("writing ILCC entry {} to the fast path", s.nid))?;
        Ok(())
    }

    pub fn remove_peer(&mut self, nid: Nid) -> Result<()> {
        let mut m = self.ilcc()?;
        match m.remove(&nid.to_bytes()) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    pub fn set_local_locators(&mut self, locs: &[LocalLocator]) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], LocalVal> =
            HashMap::try_from(self.bpf.map_mut("ilnp_locals").ok_or_else(|| anyhow!("no ilnp_locals map"))?)?;
        let old: Vec<[u8; 8]> = m.keys().filter_map(|k| k.ok()).collect();
        for k in old {
            if !locs.iter().any(|l| l.loc.to_bytes() == k) {
                let _ = m.remove(&k);
            }
        }
        for l in locs {
            m.insert(l.loc.to_bytes(), LocalVal { state: state_code(l.state), ifindex: l.ifindex }, 0)?;
        }
        Ok(())
    }

    /// Per-reason counters summed over CPUs.
    pub fn stats(&self) -> Result<Vec<(&'static str, u64)>> {
        let m: PerCpuArray<_, u64> =
            PerCpuArray::try_from(self.bpf.map("ilnp_stats").ok_or_else(|| anyhow!("no ilnp_stats"))?)?;
        let mut out = Vec::new();
        for (i, name) in REASONS.iter().enumerate() {
            let v = m.get(&(i as u32), 0)?;
            out.push((*name, v.iter().sum()));
        }
        Ok(out)
    }

    pub fn peer_counters(&self) -> Result<Vec<(Nid, PeerCounters)>> {
        let m: HashMap<_, [u8; 8], IlccVal> =
            HashMap::try_from(self.bpf.map("ilnp_ilcc").ok_or_else(|| anyhow!("no ilnp_ilcc"))?)?;
        Ok(m.iter()
            .filter_map(|r| r.ok())
            .map(|(k, v)| {
                (
                    Nid::from_bytes(k),
                    PeerCounters { tx_pkts: v.tx_pkts, tx_bytes: v.tx_bytes, rx_pkts: v.rx_pkts, rx_bytes: v.rx_bytes },
                )
            })
            .collect())
    }

    /// Detaches everything. tcx links also go away when the process exits, so a
    /// crash leaves no programs attached.
    pub fn shutdown(mut self) -> Result<()> {
        let uplinks = std::mem::take(&mut self.uplinks);
        let p: &mut SchedClassifier = self.bpf.program_mut("ilnp_ingress").expect("loaded").try_into()?;
        for (_, id) in uplinks {
            let _ = p.detach(id);
        }
        drop(self.bpf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use std::process::Command;

    /// Compiles a C program against bpf/ilnp_maps.h that prints every size and
    /// offset, and compares them with the Rust mirrors.
    #[test]
    fn layout_matches_c_header() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("layout.c");
        let hdr = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bpf");
        std::fs::write(
            &src,
            r#"#include <stdio.h>
#include <stddef.h>
#include "ilnp_maps.h"
#define P(s, f) printf(#s "." #f " %zu\n", offsetof(struct s, f))
int main(void) {
  printf("cfg %zu\nilcc %zu\nlocal %zu\nreasons %d\n", sizeof(struct ilnp_cfg), sizeof(struct ilnp_ilcc_val), sizeof(struct ilnp_local_val), ILNP_R_MAX);
  P(ilnp_cfg, id_prefix); P(ilnp_cfg, local_nid); P(ilnp_cfg, ilnp0_ifindex); P(ilnp_cfg, mode);
  P(ilnp_ilcc_val, local_loc); P(ilnp_ilcc_val, remote_loc); P(ilnp_ilcc_val, remote_locs); P(ilnp_ilcc_val, nonce_tx);
  P(ilnp_ilcc_val, nonce_rx); P(ilnp_ilcc_val, nonce_tx_len); P(ilnp_ilcc_val, nonce_rx_len); P(ilnp_ilcc_val, n_remote_locs);
  P(ilnp_ilcc_val, flags); P(ilnp_ilcc_val, tx_pkts); P(ilnp_ilcc_val, tx_bytes); P(ilnp_ilcc_val, rx_pkts); P(ilnp_ilcc_val, rx_bytes);
  P(ilnp_local_val, state); P(ilnp_local_val, ifindex);
  return 0;
}"#,
        )
        .unwrap();
        let bin = dir.path().join("layout");
        let st = Command::new("cc").arg("-I").arg(hdr).arg(&src).arg("-o").arg(&bin).status().unwrap();
        assert!(st.success(), "cannot compile the layout probe");
        let out = String::from_utf8(Command::new(&bin).output().unwrap().stdout).unwrap();
        let c: std::collections::HashMap<&str, usize> =
            out.lines().map(|l| l.split_once(' ').unwrap()).map(|(k, v)| (k, v.parse().unwrap())).collect();
        let rust = [
            ("cfg", size_of::<CfgVal>()),
            ("ilcc", size_of::<IlccVal>()),
            ("local", size_of::<LocalVal>()),
            ("reasons", REASONS.len()),
            ("ilnp_cfg.id_prefix", offset_of!(CfgVal, id_prefix)),
            ("ilnp_cfg.local_nid", offset_of!(CfgVal, local_nid)),
            ("ilnp_cfg.ilnp0_ifindex", offset_of!(CfgVal, ilnp0_ifindex)),
            ("ilnp_cfg.mode", offset_of!(CfgVal, mode)),
            ("ilnp_ilcc_val.local_loc", offset_of!(IlccVal, local_loc)),
            ("ilnp_ilcc_val.remote_loc", offset_of!(IlccVal, remote_loc)),
            ("ilnp_ilcc_val.remote_locs", offset_of!(IlccVal, remote_locs)),
            ("ilnp_ilcc_val.nonce_tx", offset_of!(IlccVal, nonce_tx)),
            ("ilnp_ilcc_val.nonce_rx", offset_of!(IlccVal, nonce_rx)),
            ("ilnp_ilcc_val.nonce_tx_len", offset_of!(IlccVal, nonce_tx_len)),
            ("ilnp_ilcc_val.nonce_rx_len", offset_of!(IlccVal, nonce_rx_len)),
            ("ilnp_ilcc_val.n_remote_locs", offset_of!(IlccVal, n_remote_locs)),
            ("ilnp_ilcc_val.flags", offset_of!(IlccVal, flags)),
            ("ilnp_ilcc_val.tx_pkts", offset_of!(IlccVal, tx_pkts)),
            ("ilnp_ilcc_val.tx_bytes", offset_of!(IlccVal, tx_bytes)),
            ("ilnp_ilcc_val.rx_pkts", offset_of!(IlccVal, rx_pkts)),
            ("ilnp_ilcc_val.rx_bytes", offset_of!(IlccVal, rx_bytes)),
            ("ilnp_local_val.state", offset_of!(LocalVal, state)),
            ("ilnp_local_val.ifindex", offset_of!(LocalVal, ifindex)),
        ];
        assert_eq!(c.len(), rust.len(), "the probe and the test list different fields");
        for (k, v) in rust {
            assert_eq!(c.get(k), Some(&v), "{k}: C says {:?}, Rust says {v}", c.get(k));
        }
    }
}
