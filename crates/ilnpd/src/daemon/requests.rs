//! Control requests (docs/control-protocol.md): answers each typed
//! `ilnp_control::Request` from the daemon's state. The JSON shapes live in
//! `ilnp_control`; the monitor stream's events are `monitor.rs`'s.

use super::counters::ShellCounter;
use super::Daemon;
use crate::bpf::PeerCounters;
use crate::config;
use crate::nid::NidSource;
use anyhow::{anyhow, bail, Result};
use ilnp_control::{self as ctl, Data, Reply, Request};
use ilnp_core::{Action, Admission, FallbackReason, HandoffMode, PeerLocator, PeerRecord, PeerState};
use ilnp_wire::{ilnp_addr, Locator, Nid, Nonce};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// The core's counters `status.admission` shows (by name: `ilnp_core::Outcome` /
/// `DropReason`).
const ADMISSION_CORE_COUNTERS: &[&str] = &[
    "admit_embryonic",
    "admit_open",
    "admit_known_peer",
    "admit_promoted",
    "admit_promote_refused_full",
    "admit_embryonic_evicted",
    "hello_sent",
    "hello_rate_limited",
    "tx_to_embryonic",
    "lu_embryonic",
    "answer_sent",
    "answer_rate_limited",
    "answer_unadmitted",
    "ilcc_full",
];

/// The fast path's admission counters (`ILNP_REASONS`).
const ADMISSION_FAST_COUNTERS: &[&str] = &["ingress_admit_socket", "ingress_no_socket"];

impl Daemon {
    /// Answers `req` from the client with `uid` (SO_PEERCRED, `control.rs`): a
    /// mutating request from anyone but root is refused, naming it, and counted
    /// (`control_refused_not_root`); `ilcc_show` shows nonces to root only.
    pub(super) fn handle_request(&mut self, req: Request, uid: u32) -> Reply {
        if let Some(why) = req.refusal(uid) {
            self.bump(ShellCounter::ControlRefusedNotRoot);
            tracing::debug!("control: refused {} from uid {uid}", req.as_str());
            return Reply::Err(why);
        }
        match self.request(req, uid == 0) {
            Ok(data) => Reply::Ok(data),
            Err(e) => Reply::Err(format!("{e:#}")),
        }
    }

