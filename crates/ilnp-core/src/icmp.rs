//! ICMPv6 errors: which to believe (RFC 6741 §11.1, RFC 6744 §7), translating them
//! for the stack, and the Parameter Problem that marks a peer not ILNPv6-capable.

use crate::action::Action;
use crate::event::{DropReason, Event, Outcome};
use crate::fallback::FallbackReason;
use crate::ilcc::IlccKey;
use crate::machine::Core;
use ilnp_wire::classify::IcmpError;
use ilnp_wire::icmpv6;
use ilnp_wire::translate;
use ilnp_wire::translate::Csum;
use ilnp_wire::{ilnp_addr, ipv6, split_addr};
use std::time::Instant;

impl Core {
    /// An ICMPv6 error punted to us: `err.nonce` is the nonce on the error itself
    /// (an ILNPv6 correspondent puts its own on every ICMP it sends, RFC 6744 §7).
    pub(crate) fn handle_icmp_error(&mut self, now: Instant, err: &IcmpError, out: &mut Vec<Action>) {
        let summary = || format!("{} -> {}", err.ip.src, err.ip.dst);
        let meta = match err.meta() {
            Ok(m) => m,
            Err(e) => {
                self.drop(out, DropReason::IcmpUnrelated, format!("{e}: {}", summary()));
                return;
            }
        };
        // An error sent by a current correspondent itself must carry that
        // correspondent's nonce; missing or wrong → forgery (RFC 6744 §7, RFC 6741
        // §11.1). Until the peer has shown its nonce (e.g. a non-ILNP peer's Parameter
        // Problem, which cannot carry one) the quoted nonce check below is all we have.
        // From anyone else (routers) an outer nonce cannot be verified and is ignored.
        let (_, sender) = split_addr(err.ip.src);
        let stable = self.cfg.local_nid;
        let sender_key = IlccKey::new(sender, split_addr(err.ip.dst).1, stable);
        // A shared-nonce peer reflects the nonce of the packet it answers: ours (an
        // error answers what we sent; its quote is checked below as for anyone's).
        if let Some(e) = self.ilcc.get(&sender_key).filter(|e| e.nonce_rx.is_some()) {
            match err.nonce.map(|n| n.nonce) {
                None => return self.drop(out, DropReason::IcmpMissingNonce, summary()),
                Some(n) if !e.accepts_reply_nonce(&n) => return self.drop(out, DropReason::IcmpBadNonce, summary()),
                Some(_) => {}
            }
        }
        // Only errors that quote our own nonce for a current correspondent are
        // believed: an off-path forger does not know it (RFC 6741 §11.1).
        let key = IlccKey::new(meta.peer_nid, meta.local_nid, stable);
        let ours = self.ilcc.get(&key).is_some_and(|e| e.nonce_tx == meta.nonce);
        if !ours {
            self.drop(out, DropReason::IcmpErrorUnverified, summary());
            return;
        }
        let translated = match err.to_identifier(self.cfg.id_prefix) {
            Ok((t, _)) => t,
            Err(e) => return self.drop(out, DropReason::IcmpUntranslatable, format!("{e}: {}", summary())),
        };
        if !meta.rejects_nonce {
            // the active locator is unreachable and the peer proved another with
            // its nonce: the session moves there (failover.rs)
            if sender != meta.peer_nid
                && crate::failover::says_locator_unreachable(meta.icmp_type, meta.icmp_code)
                && self.failover_on_unreachable(now, key, meta.peer_loc, out)
            {
                return;
            }
            // Packet Too Big (MTU already reduced by our header), unreachable, time
            // exceeded...: the kernel matches the quote to the socket
            self.stats.bump(Outcome::IcmpErrorTranslated);
            out.push(Action::DeliverLocal(translated));
            return;
        }
        // Parameter Problem code 2 at our nonce option: the peer is not ILNPv6-capable
        // (RFC 6744 §6, RFC 6740 §8). Stop using ILNP towards it: with fallback, go
        // on as plain IPv6 (the rejected packet itself re-sent so, if it was quoted
        // whole); without, fail the application at once with Destination
        // Unreachable / address unreachable (Linux: EHOSTUNREACH) quoting its own
        // identifier-form packet.
        let nid = meta.peer_nid;
        if self.cfg.fallback {
            self.stats.bump(Outcome::NonIlnpPeer);
            out.push(Action::Event(Event::NonIlnpPeer { nid }));
            self.start_fallback(now, nid, meta.peer_loc, FallbackReason::ParameterProblem, out);
            if let Some(q) = quoted_whole(&translated) {
                let (fallback, mut cx) = self.fallback_parts();
                fallback.outbound(&mut cx, nid, &q, Csum::Complete, out);
            }
            return;
        }
        self.ilcc.remove(&key);
        if let Some(p) = self.peers.get_mut(&nid) {
            p.non_ilnp = true;
        }
        self.stats.bump(Outcome::NonIlnpPeer);
        out.push(Action::IlccRemove(key));
        out.push(Action::Event(Event::NonIlnpPeer { nid }));
        let quoted = ipv6::Packet::new_checked(&translated[..])
            .ok()
            .and_then(|p| icmpv6::Message::new_checked(p.payload()).ok().map(|m| m.invoking_packet().to_vec()));
        match quoted {
            Some(q) => out.push(Action::DeliverLocal(icmpv6::error_packet(
                ilnp_addr(self.cfg.id_prefix, nid),
                ilnp_addr(self.cfg.id_prefix, meta.local_nid),
                icmpv6::Icmpv6Type::DEST_UNREACH,
                icmpv6::UNREACH_ADDRESS,
                0,
                &q,
            ))),
            None => self.drop(out, DropReason::IcmpUntranslatable, summary()),
        }
    }
}

