//! Locator Updates (RFC 6743): sending with retransmission and backoff, receiving
//! (a correspondent moved), acknowledging.

use crate::action::Action;
use crate::config::HandoffMode;
use crate::event::{DropReason, Event, Outcome};
use crate::ilcc::{IlccKey, RemoteLocator};
use crate::locator::LocatorState;
use crate::machine::Core;
use ilnp_wire::classify::{endpoints, Lu};
use ilnp_wire::icmpv6::{linux49, LocatorUpdate, LuEntry, LuFormat, LuOperation};
use ilnp_wire::translate;
use ilnp_wire::{ilnp_addr, Error as WireError, Locator};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

impl Core {
    /// Sends (or gives up) the pending LUs among the entries `keys` that are due at `now`.
    pub(crate) fn send_due_lus(&mut self, now: Instant, keys: &[IlccKey]) -> Vec<Action> {
        let mut out = Vec::new();
        let entries = self.local.lu_entries(self.cfg.lu_lifetime_s);
        let lu_timers = self.cfg.lu;
        if entries.is_empty() {
            // no locator to advertise (every uplink down): nothing can be sent now, and
            // an LU left due would keep the timer due at `now` (the shell's loop would
            // spin). Wait one retransmission interval, without counting an attempt; a
            // locator that comes back starts its own LU (`apply_local_update`)
            for key in keys {
                let Some(e) = self.ilcc.get_mut(key) else { continue };
                let srtt = e.srtt_us.map(Duration::from_micros);
                if let Some(p) = e.pending_lu.as_mut().filter(|p| p.next_at <= now) {
                    p.next_at = now + lu_timers.rto(p.attempts.max(1), srtt);
                }
            }
            return out;
        }
        let local_nid = self.cfg.local_nid;
        let hard = self.cfg.handoff == HandoffMode::Hard;
        let mut failed = Vec::new();
        for key in keys {
            let Some(e) = self.ilcc.get_mut(key) else { continue };
            let Some(p) = e.pending_lu.as_ref() else { continue };
            if p.next_at > now {
                continue;
            }
            if p.attempts >= lu_timers.max_attempts {
                failed.push((e.nid, p.attempts));
                e.pending_lu = None;
                continue;
            }
            // first attempts go to the active locator; retries (or hard handoff,
            // where both ends may have moved) go to every known locator; a recovery
            // LU to where DNS says the peer is now (dns.rs)
            let targets: Vec<Locator> = if !p.candidates.is_empty() {
                p.candidates.iter().map(|r| r.loc).collect()
            } else if p.attempts == 0 && !hard {
                e.best_remote().map(|r| vec![r.loc]).unwrap_or_default()
            } else {
                e.remote_locators.iter().filter(|r| r.state != LocatorState::Expired).map(|r| r.loc).collect()
            };
            let src = ilnp_addr(e.local_locator, e.ours(local_nid));
            let srtt = e.srtt_us.map(Duration::from_micros);
            let Some(p) = e.pending_lu.as_mut() else { continue };
            if p.attempts == 0 {
                p.entries = entries.clone();
                p.first_sent = now;
            }
            p.attempts += 1;
            // RTT-based with backoff by default, or the prototypes' fixed interval (config.rs)
            p.next_at = now + lu_timers.rto(p.attempts, srtt);
            let lu = LocatorUpdate { operation: LuOperation::Advertisement, entries: p.entries.clone() };
            let linux49 = self.cfg.peer_linux49.contains(&e.nid);
            // from a locator the peer knows first, then from the new one (lu_sources)
            let known = p.known_local.filter(|k| self.local.works(*k));
            for from in lu_sources(e.local_locator, known) {
                let (src, uplink) = (ilnp_addr(from, ilnp_wire::split_addr(src).1), self.local.uplink_of(from));
                for &t in &targets {
                    if let Ok(pkt) = lu_wire(linux49, src, ilnp_addr(t, e.nid), &e.nonce_tx, &lu) {
                        out.push(Action::SendWire { pkt, uplink });
                    }
                }
            }
            out.push(Action::Event(Event::LuSent { nid: e.nid, attempt: p.attempts, locators: loc_list(&p.entries) }));
        }
        for (nid, attempts) in failed {
            if let Some(p) = self.peers.get_mut(&nid) {
                p.lu_failed = true; // a named peer may be found again through DNS (dns.rs)
            }
            self.stats.bump(Outcome::LuFailed);
            out.push(Action::Event(Event::LuFailed { nid, attempts }));
        }
        out
    }

