//! Transparent fallback (issue #10 item 4): a correspondent found not to speak
//! ILNPv6 is still reached through its identifier address, as plain IPv6 to its
//! `L64:NID` without the nonce (`translate::{to_plain, from_plain}`).
//!
//! Two signals (`CoreConfig::fallback`; off = fail fast with EHOSTUNREACH):
//! * **Parameter Problem** code 2 pointing at our nonce option, quoting our nonce
//!   (`icmp.rs`): a node without ILNP processing discards the packet and says so.
//! * **No answer**: an initiator entry whose correspondent has not shown a nonce
//!   `fallback_probe_after` after the session began, when the application sends
//!   again (its own retransmission: no timer of ours), gets one plain ICMPv6 Echo
//!   Request to the peer's `L64:NID` (a middlebox may drop packets with Destination
//!   Options silently). An Echo Reply with our identifier → fallback. Any ILNP
//!   packet from the peer (its nonce) cancels the probe or ends the fallback.
//!
//! With the probe on, an initiator's entry reaches the fast path only once the
//! peer has answered, so the application's retransmissions to a silent peer come
//! to the core (`outbound.rs`).
//!
//! The fast path punts the peer's plain packets to the slow path
//! (`Action::PlainPeerUpsert` → BPF `ilnp_plain_peers`); it has no ILCC entry, so
//! our packets to it miss the egress program and come here too.

use crate::action::{drop_packet, Action};
use crate::config::CoreConfig;
use crate::event::{DropReason, Event, Outcome, Stats};
use crate::ilcc::{Ilcc, IlccKey};
use crate::local::LocalLocators;
use ilnp_wire::classify::Plain;
use ilnp_wire::icmpv6;
use ilnp_wire::ipv6::{self, NextHeader};
use ilnp_wire::named_enum;
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{ilnp_addr, split_addr, Locator, Nid};
use rand_core::RngCore;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

/// What the probe's Echo Request carries (and its reply echoes).
const PROBE_BODY: &[u8] = b"ilnp fallback probe";

named_enum! {
    #[serde_names]
    /// Why a correspondent is reached as plain IPv6.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
    pub enum FallbackReason {
        /// Parameter Problem code 2 at our nonce option
        ParameterProblem = "parameter_problem",
        /// no ILNP answer, but its `L64:NID` answered a plain Echo Request
        NoAnswer = "no_answer",
    }
}

named_enum! {
    #[serde_names]
    /// How a peer with a record is reached (`ilnpctl peer show`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
    pub enum PeerState {
        /// ILNPv6 (or not tried yet)
        Ilnp = "ilnp",
        /// not ILNPv6-capable and fallback is off: the application fails at once
        NonIlnp = "non-ilnp",
        /// no ILNP answer yet; a plain Echo Request to its `L64:NID` is out
        Probing = "probing",
        /// not ILNPv6-capable: plain IPv6 for its identifier address
        Fallback = "fallback",
    }
}

/// A correspondent reached as plain IPv6, for display.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FallbackView {
    pub reason: FallbackReason,
    /// its `L64:NID`, where our packets go
    pub address: std::net::Ipv6Addr,
    pub since_s: u64,
    pub pkts_out: u64,
    pub pkts_in: u64,
}

#[derive(Clone, Debug)]
pub(crate) enum State {
    Probing { ident: u16, remote: Locator, sent: Instant },
    Plain { remote: Locator, reason: FallbackReason, since: Instant, pkts_out: u64, pkts_in: u64 },
}

/// Per-peer fallback state; bounded by the peer records (only an initiator, which
/// needs a record, falls back). The sub-machine owns it; the rest of the core's
/// state it reads or changes comes in as arguments (`FallbackCx`).
#[derive(Debug, Default)]
pub struct Fallback {
    peers: BTreeMap<Nid, State>,
}

/// The rest of the core's state the fallback reads or changes, lent by `Core` for
/// one call (disjoint borrows of its fields).
pub(crate) struct FallbackCx<'a> {
    pub cfg: &'a CoreConfig,
    pub ilcc: &'a Ilcc,
    pub stats: &'a mut Stats,
    pub local: &'a LocalLocators,
    pub rng: &'a mut dyn RngCore,
}

