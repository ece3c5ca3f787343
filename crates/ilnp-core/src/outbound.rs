//! Outbound: identifier-form packets from the stack to wire form; the initiator's
//! ILCC entry is created from the peer records.

use crate::action::Action;
use crate::admission::{Admission, AnswerHint};
use crate::event::{packet_summary, DropReason, Event, Outcome};
use crate::fallback;
use crate::icmp::unreachable_to_app;
use crate::ilcc::{IlccEntry, IlccKey, RemoteLocator, Tier};
use crate::locator::LocatorState;
use crate::machine::Core;
use ilnp_wire::classify::is_icmp_error;
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{classify, ipv6, split_addr, Nid, Packet};
use std::time::Instant;

impl Core {
    /// `Core::handle_outbound` without the timer bookkeeping.
    pub(crate) fn outbound(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        hints: &mut dyn FnMut(Nid) -> Option<AnswerHint>,
        out: &mut Vec<Action>,
    ) {
        let p = match ipv6::Packet::new_checked(pkt) {
            Ok(p) => p,
            Err(e) => {
                self.drop(out, DropReason::OutMalformed, e.to_string());
                return;
            }
        };
        let (dl, dn) = split_addr(p.dst());
        let (sl, sn) = split_addr(p.src());
        if dl != self.cfg.id_prefix || sl != self.cfg.id_prefix {
            // e.g. MLD reports the kernel sends on ilnp0: not ours to carry
            self.stats.bump(Outcome::OutNotIdentifier);
            return;
        }
        // from one of our NIDs (a socket of a removed temporary NID is not: nids.rs)
        if !self.is_local_nid(sn) {
            self.drop(out, DropReason::OutSrcNotOurs, packet_summary(pkt));
            return;
        }
        // one walk: whether it is an ICMPv6 error our stack raised (a packet classify
        // refuses is still carried: to_wire below has the last word)
        let class = classify(pkt);
        let icmp_error = is_icmp_error(&class);
        // a correspondent that does not speak ILNPv6: plain IPv6 (fallback.rs)
        let (fallback, mut cx) = self.fallback_parts();
        if fallback.outbound(&mut cx, dn, pkt, csum, out) {
            return;
        }
        // the entry of this pair of NIDs: a correspondent talking to two of ours has
        // two, nothing shared between them (nids.rs)
        let key = IlccKey::new(dn, sn, self.cfg.local_nid);
        if self.ilcc.get(&key).is_none() {
            if self.cfg.admission == Admission::Socket && (icmp_error || p.is_tcp_rst()) {
                // our stack's answer to a packet the fast path passed up without
                // state (no socket took it): to the hinted locator, under the budget
                let (admission, mut cx) = self.admission_parts();
                admission.answer_unadmitted(&mut cx, now, dn, pkt, csum, &class, hints, out);
                return;
            }
            if let Err(reason) = self.create_initiator_entry(now, dn, sn, hints, out) {
                self.stats.drop(reason);
                out.push(Action::Event(Event::drop(reason, format!("packet to {}", p.dst()))));
                unreachable_to_app(pkt, icmp_error, out);
                return;
            }
        }
        // the entry's source locator must still be ours and usable (it is moved to the
        // best one by set_local_locators; with none left the application hears at once)
        let usable = self.ilcc.get(&key).is_some_and(|e| self.local.is_usable(e.local_locator));
        if !usable {
            self.stats.drop(DropReason::NoLocalLocator);
            out.push(Action::Event(Event::drop(DropReason::NoLocalLocator, format!("packet to {}", p.dst()))));
            unreachable_to_app(pkt, icmp_error, out);
            return;
        }
        let id_prefix = self.cfg.id_prefix;
        // balancing (crate::balance): the pair this packet takes; None = the entry's
        let pair = if icmp_error {
            None
        } else {
            let (balance, cx) = self.balance_parts();
            balance.choose_for(&cx, key, pkt, out)
        };
        let Some(e) = self.ilcc.get_mut(&key) else { return };
        e.last_used = now;
        e.slow_pkts_out += 1;
        e.slow_bytes_out += pkt.len() as u64;
        let Some(best_remote) = e.best_remote().map(|r| r.loc) else {
            self.drop(out, DropReason::NoRemoteLocator, format!("{dn}"));
            return;
        };
        let (local_loc, remote) = pair.unwrap_or((e.local_locator, best_remote));
        let res = match (&class, e.nonce_rx) {
            // an error our stack raised about the peer's packet: the quote goes back in
            // the wire form it arrived in, with the peer's nonce, so the peer can match
            // it; the error itself carries our nonce (RFC 6744 §7)
            (Ok(Packet::IcmpError(err)), Some(rx)) if csum == Csum::Complete => {
                err.to_wire(id_prefix, local_loc, remote, &e.nonce_tx, &rx)
            }
            // an ICMPv6 error classify refused (e.g. a bad checksum): as before, not sent
            (Err(c), Some(_)) if icmp_error && csum == Csum::Complete => Err(c.error),
            _ => translate::to_wire_rule(pkt, id_prefix, local_loc, remote, &e.nonce_tx, csum, e.checksum_rule),
        };
        let uplink = self.local.uplink_of(local_loc);
        if res.is_ok() && e.tier == Tier::Embryonic {
            // towards an unconfirmed source: only under the one budget the hellos
            // and refusals take from (a spoofed source is a third party)
            if !self.admission.take_towards(now, Some(remote)) {
                self.stats.drop(DropReason::TxEmbryonicRateLimited);
                out.push(Action::Event(Event::drop(DropReason::TxEmbryonicRateLimited, format!("packet to {dn}"))));
                return;
            }
            // an answer reached the claimed locator, if it is real: the next packet
            // with the peer's nonce promotes the entry (admission.rs)
            e.answered = true;
            self.stats.bump(Outcome::TxToEmbryonic);
        }
        match res {
            Ok(pkt) => out.push(Action::SendWire { pkt, uplink }),
            Err(err) => self.drop(out, DropReason::OutMalformed, format!("{err}: {}", packet_summary(pkt))),
        }
        // still no word from the correspondent: is it there without ILNP?
        let (fallback, mut cx) = self.fallback_parts();
        fallback.maybe_probe(&mut cx, now, key, out);
    }

