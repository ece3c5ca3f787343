//! The correspondents' entries in the fast path's maps: ilnp_ilcc (written from
//! the core's `IlccSnapshot`, per-peer counters read back), the fallback peers'
//! ilnp_plain_peers, our temporary NIDs (ilnp_temp_nids), the answer hints, and
//! the reason counters.

use super::maps::{self, ilcc_key_of, ilcc_map_key, AnswerHintVal, IlccMapKey, IlccVal, PlainPeerVal, REASONS};
use super::{absent_ok, map_err, Datapath, MAP_ANSWER_HINTS, MAP_ILCC, MAP_PLAIN_PEERS, MAP_STATS, MAP_TEMP_NIDS};
use anyhow::{anyhow, Context, Result};
use aya::maps::{HashMap, MapData, MapError, PerCpuArray};
use ilnp_core::{IlccKey, IlccSnapshot};
use ilnp_wire::{Locator, Nid};

/// Where a partial sweep of the ILCC map goes on (None: from the start).
pub type Cursor = Option<IlccKey>;

/// Fast-path counters of one ILCC entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PeerCounters {
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
}

impl Datapath {
    pub(super) fn ilcc_mut(&mut self) -> Result<HashMap<&mut MapData, IlccMapKey, IlccVal>> {
        Ok(HashMap::try_from(self.bpf.map_mut(MAP_ILCC).ok_or_else(|| map_err(MAP_ILCC))?)?)
    }

    pub(super) fn ilcc(&self) -> Result<HashMap<&MapData, IlccMapKey, IlccVal>> {
        Ok(HashMap::try_from(self.bpf.map(MAP_ILCC).ok_or_else(|| map_err(MAP_ILCC))?)?)
    }

    /// Writes one ILCC entry. The fast-path counters are kept (a
    /// packet counted between the read and the write is lost from them), and
    /// `ILCC_F_BALANCED` says whether ilnp_balance holds its table.
    pub fn upsert_peer(&mut self, s: &IlccSnapshot) -> Result<()> {
        let key = ilcc_map_key(s.key());
        let balanced = self.balance_mut()?.get(&key, 0).is_ok();
        let mut m = self.ilcc_mut()?;
        let old = m.get(&key, 0).ok();
        let mut v = IlccVal::from_snapshot(s, old.as_ref());
        if balanced {
            v.flags |= maps::ILCC_F_BALANCED;
        }
        m.insert(key, v, 0).with_context(|| format!("writing the ILCC entry of {} to the fast path", s.key()))
    }