    fn request(&mut self, req: Request, root: bool) -> Result<Data> {
        Ok(match req {
            Request::Status => Data::Status(self.status()),
            Request::IlccShow => Data::Ilcc(self.ilcc_view(root)),
            Request::IlccFlush => {
                let a = self.core.flush_ilcc();
                let n = a.iter().filter(|x| matches!(x, Action::IlccRemove(_))).count();
                self.run_actions(a);
                Data::Flushed(ctl::Flushed { flushed: n as u64 })
            }
            Request::LocatorShow => Data::Locators(self.locator_view()),
            Request::DnsStatus => Data::Dns(Box::new(self.dns_status())),
            Request::PeerShow => Data::Peers(
                self.core
                    .peers()
                    .map(|p| ctl::PeerInfo {
                        name: p.record.name.clone(),
                        nid: p.record.nid,
                        locators: p
                            .record
                            .locators
                            .iter()
                            .map(|l| ctl::PeerLocator { l64: l.loc, pref: l.pref })
                            .collect(),
                        non_ilnp: p.non_ilnp,
                        source: Some(match p.source {
                            ilnp_core::PeerSource::Static => ctl::PeerSource::Static,
                            ilnp_core::PeerSource::Dns => ctl::PeerSource::Dns,
                        }),
                        ttl_s: p.ttl_s,
                        expires_in_s: p.expires.map(|e| {
                            let now = Instant::now();
                            if e >= now {
                                e.duration_since(now).as_secs() as i64
                            } else {
                                -(now.duration_since(e).as_secs() as i64)
                            }
                        }),
                        expired: p.expires.is_some_and(|e| e <= Instant::now()),
                        state: Some(peer_state(self.core.peer_state(p.record.nid))),
                        fallback: self.core.fallback().view(p.record.nid, Instant::now()).map(|f| ctl::PeerFallback {
                            reason: fallback_reason(f.reason),
                            address: f.address.to_string(),
                            since_s: f.since_s,
                            pkts_out: f.pkts_out,
                            pkts_in: f.pkts_in,
                        }),
                    })
                    .collect(),
            ),
            Request::PeerAdd { name, nid, locators } => {
                let r = peer_record(name, &nid, &locators, self.local_nid, self.cfg.id_prefix)?;
                let nid = r.nid;
                self.core.add_peer(r);
                Data::PeerAdded(ctl::PeerAdded { added: nid, persistent: false })
            }
            Request::PeerDel { nid } => {
                let nid = nid.value;
                if let Some(dp) = self.dp.as_mut() {
                    // a fallback peer's punt goes with its record
                    if let Err(e) = dp.remove_plain_peer(nid) {
                        tracing::warn!("{e:#}");
                    }
                }
                if !self.core.del_peer(nid) {
                    bail!("peer del: no peer with NID {nid}");
                }
                // its fallback, if any, went with it (kept in the state file)
                self.state_dirty.get_or_insert_with(Instant::now);
                Data::PeerDeleted(ctl::PeerDeleted { deleted: nid })
            }
            Request::Stats => {
                let mut core: BTreeMap<String, u64> =
                    self.core.stats().counters.iter().map(|(k, v)| (k.to_string(), *v)).collect();
                for (k, v) in &self.counters {
                    *core.entry(k.as_str().to_string()).or_insert(0) += v;
                }
                for (k, v) in crate::control::counters() {
                    core.insert(k.to_string(), v);
                }
                let datapath = self
                    .dp
                    .as_ref()
                    .and_then(|d| d.stats().ok())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                Data::Stats(ctl::Stats { core, datapath, slow_path_ns: self.slow_hist.labelled() })
            }
            // served by the connection (control.rs): it streams, the main loop does not
            Request::Monitor => Data::Monitoring(ctl::Monitoring),
            Request::PolicyShow => Data::Balance(self.balance_info()),
            Request::PolicySet { peer, policy } => {
                let nid = match peer.as_deref() {
                    None => None,
                    Some(who) => Some(self.peer_nid(who)?),
                };
                let a = self.core.set_policy(nid, policy).map_err(|e| anyhow!("policy: {e}"))?;
                self.run_actions(a);
                Data::Balance(self.balance_info())
            }
            Request::LocatorSet { dev, weight } => {
                let Some(u) = self.uplinks.iter().find(|u| u.name == dev) else {
                    let names: Vec<&str> = self.uplinks.iter().map(|u| u.name.as_str()).collect();
                    bail!("locator set: unknown interface {dev:?} (uplinks are {names:?})");
                };
                let a = self.core.set_uplink_weight(u.index, weight).map_err(|e| anyhow!("locator set {dev}: {e}"))?;
                self.run_actions(a);
                Data::Balance(self.balance_info())
            }
        })
    }

    /// A peer named by name or NID: a static peer or an ILCC entry.
    fn peer_nid(&self, who: &str) -> Result<Nid> {
        if let Some(p) = self.core.peers().find(|p| p.record.name == who) {
            return Ok(p.record.nid);
        }
        match who.parse::<Nid>() {
            Ok(n) => Ok(n), // the core says whether it knows it
            Err(_) => bail!("unknown peer {who:?} (neither a peer name nor a NID)"),
        }
    }

    fn balance_info(&self) -> ctl::BalanceInfo {
        let v = self.core.balancer().view();
        let name_of = |ifx: u32| {
            self.uplinks.iter().find(|u| u.index == ifx).map_or_else(|| format!("ifindex {ifx}"), |u| u.name.clone())
        };
        ctl::BalanceInfo {
            default_policy: Some(v.default_policy),
            peer_policy: v.peer_policy,
            weights: v.weights.into_iter().map(|(i, w)| (name_of(i), w)).collect(),
            flow_seed: v.flow_seed,
            peers: v
                .peers
                .into_iter()
                .map(|p| ctl::BalancePeer { nid: p.nid, policy: p.policy, pairs: p.pairs, seq: p.seq })
                .collect(),
        }
    }

