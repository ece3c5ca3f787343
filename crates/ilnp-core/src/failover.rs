//! Failover to a proven remote locator (docs/design/locator-failover.md): the
//! active locator of a peer draws Destination Unreachables for the session's own
//! packets, and another of the peer's locators has shown the peer's current nonce
//! more recently than the active one: the session moves there.
//!
//! What each step needs, and who could fake it:
//! * the trigger, an unreachable that quotes our packet to the *active* locator
//!   with our nonce for the peer: a router on the path, or anyone who saw our
//!   direction (`nonce_tx`); an off-path forger must guess the nonce
//!   (`icmp.rs` checks the quote before anything here);
//! * the target, a locator whose `proven` time is later than the active one's:
//!   only a packet from it carrying the peer's own nonce (`nonce_rx`) sets it, so
//!   only the peer or an observer of the peer's direction. Never a locator that
//!   was only named (an LU's other entries, DNS, the peer file);
//! * back again: the old locator must be proven again after the new one, i.e.
//!   heard with the nonce; forged unreachables alone cannot make the entry flap.

use crate::action::Action;
use crate::event::{Event, Outcome};
use crate::ilcc::IlccKey;
use crate::locator::LocatorState;
use crate::machine::Core;
use ilnp_wire::icmpv6::{self, Icmpv6Type};
use ilnp_wire::Locator;
use std::time::Instant;

/// Destination Unreachable codes that say the destination locator cannot be
/// reached (RFC 4443 §3.1): no route (0), administratively prohibited (1),
/// address unreachable (3), reject route (6). Port unreachable (4) comes from the
/// peer itself (reachable); 2 and 5 are about our source address.
pub(crate) fn says_locator_unreachable(icmp_type: Icmpv6Type, code: u8) -> bool {
    icmp_type == Icmpv6Type::DEST_UNREACH
        && matches!(code, icmpv6::UNREACH_NO_ROUTE | icmpv6::UNREACH_ADMIN | icmpv6::UNREACH_ADDRESS | 6)
}

