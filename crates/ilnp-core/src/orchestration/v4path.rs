//! The core's entry into `v4path.rs`: the `Core` methods that lend it the rest of
//! the core's state (moved out so that the sub-machine never names `Core`).

use crate::action::Action;
use crate::challenge::is_echo_reply;
use crate::event::{Event, Outcome};
use crate::ilcc::{RemoteLocator, Tier};
use crate::locator::LocatorState;
use crate::machine::Core;
use crate::v4path::{
    echo_body, echo_body_old, PathChallenge, ECHO_MARK, OLD_PATH_WAIT_MAX, OLD_PATH_WAIT_MIN, V4_CHALLENGE_TIMEOUT,
    V4_VALIDATION_MAX_OPEN, V4_VALIDATION_PER_PEER,
};
use ilnp_wire::icmpv6::{Icmpv6Type, Repr};
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{ilnp_addr, split_addr, Locator, Nid};
use std::net::{Ipv6Addr, SocketAddrV4};
use std::time::{Duration, Instant};

impl Core {
    /// A UDP datagram that arrived on the v4 path's port from `from`: its payload,
    /// a wire-form ILNPv6 packet, is handled as a punted packet is, and the path it
    /// came on is learned or checked.
    pub fn handle_inbound_v4(&mut self, now: Instant, pkt: &[u8], csum: Csum, from: SocketAddrV4) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_inbound_v4_into(now, pkt, csum, from, &mut out);
        out
    }

    /// `handle_inbound_v4` into a buffer of the caller's (cleared first).
    pub fn handle_inbound_v4_into(
        &mut self,
        now: Instant,
        pkt: &[u8],
        csum: Csum,
        from: SocketAddrV4,
        out: &mut Vec<Action>,
    ) {
        self.v4.rx_via = Some(from);
        self.handle_inbound_into(now, pkt, csum, out);
        self.v4.rx_via = None;
    }

    /// A packet from `nid`'s locator `src` was accepted (its nonce checked, or the
    /// responder's first): learn or check the v4 path it came on.
    pub(crate) fn v4_observe(&mut self, now: Instant, nid: Nid, src: Locator, out: &mut Vec<Action>) {
        let Some(from) = self.v4.rx_via else { return };
        if !src.is_v4_path() {
            self.stats.bump(Outcome::V4InnerNotV4Path);
            return;
        }
        let Some(e) = self.ilcc.get_mut(&nid) else { return };
        let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == src) else { return };
        let current = r.v4_destination();
        if current == Some(from) {
            // from where the path says: heard (a no-NAT path is defined by its own
            // address; only now does the fast path carry it, `IlccEntry::snapshot`)
            if !r.v4_heard {
                r.v4_heard = true;
                out.extend(e.snapshot().map(Action::IlccUpsert));
            }
            return;
        }
        if !r.v4_heard {
            // the first datagram on this path: it defines it (as the first packet
            // defines an entry); a different address than advertised is a NAT
            r.v4_heard = true;
            if src.as_v4_path() != Some(from) {
                r.via = Some(from);
                out.extend(e.snapshot().map(Action::IlccUpsert));
                self.stats.bump(Outcome::V4NatDetected);
                out.push(Action::Event(Event::V4Path {
                    nid,
                    locator: src,
                    via: from.to_string(),
                    outcome: "NAT detected",
                }));
            }
            return;
        }
        self.stats.bump(Outcome::V4PathUnvalidatedRx);
        let mine = self.v4.open.get(&nid).map(Vec::as_slice).unwrap_or_default();
        if mine.iter().any(|c| c.loc == src && c.candidate == from) {
            return;
        }
        if self.v4.limits.holdoff.get(&(nid, from)).is_some_and(|t| *t > now) {
            self.stats.bump(Outcome::V4PathChallengeHeldOff);
            return;
        }
        if mine.len() >= V4_VALIDATION_PER_PEER
            || self.v4.open_count() >= V4_VALIDATION_MAX_OPEN
            || !self.v4.limits.bucket.take(now)
        {
            self.stats.bump(Outcome::V4PathChallengeRateLimited);
            return;
        }
        let (echo_word, old_word) = (self.rng.next_u32(), self.rng.next_u32());
        let echo_body = echo_body(&mut *self.rng, ECHO_MARK);
        let old_body = echo_body_old(&mut *self.rng);
        let e = self.ilcc.get(&nid).expect("present");
        let (us, them) = (ilnp_addr(e.local_locator, e.ours(self.cfg.local_nid)), ilnp_addr(src, nid));
        let echo = Repr { msg_type: Icmpv6Type::ECHO_REQUEST, code: 0, data_word: echo_word, body: &echo_body };
        out.push(Action::SendV4 { pkt: echo.packet(us, them, 64, Some(&e.nonce_tx)), to: from });
        // and over the old path: is the peer still there?
        let old = current.filter(|o| *o != from);
        if let Some(to) = old {
            let echo = Repr { msg_type: Icmpv6Type::ECHO_REQUEST, code: 0, data_word: old_word, body: &old_body };
            out.push(Action::SendV4 { pkt: echo.packet(us, them, 64, Some(&e.nonce_tx)), to });
        }
        let old_wait = e
            .srtt_us
            .map_or(OLD_PATH_WAIT_MAX, |us| Duration::from_micros(us.saturating_mul(4)))
            .clamp(OLD_PATH_WAIT_MIN, OLD_PATH_WAIT_MAX);
        self.v4.open.entry(nid).or_default().push(PathChallenge {
            loc: src,
            candidate: from,
            echo_word,
            echo_body,
            old,
            old_word,
            old_body,
            candidate_ok: false,
            old_confirmed: false,
            decide_at: None,
            deadline: now + V4_CHALLENGE_TIMEOUT,
            old_wait,
        });
        self.stats.bump(Outcome::V4PathChallengeSent);
        out.push(Action::Event(Event::V4Path { nid, locator: src, via: from.to_string(), outcome: "challenged" }));
    }

    /// A verified identifier-form packet from `nid`: an answer to one of its path
    /// challenges (consumed: it was ours)? The candidate's own echo counts only from
    /// the candidate; the old path's from the candidate confirms the move, from
    /// anywhere else (the old address) refuses it: the peer is still there.
    pub(crate) fn v4_challenge_answer(&mut self, now: Instant, nid: Nid, ident: &[u8], out: &mut Vec<Action>) -> bool {
        let Some(list) = self.v4.open.get_mut(&nid) else { return false };
        let via = self.v4.rx_via;
        let Some(i) = list.iter().position(|c| {
            is_echo_reply(ident, c.echo_word, &c.echo_body) || is_echo_reply(ident, c.old_word, &c.old_body)
        }) else {
            return false;
        };
        let c = &mut list[i];
        if is_echo_reply(ident, c.echo_word, &c.echo_body) {
            if via != Some(c.candidate) {
                return true; // ours, but not from where it was sent: counts for nothing
            }
            c.candidate_ok = true;
            c.decide_at.get_or_insert(now + c.old_wait);
        } else if via == Some(c.candidate) {
            c.old_confirmed = true;
            self.stats.bump(Outcome::V4PathConfirmedOldPath);
        } else {
            // the old path answered from elsewhere: the peer did not move
            let c = list.remove(i);
            self.v4_refused(now, nid, c, out);
            return true;
        }
        let c = &list[i];
        if c.candidate_ok && (c.old_confirmed || c.old.is_none()) {
            let c = list.remove(i);
            self.v4_rebind(nid, c, out);
        }
        true
    }

    fn v4_refused(&mut self, now: Instant, nid: Nid, c: PathChallenge, out: &mut Vec<Action>) {
        self.v4.hold_off(now, nid, c.candidate);
        self.v4.open.retain(|_, l| !l.is_empty());
        self.stats.bump(Outcome::V4PathRefusedOldPath);
        out.push(Action::Event(Event::V4Path {
            nid,
            locator: c.loc,
            via: c.candidate.to_string(),
            outcome: "refused: the peer answered on the old path",
        }));
    }

    fn v4_rebind(&mut self, nid: Nid, c: PathChallenge, out: &mut Vec<Action>) {
        self.v4.open.retain(|_, l| !l.is_empty());
        // the other validations of this peer's locator are moot now
        if let Some(l) = self.v4.open.get_mut(&nid) {
            l.retain(|o| o.loc != c.loc);
        }
        self.v4.open.retain(|_, l| !l.is_empty());
        if let Some(e) = self.ilcc.get_mut(&nid) {
            if let Some(r) = e.remote_locators.iter_mut().find(|r| r.loc == c.loc) {
                r.via = (c.loc.as_v4_path() != Some(c.candidate)).then_some(c.candidate);
            }
            out.extend(e.snapshot().map(Action::IlccUpsert));
        }
        self.stats.bump(Outcome::V4PathRebound);
        out.push(Action::Event(Event::V4Path {
            nid,
            locator: c.loc,
            via: c.candidate.to_string(),
            outcome: "rebound",
        }));
    }

    /// Path challenges nobody answered; keepalives due.
    pub(crate) fn v4_due(&mut self, now: Instant, out: &mut Vec<Action>) {
        let mut won = Vec::new();
        let mut failed = Vec::new();
        for (nid, list) in self.v4.open.iter_mut() {
            let mut i = 0;
            while i < list.len() {
                let c = &list[i];
                if c.candidate_ok && c.decide_at.is_some_and(|t| t <= now) {
                    // the old path stayed silent: its mapping is gone, the peer moved
                    won.push((*nid, list.remove(i)));
                } else if !c.candidate_ok && c.deadline <= now {
                    failed.push((*nid, list.remove(i)));
                } else {
                    i += 1;
                }
            }
        }
        self.v4.open.retain(|_, l| !l.is_empty());
        for (nid, c) in won {
            self.stats.bump(Outcome::V4PathOldPathSilent);
            self.v4_rebind(nid, c, out);
        }
        for (nid, c) in failed {
            self.v4.hold_off(now, nid, c.candidate);
            self.stats.bump(Outcome::V4PathChallengeFailed);
            let via = c.candidate.to_string();
            out.push(Action::Event(Event::V4Path { nid, locator: c.loc, via, outcome: "unanswered: path kept" }));
        }
        if self.v4.keepalive_at.is_some_and(|t| t <= now) {
            self.v4_keepalives(now, out);
        }
    }

    /// One nonce-only packet per established session over a v4 path that was quiet
    /// for the keepalive interval. O(ILCC entries) once per interval.
    fn v4_keepalives(&mut self, now: Instant, out: &mut Vec<Action>) {
        let every = self.cfg.v4_keepalive;
        let local_nid = self.cfg.local_nid;
        let mut sent = 0;
        for e in self.ilcc.iter() {
            let quiet = now.saturating_duration_since(e.last_used) >= every;
            if !e.local_locator.is_v4_path() || e.tier != Tier::Established || e.nonce_rx.is_none() || !quiet {
                continue;
            }
            let Some(r) = e.best_remote().filter(|r| r.loc.is_v4_path()) else { continue };
            let pkt = translate::nonce_only_packet(
                ilnp_addr(e.local_locator, e.ours(local_nid)),
                ilnp_addr(r.loc, e.nid),
                &e.nonce_tx,
            );
            out.push(Action::SendWire { pkt, uplink: self.local.uplink_of(e.local_locator) });
            sent += 1;
        }
        self.stats.add(Outcome::V4KeepaliveSent, sent);
        self.v4.keepalive_at = Some(now + every);
    }

    /// On a change of our locators: keepalives run while one is a v4 path, and a new
    /// v4 path is warmed up at once.
    ///
    /// Warming: a nonce-only packet from the new v4 path to each established
    /// correspondent's v4 path, while the session still runs elsewhere. It resolves
    /// the neighbours along the path, opens the NAT's mapping, and shows the
    /// correspondent where that mapping is (`v4_observe`), so when the old network
    /// goes the LU over the v4 path takes one round trip, not one plus address
    /// resolution on every hop (measured: 17 ms on a cold LAN path, the datagrams
    /// in flight meanwhile lost). Like an ICE connectivity check, without a server.
    pub(crate) fn v4_locals_changed(&mut self, now: Instant, out: &mut Vec<Action>) {
        let v4: Vec<Locator> = self.local.usable().map(|l| l.loc).filter(|l| l.is_v4_path()).collect();
        let on = !self.cfg.v4_keepalive.is_zero() && !v4.is_empty();
        self.v4.keepalive_at = match (on, self.v4.keepalive_at) {
            (true, Some(t)) => Some(t),
            (true, None) => Some(now + self.cfg.v4_keepalive),
            (false, _) => None,
        };
        let new: Vec<Locator> = v4.iter().copied().filter(|l| !self.v4.locals.contains(l)).collect();
        self.v4.locals = v4;
        let local_nid = self.cfg.local_nid;
        for from in new {
            for e in self.ilcc.iter().filter(|e| e.tier == Tier::Established && e.nonce_rx.is_some()) {
                // its v4 path: from the entry, else from its record (a responder's
                // entry knows only the locator the session began on)
                let known =
                    e.remote_locators.iter().filter(|r| r.state != LocatorState::Expired).map(|r| (r.loc, r.pref));
                let record =
                    self.peers.get(&e.nid).into_iter().flat_map(|p| p.record.locators.iter().map(|l| (l.loc, l.pref)));
                let Some((to, _)) = known.chain(record).filter(|(l, _)| l.is_v4_path()).min_by_key(|(_, p)| *p) else {
                    continue;
                };
                let pkt =
                    translate::nonce_only_packet(ilnp_addr(from, e.ours(local_nid)), ilnp_addr(to, e.nid), &e.nonce_tx);
                out.push(Action::SendWire { pkt, uplink: self.local.uplink_of(from) });
                self.stats.bump(Outcome::V4PathWarmed);
            }
        }
    }

    /// Packets to a v4-path locator leave as UDP/IPv4: to the path observed behind a
    /// NAT, else to the address and port the locator names. The exit pass of every
    /// entry point.
    pub(crate) fn v4_route(&self, out: &mut [Action]) {
        for a in out.iter_mut() {
            let Action::SendWire { pkt, .. } = a else { continue };
            let Some(dst) = pkt.get(24..40) else { continue };
            let (loc, nid) = split_addr(Ipv6Addr::from(<[u8; 16]>::try_from(dst).expect("16 bytes")));
            if !loc.is_v4_path() {
                continue;
            }
            let observed = self.ilcc.get(&nid).and_then(|e| e.remote_locators.iter().find(|r| r.loc == loc));
            let Some(to) = observed.and_then(|r| r.v4_destination()).or_else(|| loc.as_v4_path()) else { continue };
            *a = Action::SendV4 { pkt: std::mem::take(pkt), to };
        }
    }

    /// Moves `nid`'s source locator to one of a family its locators have. When none
    /// of ours reaches any of theirs (we are on an IPv4-only network, and the entry
    /// only knows the IPv6 locator the session began on), the peer record's other
    /// locators are added first (a static peer's or DNS's v4 path: the responder's
    /// entry starts with the initiator's source locator alone).
    pub(crate) fn fit_local(&mut self, nid: Nid) {
        let Some(e) = self.ilcc.get_mut(&nid) else { return };
        if self.local.fitting(e.local_locator, &e.remote_locators).is_none() {
            let max = self.cfg.max_remote_locators.max(1);
            for l in self.peers.get(&nid).map(|p| p.record.locators.as_slice()).unwrap_or_default() {
                if e.remote_locators.len() < max && !e.has_remote(l.loc) {
                    e.remote_locators.push(RemoteLocator::new(l.loc, l.pref, LocatorState::Valid, None));
                }
            }
        }
        if let Some(l) = self.local.fitting(e.local_locator, &e.remote_locators) {
            e.local_locator = l;
        }
    }
}
