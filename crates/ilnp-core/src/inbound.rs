//! Inbound: wire-form packets punted by an uplink. Checks the nonce (RFC 6744), the
//! destination locator and NID, creates the responder's ILCC entry, learns new remote
//! locators, and hands ICMPv6 errors and Locator Updates to their sub-machines.

use crate::action::Action;
use crate::event::{packet_summary, DropReason, Event, Outcome};
use crate::ilcc::{IlccKey, RemoteLocator};
use crate::locator::LocatorState;
use crate::lu::lu_malformed_kind;
use crate::machine::Core;
use ilnp_wire::classify::Kind;
use ilnp_wire::translate::Csum;
use ilnp_wire::{classify, ipv6, ClassifyError, Error as WireError, Packet};
use std::time::Instant;

impl Core {
    /// `Core::handle_inbound` without the timer bookkeeping.
    pub(crate) fn inbound(&mut self, now: Instant, pkt: &[u8], csum: Csum, out: &mut Vec<Action>) {
        let data = match classify(pkt) {
            Ok(Packet::Data(d) | Packet::NonceOnly(d)) => d,
            // an ICMPv6 error quoting one of ours (the nonce on the error itself, if
            // any, is checked against the sender's)
            Ok(Packet::IcmpError(e)) => {
                self.handle_icmp_error(now, &e, out);
                return;
            }
            Ok(Packet::Lu(lu)) if lu.nonce.is_some() => {
                self.handle_lu(now, &lu, out);
                return;
            }
            // no nonce: a fallback peer's plain packet (the fast path punts only
            // those), else not one of ours (an LU without a nonce cannot be verified)
            Ok(Packet::Plain(p)) if self.fallback_inbound(now, &p, csum, out) => return,
            // a later fragment of a datagram whose nonce is in its first fragment
            Ok(Packet::Plain(p)) if p.is_later_fragment() => {
                self.later_fragment(now, &p, out);
                return;
            }
            Ok(p @ (Packet::Plain(_) | Packet::Lu(_))) => {
                self.drop(out, DropReason::IcmpUnrelated, p.summary());
                return;
            }
            Err(e) => {
                self.classify_failed(out, pkt, e);
                return;
            }
        };
        let summary = || format!("{} -> {}", data.ip.src, data.ip.dst);
        let (src_nid, dst_nid) = (ilnp_wire::split_addr(data.ip.src).1, ilnp_wire::split_addr(data.ip.dst).1);
        let rule = self
            .ilcc
            .get(&IlccKey::new(src_nid, dst_nid, self.cfg.local_nid))
            .map_or_else(|| self.cfg.checksum_rule(src_nid), |e| e.checksum_rule);
        let (ident, meta) = match data.to_identifier_rule(self.cfg.id_prefix, csum, rule) {
            Ok(x) => x,
            Err(e) => {
                self.drop(out, DropReason::Malformed, format!("{e}: {}", summary()));
                return;
            }
        };
        if !self.is_local_nid(meta.dst_nid) {
            self.drop(out, DropReason::NotForUs, summary());
            return;
        }
        // soft handoff: a retired locator still accepts late packets (RFC 6740 §6)
        if let Err(reason) = self.local.accepts(meta.dst_loc) {
            self.drop(out, reason, summary());
            return;
        }
        // the entry of this pair of NIDs (a correspondent talking to two of ours has
        // two: nids.rs)
        let key = IlccKey::new(meta.src_nid, meta.dst_nid, self.cfg.local_nid);
        let nid = key.remote;
        let mut answered = false;
        if self.ilcc.get(&key).is_none() {
            if !self.admit_responder(now, &meta, out) {
                self.drop(out, DropReason::IlccFull, summary());
                return;
            }
        } else {
            let e = self.ilcc.get_mut(&key).expect("checked");
            match e.nonce_rx {
                Some(_) if e.accepts_nonce(&meta.nonce) => answered = self.challenges.is_open(&key),
                // ours reflected by a shared-nonce peer: only as its answer to our
                // open challenge (the live old peer), never on data it sends unasked
                Some(_) if e.is_reflected(&meta.nonce) && self.challenges.answers(&key, meta.src_loc, &ident) => {
                    self.stats.bump(Outcome::NonceReflectedAccepted);
                    answered = true;
                }
                // our own nonce where the peer's is required: what an observer of our
                // direction saw, not a restart (a restarted peer draws a fresh one)
                Some(_) if meta.nonce == e.nonce_tx => {
                    self.drop(out, DropReason::ReflectedNonce, summary());
                    return;
                }
                Some(_) => {
                    self.drop(out, DropReason::BadNonce, summary());
                    // the peer may have restarted: ask the old one (`challenge.rs`)
                    let (challenges, mut cx) = self.challenge_parts();
                    challenges.bad_nonce(&mut cx, now, key, meta.nonce, meta.src_loc, ident, out);
                    return;
                }
                None => {
                    // the responder's first packet: learn its nonce (RFC 6744 §6);
                    // it answers our first packet at once, so this is an RTT sample
                    e.nonce_rx = Some(meta.nonce);
                    if e.initiator && e.srtt_us.is_none() {
                        e.srtt_us = Some(now.saturating_duration_since(e.created).as_micros() as u64);
                    }
                    out.extend(e.snapshot().map(Action::IlccUpsert));
                }
            }
            if !e.has_remote(meta.src_loc) && e.remote_locators.len() >= self.cfg.max_remote_locators.max(1) {
                // the peer's own packet (right nonce): delivered, its locator not kept
                self.stats.bump(Outcome::RemoteLocatorNotLearnedFull);
            } else if !e.has_remote(meta.src_loc) {
                // unknown source locator with the correct nonce: learn it (RFC 6744 §4)
                let pref = e.remote_locators.iter().map(|r| r.pref).max().unwrap_or(10);
                e.remote_locators.push(RemoteLocator::new(meta.src_loc, pref, LocatorState::Valid, Some(now)));
                self.stats.bump(Outcome::RemoteLocatorLearned);
                out.push(Action::Event(Event::RemoteLocatorLearned { nid, locator: meta.src_loc }));
                out.extend(e.snapshot().map(Action::IlccUpsert));
            }
            // the right nonce again after our answer: the peer is there
            self.admission.maybe_promote(&mut self.ilcc, &mut self.stats, key, out);
        }
        if answered {
            self.challenges.answered(&self.ilcc, &mut self.stats, now, key, out);
        }
        // the peer speaks ILNPv6: a fallback probe for it is moot
        self.fallback.cancel_probe(nid, out);
        // over UDP/IPv4: the path it came on (learned, or a rebinding checked)
        let (v4, mut cx) = self.v4_parts();
        v4.observe(&mut cx, now, key, meta.src_loc, out);
        // a verified packet arrived on this locator: it is not quiet
        self.local.note_rx(meta.dst_loc, now);
        if self.local.is_retired(meta.dst_loc) {
            self.stats.bump(Outcome::RetiredLocalLocatorRx);
        }
        let e = self.ilcc.get_mut(&key).expect("present");
        e.last_used = now;
        e.slow_pkts_in += 1;
        e.slow_bytes_in += pkt.len() as u64;
        if let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == meta.src_loc) {
            r.last_heard = Some(now);
        }
        // the peer's own nonce from this locator: a failover may go there (failover.rs)
        if e.accepts_nonce(&meta.nonce) {
            if let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == meta.src_loc) {
                r.proven = Some(now);
            }
        }
        if data.after_fragment {
            self.stats.bump(Outcome::FragmentNonceAfterFrag);
        }
        if meta.proto == ipv6::NextHeader::NONE {
            // a nonce-only packet: nothing for the stack
            self.stats.bump(Outcome::NonceOnlyReceived);
            return;
        }
        let (v4, mut cx) = self.v4_parts();
        if v4.challenge_answer(&mut cx, now, key, &ident, out) {
            return;
        }
        out.push(Action::DeliverLocal(ident));
    }

    /// A later fragment (no nonce: the first fragment carried it after its Fragment
    /// header, RFC 8200 §4.5, FreeBSD's layout). Believed only from a correspondent
    /// whose nonce we know, from one of its known locators to one of ours; the kernel
    /// reassembles it with the first fragment, whose nonce was checked (an off-path
    /// forger of a later fragment must also guess the 32-bit fragment identification,
    /// as for any IPv6 fragment; docs/architecture.md § Nonce models).
    fn later_fragment(&mut self, now: Instant, p: &ilnp_wire::classify::Plain, out: &mut Vec<Action>) {
        let ((src_loc, nid), (dst_loc, dst_nid)) = ilnp_wire::classify::endpoints(&p.ip);
        let summary = format!("{} -> {} (later fragment)", p.ip.src, p.ip.dst);
        if !self.is_local_nid(dst_nid) {
            return self.drop(out, DropReason::NotForUs, summary);
        }
        if let Err(reason) = self.local.accepts(dst_loc) {
            return self.drop(out, reason, summary);
        }
        let key = IlccKey::new(nid, dst_nid, self.cfg.local_nid);
        let Some(e) = self.ilcc.get_mut(&key).filter(|e| e.nonce_rx.is_some() && e.has_remote(src_loc)) else {
            return self.drop(out, DropReason::FragmentUnverified, summary);
        };
        match p.later_fragment_to_identifier(self.cfg.id_prefix) {
            Ok(ident) => {
                e.last_used = now;
                e.slow_pkts_in += 1;
                e.slow_bytes_in += p.bytes().len() as u64;
                self.stats.bump(Outcome::FragmentAccepted);
                out.push(Action::DeliverLocal(ident));
            }
            Err(err) => self.drop(out, DropReason::Malformed, format!("{err}: {summary}")),
        }
    }

    /// Counts a packet `classify` refused where the old one-question-at-a-time walk
    /// counted it: a second nonce is an authentication failure, a broken LU has its
    /// own counters, anything without our nonce (or a broken ICMPv6 error) is not
    /// ours, the rest is malformed.
    fn classify_failed(&mut self, out: &mut Vec<Action>, pkt: &[u8], e: ClassifyError) {
        let detail = format!("{}: {}", e.error, packet_summary(pkt));
        let reason = match e.kind {
            Kind::Header if e.error == WireError::MoreThanOneNonce => {
                return self.drop(out, DropReason::MultiNonce, packet_summary(pkt))
            }
            Kind::Header if e.error == WireError::NonceOverrun => DropReason::NonceOverrun,
            Kind::Header | Kind::Data | Kind::NonceOnly => DropReason::Malformed,
            Kind::Plain | Kind::IcmpError => DropReason::IcmpUnrelated,
            // an LU without a nonce was never looked at as an LU: not ours
            Kind::Lu if !has_nonce(pkt) => DropReason::IcmpUnrelated,
            Kind::Lu => {
                // one drop reason for every malformed LU, and a breakdown by what was
                // wrong (a flood of one kind shows up as that kind)
                self.stats.bump(lu_malformed_kind(&e.error));
                DropReason::LuMalformed
            }
        };
        self.drop(out, reason, detail);
    }
}