    pub fn remove_peer(&mut self, key: IlccKey) -> Result<()> {
        absent_ok(self.ilcc_mut()?.remove(&ilcc_map_key(key)))
            .with_context(|| format!("removing the ILCC entry of {key} from the fast path"))
    }
    /// A correspondent reached as plain IPv6 (fallback): the ingress program punts
    /// its plain packets from `remote_loc` to ilnpd.
    pub fn upsert_plain_peer(&mut self, nid: Nid, remote_loc: Locator) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], PlainPeerVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_PLAIN_PEERS).ok_or_else(|| map_err(MAP_PLAIN_PEERS))?)?;
        m.insert(nid.to_bytes(), PlainPeerVal { remote_loc: remote_loc.to_bytes() }, 0)
            .with_context(|| format!("writing the plain peer {nid} to the fast path"))
    }

    /// The correspondents whose plain packets the ingress program punts.
    pub fn plain_peers(&self) -> Result<Vec<Nid>> {
        let m: HashMap<_, [u8; 8], PlainPeerVal> =
            HashMap::try_from(self.bpf.map(MAP_PLAIN_PEERS).ok_or_else(|| map_err(MAP_PLAIN_PEERS))?)?;
        m.keys().map(|k| Ok(Nid::from_bytes(k?))).collect()
    }

    pub fn remove_plain_peer(&mut self, nid: Nid) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], PlainPeerVal> =
            HashMap::try_from(self.bpf.map_mut(MAP_PLAIN_PEERS).ok_or_else(|| map_err(MAP_PLAIN_PEERS))?)?;
        absent_ok(m.remove(&nid.to_bytes()))
            .with_context(|| format!("removing the plain peer {nid} from the fast path"))
    }

    /// One of our temporary NIDs ([privacy]): the ingress program punts packets to
    /// it to ilnpd (`present` false: no longer).
    pub fn set_temp_nid(&mut self, nid: Nid, present: bool) -> Result<()> {
        let mut m: HashMap<_, [u8; 8], u8> =
            HashMap::try_from(self.bpf.map_mut(MAP_TEMP_NIDS).ok_or_else(|| map_err(MAP_TEMP_NIDS))?)?;
        if present {
            m.insert(nid.to_bytes(), 1, 0).with_context(|| format!("writing the temporary NID {nid} to the fast path"))
        } else {
            absent_ok(m.remove(&nid.to_bytes()))
                .with_context(|| format!("removing the temporary NID {nid} from the fast path"))
        }
    }

    /// The ingress program's hint for `nid` (admission = socket): where its last
    /// packet that no socket took came from, our locator it arrived on, its nonce,
    /// and when (CLOCK_MONOTONIC ns). None: no hint (never, or evicted).
    /// For a v4 path's packet, also the outer IPv4 source it came from.
    #[allow(clippy::type_complexity)]
    pub fn answer_hint(
        &self,
        nid: Nid,
    ) -> Result<Option<(Locator, Locator, ilnp_wire::Nonce, u64, Option<std::net::SocketAddrV4>)>> {
        let m: HashMap<_, [u8; 8], AnswerHintVal> =
            HashMap::try_from(self.bpf.map(MAP_ANSWER_HINTS).ok_or_else(|| map_err(MAP_ANSWER_HINTS))?)?;
        let v = match m.get(&nid.to_bytes(), 0) {
            Ok(v) => v,
            Err(MapError::KeyNotFound) => return Ok(None),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading the answer hint of {nid}")),
        };
        let Some(nonce) = v.nonce.get(..usize::from(v.nonce_len)).and_then(ilnp_wire::Nonce::from_slice) else {
            return Ok(None);
        };
        let via = (v.remote_v4_port != 0)
            .then(|| std::net::SocketAddrV4::new(v.remote_v4_addr.into(), u16::from_be(v.remote_v4_port)));
        Ok(Some((Locator::from_bytes(v.remote_loc), Locator::from_bytes(v.local_loc), nonce, v.ts_ns, via)))
    }
    /// Reason counters summed over CPUs, in `REASONS` order.
    pub fn stats(&self) -> Result<Vec<(&'static str, u64)>> {
        let m: PerCpuArray<_, u64> = PerCpuArray::try_from(self.bpf.map(MAP_STATS).ok_or_else(|| map_err(MAP_STATS))?)?;
        REASONS.iter().enumerate().map(|(i, n)| Ok((*n, m.get(&(i as u32), 0)?.iter().sum()))).collect()
    }

    pub fn peer_counters(&self) -> Result<Vec<(IlccKey, PeerCounters)>> {
        let m = self.ilcc()?;
        let mut out = Vec::new();
        for r in m.iter() {
            let (k, v) = r?;
            let c = PeerCounters { tx_pkts: v.tx_pkts, tx_bytes: v.tx_bytes, rx_pkts: v.rx_pkts, rx_bytes: v.rx_bytes };
            out.push((ilcc_key_of(k), c));
        }
        Ok(out)
    }

    /// At most `max` ILCC entries' fast-path counters, in the map's order, starting
    /// after `cursor` (None: from the beginning), and where to go on next time (None:
    /// the sweep reached the end). Bounds the work per call whatever the ILCC's size
    /// (issue #11 item 4); a cursor whose entry went away restarts the sweep (the
    /// kernel's BPF_MAP_GET_NEXT_KEY returns the first key for a key it lacks).
    pub fn peer_counters_from(&self, cursor: Cursor, max: usize) -> Result<(Vec<(IlccKey, PeerCounters)>, Cursor)> {
        use std::os::fd::{AsFd, AsRawFd};
        let fd = match self.bpf.map(MAP_ILCC) {
            Some(aya::maps::Map::HashMap(d)) => d.fd().as_fd().as_raw_fd(),
            _ => return Err(map_err(MAP_ILCC)),
        };
        let m = self.ilcc()?;
        let mut key = cursor.map(ilcc_map_key);
        let mut out = Vec::new();
        while out.len() < max {
            let Some(next) = next_key(fd, key.as_ref())? else { return Ok((out, None)) };
            if let Ok(v) = m.get(&next, 0) {
                let c =
                    PeerCounters { tx_pkts: v.tx_pkts, tx_bytes: v.tx_bytes, rx_pkts: v.rx_pkts, rx_bytes: v.rx_bytes };
                out.push((ilcc_key_of(next), c));
            }
            key = Some(next);
        }
        Ok((out, key.map(ilcc_key_of)))
    }
}

/// BPF_MAP_GET_NEXT_KEY on ilnp_ilcc: the key after `key` (None: the first), or
/// None at the end. aya only iterates from the start.
fn next_key(fd: std::os::fd::RawFd, key: Option<&IlccMapKey>) -> Result<Option<IlccMapKey>> {
    #[repr(C)]
    struct Attr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        next_key: u64,
        flags: u64,
    }
    const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
    let mut next: IlccMapKey = [0u8; 16];
    let attr = Attr {
        map_fd: fd as u32,
        _pad: 0,
        key: key.map_or(0, |k| k.as_ptr() as u64),
        next_key: next.as_mut_ptr() as u64,
        flags: 0,
    };
    // SAFETY: attr points at live buffers of the map's key size for the call's duration.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, BPF_MAP_GET_NEXT_KEY, &attr as *const Attr, std::mem::size_of::<Attr>())
    };
    if r == 0 {
        return Ok(Some(next));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOENT) {
        return Ok(None);
    }
    Err(anyhow!("BPF_MAP_GET_NEXT_KEY on ilnp_ilcc: {e}"))
}