    /// A Locator Update `classify` checked (malformed ones are counted by the caller).
    pub(crate) fn handle_lu(&mut self, now: Instant, packet: &Lu, out: &mut Vec<Action>) {
        let summary = || format!("{} -> {}", packet.ip.src, packet.ip.dst);
        let lu = packet.to_owned();
        let nonce = packet.nonce.map(|n| n.nonce);
        let ((src_loc, nid), (dst_loc, dst_nid)) = endpoints(&packet.ip);
        if !self.is_local_nid(dst_nid) {
            self.drop(out, DropReason::NotForUs, summary());
            return;
        }
        // the Linux 4.9 prototype's layout only from a peer marked so, checked as any LU
        let linux49 = self.cfg.peer_linux49.contains(&nid);
        if packet.lu.format() == LuFormat::Linux49 && !linux49 {
            self.drop(out, DropReason::LuLinux49Unmarked, summary());
            return;
        }
        let stable = self.cfg.local_nid;
        // the entry of the NID of ours it was sent to (none for another of ours)
        let key = IlccKey::new(nid, dst_nid, stable);
        let Some(e) = self.ilcc.get_mut(&key) else {
            self.drop(out, DropReason::LuUnknownPeer, summary());
            return;
        };
        if e.tier == crate::ilcc::Tier::Embryonic {
            self.drop(out, DropReason::LuEmbryonic, summary());
            return;
        }
        // the peer's own nonce; ours reflected only from a shared-nonce peer and only
        // on the ack of what we advertised (an observer of our direction saw ours)
        let Some(n) = nonce.filter(|n| e.accepts_reply_nonce(n)) else {
            let reason = if nonce == Some(e.nonce_tx) { DropReason::LuReflectedNonce } else { DropReason::LuBadNonce };
            self.drop(out, reason, summary());
            return;
        };
        if e.is_reflected(&n) {
            let acks_ours = lu.operation == LuOperation::Acknowledgement
                && (acks_pending(e, &lu.entries, linux49) || acked_last(e, &lu.entries, linux49));
            if !acks_ours {
                self.drop(out, DropReason::LuReflectedNonce, summary());
                return;
            }
            self.stats.bump(Outcome::NonceReflectedAccepted);
        }
        self.local.note_rx(dst_loc, now);
        if let Some(p) = self.peers.get_mut(&nid) {
            p.lu_failed = false; // the peer reached us with its nonce: LU state is live again
        }
        match lu.operation {
            LuOperation::Advertisement => {
                // replace the whole set (RFC 6743 §4); the preferred one becomes active.
                // A locator listed twice counts once (its best preference); at most
                // max_remote_locators are kept, the best by preference.
                let mut listed: Vec<&LuEntry> = lu.entries.iter().collect();
                listed.sort_by_key(|x| x.preference);
                let mut seen = BTreeSet::new();
                listed.retain(|x| seen.insert(x.locator));
                let ignored = listed.len().saturating_sub(self.cfg.max_remote_locators.max(1));
                listed.truncate(self.cfg.max_remote_locators.max(1));
                let mut remote: Vec<RemoteLocator> = listed
                    .into_iter()
                    .map(|x| RemoteLocator {
                        loc: x.locator,
                        pref: x.preference,
                        lifetime_s: x.lifetime,
                        state: LocatorState::Valid,
                        last_heard: if x.locator == src_loc { Some(now) } else { None },
                        // the advertisement carried the peer's own nonce from there
                        proven: (x.locator == src_loc).then_some(now),
                        // Lifetime 0: none given; the locator stays until the next LU
                        expires: (x.lifetime > 0).then(|| now + Duration::from_secs(u64::from(x.lifetime))),
                        // a NAT's observed path for a locator listed again stays
                        via: e.remote_locators.iter().find(|r| r.loc == x.locator).and_then(|r| r.via),
                        v4_heard: e.remote_locators.iter().any(|r| r.loc == x.locator && r.v4_heard),
                    })
                    .collect();
                remote.sort_by_key(|r| r.pref);
                let old_active = e.best_remote().map(|r| r.loc);
                e.remote_locators = remote;
                e.last_used = now;
                // a v4 path to answer on (v4path.rs), and a local locator of the
                // advertised locators' family
                let (v4, mut cx) = self.v4_parts();
                v4.observe(&mut cx, now, key, src_loc, out);
                self.fit_local(key);
                let Some(e) = self.ilcc.get_mut(&key) else { return };
                let best = e.best_remote().map(|r| r.loc).unwrap_or(src_loc);
                e.activate_remote(best);
                let ack = lu.ack();
                // ack from our active locator towards this peer (what our data uses), to
                // the preferred advertised one; the locator the LU reached if ours is gone
                let from = if self.local.is_usable(e.local_locator) { e.local_locator } else { dst_loc };
                let entries = loc_list(&lu.entries);
                let (src, dst) = (ilnp_addr(from, e.ours(stable)), ilnp_addr(best, nid));
                if let Ok(a) = lu_wire(linux49, src, dst, &e.nonce_tx, &ack) {
                    out.push(Action::SendWire { pkt: a, uplink: self.local.uplink_of(from) });
                }
                out.extend(e.snapshot().map(Action::IlccUpsert));
                if old_active != Some(best) {
                    // the path we were using is gone: what we sent on it may be stuck
                    // in transport backoff (after the ack, so the peer hears it first)
                    out.push(Action::NudgeTransport(nid));
                    self.stats.bump(Outcome::TransportNudge);
                }
                self.stats.bump(Outcome::LuReceived);
                if ignored > 0 {
                    self.stats.add(Outcome::LuLocatorsIgnored, ignored as u64);
                }
                out.push(Action::Event(Event::LuReceived { nid, locators: entries }));
            }
            LuOperation::Acknowledgement => {
                let matches = acks_pending(e, &lu.entries, linux49);
                if !matches && acked_last(e, &lu.entries, linux49) {
                    // the ack of a retransmission that crossed the first ack
                    self.stats.bump(Outcome::LuDuplicateAck);
                    return;
                }
                if !matches {
                    self.drop(out, DropReason::LuUnexpectedAck, summary());
                    return;
                }
                let p = e.pending_lu.take().expect("checked");
                if !p.candidates.is_empty() {
                    // recovery by re-resolution: only the peer's own nonce, from one of
                    // the locators DNS gave, moves the session there
                    if e.is_reflected(&n) || !p.candidates.iter().any(|r| r.loc == src_loc) {
                        e.pending_lu = Some(p);
                        self.drop(out, DropReason::LuUnexpectedAck, summary());
                        return;
                    }
                    if !e.has_remote(src_loc) {
                        e.remote_locators = p.candidates.clone();
                    }
                    e.activate_remote(src_loc);
                    self.stats.bump(Outcome::DnsPeerRecovered);
                    self.fit_local(key);
                    let Some(e) = self.ilcc.get_mut(&key) else { return };
                    out.extend(e.snapshot().map(Action::IlccUpsert));
                    out.push(Action::NudgeTransport(nid));
                    self.stats.bump(Outcome::TransportNudge);
                }
                let Some(e) = self.ilcc.get_mut(&key) else { return };
                let rtt = now.saturating_duration_since(p.first_sent);
                // a sample only when unambiguous (Karn): the first transmission was acked
                if p.attempts == 1 {
                    let sample = rtt.as_micros() as u64;
                    e.srtt_us = Some(e.srtt_us.map_or(sample, |s| (7 * s + sample) / 8));
                }
                e.last_acked_lu = Some(p.entries.clone());
                self.stats.bump(Outcome::LuAcked);
                out.push(Action::Event(Event::LuAcked { nid, rtt_us: rtt.as_micros() as u64, attempts: p.attempts }));
                let (v4, mut cx) = self.v4_parts();
                v4.observe(&mut cx, now, key, src_loc, out);
            }
        }
    }
}

