//! A versioned, serialisable copy of the core's state that must survive a daemon
//! restart (issue #10 item 2): every ILCC entry with its nonces, remote locators,
//! RTT estimate and pending Locator Update, which peers were found not to speak
//! ILNP, which are reached as plain IPv6 (fallback), and the peer records learned
//! from DNS (with what is left of their TTL). The file format and I/O are the
//! shell's (ilnpd); this module only says what is kept and how it is put back.
//!
//! Time is relative: an `Instant` cannot be written down, so each deadline or stamp
//! is kept as milliseconds before (`*_ago_ms`) or after (`*_in_ms`) the moment the
//! snapshot was taken, and restored relative to the moment it is read back. The time
//! the daemon was down therefore does not count towards idle timeouts or lifetimes
//! (a few seconds against minutes), which errs on the side of keeping a session.
//!
//! Not kept: counters (statistics start again at zero), the local locator set (the
//! shell reads it from the kernel at start; a change made while the daemon was down
//! is advertised with an LU as usual), challenges in flight (a peer that restarted
//! while we were down is challenged again on its next packet).

use crate::action::Action;
use crate::dns::PeerSource;
use crate::fallback::FallbackReason;
use crate::ilcc::{IlccEntry, PendingLu, RemoteLocator};
use crate::locator::LocatorState;
use crate::machine::Core;
use crate::peers::{PeerInfo, PeerLocator, PeerRecord};
use ilnp_wire::icmpv6::LuEntry;
use ilnp_wire::{Locator, Nid, Nonce};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, Instant};

/// Bumped when a field's meaning changes; a snapshot of another version is refused.
pub const SNAPSHOT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreSnapshot {
    pub version: u32,
    /// the NID the state belongs to: a file left by a host with another NID is refused
    pub local_nid: u64,
    pub entries: Vec<EntryState>,
    /// peers found not to speak ILNP (Parameter Problem on our nonce)
    pub non_ilnp: Vec<u64>,
    /// correspondents reached as plain IPv6 (transparent fallback): their sessions
    /// go on after a restart like those of ILCC entries (absent in files of earlier
    /// builds: none)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<FallbackState>,
    /// peer records learned from DNS: a session keeps its name (for the recovery
    /// when both ends moved, `Core::recover_from_dns`), and an application that
    /// was handed the identifier address can still open sessions until the TTL
    /// ends (absent in files of earlier builds: none)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_peers: Vec<DnsPeerState>,
    /// our temporary NIDs (`nids.rs`), with whether new sessions may use them
    /// (absent in files of earlier builds: none)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temporary_nids: Vec<(u64, bool)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsPeerState {
    pub name: String,
    pub nid: u64,
    /// (locator, preference), as learned
    pub locators: Vec<(u64, u16)>,
    pub ttl_s: u32,
    /// 0: expired (kept for its name while a session uses it)
    pub expires_in_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackState {
    pub nid: u64,
    /// the locator of its `L64:NID`, where our plain packets go
    pub remote_locator: u64,
    pub reason: FallbackReason,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryState {
    pub nid: u64,
    pub local_locator: u64,
    pub remote_locators: Vec<RemoteState>,
    /// hex, 8 or 24 digits
    pub nonce_tx: String,
    pub nonce_rx: Option<String>,
    pub initiator: bool,
    pub age_ms: u64,
    pub idle_ms: u64,
    pub srtt_us: Option<u64>,
    pub pending_lu: Option<PendingLuState>,
    /// the temporary NID of ours the correspondent talks to; absent: the stable one
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_nid: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteState {
    pub loc: u64,
    pub pref: u16,
    pub lifetime_s: u16,
    pub state: LocatorState,
    /// None: no lifetime known
    pub expires_in_ms: Option<u64>,
    /// a v4 path's observed address behind a NAT (`RemoteLocator::via`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<std::net::SocketAddrV4>,
    /// a v4 path the core has heard from (`RemoteLocator::v4_heard`); files
    /// without it: heard if a NAT was seen
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub v4_heard: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingLuState {
    /// (locator, preference, lifetime in seconds)
    pub entries: Vec<(u64, u16, u16)>,
    pub attempts: u32,
    pub next_in_ms: u64,
}

/// Why a snapshot was not restored (nothing of it was applied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    Version(u32),
    OtherNid(Nid),
    BadNonce { nid: Nid, value: String },
}

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreError::Version(v) => write!(f, "state version {v}, this build reads {SNAPSHOT_VERSION}"),
            RestoreError::OtherNid(n) => write!(f, "state of NID {n}, not ours"),
            RestoreError::BadNonce { nid, value } => {
                write!(f, "entry {nid}: nonce {value:?} is not 8 or 24 hex digits")
            }
        }
    }
}