/// Whether a packet whose header `classify` accepted carries a nonce option (only
/// asked about a malformed LU, whose error does not say).
fn has_nonce(pkt: &[u8]) -> bool {
    ipv6::Packet::new_checked(pkt).is_ok_and(|p| {
        p.next_header() == ipv6::NextHeader::DSTOPTS
            && matches!(ilnp_wire::destopts::find_nonce_in_header(p.payload(), ipv6::HEADER_LEN), Ok(Some(_)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DropReason;
    use crate::tests::{core, events, session, udp, wire, LA, LB, NA, NB};
    use ilnp_wire::Nid;

    #[test]
    fn first_packet_creates_the_responder_entry_and_answers_with_our_nonce() {
        let now = Instant::now();
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let mut b = core(NB, LB, 2, None);
        let ab = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
        let out = b.handle_inbound(now, &ab, Csum::Complete);
        assert!(events(&out).iter().any(|e| matches!(e, Event::PeerCreated { initiator: false, .. })));
        let nonce_only = wire(&out).pop().expect("nonce-only packet");
        let out = a.handle_inbound(now, &nonce_only, Csum::Complete);
        assert!(out.iter().all(|x| !matches!(x, Action::DeliverLocal(_))), "nothing for the stack");
        assert_eq!(a.stats().outcome(Outcome::NonceOnlyReceived), 1);
        assert_eq!(b.stats().outcome(Outcome::PeerCreated), 1);
    }

    #[test]
    fn packets_for_another_nid_or_locator_are_dropped() {
        let (_a, _b, ab, _) = session();
        let mut c = core(Nid(0x0200_00ff_fe00_00ee), LB, 3, None);
        c.handle_inbound(Instant::now(), &ab, Csum::Complete);
        assert_eq!(c.stats().dropped(DropReason::NotForUs), 1);
        let mut d = core(NB, LA, 4, None);
        d.handle_inbound(Instant::now(), &ab, Csum::Complete);
        assert_eq!(d.stats().dropped(DropReason::UnknownLocalLocator), 1);
        assert_eq!(d.ilcc.iter().count(), 0);
    }
}