/// An ack listing `entries` acknowledges the LU we sent and wait on.
fn acks_pending(e: &crate::ilcc::IlccEntry, entries: &[LuEntry], linux49: bool) -> bool {
    e.pending_lu.as_ref().is_some_and(|p| p.attempts > 0 && same_set(&p.entries, entries, linux49))
}

/// An ack listing `entries` acknowledges the LU last acked (a retransmission's).
fn acked_last(e: &crate::ilcc::IlccEntry, entries: &[LuEntry], linux49: bool) -> bool {
    e.last_acked_lu.as_ref().is_some_and(|l| same_set(l, entries, linux49))
}

/// An ack acknowledges the set we sent: the same entries (RFC 6743 §2: identical
/// but for Operation), or from a `linux49` peer the one locator we sent it (its
/// ack carries that L64 with its own constant prec and lifetime, ilnp6.c:1274).
fn same_set(sent: &[LuEntry], acked: &[LuEntry], linux49: bool) -> bool {
    if linux49 {
        linux49::advertised(sent).map(|e| e.locator) == acked.first().map(|e| e.locator)
    } else {
        sent == acked
    }
}

/// An LU packet in the layout the peer takes: RFC 6743's, or the Linux 4.9 prototype's.
fn lu_wire(
    linux49: bool,
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    nonce: &ilnp_wire::Nonce,
    lu: &LocatorUpdate,
) -> Result<Vec<u8>, WireError> {
    if linux49 {
        linux49::packet(src, dst, nonce, lu)
    } else {
        translate::lu_packet(src, dst, nonce, lu)
    }
}