impl std::error::Error for RestoreError {}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

fn nonce_hex(n: &Nonce) -> String {
    crate::ilcc::hex(n.as_bytes())
}

fn parse_nonce(nid: Nid, s: &str) -> Result<Nonce, RestoreError> {
    let bad = || RestoreError::BadNonce { nid, value: s.to_string() };
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    Nonce::from_slice(&bytes).ok_or_else(bad)
}

impl EntryState {
    fn of(e: &IlccEntry, now: Instant) -> EntryState {
        EntryState {
            nid: e.nid.0,
            local_locator: e.local_locator.0,
            remote_locators: e
                .remote_locators
                .iter()
                .map(|r| RemoteState {
                    loc: r.loc.0,
                    pref: r.pref,
                    lifetime_s: r.lifetime_s,
                    state: r.state,
                    expires_in_ms: r.expires.map(|t| ms(t.saturating_duration_since(now))),
                    via: r.via,
                    v4_heard: r.v4_heard,
                })
                .collect(),
            nonce_tx: nonce_hex(&e.nonce_tx),
            nonce_rx: e.nonce_rx.as_ref().map(nonce_hex),
            initiator: e.initiator,
            age_ms: ms(now.saturating_duration_since(e.created)),
            idle_ms: ms(now.saturating_duration_since(e.last_used)),
            srtt_us: e.srtt_us,
            pending_lu: e.pending_lu.as_ref().map(|p| PendingLuState {
                entries: p.entries.iter().map(|x| (x.locator.0, x.preference, x.lifetime)).collect(),
                attempts: p.attempts,
                next_in_ms: ms(p.next_at.saturating_duration_since(now)),
            }),
            local_nid: e.local_nid.map(|n| n.0),
        }
    }

    fn to_entry(&self, now: Instant) -> Result<IlccEntry, RestoreError> {
        let nid = Nid(self.nid);
        let back = |m: u64| now.checked_sub(Duration::from_millis(m)).unwrap_or(now);
        let ahead = |m: u64| now + Duration::from_millis(m);
        let nonce_tx = parse_nonce(nid, &self.nonce_tx)?;
        let nonce_rx = self.nonce_rx.as_deref().map(|s| parse_nonce(nid, s)).transpose()?;
        let remote = self
            .remote_locators
            .iter()
            .map(|r| RemoteLocator {
                loc: Locator(r.loc),
                pref: r.pref,
                lifetime_s: r.lifetime_s,
                state: r.state,
                last_heard: None,
                proven: None,
                expires: r.expires_in_ms.map(ahead),
                via: r.via,
                // a file from before v4_heard was kept: a path a NAT rewrote was heard
                v4_heard: r.v4_heard || r.via.is_some(),
            })
            .collect();
        let mut e = IlccEntry::new(nid, remote, Locator(self.local_locator), nonce_tx, nonce_rx, self.initiator, now);
        e.created = back(self.age_ms);
        e.last_used = back(self.idle_ms);
        e.srtt_us = self.srtt_us;
        e.local_nid = self.local_nid.map(Nid);
        e.pending_lu = self.pending_lu.as_ref().map(|p| PendingLu {
            entries: p
                .entries
                .iter()
                .map(|&(l, preference, lifetime)| LuEntry { locator: Locator(l), preference, lifetime })
                .collect(),
            // the RTT sample of a retransmitted LU is not taken (Karn), so the
            // original send time does not matter beyond that
            first_sent: now,
            attempts: p.attempts.max(1),
            next_at: ahead(p.next_in_ms),
            candidates: Vec::new(),
            known_local: None,
        });
        Ok(e)
    }
}