/// The invoking packet an (identifier-form) ICMPv6 error quotes, if it quotes it whole.
fn quoted_whole(err: &[u8]) -> Option<Vec<u8>> {
    let p = ipv6::Packet::new_checked(err).ok()?;
    let q = icmpv6::Message::new_checked(p.payload()).ok()?.invoking_packet().to_vec();
    let qp = ipv6::Packet::new_checked(&q[..]).ok()?;
    (ipv6::HEADER_LEN + qp.payload_len() as usize == q.len()).then_some(q)
}

/// Fails the application's packet at once: Destination Unreachable, code 3
/// (address unreachable), which Linux reports as EHOSTUNREACH (a connecting TCP
/// socket fails instead of retrying SYNs for minutes). Never in answer to an ICMPv6
/// error (RFC 4443 §2.4 (e)).
/// `icmp_error`: what [`ilnp_wire::classify::is_icmp_error`] said about `pkt`.
pub(crate) fn unreachable_to_app(pkt: &[u8], icmp_error: bool, out: &mut Vec<Action>) {
    if icmp_error {
        return;
    }
    if let Ok(u) = translate::unreachable_to_app(pkt, icmpv6::UNREACH_ADDRESS) {
        out.push(Action::DeliverLocal(u));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{udp, NA, NB, P};
    use ilnp_wire::classify;
    use ilnp_wire::classify::is_icmp_error;

    #[test]
    fn errors_are_recognised_and_never_answered_with_errors() {
        let data = udp(NA, NB, b"x");
        assert!(!is_icmp_error(&classify(&data)));
        let err = icmpv6::error_packet(
            ilnp_addr(P, NB),
            ilnp_addr(P, NA),
            icmpv6::Icmpv6Type::DEST_UNREACH,
            icmpv6::UNREACH_ADDRESS,
            0,
            &data,
        );
        assert!(is_icmp_error(&classify(&err)));
        let mut out = Vec::new();
        unreachable_to_app(&err, is_icmp_error(&classify(&err)), &mut out);
        assert!(out.is_empty(), "no error about an error (RFC 4443 §2.4 (e))");
        unreachable_to_app(&data, is_icmp_error(&classify(&data)), &mut out);
        assert_eq!(out.len(), 1);
    }
}