/// What `Fallback::inbound` made of a plain packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inbound {
    /// not a fallback peer's: ILNP as usual
    NotOurs,
    /// taken (delivered, or dropped and counted)
    Taken,
    /// the Echo Reply to the probe of `nid` at `remote`: the caller starts its
    /// fallback (`FallbackReason::NoAnswer`)
    ProbeAnswered { nid: Nid, remote: Locator },
}

/// A silent correspondent is probed (`fallback_probe_after`).
pub(crate) fn probing_on(cfg: &CoreConfig) -> bool {
    cfg.fallback && !cfg.fallback_probe_after.is_zero()
}

impl Fallback {
    /// How `nid` is reached; `non_ilnp`: its record says it is not ILNPv6-capable.
    pub(crate) fn peer_state(&self, nid: Nid, non_ilnp: bool) -> PeerState {
        match self.peers.get(&nid) {
            Some(State::Plain { .. }) => PeerState::Fallback,
            Some(State::Probing { .. }) => PeerState::Probing,
            None if non_ilnp => PeerState::NonIlnp,
            None => PeerState::Ilnp,
        }
    }

    /// The fallback of `nid`, if it is reached as plain IPv6.
    pub fn view(&self, nid: Nid, now: Instant) -> Option<FallbackView> {
        match self.peers.get(&nid)? {
            State::Plain { remote, reason, since, pkts_out, pkts_in } => Some(FallbackView {
                reason: *reason,
                address: ilnp_addr(*remote, nid),
                since_s: now.saturating_duration_since(*since).as_secs(),
                pkts_out: *pkts_out,
                pkts_in: *pkts_in,
            }),
            State::Probing { .. } => None,
        }
    }

    /// From now on `nid` is plain IPv6 at `remote:nid` (its ILCC entry is the
    /// caller's to remove first).
    pub(crate) fn start(
        &mut self,
        stats: &mut Stats,
        now: Instant,
        nid: Nid,
        remote: Locator,
        reason: FallbackReason,
        out: &mut Vec<Action>,
    ) {
        self.restore(now, nid, remote, reason, out);
        stats.bump(Outcome::FallbackStarted);
        out.push(Action::Event(Event::PeerFallback { nid, reason: reason.as_str(), address: ilnp_addr(remote, nid) }));
    }

    /// The peer showed a nonce: it speaks ILNPv6 (after all, or again).
    pub(crate) fn end(&mut self, stats: &mut Stats, nid: Nid, out: &mut Vec<Action>) {
        if let Some(s) = self.peers.remove(&nid) {
            if matches!(s, State::Plain { .. }) {
                stats.bump(Outcome::FallbackEnded);
            }
            out.push(Action::PlainPeerRemove(nid));
        }
    }