impl Core {
    /// The state a restarted daemon needs, at `now`. Entries in NID order, so the
    /// same state gives the same bytes.
    pub fn snapshot(&self, now: Instant) -> CoreSnapshot {
        // established entries only: an embryonic one is an unconfirmed claim
        // (admission.rs); a restart must not promote it, and its peer simply retries
        let mut entries: Vec<EntryState> = self
            .ilcc
            .iter()
            .filter(|e| e.tier == crate::ilcc::Tier::Established)
            .map(|e| EntryState::of(e, now))
            .collect();
        entries.sort_by_key(|e| e.nid);
        CoreSnapshot {
            version: SNAPSHOT_VERSION,
            local_nid: self.cfg.local_nid.0,
            entries,
            non_ilnp: self.peers.values().filter(|p| p.non_ilnp).map(|p| p.record.nid.0).collect(),
            fallback: self
                .fallback
                .plain()
                .map(|(nid, remote, reason)| FallbackState { nid: nid.0, remote_locator: remote.0, reason })
                .collect(),
            dns_peers: self
                .peers
                .values()
                .filter(|p| p.source == PeerSource::Dns)
                .map(|p| DnsPeerState {
                    name: p.record.name.clone(),
                    nid: p.record.nid.0,
                    locators: p.record.locators.iter().map(|l| (l.loc.0, l.pref)).collect(),
                    ttl_s: p.ttl_s.unwrap_or(0),
                    expires_in_ms: p.expires.map_or(0, |t| ms(t.saturating_duration_since(now))),
                })
                .collect(),
            temporary_nids: self.nids.iter().map(|(n, t)| (n.0, t.preferred)).collect(),
        }
    }