    fn status(&mut self) -> ctl::Status {
        ctl::Status {
            nid: self.local_nid,
            nid_source: Some(match self.nid_source {
                NidSource::Configured => ctl::NidSource::Configured,
                NidSource::StablePrivacy => ctl::NidSource::StablePrivacy,
                NidSource::KeptFromUpgrade => ctl::NidSource::KeptFromUpgrade,
                NidSource::Eui64 => ctl::NidSource::Eui64,
            }),
            identifier_prefix: format!("{}/64", self.cfg.id_prefix.prefix()),
            identifier_address: ilnp_addr(self.cfg.id_prefix, self.local_nid).to_string(),
            tun: self.tun.name.clone(),
            datapath: match self.cfg.datapath {
                config::Datapath::Ebpf => ctl::DatapathMode::Ebpf,
                config::Datapath::Userspace => ctl::DatapathMode::Userspace,
            },
            route_xmit: self.route_xmit,
            handoff: match self.cfg.core.handoff {
                HandoffMode::Soft => ctl::Handoff::Soft,
                HandoffMode::Hard => ctl::Handoff::Hard,
            },
            nonce_bits: self.cfg.core.nonce_len as u32 * 8,
            uplinks: self.uplinks.iter().map(|u| ctl::Uplink { name: u.name.clone(), ifindex: u.index }).collect(),
            locators: self.locator_view(),
            ilcc_entries: self.core.ilcc().iter().count() as u64,
            admission: Some(Box::new(self.admission_status())),
            peers: self.core.peers().count() as u64,
            uptime_s: self.started.elapsed().as_secs(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            balance: Box::new(self.balance_info()),
            temporary_nids: self.privacy_status(),
        }
    }

    fn admission_status(&self) -> ctl::AdmissionStatus {
        let t = self.core.tier_counts();
        let st = self.core.stats();
        let mut counters: BTreeMap<String, u64> =
            ADMISSION_CORE_COUNTERS.iter().map(|o| (o.to_string(), st.get(o))).collect();
        let fast = self.dp.as_ref().and_then(|d| d.stats().ok()).unwrap_or_default();
        for (k, v) in fast.into_iter().filter(|(k, _)| ADMISSION_FAST_COUNTERS.contains(k)) {
            counters.insert(k.to_string(), v);
        }
        ctl::AdmissionStatus {
            policy: match self.cfg.core.admission {
                Admission::Socket => ctl::AdmissionPolicy::Socket,
                Admission::Open => ctl::AdmissionPolicy::Open,
            },
            established: t.established as u64,
            embryonic: t.embryonic as u64,
            max_established: t.max_established as u64,
            max_embryonic: t.max_embryonic as u64,
            hello_rate_pps: self.cfg.core.hello_rate_pps as u32,
            hello_burst: self.cfg.core.hello_burst,
            counters,
        }
    }

    /// ILCC entries by NID, with idle time, age and the fast path's counters; the
    /// nonces only with `nonces` (a root client), null otherwise.
    fn ilcc_view(&self, nonces: bool) -> Vec<ctl::IlccEntry> {
        let fast: HashMap<ilnp_core::IlccKey, PeerCounters> =
            self.dp.as_ref().and_then(|d| d.peer_counters().ok()).unwrap_or_default().into_iter().collect();
        let now = Instant::now();
        let mut entries: Vec<&ilnp_core::IlccEntry> = self.core.ilcc().iter().collect();
        entries.sort_by_key(|e| e.key());
        entries
            .into_iter()
            .map(|e| ctl::IlccEntry {
                nid: e.nid,
                local_nid: e.local_nid,
                remote_locators: e
                    .remote_locators
                    .iter()
                    .map(|r| ctl::RemoteLocator {
                        l64: r.loc,
                        pref: r.pref,
                        lifetime_s: r.lifetime_s,
                        state: r.state,
                        via: r.via.map(|v| v.to_string()),
                    })
                    .collect(),
                local_locator: e.local_locator,
                nonce_tx: Some(hex(&e.nonce_tx)).filter(|_| nonces),
                nonce_rx: e.nonce_rx.as_ref().map(hex).filter(|_| nonces),
                nonces_hidden: !nonces,
                initiator: e.initiator,
                idle_s: now.saturating_duration_since(e.last_used).as_secs_f64(),
                slow_pkts_in: e.slow_pkts_in,
                slow_pkts_out: e.slow_pkts_out,
                slow_bytes_in: e.slow_bytes_in,
                slow_bytes_out: e.slow_bytes_out,
                age_s: now.saturating_duration_since(e.created).as_secs_f64(),
                srtt_us: e.srtt_us,
                interop: self.cfg.core.peer_linux49.contains(&e.nid).then(|| "linux49".to_string()),
                fast: fast.get(&e.key()).map(|f| ctl::FastCounters {
                    tx_pkts: f.tx_pkts,
                    tx_bytes: f.tx_bytes,
                    rx_pkts: f.rx_pkts,
                    rx_bytes: f.rx_bytes,
                }),
            })
            .collect()
    }

    fn dns_status(&self) -> ctl::DnsStatus {
        let mut st = ctl::DnsStatus::default();
        if let Some(p) = &self.dns {
            st.proxy = true;
            st.listen = p.listen.iter().map(|a| a.to_string()).collect();
            st.upstream = p.up.server.to_string();
            st.counters = p.counters.snapshot().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        }
        if let Some((u, _)) = &self.dns_update {
            let s = u.status();
            st.update = Some(ctl::DnsUpdateStatus {
                zone: u.cfg.zone.clone(),
                name: u.cfg.name.clone(),
                server: u.cfg.server.to_string(),
                ttl_s: u.cfg.ttl_s,
                state: s.state,
                locators: s.locators.iter().map(|l| format!("{}|{}", l.loc, l.pref)).collect(),
                updates_ok: s.updates_ok,
                updates_failed: s.updates_failed,
                last_error: s.last_error,
                last_ok_age_s: s.last_ok.map(|t| t.elapsed().as_secs_f64()),
                last_latency_ms: s.last_latency.map(|d| d.as_secs_f64() * 1e3),
            });
        }
        st
    }

    pub(super) fn locator_view(&mut self) -> Vec<ctl::LocatorInfo> {
        self.feed_local_activity();
        let now = Instant::now();
        self.core
            .local()
            .all()
            .iter()
            .map(|l| {
                let uplink = self.uplinks.iter().find(|u| u.index == l.ifindex);
                ctl::LocatorInfo {
                    l64: l.loc,
                    address: ilnp_addr(l.loc, self.local_nid).to_string(),
                    interface: uplink.map(|u| u.name.clone()).unwrap_or_default(),
                    pref: l.pref,
                    router_preference: uplink.and_then(|u| u.router),
                    lifetime_s: l.lifetime_s,
                    state: l.state,
                    has_router: l.has_router,
                    deprecated: l.deprecated,
                    // seconds since a packet last arrived on it (as of the core's last
                    // look at the fast path); null: none yet
                    last_rx_age_s: self
                        .core
                        .local()
                        .last_rx(l.loc)
                        .map(|t| now.saturating_duration_since(t).as_secs_f64()),
                }
            })
            .collect()
    }
}

/// `peer add`'s record, if it may be a peer of this host. `Request::from_line`
/// checked what the config file's peers are checked for (the same functions);
/// this adds what only the daemon knows: not our NID, not our identifier prefix
/// (`ilnp_core::PeerRecord::check`).
fn peer_record(
    name: String,
    nid: &ctl::Spelled<Nid>,
    locators: &[ctl::PeerLocatorArg],
    local_nid: Nid,
    id_prefix: Locator,
) -> Result<PeerRecord> {
    let locators = locators.iter().map(|l| PeerLocator { loc: l.l64.value, pref: l.pref }).collect();
    let r = PeerRecord { name, nid: nid.value, locators };
    r.check(local_nid, id_prefix).map_err(|e| anyhow!("peer add: {e}"))?;
    Ok(r)
}

fn peer_state(s: PeerState) -> ctl::PeerState {
    match s {
        PeerState::Ilnp => ctl::PeerState::Ilnp,
        PeerState::NonIlnp => ctl::PeerState::NonIlnp,
        PeerState::Probing => ctl::PeerState::Probing,
        PeerState::Fallback => ctl::PeerState::Fallback,
    }
}

fn fallback_reason(r: FallbackReason) -> ctl::FallbackReason {
    match r {
        FallbackReason::ParameterProblem => ctl::FallbackReason::ParameterProblem,
        FallbackReason::NoAnswer => ctl::FallbackReason::NoAnswer,
    }
}

fn hex(n: &Nonce) -> String {
    n.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::peers::{load_hosts_str, load_toml_str};

    const ME: Nid = Nid(0x0200_00ff_fe00_000c);
    const ID_PREFIX: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;

    /// `peer add NAME NID L64` as the daemon answers it: the request line parsed,
    /// then the record checked.
    fn peer_add(nid: &str, l64: &str) -> Result<PeerRecord, String> {
        let line = serde_json::json!({"cmd": "peer_add", "name": "mn", "nid": nid, "locators": [{"l64": l64}]});
        match Request::from_line(&line.to_string()).map_err(|e| e.to_string())? {
            Request::PeerAdd { name, nid, locators } => {
                peer_record(name, &nid, &locators, ME, ID_PREFIX).map_err(|e| format!("{e:#}"))
            }
            r => panic!("{r:?}"),
        }
    }

    /// The rule's words, without the entry point's prefix (`peer_add: `, `peer add: `).
    fn rule(e: &str) -> &str {
        e.split_once(": ").map_or(e, |(_, r)| r)
    }

    #[test]
    fn peer_add_refuses_what_is_not_a_peer_of_ours() {
        assert!(peer_add("0200:00ff:fe00:000d", "2001:db8:b::/64").is_ok());
        let own = peer_add("0200:00ff:fe00:000c", "2001:db8:b::/64").unwrap_err();
        assert_eq!(own, "peer add: nid 0200:00ff:fe00:000c: this host's own NID; a peer is another node");
        let idp = peer_add("0200:00ff:fe00:000d", "fd69:6c6e:7000::/64").unwrap_err();
        assert!(idp.starts_with("peer add: l64 fd69:6c6e:7000:0000: this host's identifier prefix"), "{idp}");
    }

    /// The config file's peers (TOML `[[peer]]`, hosts form) and `peer add` refuse
    /// the same inputs with the same words.
    #[test]
    fn config_and_peer_add_refuse_the_same_inputs_alike() {
        let good_nid = "0200:00ff:fe00:000d";
        let good_l64 = "2001:db8:b::/64";
        let bad = [
            ("0300:0000:0000:0001", good_l64, "the group (g) bit is set"),
            ("0000:0000:0000:0000", good_l64, "the all-zero NID"),
            ("ffff:ffff:ffff:ffff", good_l64, "the all-ones NID"),
            ("zz", good_l64, "expected four colon-separated"),
            (good_nid, "2001:db8:b::/48", "prefix length /48"),
            (good_nid, "ff02::/64", "multicast prefix"),
            (good_nid, "fe80::/64", "link-local prefix"),
            (good_nid, "::/64", "the all-zero locator"),
            (good_nid, "2001:db8:b::1/64", "lower 64 bits"),
        ];
        for (nid, l64, why) in bad {
            let ctl = peer_add(nid, l64).unwrap_err();
            let want = rule(&ctl);
            assert!(want.contains(why) && (want.contains(nid) || want.contains(l64) || !want.contains('"')), "{ctl}");
            let toml = format!("[[peer]]\nname = \"mn\"\nnid = \"{nid}\"\nlocators = [{{ l64 = \"{l64}\" }}]\n");
            let t = load_toml_str(&toml, "p.toml").unwrap_err();
            assert_eq!(t.message, format!("peer \"mn\": {want}"), "TOML {nid} {l64}");
            let h = load_hosts_str(&format!("{l64}|10,{nid} mn\n"), "hosts").unwrap_err();
            assert_eq!(h.message, want, "hosts {nid} {l64}");
        }
    }

    /// The reply's states say what the core's names said (what the daemon sent when
    /// it took them through serde_json).
    #[test]
    fn reply_states_are_the_cores_names() {
        for s in PeerState::ALL {
            assert_eq!(peer_state(*s).as_str(), s.as_str());
            assert_eq!(serde_json::to_value(peer_state(*s)).unwrap(), serde_json::to_value(s).unwrap());
        }
        for r in FallbackReason::ALL {
            assert_eq!(serde_json::to_value(fallback_reason(*r)).unwrap(), serde_json::to_value(r).unwrap());
        }
    }

    #[test]
    fn nonces_in_hex() {
        assert_eq!(hex(&Nonce::from_slice(&[0x70, 0x1d, 0x80, 0xb0]).unwrap()), "701d80b0");
    }
}
