//! The protocol core itself: `Core` owns the sub-machines and is the shell's one
//! handle; its entry points run the sub-machines and the exit pass (`finish`).

use crate::action::{drop_packet, Action};
use crate::admission::{self, AnswerHint};
use crate::balance;
use crate::challenge;
use crate::config::CoreConfig;
use crate::event::{DropReason, Event, Stats};
use crate::fallback;
use crate::ilcc::{self, IlccKey, IlccView};
use crate::local::LocalLocators;
use crate::nids;
use crate::nonce_key::random_nonce;
use crate::peers::{PeerInfo, PeerRecord, PeerSource};
use crate::v4path;
use ilnp_wire::translate::Csum;
use ilnp_wire::{Nid, Nonce};
use std::collections::BTreeMap;
use std::time::Instant;

pub struct Core {
    pub(crate) cfg: CoreConfig,
    pub(crate) rng: Box<dyn rand_core::RngCore + Send>,
    pub(crate) ilcc: ilcc::Ilcc,
    pub(crate) peers: BTreeMap<Nid, PeerInfo>,
    pub(crate) local: LocalLocators,
    pub(crate) stats: Stats,
    pub(crate) challenges: challenge::Challenges,
    pub(crate) balance: balance::Balancer,
    pub(crate) fallback: fallback::Fallback,
    pub(crate) admission: admission::AdmissionState,
    pub(crate) v4: v4path::V4Paths,
    /// the temporary NIDs (`nids.rs`)
    pub(crate) nids: nids::LocalNids,
}

impl Core {
    pub fn new(cfg: CoreConfig, rng: Box<dyn rand_core::RngCore + Send>) -> Core {
        let (max, idle) = (cfg.ilcc_max_entries, cfg.idle_timeout);
        let local = LocalLocators::new(cfg.handoff, cfg.soft_quiet_period);
        let balance = balance::Balancer::new(cfg.local_nid);
        let fallback = fallback::Fallback::default();
        let ilcc = ilcc::Ilcc::new(max, cfg.ilcc_embryonic_max, idle);
        let admission = admission::AdmissionState::new(cfg.hello_rate_pps, cfg.hello_burst);
        Core {
            cfg,
            rng,
            ilcc,
            peers: BTreeMap::new(),
            local,
            stats: Stats::default(),
            challenges: challenge::Challenges::default(),
            balance,
            fallback,
            admission,
            v4: v4path::V4Paths::default(),
            nids: nids::LocalNids::default(),
        }
    }

    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    pub(crate) fn drop(&mut self, out: &mut Vec<Action>, reason: DropReason, detail: String) {
        drop_packet(&mut self.stats, out, reason, detail);
    }

    pub(crate) fn new_nonce(&mut self) -> Nonce {
        random_nonce(&mut *self.rng, self.cfg.nonce_len)
    }

    // ---------------------------------------------------------------- peers

    pub fn add_peer(&mut self, peer: PeerRecord) {
        let info = PeerInfo {
            record: peer,
            non_ilnp: false,
            source: PeerSource::Static,
            expires: None,
            ttl_s: None,
            lu_failed: false,
        };
        self.peers.insert(info.record.nid, info);
    }

    pub fn del_peer(&mut self, nid: Nid) -> bool {
        self.fallback.forget(nid);
        self.peers.remove(&nid).is_some()
    }

    pub fn peers(&self) -> impl Iterator<Item = &PeerInfo> {
        self.peers.values()
    }

    // ---------------------------------------------------------------- packets
    // Every entry point that may change an ILCC entry ends with `ilcc.tidy()`, so
    // `poll_timeout` stays a peek.