/// The source locators of an LU, in sending order (docs/design/lu-source-locator.md).
/// `current`: the entry's local locator now (after the move); `known`: the one the
/// peer saw us on before, if it still works. While it does, the LU leaves from it
/// first: the peer checks the nonce before it meets a source locator it does not
/// know (a peer that drops those unread, the Linux 4.9 code, still gets it). Then
/// from the new one: a peer that learns our locators from source addresses learns
/// it, the new path's round trip times the ack (the first ack ends the LU, a second
/// is a duplicate), and a peer whose packets to the old locator no longer come back
/// still hears us. With the old one gone (hard handoff) only the new one is left.
pub(crate) fn lu_sources(current: Locator, known: Option<Locator>) -> Vec<Locator> {
    match known.filter(|k| *k != current && k.same_family(current)) {
        Some(k) => vec![k, current],
        None => vec![current],
    }
}

fn loc_list(entries: &[LuEntry]) -> Vec<String> {
    entries.iter().map(|e| format!("{}|{}", e.locator, e.preference)).collect()
}

/// The breakdown counter of a malformed Locator Update (`lu_malformed` counts them all).
pub(crate) fn lu_malformed_kind(e: &WireError) -> Outcome {
    match e {
        WireError::LuNoLocators => Outcome::LuMalformedNoLocators,
        WireError::LuLengthMismatch { .. } => Outcome::LuMalformedLengthMismatch,
        WireError::Truncated => Outcome::LuMalformedTruncated,
        WireError::BadChecksum => Outcome::LuMalformedBadChecksum,
        WireError::UnknownLuOperation { .. } => Outcome::LuMalformedUnknownOperation,
        _ => Outcome::LuMalformedOther,
    }
}