    /// The correspondents reached as plain IPv6: (NID, its locator, why).
    pub(crate) fn plain(&self) -> impl Iterator<Item = (Nid, Locator, FallbackReason)> + '_ {
        self.peers.iter().filter_map(|(n, s)| match s {
            State::Plain { remote, reason, .. } => Some((*n, *remote, *reason)),
            State::Probing { .. } => None,
        })
    }

    /// The correspondents whose plain packets the fast path punts (in fallback, or
    /// probed).
    pub fn punted(&self) -> impl Iterator<Item = Nid> + '_ {
        self.peers.keys().copied()
    }

    /// `nid` is plain IPv6 at `remote:nid`, its plain packets punted: `start`'s
    /// state, and all of a fallback put back by a restarted daemon
    /// (`Core::restore`: neither counted nor reported again; the packet counts
    /// start at zero).
    pub(crate) fn restore(
        &mut self,
        now: Instant,
        nid: Nid,
        remote: Locator,
        reason: FallbackReason,
        out: &mut Vec<Action>,
    ) {
        self.peers.insert(nid, State::Plain { remote, reason, since: now, pkts_out: 0, pkts_in: 0 });
        out.push(Action::PlainPeerUpsert { nid, remote_loc: remote });
    }

    /// Forgets `nid`'s fallback with its record.
    pub(crate) fn forget(&mut self, nid: Nid) -> bool {
        self.peers.remove(&nid).is_some()
    }

    /// An identifier-form packet to `nid`: carried as plain IPv6 if `nid` is in
    /// fallback. False: not ours, ILNP as usual.
    pub(crate) fn outbound(
        &mut self,
        cx: &mut FallbackCx<'_>,
        nid: Nid,
        pkt: &[u8],
        csum: Csum,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(State::Plain { remote, pkts_out, .. }) = self.peers.get_mut(&nid) else { return false };
        let remote = *remote;
        *pkts_out += 1;
        let Some(local) = cx.local.best() else {
            drop_packet(cx.stats, out, DropReason::NoLocalLocator, format!("plain packet to {nid}"));
            return true;
        };
        match translate::to_plain(pkt, cx.cfg.id_prefix, local, remote, csum) {
            Ok(p) => {
                cx.stats.bump(Outcome::FallbackPktsOut);
                out.push(Action::SendWire { pkt: p, uplink: cx.local.uplink_of(local) });
            }
            Err(e) => drop_packet(cx.stats, out, DropReason::OutMalformed, format!("{e}: plain packet to {nid}")),
        }
        true
    }

    /// A plain packet the fast path punted: from a fallback peer → identifier form;
    /// the Echo Reply to a probe → `Inbound::ProbeAnswered`.
    pub(crate) fn inbound(
        &mut self,
        cx: &mut FallbackCx<'_>,
        p: &Plain<'_>,
        csum: Csum,
        out: &mut Vec<Action>,
    ) -> Inbound {
        let (src_loc, nid) = split_addr(p.ip.src);
        let (dst_loc, dst_nid) = split_addr(p.ip.dst);
        let Some(state) = self.peers.get(&nid).cloned() else { return Inbound::NotOurs };
        let summary = || format!("{} -> {}", p.ip.src, p.ip.dst);
        let remote = match state {
            State::Plain { remote, .. } | State::Probing { remote, .. } => remote,
        };
        // to the stable NID, or to the NID of ours a probing entry talks from
        let stable = cx.cfg.local_nid;
        let ours = dst_nid == stable || cx.ilcc.get(&IlccKey::new(nid, dst_nid, stable)).is_some();
        if !ours || src_loc != remote || cx.local.accepts(dst_loc).is_err() {
            drop_packet(cx.stats, out, DropReason::FallbackUnexpected, summary());
            return Inbound::Taken;
        }
        match state {
            State::Probing { ident, .. } => {
                if is_probe_reply(p.bytes(), ident) {
                    return Inbound::ProbeAnswered { nid, remote };
                }
                drop_packet(cx.stats, out, DropReason::FallbackUnexpected, summary());
            }
            State::Plain { .. } => match translate::from_plain(p.bytes(), cx.cfg.id_prefix, csum) {
                Ok((ident, _)) => {
                    if let Some(State::Plain { pkts_in, .. }) = self.peers.get_mut(&nid) {
                        *pkts_in += 1;
                    }
                    cx.stats.bump(Outcome::FallbackPktsIn);
                    out.push(Action::DeliverLocal(ident));
                }
                Err(e) => drop_packet(cx.stats, out, DropReason::Malformed, format!("{e}: {}", summary())),
            },
        }
        Inbound::Taken
    }

    /// After an ILNP packet of the entry `key` left: if the session is old enough and
    /// the peer never showed its nonce, ask its `L64:NID` over plain IPv6 whether it
    /// is there.
    pub(crate) fn maybe_probe(&mut self, cx: &mut FallbackCx<'_>, now: Instant, key: IlccKey, out: &mut Vec<Action>) {
        let after = cx.cfg.fallback_probe_after;
        if !probing_on(cx.cfg) {
            return;
        }
        let nid = key.remote;
        let Some(e) = cx.ilcc.get(&key) else { return };
        if !e.initiator || e.nonce_rx.is_some() || now.saturating_duration_since(e.created) < after {
            return;
        }
        if let Some(State::Probing { sent, .. }) = self.peers.get(&nid) {
            if now.saturating_duration_since(*sent) < after {
                return; // one probe per interval
            }
        }
        let (local, Some(remote)) = (e.local_locator, e.best_remote().map(|r| r.loc)) else { return };
        let ours = e.ours(cx.cfg.local_nid);
        let ident = cx.rng.next_u32() as u16;
        let probe = icmpv6::Repr {
            msg_type: icmpv6::Icmpv6Type::ECHO_REQUEST,
            code: 0,
            data_word: u32::from(ident) << 16 | 1,
            body: PROBE_BODY,
        }
        .packet(ilnp_addr(local, ours), ilnp_addr(remote, nid), 64, None);
        self.peers.insert(nid, State::Probing { ident, remote, sent: now });
        cx.stats.bump(Outcome::FallbackProbeSent);
        out.push(Action::PlainPeerUpsert { nid, remote_loc: remote });
        out.push(Action::SendWire { pkt: probe, uplink: cx.local.uplink_of(local) });
    }

    /// The peer's nonce arrived: a probe for it is moot.
    pub(crate) fn cancel_probe(&mut self, nid: Nid, out: &mut Vec<Action>) {
        if matches!(self.peers.get(&nid), Some(State::Probing { .. })) {
            self.peers.remove(&nid);
            out.push(Action::PlainPeerRemove(nid));
        }
    }
}