    fn create_initiator_entry(
        &mut self,
        now: Instant,
        nid: Nid,
        ours: Nid,
        hints: &mut dyn FnMut(Nid) -> Option<AnswerHint>,
        out: &mut Vec<Action>,
    ) -> Result<(), DropReason> {
        let peer = match self.live_peer(now, nid) {
            None => return Err(DropReason::UnknownPeer),
            Some(p) if p.non_ilnp => return Err(DropReason::NonIlnpPeerBlocked),
            Some(p) => p.record.clone(),
        };
        let local = self.local.best().ok_or(DropReason::NoLocalLocator)?;
        if self.ilcc.is_full() {
            return Err(DropReason::IlccFull);
        }
        // the nonce a stateless answer to this peer carried, if one may have (admission.rs)
        let locs: Vec<_> = peer.locators.iter().map(|l| l.loc).collect();
        let hint = if self.cfg.admission == Admission::Socket { hints(nid) } else { None };
        let nonce_tx = match self.admission.key.answered(&self.cfg, &mut *self.rng, now, nid, &locs, hint) {
            Some(n) => n,
            None => self.new_nonce(),
        };
        let mut remote: Vec<RemoteLocator> =
            peer.locators.iter().map(|l| RemoteLocator::new(l.loc, l.pref, LocatorState::Valid, None)).collect();
        remote.sort_by_key(|r| r.pref);
        // a source locator of a family the peer has (IPv6 or v4 path)
        let local = self.local.fitting(local, &remote).unwrap_or(local);
        let mut e = IlccEntry::new(nid, remote, local, nonce_tx, None, true, now);
        e.local_nid = IlccKey::new(nid, ours, self.cfg.local_nid).local;
        self.cfg.apply_peer_settings(&mut e);
        let best = e.best_remote().map(|r| r.loc).ok_or(DropReason::NoRemoteLocator)?;
        e.activate_remote(best);
        let snap = e.snapshot();
        self.ilcc.insert(e).map_err(|_| DropReason::IlccFull)?;
        self.stats.bump(Outcome::PeerCreated);
        out.push(Action::Event(Event::PeerCreated {
            nid,
            initiator: true,
            local_locator: local,
            remote_locator: best,
        }));
        // with the no-answer probe on, the fast path gets the entry only once the
        // peer has answered (inbound.rs upserts it with the learned nonce): until
        // then its packets come here, where a silent peer is noticed (fallback.rs)
        if let Some(s) = snap.filter(|_| !fallback::probing_on(&self.cfg)) {
            out.push(Action::IlccUpsert(s));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{core, delivered, wire, LA, LB, NA, NB};
    use ilnp_wire::ilnp_addr;

    #[test]
    fn only_identifier_form_packets_are_carried() {
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let mut mld = crate::tests::udp(NA, NB, b"x");
        mld[8..24].copy_from_slice(&ilnp_addr(LA, NA).octets());
        assert!(a.handle_outbound(Instant::now(), &mld, Csum::Complete).is_empty());
        assert_eq!(a.stats().outcome(Outcome::OutNotIdentifier), 1);
    }

    #[test]
    fn the_initiator_entry_comes_from_the_peer_record() {
        let mut a = core(NA, LA, 1, Some((NB, LB)));
        let out = a.handle_outbound(Instant::now(), &crate::tests::udp(NA, NB, b"x"), Csum::Complete);
        let w = wire(&out).pop().expect("sent");
        assert!(out.iter().any(|a| matches!(a, Action::SendWire { uplink: Some(2), .. })), "out of LA's uplink");
        let p = ipv6::Packet::new_checked(&w[..]).unwrap();
        assert_eq!((split_addr(p.src()).0, split_addr(p.dst()).0), (LA, LB));
        let e = a.ilcc.iter().next().unwrap();
        assert!(e.initiator && e.nonce_rx.is_none());
        // no record: the application hears at once
        let out =
            a.handle_outbound(Instant::now(), &crate::tests::udp(NA, Nid(0x0200_0000_0000_0042), b"x"), Csum::Complete);
        assert_eq!(delivered(&out).len(), 1);
        assert_eq!(a.stats().dropped(DropReason::UnknownPeer), 1);
    }
}