#[cfg(test)]
mod linux49_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{events, local, session, wire, LB, LB2, NB};
    use ilnp_wire::translate::Csum;

    #[test]
    fn malformed_lus_are_broken_down_by_wire_error() {
        assert_eq!(lu_malformed_kind(&WireError::LuNoLocators), Outcome::LuMalformedNoLocators);
        assert_eq!(lu_malformed_kind(&WireError::Truncated), Outcome::LuMalformedTruncated);
        assert_eq!(lu_malformed_kind(&WireError::BadChecksum), Outcome::LuMalformedBadChecksum);
        assert_eq!(lu_malformed_kind(&WireError::MoreThanOneNonce), Outcome::LuMalformedOther);
        let e = [LuEntry { locator: Locator(0x2001_0db8_0000_0001), preference: 7, lifetime: 0 }];
        assert_eq!(loc_list(&e), ["2001:0db8:0000:0001|7"]);
    }

    #[test]
    fn an_lu_that_moves_the_active_locator_nudges_transport_once() {
        let (mut a, mut b, _, _) = session();
        let t0 = Instant::now();
        let lu = wire(&b.set_local_locators(t0, vec![local(LB2)])).pop().unwrap();
        let out = a.handle_inbound(t0, &lu, Csum::Complete);
        let nudges: Vec<_> = out.iter().filter(|x| matches!(x, Action::NudgeTransport(n) if *n == NB)).collect();
        assert_eq!(nudges.len(), 1);
        let pos = |f: fn(&Action) -> bool| out.iter().position(f).unwrap();
        assert!(
            pos(|x| matches!(x, Action::SendWire { .. })) < pos(|x| matches!(x, Action::NudgeTransport(_))),
            "ack first"
        );
        assert_eq!(a.stats().get("transport_nudge"), 1);
        // the same set again (a retransmitted LU): the active locator did not move
        let out = a.handle_inbound(t0, &lu, Csum::Complete);
        assert!(!out.iter().any(|x| matches!(x, Action::NudgeTransport(_))));
        assert_eq!(a.stats().get("transport_nudge"), 1);
    }

    fn srcs(out: &[Action]) -> Vec<Locator> {
        wire(out).iter().map(|w| crate::tests::src_loc(w)).collect()
    }

    #[test]
    fn an_lu_leaves_from_the_locator_the_peer_knows_while_it_works_then_from_the_new() {
        let (_a, mut b, _, _) = session();
        let t0 = Instant::now();
        // B joins a second network (preferred): LB still works, A knows only LB
        let out = b.set_local_locators(t0, vec![local(LB), local(LB2)]);
        assert_eq!(srcs(&out), [LB, LB2], "from the known locator first, then the new one");
        assert_eq!(b.ilcc.iter().next().unwrap().local_locator, LB2, "data moves to the new one");
        // retransmissions alike
        let out = b.handle_timeout(t0 + Duration::from_millis(250));
        assert_eq!(srcs(&out), [LB, LB2]);
        // the old network stops offering LB (no router): the new one alone
        let mut gone = local(LB);
        gone.has_router = false;
        b.set_local_locators(t0 + Duration::from_millis(300), vec![gone, local(LB2)]);
        let out = b.handle_timeout(t0 + Duration::from_secs(5));
        assert!(!srcs(&out).is_empty());
        assert!(srcs(&out).iter().all(|l| *l == LB2), "{:?}", srcs(&out));
    }

    #[test]
    fn an_lu_after_a_hard_move_leaves_from_the_new_locator() {
        let (_a, mut b, _, _) = session();
        let t0 = Instant::now();
        // LB went away with its link: nothing the peer knows works
        let out = b.set_local_locators(t0, vec![local(LB2)]);
        assert_eq!(srcs(&out), [LB2]);
        let out = b.handle_timeout(t0 + Duration::from_millis(250));
        assert_eq!(srcs(&out), [LB2]);
    }

    #[test]
    fn a_second_move_before_the_ack_keeps_the_locator_the_peer_knows() {
        let (_a, mut b, _, _) = session();
        let t0 = Instant::now();
        let lb3 = Locator(0x2001_0db8_00f0_0000);
        b.set_local_locators(t0, vec![local(LB), local(LB2)]);
        // unacked, a third network: A still knows only LB
        let out = b.set_local_locators(t0 + Duration::from_millis(10), vec![local(LB), local(LB2), local(lb3)]);
        assert_eq!(srcs(&out), [LB, lb3], "not from LB2, which A never acknowledged");
    }

    #[test]
    fn lu_sources_order() {
        let (old, new) = (LB, LB2);
        assert_eq!(lu_sources(new, Some(old)), [old, new]);
        assert_eq!(lu_sources(new, None), [new]);
        assert_eq!(lu_sources(new, Some(new)), [new], "no move: one copy");
        let v4: Locator = "v4:192.0.2.1:4500".parse().unwrap();
        assert_eq!(lu_sources(new, Some(v4)), [new], "another family is no source for it");
    }

    #[test]
    fn first_attempt_to_the_active_locator_retries_back_off() {
        let (_a, mut b, _, _) = session();
        let t0 = Instant::now();
        let out = b.set_local_locators(t0, vec![local(LB2)]);
        assert_eq!(wire(&out).len(), 1);
        assert!(events(&out).iter().any(|e| matches!(e, Event::LuSent { attempt: 1, .. })));
        // initial_rto 250 ms, then doubled
        assert!(wire(&b.handle_timeout(t0 + Duration::from_millis(249))).is_empty());
        let out = b.handle_timeout(t0 + Duration::from_millis(250));
        assert_eq!(wire(&out).len(), 1);
        assert!(events(&out).iter().any(|e| matches!(e, Event::LuSent { attempt: 2, .. })));
        assert!(wire(&b.handle_timeout(t0 + Duration::from_millis(749))).is_empty());
        assert_eq!(wire(&b.handle_timeout(t0 + Duration::from_millis(750))).len(), 1);
    }
}