    /// Puts a snapshot back (before any packet is handled): every entry is
    /// re-created, and the fast path is told about each (`IlccUpsert`). All or
    /// nothing: a snapshot with one bad field changes nothing. Entries beyond the
    /// ILCC bound (a smaller `ilcc_max_entries` than before) are left out.
    pub fn restore(&mut self, now: Instant, snap: &CoreSnapshot) -> Result<Vec<Action>, RestoreError> {
        if snap.version != SNAPSHOT_VERSION {
            return Err(RestoreError::Version(snap.version));
        }
        if snap.local_nid != self.cfg.local_nid.0 {
            return Err(RestoreError::OtherNid(Nid(snap.local_nid)));
        }
        let entries: Vec<IlccEntry> = snap.entries.iter().map(|e| e.to_entry(now)).collect::<Result<_, _>>()?;
        let mut out = Vec::new();
        // our temporary NIDs first: their sessions' entries name them
        for &(n, preferred) in &snap.temporary_nids {
            if self.add_temporary_nid(Nid(n)).is_ok() && !preferred {
                self.deprecate_temporary_nid(Nid(n));
            }
        }
        for mut e in entries {
            // not in the state file: the configuration's, as for a new entry
            self.cfg.apply_peer_settings(&mut e);
            let snap = e.snapshot();
            if self.ilcc.insert(e).is_ok() {
                out.extend(snap.map(Action::IlccUpsert));
            }
        }
        for d in &snap.dns_peers {
            // a peer-file record is the operator's word (dns.rs)
            if self.peers.get(&Nid(d.nid)).is_some_and(|p| p.source == PeerSource::Static) {
                continue;
            }
            let locators = d.locators.iter().map(|&(l, pref)| PeerLocator { loc: Locator(l), pref }).collect();
            let record = PeerRecord { name: d.name.clone(), nid: Nid(d.nid), locators };
            let expires = Some(now + Duration::from_millis(d.expires_in_ms));
            let info = PeerInfo {
                record,
                non_ilnp: false,
                source: PeerSource::Dns,
                expires,
                ttl_s: Some(d.ttl_s),
                lu_failed: false,
            };
            self.peers.insert(Nid(d.nid), info);
        }
        for n in &snap.non_ilnp {
            if let Some(p) = self.peers.get_mut(&Nid(*n)) {
                p.non_ilnp = true;
            }
        }
        // with fallback configured off now, such a peer is just not ILNPv6-capable
        // (`non_ilnp`); else its plain session goes on (an ILCC entry, which the file
        // cannot have beside it, would win). No record needed: the earlier run
        // bounded these by its records, and the session outlives a name's TTL
        if self.cfg.fallback {
            for f in &snap.fallback {
                let nid = Nid(f.nid);
                if !self.ilcc.knows(nid) {
                    self.fallback.restore(now, nid, Locator(f.remote_locator), f.reason, &mut out);
                }
            }
        }
        self.ilcc.tidy();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{core, session, NA, NB};
    use ilnp_wire::translate::Csum;

    #[test]
    fn a_restored_core_continues_the_session_with_the_same_nonces() {
        let (a, mut b, _, _) = session();
        let t0 = Instant::now();
        let snap = a.snapshot(t0);
        let json = serde_json::to_string(&snap).unwrap();
        let back: CoreSnapshot = serde_json::from_str(&json).unwrap();
        assert_eq!(back, snap);
        // a new process: same NID and locator, another RNG seed (new nonces if it had to make any)
        let mut a2 = core(NA, crate::tests::LA, 99, Some((NB, crate::tests::LB)));
        let t1 = t0 + Duration::from_secs(2);
        let out = a2.restore(t1, &back).unwrap();
        assert!(matches!(&out[..], [Action::IlccUpsert(s)] if s.nid == NB && s.nonce_rx.is_some()));
        let e = a2.ilcc.iter().next().unwrap();
        let old = a.ilcc.iter().next().unwrap();
        assert_eq!((e.nonce_tx, e.nonce_rx, e.initiator), (old.nonce_tx, old.nonce_rx, old.initiator));
        // b accepts what the restored a sends (same tx nonce), and a accepts b
        let w = crate::tests::wire(&a2.handle_outbound(t1, &crate::tests::udp(NA, NB, b"again"), Csum::Complete));
        let out = b.handle_inbound(t1, &w[0], Csum::Complete);
        assert_eq!(crate::tests::delivered(&out).len(), 1, "{out:?}");
        assert_eq!(b.stats().dropped(crate::event::DropReason::BadNonce), 0);
        // the idle clock resumed where it stopped, the downtime does not count
        assert_eq!(a2.snapshot(t1).entries[0].idle_ms, 0, "used just now");
        assert_eq!(a2.snapshot(t1).entries[0].age_ms, snap.entries[0].age_ms);
    }

    #[test]
    fn refused_snapshots_change_nothing() {
        let (a, _, _, _) = session();
        let now = Instant::now();
        let mut snap = a.snapshot(now);
        let mut c = core(NA, crate::tests::LA, 5, None);
        snap.version = 7;
        assert_eq!(c.restore(now, &snap), Err(RestoreError::Version(7)));
        snap.version = SNAPSHOT_VERSION;
        snap.local_nid = NB.0;
        assert_eq!(c.restore(now, &snap), Err(RestoreError::OtherNid(NB)));
        snap.local_nid = NA.0;
        snap.entries.push(EntryState { nonce_tx: "abc".into(), ..snap.entries[0].clone() });
        snap.entries[1].nid = 42;
        assert!(matches!(c.restore(now, &snap), Err(RestoreError::BadNonce { nid: Nid(42), .. })));
        assert_eq!(c.ilcc.iter().count(), 0, "all or nothing");
    }

    #[test]
    fn truncated_or_corrupt_json_is_an_error_not_a_panic() {
        let (a, _, _, _) = session();
        let json = serde_json::to_string(&a.snapshot(Instant::now())).unwrap();
        for cut in [0, 1, json.len() / 2, json.len() - 1] {
            assert!(serde_json::from_str::<CoreSnapshot>(&json[..cut]).is_err(), "cut at {cut}");
        }
        let garbage = json.replace("\"initiator\"", "\"initiatorx\"");
        assert!(serde_json::from_str::<CoreSnapshot>(&garbage).is_err());
    }
}