/// An Echo Reply carrying our probe's identifier and body.
fn is_probe_reply(pkt: &[u8], ident: u16) -> bool {
    let Ok((NextHeader::ICMPV6, off)) = ipv6::upper_layer(pkt) else { return false };
    let Some(m) = pkt.get(off..).and_then(|b| icmpv6::Message::new_checked(b).ok()) else { return false };
    m.msg_type() == icmpv6::Icmpv6Type::ECHO_REPLY
        && (m.data_word() >> 16) as u16 == ident
        && m.invoking_packet() == PROBE_BODY
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Core;
    use crate::tests::{core, core_with, delivered, udp, wire, LA, LB, NA, NB, P};

    /// A core with the no-answer probe on, as ilnpd runs it.
    fn probing(nid: Nid, loc: Locator, seed: u64, peer: (Nid, Locator)) -> Core {
        core_with(nid, loc, seed, Some(peer), |c| c.fallback_probe_after = Duration::from_millis(900))
    }
    use ilnp_wire::test_support as ts;
    use ilnp_wire::{classify, Packet};
    use std::time::Duration;

    fn plain_ups(out: &[Action]) -> Vec<(Nid, Locator)> {
        out.iter()
            .filter_map(|a| match a {
                Action::PlainPeerUpsert { nid, remote_loc } => Some((*nid, *remote_loc)),
                _ => None,
            })
            .collect()
    }

    /// B's kernel (no ILNP) answers A's first packet with Parameter Problem code 2
    /// at the nonce option; returns A's actions and the packet A sent.
    fn rejected(a: &mut Core, now: Instant, first: &[u8]) -> Vec<Action> {
        let w = wire(&a.handle_outbound(now, first, Csum::Complete)).pop().unwrap();
        let pp = ts::icmp_error(ilnp_addr(LB, NB), ilnp_addr(LA, NA), icmpv6::Icmpv6Type::PARAM_PROBLEM, 2, 42, &w);
        a.handle_inbound(now, &pp, Csum::Complete)
    }

    #[test]
    fn parameter_problem_turns_the_session_into_plain_ipv6() {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let syn = udp(NA, NB, b"syn");
        let out = rejected(&mut a, now, &syn);
        assert!(out.contains(&Action::IlccRemove(IlccKey::stable(NB))));
        assert_eq!(plain_ups(&out), [(NB, LB)], "the fast path punts B's plain packets");
        assert!(delivered(&out).is_empty(), "the application is not failed");
        // the rejected packet itself goes again, plain
        let resent = wire(&out);
        assert_eq!(resent, [translate::to_plain(&syn, P, LA, LB, Csum::Complete).unwrap()]);
        assert!(matches!(classify(&resent[0]), Ok(Packet::Plain(_))), "no nonce");
        assert_eq!(a.peer_state(NB), PeerState::Fallback);
        assert_eq!((a.stats().get("fallback_started"), a.stats().get("non_ilnp_peer")), (1, 1));
        assert!(out.iter().any(|x| matches!(x, Action::Event(Event::PeerFallback { nid: NB, .. }))));

        // later packets: plain both ways, no ILCC entry
        let out = a.handle_outbound(now, &udp(NA, NB, b"more"), Csum::Complete);
        let w = wire(&out).pop().unwrap();
        let p = ipv6::Packet::new_checked(&w[..]).unwrap();
        assert_eq!((p.src(), p.dst()), (ilnp_addr(LA, NA), ilnp_addr(LB, NB)));
        assert!(a.ilcc.iter().next().is_none());
        let reply = ts::udp(ilnp_addr(LB, NB), ilnp_addr(LA, NA), 0x1770, 0x9c41, b"reply");
        let out = a.handle_inbound(now, &reply, Csum::Complete);
        assert_eq!(delivered(&out), [ts::udp(ilnp_addr(P, NB), ilnp_addr(P, NA), 0x1770, 0x9c41, b"reply")]);
        let v = a.fallback.view(NB, now + Duration::from_secs(2)).unwrap();
        assert_eq!(
            (v.reason, v.address, v.since_s, v.pkts_out, v.pkts_in),
            (FallbackReason::ParameterProblem, ilnp_addr(LB, NB), 2, 2, 1)
        );
        // from another locator of B: not the session's
        let other = ts::udp(ilnp_addr(Locator(0x2001_0db8_0077_0000), NB), ilnp_addr(LA, NA), 1, 2, b"x");
        assert!(delivered(&a.handle_inbound(now, &other, Csum::Complete)).is_empty());
        assert_eq!(a.stats().get("fallback_unexpected"), 1);
    }

    #[test]
    fn a_restarted_core_goes_on_with_the_fallback() {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        rejected(&mut a, now, &udp(NA, NB, b"syn"));
        let snap = a.snapshot(now);
        let back: crate::snapshot::CoreSnapshot = serde_json::from_str(&serde_json::to_string(&snap).unwrap()).unwrap();
        assert_eq!(back, snap);
        let mut r = core(NA, LA, 3, Some((NB, LB)));
        let out = r.restore(now, &back).unwrap();
        assert_eq!(plain_ups(&out), [(NB, LB)], "the fast path punts B's plain packets again");
        assert_eq!(r.peer_state(NB), PeerState::Fallback);
        assert_eq!(r.fallback.punted().collect::<Vec<_>>(), [NB]);
        assert_eq!(r.stats().get("fallback_started"), 0, "a restore is not a new fallback");
        // both ways at once, without a packet of ours first
        let reply = ts::udp(ilnp_addr(LB, NB), ilnp_addr(LA, NA), 0x1770, 0x9c41, b"reply");
        let out = r.handle_inbound(now, &reply, Csum::Complete);
        assert_eq!(delivered(&out), [ts::udp(ilnp_addr(P, NB), ilnp_addr(P, NA), 0x1770, 0x9c41, b"reply")]);
        let more = udp(NA, NB, b"more");
        let out = r.handle_outbound(now, &more, Csum::Complete);
        assert_eq!(wire(&out), [translate::to_plain(&more, P, LA, LB, Csum::Complete).unwrap()]);

        // a file of an earlier build (no `fallback`) reads as none
        let mut v = serde_json::to_value(&snap).unwrap();
        v.as_object_mut().unwrap().remove("fallback").expect("written");
        assert!(serde_json::from_value::<crate::snapshot::CoreSnapshot>(v).unwrap().fallback.is_empty());
        // fallback configured off since: B is not ILNPv6-capable, nothing punted
        let mut off = core_with(NA, LA, 4, Some((NB, LB)), |c| c.fallback = false);
        assert!(plain_ups(&off.restore(now, &snap).unwrap()).is_empty());
        assert_eq!(off.peer_state(NB), PeerState::NonIlnp);
        assert_eq!(off.fallback.punted().count(), 0);
    }

    #[test]
    fn an_ilnp_packet_from_the_peer_ends_the_fallback() {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        rejected(&mut a, now, &udp(NA, NB, b"syn"));
        // B installs ilnpd and opens a session to A
        let mut b = core(NB, LB, 2, Some((NA, LA)));
        let w = wire(&b.handle_outbound(now, &udp(NB, NA, b"hello"), Csum::Complete)).pop().unwrap();
        let out = a.handle_inbound(now, &w, Csum::Complete);
        assert!(out.contains(&Action::PlainPeerRemove(NB)));
        assert_eq!(delivered(&out).len(), 1);
        assert_eq!(a.peer_state(NB), PeerState::Ilnp);
        assert_eq!(a.stats().get("fallback_ended"), 1);
        let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
        assert!(classify(&w).unwrap().nonce().is_some(), "ILNP again");
    }

    #[test]
    fn silence_then_an_echo_reply_means_fallback() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut a = probing(NA, LA, 1, (NB, LB));
        // the fast path gets the entry only once B has answered
        let out = a.handle_outbound(t0, &udp(NA, NB, b"first"), Csum::Complete);
        assert!(!out.iter().any(|x| matches!(x, Action::IlccUpsert(_))));
        let syn = udp(NA, NB, b"syn");
        a.handle_outbound(t0, &syn, Csum::Complete);
        // the application retransmits before the probe interval: no probe yet
        let out = a.handle_outbound(t0 + ms(500), &syn, Csum::Complete);
        assert_eq!(wire(&out).len(), 1);
        assert_eq!(a.peer_state(NB), PeerState::Ilnp);
        // ... and after it: the ILNP packet, then one plain Echo Request to B's L64:NID
        let out = a.handle_outbound(t0 + ms(1000), &syn, Csum::Complete);
        let sent = wire(&out);
        assert_eq!(sent.len(), 2);
        let probe = &sent[1];
        assert!(matches!(classify(probe), Ok(Packet::Plain(_))));
        assert_eq!(probe[40], icmpv6::Icmpv6Type::ECHO_REQUEST.0);
        assert_eq!(&probe[24..40], &ilnp_addr(LB, NB).octets());
        assert_eq!(plain_ups(&out), [(NB, LB)]);
        assert_eq!(a.peer_state(NB), PeerState::Probing);
        // a second retransmission within the interval sends no second probe
        assert_eq!(wire(&a.handle_outbound(t0 + ms(1200), &syn, Csum::Complete)).len(), 1);
        assert_eq!(a.stats().get("fallback_probe_sent"), 1);
        // a stray plain packet from B while probing is not the reply
        let stray = ts::udp(ilnp_addr(LB, NB), ilnp_addr(LA, NA), 1, 2, b"x");
        assert!(delivered(&a.handle_inbound(t0 + ms(1210), &stray, Csum::Complete)).is_empty());
        assert_eq!(a.peer_state(NB), PeerState::Probing);
        // B's kernel answers the echo
        let word = u32::from_be_bytes([probe[44], probe[45], probe[46], probe[47]]);
        let reply =
            icmpv6::Repr { msg_type: icmpv6::Icmpv6Type::ECHO_REPLY, code: 0, data_word: word, body: PROBE_BODY }
                .packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), 64, None);
        let out = a.handle_inbound(t0 + ms(1220), &reply, Csum::Complete);
        assert!(out.contains(&Action::IlccRemove(IlccKey::stable(NB))));
        assert_eq!(a.peer_state(NB), PeerState::Fallback);
        assert_eq!(a.fallback.view(NB, t0 + ms(1220)).unwrap().reason, FallbackReason::NoAnswer);
        let w = wire(&a.handle_outbound(t0 + ms(1300), &syn, Csum::Complete)).pop().unwrap();
        assert!(matches!(classify(&w), Ok(Packet::Plain(_))), "the next retransmission is plain");
    }

    #[test]
    fn an_ilnp_answer_cancels_the_probe() {
        let t0 = Instant::now();
        let mut a = probing(NA, LA, 1, (NB, LB));
        let mut b = core(NB, LB, 2, Some((NA, LA)));
        let syn = udp(NA, NB, b"syn");
        a.handle_outbound(t0, &syn, Csum::Complete); // lost
        let out = a.handle_outbound(t0 + Duration::from_secs(1), &syn, Csum::Complete);
        assert_eq!(a.peer_state(NB), PeerState::Probing);
        // the retransmission reaches B: its nonce-only packet answers
        let to_b = wire(&out)[0].clone();
        let answer = wire(&b.handle_inbound(t0 + Duration::from_secs(1), &to_b, Csum::Complete));
        let mut cancelled = false;
        for w in answer {
            cancelled |= a
                .handle_inbound(t0 + Duration::from_secs(1), &w, Csum::Complete)
                .contains(&Action::PlainPeerRemove(NB));
        }
        assert!(cancelled);
        assert_eq!(a.peer_state(NB), PeerState::Ilnp);
        assert_eq!(a.stats().get("fallback_started"), 0);
    }

    #[test]
    fn without_fallback_there_is_no_probe() {
        let t0 = Instant::now();
        let mut a = core_with(NA, LA, 1, Some((NB, LB)), |c| {
            c.fallback = false;
            c.fallback_probe_after = Duration::from_millis(900);
        });
        let syn = udp(NA, NB, b"syn");
        for s in 0..3 {
            let out = a.handle_outbound(t0 + Duration::from_secs(s), &syn, Csum::Complete);
            assert_eq!(wire(&out).len(), 1);
            assert!(plain_ups(&out).is_empty());
        }
        assert_eq!(a.stats().get("fallback_probe_sent"), 0);
    }
}