    /// A wire-form packet an uplink punted to the daemon.
    pub fn handle_inbound(&mut self, now: Instant, pkt: &[u8], csum: Csum) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_inbound_into(now, pkt, csum, &mut out);
        out
    }

    /// `handle_inbound` into a buffer of the caller's (cleared first): a shell
    /// handling packet after packet keeps one allocation instead of one per call.
    pub fn handle_inbound_into(&mut self, now: Instant, pkt: &[u8], csum: Csum, out: &mut Vec<Action>) {
        out.clear();
        self.inbound(now, pkt, csum, out);
        self.ilcc.tidy();
        self.finish(out);
    }

    /// An identifier-form packet the kernel routed to ilnp0.
    pub fn handle_outbound(&mut self, now: Instant, pkt: &[u8], csum: Csum) -> Vec<Action> {
        self.handle_outbound_hinted(now, pkt, csum, &mut |_| None)
    }

    /// `handle_outbound` for a shell whose fast path keeps answer hints: `hints` is
    /// asked (at most once, only for a NID with no entry under admission = socket:
    /// our stack's answer to it, or the entry we open to it, which takes the nonce a
    /// stateless answer carried) where that NID's last unadmitted packet came from.
    pub fn handle_outbound_hinted(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        hints: &mut dyn FnMut(Nid) -> Option<AnswerHint>,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_outbound_into(now, pkt, csum, hints, &mut out);
        out
    }

    /// `handle_outbound_hinted` into a buffer of the caller's (cleared first), as
    /// `handle_inbound_into`.
    pub fn handle_outbound_into(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        hints: &mut dyn FnMut(Nid) -> Option<AnswerHint>,
        out: &mut Vec<Action>,
    ) {
        out.clear();
        self.outbound(now, pkt, csum, hints, out);
        self.ilcc.tidy();
        self.finish(out);
    }

    /// The fast path saw traffic for the entry `key`: keep it alive.
    pub fn note_activity(&mut self, key: IlccKey, now: Instant) {
        if let Some(e) = self.ilcc.get_mut(&key) {
            e.last_used = now;
        }
        self.ilcc.tidy();
    }

    // ---------------------------------------------------------------- inspection

    /// The ILCC, read-only: its entries (`Ilcc::iter`), one entry in O(1)
    /// (`Ilcc::get`: what the fast path's `ilnp_ilcc` lookup answers, for shells that
    /// model it; the simulator's admission check, like the ingress program's, applies
    /// only without an entry).
    pub fn ilcc(&self) -> &ilcc::Ilcc {
        &self.ilcc
    }

    /// The transparent fallback, read-only: who is reached as plain IPv6
    /// (`Fallback::punted`) and how (`Fallback::view`).
    pub fn fallback(&self) -> &fallback::Fallback {
        &self.fallback
    }

    /// The balancing configuration and tables, read-only (`Balancer::view`).
    pub fn balancer(&self) -> &balance::Balancer {
        &self.balance
    }

    /// This host's locators, read-only (`LocalLocators::all`, `last_rx`, `best`).
    /// Shells change them only through `set_local_locators` and
    /// `note_local_activity`, which keep the ILCC in step.
    pub fn local(&self) -> &LocalLocators {
        &self.local
    }

    /// ILCC entries with their idle time and age at `now`, for display.
    pub fn ilcc_view(&self, now: Instant) -> Vec<IlccView> {
        let mut v: Vec<IlccView> = self.ilcc.iter().map(|e| IlccView::new(e, now)).collect();
        v.sort_by_key(|e| e.key());
        v
    }

    pub fn flush_ilcc(&mut self) -> Vec<Action> {
        let keys = self.ilcc.clear();
        let mut out = keys
            .into_iter()
            .flat_map(|k| {
                [Action::IlccRemove(k), Action::Event(Event::PeerRemoved { nid: k.remote, reason: "flushed" })]
            })
            .collect();
        self.finish(&mut out);
        out
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The exit pass of every entry point over what it produced: challenged peers'
    /// fast-path entries masked, balancing tables followed, packets to v4 paths
    /// turned into datagrams.
    pub(crate) fn finish(&mut self, out: &mut Vec<Action>) {
        self.challenges.mask(out);
        let (balance, cx) = self.balance_parts();
        balance.follow(&cx, out);
        v4path::route(&self.ilcc, self.cfg.local_nid, out);
    }
}