impl Core {
    /// A verified unreachable (it quotes our nonce for the entry `key`) about our packet to
    /// `dead`, sent by someone other than the peer. Returns whether the session
    /// moved (the error is then not handed to the application: its path is gone
    /// and the transport is nudged to retransmit on the new one).
    pub(crate) fn failover_on_unreachable(
        &mut self,
        now: Instant,
        key: IlccKey,
        dead: Locator,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(e) = self.ilcc.get_mut(&key) else { return false };
        if e.tier == crate::ilcc::Tier::Embryonic || e.nonce_rx.is_none() {
            return false;
        }
        // only about the locator the session uses now: an error about one it left
        // already (packets in flight) changes nothing
        let Some(active) = e.best_remote().filter(|r| r.loc == dead) else { return false };
        let dead_proof = active.proven;
        let to = e
            .remote_locators
            .iter()
            .filter(|r| r.loc != dead && r.state == LocatorState::Valid && r.loc.same_family(dead))
            .filter(|r| r.proven.is_some_and(|p| dead_proof.is_none_or(|d| p > d)))
            .max_by_key(|r| r.proven)
            .map(|r| r.loc);
        let Some(to) = to else {
            self.stats.bump(Outcome::FailoverNoProvenLocator);
            return false;
        };
        e.activate_remote(to);
        e.last_used = now;
        self.fit_local(key);
        let Some(e) = self.ilcc.get_mut(&key) else { return false };
        out.extend(e.snapshot().map(Action::IlccUpsert));
        self.stats.bump(Outcome::RemoteLocatorFailover);
        out.push(Action::Event(Event::RemoteLocatorFailover { nid: key.remote, from: dead, to }));
        // what the transport sent to the dead locator may sit in backoff
        out.push(Action::NudgeTransport(key.remote));
        self.stats.bump(Outcome::TransportNudge);
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::action::Action;
    use crate::event::Event;
    use crate::machine::Core;
    use crate::tests::{delivered, events, session, wire, LA, LB, NA, NB};
    use ilnp_wire::icmpv6::{self, Icmpv6Type};
    use ilnp_wire::translate::Csum;
    use ilnp_wire::{ilnp_addr, ipv6, split_addr, Locator};
    use std::time::{Duration, Instant};

    const LB_NEW: Locator = Locator(0x2001_0db8_00bc_0000);

    fn router() -> std::net::Ipv6Addr {
        "2001:db8:ff::1".parse().unwrap()
    }

    /// A's next packet to B, on the wire.
    fn a_to_b(a: &mut Core, t: Instant) -> Vec<u8> {
        wire(&a.handle_outbound(t, &crate::tests::udp(NA, NB, b"data"), Csum::Complete)).pop().unwrap()
    }

    fn dst_of(w: &[u8]) -> Locator {
        split_addr(ipv6::Packet::new_checked(w).unwrap().dst()).0
    }

    /// A router's (or a forger's) Destination Unreachable quoting `quoted`.
    fn unreachable(quoted: &[u8], code: u8) -> Vec<u8> {
        icmpv6::error_packet(router(), ilnp_addr(LA, NA), Icmpv6Type::DEST_UNREACH, code, 0, quoted)
    }

    /// B's packet `ba` as if sent from `loc` (the source locator is outside the
    /// transport checksum: the same nonce, still valid).
    fn from(ba: &[u8], loc: Locator) -> Vec<u8> {
        let mut w = ba.to_vec();
        w[8..16].copy_from_slice(&loc.to_bytes());
        w
    }

    #[test]
    fn unreachables_move_the_session_to_the_locator_proven_with_the_nonce() {
        let (mut a, _b, _, ba) = session();
        let t0 = Instant::now() + Duration::from_secs(1);
        // B moved: its packet from the new locator carries its nonce (no LU reached us)
        let out = a.handle_inbound(t0, &from(&ba, LB_NEW), Csum::Complete);
        assert_eq!(delivered(&out).len(), 1);
        // ... but A still sends to the old one, and the router there answers
        let w = a_to_b(&mut a, t0);
        assert_eq!(dst_of(&w), LB);
        let out = a.handle_inbound(t0, &unreachable(&w, icmpv6::UNREACH_ADDRESS), Csum::Complete);
        assert!(delivered(&out).is_empty(), "the error the session acted on is not the application's");
        assert!(events(&out).iter().any(|e| matches!(e, Event::RemoteLocatorFailover { nid, from, to }
            if *nid == NB && *from == LB && *to == LB_NEW)));
        assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.remote_loc == LB_NEW)));
        assert!(out.iter().any(|x| matches!(x, Action::NudgeTransport(n) if *n == NB)));
        assert_eq!(a.stats().get("remote_locator_failover"), 1);
        assert_eq!(dst_of(&a_to_b(&mut a, t0)), LB_NEW);
        let j =
            serde_json::to_value(events(&out).into_iter().find(|e| matches!(e, Event::RemoteLocatorFailover { .. })))
                .unwrap();
        assert_eq!(j["event"], "remote_locator_failover");
        assert_eq!(j["to"], LB_NEW.to_string());
    }

    /// The attacker: forged unreachables quoting our packet (it knows our nonce,
    /// the strongest case) cannot move the session without a locator the peer
    /// proved, never to one it only names, and cannot make it flap.
    #[test]
    fn forged_unreachables_without_a_proven_locator_change_nothing() {
        let (mut a, _b, _, ba) = session();
        let t0 = Instant::now() + Duration::from_secs(1);
        let w = a_to_b(&mut a, t0);
        for code in [0, 1, 3, 6] {
            let out = a.handle_inbound(t0, &unreachable(&w, code), Csum::Complete);
            assert_eq!(delivered(&out).len(), 1, "handed to the application as before");
            assert!(!events(&out).iter().any(|e| matches!(e, Event::RemoteLocatorFailover { .. })));
        }
        assert_eq!(a.stats().get("failover_no_proven_locator"), 4);
        assert_eq!(dst_of(&a_to_b(&mut a, t0)), LB);
        // a locator B never sent from with its nonce (here: named in the peer file
        // only, or the forger's own) is no target
        let mut spoofed = from(&ba, LB_NEW);
        spoofed[44] ^= 1; // not B's nonce: dropped (and challenged), not learned
        a.handle_inbound(t0, &spoofed, Csum::Complete);
        a.handle_inbound(t0, &unreachable(&w, 3), Csum::Complete);
        assert_eq!(dst_of(&a_to_b(&mut a, t0)), LB);
        assert_eq!(a.stats().get("remote_locator_failover"), 0);
        // port unreachable (from the peer's side: it is there) moves nothing either
        a.handle_inbound(t0 + Duration::from_secs(1), &from(&ba, LB_NEW), Csum::Complete);
        a.handle_inbound(t0, &unreachable(&w, icmpv6::UNREACH_PORT), Csum::Complete);
        assert_eq!(dst_of(&a_to_b(&mut a, t0)), LB);
    }

    #[test]
    fn no_flapping_back_until_the_old_locator_is_heard_again_with_the_nonce() {
        let (mut a, _b, _, ba) = session();
        let t1 = Instant::now() + Duration::from_secs(1);
        a.handle_inbound(t1, &from(&ba, LB_NEW), Csum::Complete);
        let w = a_to_b(&mut a, t1);
        a.handle_inbound(t1, &unreachable(&w, 3), Csum::Complete);
        assert_eq!(dst_of(&a_to_b(&mut a, t1)), LB_NEW);
        // forged unreachables about the new locator: LB was proven before LB_NEW
        let w2 = a_to_b(&mut a, t1);
        for _ in 0..50 {
            a.handle_inbound(t1, &unreachable(&w2, 3), Csum::Complete);
        }
        assert_eq!(dst_of(&a_to_b(&mut a, t1)), LB_NEW);
        assert_eq!(a.stats().get("remote_locator_failover"), 1);
        // an error about the locator left behind (in flight) changes nothing
        a.handle_inbound(t1, &unreachable(&w, 3), Csum::Complete);
        assert_eq!(dst_of(&a_to_b(&mut a, t1)), LB_NEW);
        // B is heard on LB again with its nonce: now LB may take the session back
        let t2 = t1 + Duration::from_secs(1);
        a.handle_inbound(t2, &ba, Csum::Complete);
        a.handle_inbound(t2, &unreachable(&w2, 3), Csum::Complete);
        assert_eq!(dst_of(&a_to_b(&mut a, t2)), LB);
        assert_eq!(a.stats().get("remote_locator_failover"), 2);
    }

    #[test]
    fn an_unverified_unreachable_or_one_from_the_peer_moves_nothing() {
        let (mut a, _b, _, ba) = session();
        let t0 = Instant::now() + Duration::from_secs(1);
        a.handle_inbound(t0, &from(&ba, LB_NEW), Csum::Complete);
        let w = a_to_b(&mut a, t0);
        // an off-path forger does not know our nonce: the quote check refuses it
        let mut guess = w.clone();
        guess[44] ^= 1;
        a.handle_inbound(t0, &unreachable(&guess, 3), Csum::Complete);
        assert_eq!(a.stats().get("icmp_error_unverified"), 1);
        // "from B" without its nonce: a forgery (RFC 6744 §7)
        let from_b = icmpv6::error_packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), Icmpv6Type::DEST_UNREACH, 3, 0, &w);
        a.handle_inbound(t0, &from_b, Csum::Complete);
        assert_eq!(dst_of(&a_to_b(&mut a, t0)), LB);
        assert_eq!(a.stats().get("remote_locator_failover"), 0);
    }
}
