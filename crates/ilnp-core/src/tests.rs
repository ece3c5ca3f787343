//! Two cores exchanging real packets in memory: no OS, fake clock.

use crate::action::Action;
use crate::admission::{Admission, AnswerHint};
use crate::balance::Policy;
use crate::config::{CoreConfig, HandoffMode, LuTimerMode, LuTimers, DEFAULT_LOCATOR_PREF};
use crate::dns::DnsPeerResult;
use crate::event::{DropReason, Event, Outcome};
use crate::fallback::{FallbackReason, PeerState};
use crate::ilcc;
use crate::ilcc::IlccKey;
use crate::local::locator_preference;
use crate::locator::{LocalLocator, LocatorState, RouterPreference};
use crate::machine::Core;
use crate::peers::{PeerLocator, PeerRecord};
use ilnp_wire::checksum::ChecksumRule;
use ilnp_wire::icmpv6::{self, Icmpv6Type, LocatorUpdate, LuEntry, LuOperation};
use ilnp_wire::ipv6;
use ilnp_wire::ipv6::NextHeader;
use ilnp_wire::test_support as ts;
pub(crate) use ilnp_wire::test_support::{LA, LB, NA, NB, P};
use ilnp_wire::translate;
use ilnp_wire::translate::Csum;
use ilnp_wire::{classify, ilnp_addr, split_addr};
use ilnp_wire::{Locator, Nid, Nonce};
use rand_core::RngCore;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

pub(crate) const LB2: Locator = Locator(0x2001_0db8_000e_0000);

mod linux_parser;

/// The shared test generator (xorshift64*) as the core's `RngCore`: same sequence.
pub(crate) struct TestRng(ts::Rng);
impl TestRng {
    pub(crate) fn new(seed: u64) -> TestRng {
        TestRng(ts::Rng(seed))
    }
}
impl rand_core::RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

pub(crate) fn local(loc: Locator) -> LocalLocator {
    LocalLocator {
        loc,
        ifindex: 2,
        pref: 10,
        lifetime_s: u32::MAX,
        state: LocatorState::Active,
        has_router: true,
        deprecated: false,
    }
}

pub(crate) fn core(nid: Nid, loc: Locator, seed: u64, peer: Option<(Nid, Locator)>) -> Core {
    core_with(nid, loc, seed, peer, |_| {})
}

/// `core` with a configuration change.
pub(crate) fn core_with(
    nid: Nid,
    loc: Locator,
    seed: u64,
    peer: Option<(Nid, Locator)>,
    cfg: impl FnOnce(&mut CoreConfig),
) -> Core {
    let mut config = CoreConfig::new(P, nid);
    cfg(&mut config);
    let mut c = Core::new(config, Box::new(TestRng::new(seed)));
    c.set_local_locators(Instant::now(), vec![local(loc)]);
    if let Some((n, l)) = peer {
        c.add_peer(PeerRecord { name: "peer".into(), nid: n, locators: vec![PeerLocator { loc: l, pref: 10 }] });
    }
    c
}

pub(crate) fn udp(src: Nid, dst: Nid, payload: &[u8]) -> Vec<u8> {
    ts::udp(ilnp_addr(P, src), ilnp_addr(P, dst), 0x9c41, 0x1770, payload)
}

/// The echo reply a stack would send for the echo request `req_ident` (identifier form in, out).
pub(crate) fn echo_reply_for(req_ident: &[u8]) -> Vec<u8> {
    let ul = ilnp_wire::ipv6::upper_layer_info(req_ident).unwrap();
    let m = icmpv6::Message::new_checked(&req_ident[ul.offset..]).unwrap();
    let p = ilnp_wire::ipv6::Packet::new_checked(req_ident).unwrap();
    let r =
        icmpv6::Repr { msg_type: Icmpv6Type::ECHO_REPLY, code: 0, data_word: m.data_word(), body: &m.as_bytes()[8..] };
    r.packet(p.dst(), p.src(), 64, None)
}

/// The packets the actions send; each must pass Linux's option parser
/// (`linux_parser::linux_accepts`: every test that looks at what the core sends checks it).
pub(crate) fn wire(actions: &[Action]) -> Vec<Vec<u8>> {
    let v: Vec<Vec<u8>> = actions
        .iter()
        .filter_map(|a| if let Action::SendWire { pkt: w, .. } = a { Some(w.clone()) } else { None })
        .collect();
    v.iter().for_each(|w| linux_parser::linux_accepts(w));
    v
}
pub(crate) fn delivered(actions: &[Action]) -> Vec<Vec<u8>> {
    actions.iter().filter_map(|a| if let Action::DeliverLocal(w) = a { Some(w.clone()) } else { None }).collect()
}
pub(crate) fn nonce_of(w: &[u8]) -> Nonce {
    classify(w).unwrap().nonce().unwrap()
}

/// A Locator Update packet's addresses and message, as `classify` reads it.
pub(crate) struct LuPkt {
    pub(crate) src: std::net::Ipv6Addr,
    pub(crate) dst: std::net::Ipv6Addr,
    pub(crate) lu: LocatorUpdate,
}
pub(crate) fn parse_lu(w: &[u8]) -> LuPkt {
    let Ok(ilnp_wire::Packet::Lu(l)) = classify(w) else { panic!("not an LU: {:?}", classify(w)) };
    LuPkt { src: l.ip.src, dst: l.ip.dst, lu: l.to_owned() }
}

/// A sends to B, B answers: returns (A, B, a→b wire, b→a wire).
pub(crate) fn session() -> (Core, Core, Vec<u8>, Vec<u8>) {
    let now = Instant::now();
    let mut a = core(NA, LA, 1, Some((NB, LB)));
    let mut b = core(NB, LB, 2, None);
    let out = a.handle_outbound(now, &udp(NA, NB, b"hello"), Csum::Complete);
    assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.nid == NB && s.nonce_rx.is_none())));
    let ab = wire(&out).pop().expect("a sends");
    let out = b.handle_inbound(now, &ab, Csum::Complete);
    assert_eq!(delivered(&out), vec![udp(NA, NB, b"hello")]);
    let out = b.handle_outbound(now, &udp(NB, NA, b"world"), Csum::Complete);
    let ba = wire(&out).pop().expect("b answers");
    let out = a.handle_inbound(now, &ba, Csum::Complete);
    assert_eq!(delivered(&out), vec![udp(NB, NA, b"world")]);
    (a, b, ab, ba)
}

#[test]
fn nonces_differ_per_direction_and_stay_constant() {
    let (mut a, mut b, ab, ba) = session();
    assert_ne!(nonce_of(&ab), nonce_of(&ba));
    let now = Instant::now();
    for i in 0..5u8 {
        let w1 = wire(&a.handle_outbound(now, &udp(NA, NB, &[i]), Csum::Complete)).pop().unwrap();
        let w2 = wire(&b.handle_outbound(now, &udp(NB, NA, &[i]), Csum::Complete)).pop().unwrap();
        assert_eq!(nonce_of(&w1), nonce_of(&ab));
        assert_eq!(nonce_of(&w2), nonce_of(&ba));
    }
    let ea = a.ilcc.iter().next().unwrap();
    assert_eq!(ea.nonce_rx, Some(nonce_of(&ba)));
    assert_eq!(ea.nonce_tx, nonce_of(&ab));
}

#[test]
fn ilcc_entry_looks_up_one_correspondent() {
    let (a, b, _, _) = session();
    assert_eq!(a.ilcc.get(&IlccKey::stable(NB)).map(|e| (e.nid, e.initiator)), Some((NB, true)));
    assert_eq!(b.ilcc.get(&IlccKey::stable(NA)).map(|e| (e.nid, e.initiator)), Some((NA, false)));
    assert!(a.ilcc.get(&IlccKey::stable(NA)).is_none(), "no entry for ourselves");
}

#[test]
fn wrong_nonce_is_dropped_and_counted() {
    let (_a, mut b, ab, _) = session();
    let mut forged = ab.clone();
    forged[44] ^= 0xff; // first nonce byte
    let out = b.handle_inbound(Instant::now(), &forged, Csum::Complete);
    assert!(delivered(&out).is_empty());
    assert_eq!(b.stats().get("bad_nonce"), 1);
}

#[test]
fn unknown_peer_gets_unreachable() {
    let mut a = core(NA, LA, 1, None);
    let out = a.handle_outbound(Instant::now(), &udp(NA, NB, b"x"), Csum::Complete);
    let d = delivered(&out);
    assert_eq!(d.len(), 1);
    assert_eq!(&d[0][40..42], &[1, 3]);
    assert_eq!(a.stats().get("unknown_peer"), 1);
}

#[test]
fn unknown_source_locator_learned_only_with_right_nonce() {
    let (_a, mut b, ab, _) = session();
    // same packet from a new source locator LB2? no: A moved to LA2
    let la2 = Locator(0x2001_0db8_00aa_0000);
    let mut moved = ab.clone();
    moved[8..16].copy_from_slice(&la2.to_bytes());
    // source locator is outside the transport checksum: still valid
    let out = b.handle_inbound(Instant::now(), &moved, Csum::Complete);
    assert_eq!(delivered(&out).len(), 1);
    assert_eq!(b.stats().get("remote_locator_learned"), 1);
    let mut bad = moved.clone();
    bad[8..16].copy_from_slice(&Locator(0x2001_0db8_00bb_0000).to_bytes());
    bad[44] ^= 1;
    assert!(delivered(&b.handle_inbound(Instant::now(), &bad, Csum::Complete)).is_empty());
    assert_eq!(b.stats().get("remote_locator_learned"), 1);
}

#[test]
fn locator_update_replaces_set_and_ack_echoes_body() {
    let (mut a, mut b, _, _) = session();
    let t0 = Instant::now();
    // B moves: LB → LB2
    let out = b.set_local_locators(t0, vec![local(LB2)]);
    let lus = wire(&out);
    assert_eq!(lus.len(), 1);
    let lu = parse_lu(&lus[0]);
    assert_eq!(lu.lu.operation, LuOperation::Advertisement);
    assert_eq!(lu.lu.entries.iter().map(|e| e.locator).collect::<Vec<_>>(), vec![LB2]);
    assert_eq!(split_addr(lu.src).0, LB2);
    let out = a.handle_inbound(t0, &lus[0], Csum::Complete);
    let acks = wire(&out);
    assert_eq!(acks.len(), 1);
    let ack = parse_lu(&acks[0]);
    assert_eq!(ack.lu, lu.lu.ack());
    assert_eq!(split_addr(ack.dst).0, LB2);
    let e = a.ilcc.iter().next().unwrap();
    assert_eq!(e.remote_locators.iter().map(|r| r.loc).collect::<Vec<_>>(), vec![LB2]);
    // A's data now goes to LB2
    let w = wire(&a.handle_outbound(t0, &udp(NA, NB, b"after"), Csum::Complete)).pop().unwrap();
    assert_eq!(split_addr(ipv6::Packet::new_checked(&w[..]).unwrap().dst()).0, LB2);
    // B accepts the ack and stops retransmitting
    let out = b.handle_inbound(t0 + Duration::from_millis(3), &acks[0], Csum::Complete);
    assert!(out.iter().any(|x| matches!(x, Action::Event(Event::LuAcked { attempts: 1, .. }))));
    assert!(wire(&b.handle_timeout(t0 + Duration::from_secs(2))).is_empty());
}

#[test]
fn lu_is_retransmitted_with_backoff_then_given_up() {
    let (_a, mut b, _, _) = session();
    let t0 = Instant::now();
    assert_eq!(wire(&b.set_local_locators(t0, vec![local(LB2)])).len(), 1);
    let mut sends = 1;
    let mut t = t0;
    for _ in 0..100 {
        t += Duration::from_millis(250);
        sends += wire(&b.handle_timeout(t)).len();
    }
    assert_eq!(sends, 7, "max_attempts transmissions");
    assert_eq!(b.stats().get("lu_failed"), 1);
}

#[test]
fn forged_lu_is_rejected() {
    let (mut a, _b, _, ba) = session();
    let lu = LocatorUpdate {
        operation: LuOperation::Advertisement,
        entries: vec![LuEntry { locator: Locator(0xdead_0000_0000_0000), preference: 1, lifetime: 30 }],
    };
    let wrong = Nonce::N32([0, 0, 0, 0]);
    let pkt = translate::lu_packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), &wrong, &lu).unwrap();
    let out = a.handle_inbound(Instant::now(), &pkt, Csum::Complete);
    assert!(wire(&out).is_empty());
    assert_eq!(a.stats().get("lu_bad_nonce"), 1);
    let e = a.ilcc.iter().next().unwrap();
    assert_eq!(e.remote_locators[0].loc, LB);
    // unknown peer
    let pkt = translate::lu_packet(ilnp_addr(LB, Nid(77)), ilnp_addr(LA, NA), &nonce_of(&ba), &lu).unwrap();
    a.handle_inbound(Instant::now(), &pkt, Csum::Complete);
    assert_eq!(a.stats().get("lu_unknown_peer"), 1);
}

#[test]
fn parameter_problem_on_nonce_means_non_ilnp_peer() {
    // fallback off: fail fast (fallback on: fallback::tests)
    let now = Instant::now();
    let mut a = core_with(NA, LA, 1, Some((NB, LB)), |c| c.fallback = false);
    let syn = udp(NA, NB, b"syn");
    let w = wire(&a.handle_outbound(now, &syn, Csum::Complete)).pop().unwrap();
    let (s, d) = (ilnp_addr(LB, NB), ilnp_addr(LA, NA));
    let pp = ts::icmp_error(s, d, Icmpv6Type::PARAM_PROBLEM, 2, 42, &w);
    let out = a.handle_inbound(now, &pp, Csum::Complete);
    assert!(out.contains(&Action::IlccRemove(IlccKey::stable(NB))));
    let d = delivered(&out);
    assert_eq!(d.len(), 1);
    assert_eq!(&d[0][40..42], &[1, 3], "Destination Unreachable / address unreachable");
    assert_eq!(&d[0][48..48 + syn.len()], &syn[..], "quotes the application's packet");
    assert_eq!(a.stats().get("non_ilnp_peer"), 1);
    assert!(a.peers().next().unwrap().non_ilnp);
    // the next attempt fails at once without touching the wire
    let out = a.handle_outbound(now, &syn, Csum::Complete);
    assert!(wire(&out).is_empty());
    assert_eq!(delivered(&out).len(), 1);
}

#[test]
fn capacity_bound_never_evicts_established() {
    let now = Instant::now();
    let mut cfg = CoreConfig::new(P, NB);
    cfg.ilcc_max_entries = 3;
    let mut b = Core::new(cfg, Box::new(TestRng::new(9)));
    b.set_local_locators(now, vec![local(LB)]);
    let mut a = core(NA, LA, 1, Some((NB, LB)));
    let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    b.handle_inbound(now, &w, Csum::Complete);
    for i in 0..100u64 {
        let n = Nid(0x0200_0000_0000_1000 + i);
        let mut c = core(n, LA, 100 + i, Some((NB, LB)));
        let w = wire(&c.handle_outbound(now, &udp(n, NB, b"flood"), Csum::Complete)).pop().unwrap();
        b.handle_inbound(now, &w, Csum::Complete);
    }
    assert_eq!(b.ilcc.iter().count(), 3);
    assert!(b.ilcc.iter().any(|e| e.nid == NA));
    assert_eq!(b.stats().get("ilcc_full"), 98);
    let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"still"), Csum::Complete)).pop().unwrap();
    assert_eq!(delivered(&b.handle_inbound(now, &w, Csum::Complete)).len(), 1);
}

#[test]
fn idle_entries_age_out_unless_active() {
    let (mut a, _b, _, _) = session();
    let t0 = Instant::now();
    let idle = a.config().idle_timeout;
    a.note_activity(IlccKey::stable(NB), t0 + idle / 2);
    assert!(a.handle_timeout(t0 + idle).iter().all(|x| !matches!(x, Action::IlccRemove(_))));
    let out = a.handle_timeout(t0 + idle * 2);
    assert!(out.contains(&Action::IlccRemove(IlccKey::stable(NB))));
    assert_eq!(a.ilcc.iter().count(), 0);
}

#[test]
fn hard_handoff_ages_old_locator() {
    let now = Instant::now();
    let mut cfg = CoreConfig::new(P, NB);
    cfg.handoff = HandoffMode::Hard;
    let mut b = Core::new(cfg, Box::new(TestRng::new(5)));
    b.set_local_locators(now, vec![local(LB)]);
    let mut a = core(NA, LA, 1, Some((NB, LB)));
    let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(delivered(&b.handle_inbound(now, &w, Csum::Complete)).len(), 1);
    b.set_local_locators(now, vec![local(LB2)]);
    // a late packet to the old locator is dropped and counted
    assert!(delivered(&b.handle_inbound(now, &w, Csum::Complete)).is_empty());
    assert_eq!(b.stats().get("aged_local_locator"), 1);
}

#[test]
fn ninety_six_bit_nonces() {
    let now = Instant::now();
    let mut cfg = CoreConfig::new(P, NA);
    cfg.nonce_len = 12;
    let mut a = Core::new(cfg, Box::new(TestRng::new(3)));
    a.set_local_locators(now, vec![local(LA)]);
    a.add_peer(PeerRecord { name: "b".into(), nid: NB, locators: vec![PeerLocator { loc: LB, pref: 1 }] });
    let mut b = core(NB, LB, 2, None);
    let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(nonce_of(&w).len(), 12);
    assert_eq!(delivered(&b.handle_inbound(now, &w, Csum::Complete)).len(), 1);
}

#[test]
fn nonce_byte_8_never_has_its_top_bit_set() {
    // DestOpts header byte 12 (ilnp_wire::destopts::GSO_DOFF_BYTE) is nonce byte 8;
    // a router reads its high nibble as a TCP data offset (tests/test_gso_exthdr.py)
    let mut cfg = CoreConfig::new(P, NA);
    cfg.nonce_len = 12;
    let mut a = Core::new(cfg, Box::new(TestRng::new(7)));
    let mut high = [false; 2];
    for _ in 0..512 {
        let n = a.new_nonce();
        let b = n.as_bytes();
        assert!(b[8] < 0x80, "nonce {b:02x?}");
        high[0] |= b[8] >= 0x40; // the other bits still vary
        high[1] |= b[0] >= 0x80;
    }
    assert_eq!(high, [true, true]);
}

#[test]
fn newest_locator_is_preferred_on_join_and_advertised_first() {
    let (mut a, mut b, _, _) = session();
    let t0 = Instant::now();
    // B joins a second network: both locators valid, the new one preferred
    let out = b.set_local_locators(t0 + Duration::from_secs(1), vec![local(LB), local(LB2)]);
    let lu = parse_lu(&wire(&out)[0]);
    assert_eq!(lu.lu.entries.iter().map(|e| e.locator).collect::<Vec<_>>(), vec![LB2, LB]);
    // the LU leaves from the locator A knows (still usable) first, then from the new
    // one; data from the new one
    assert_eq!(wire(&out).iter().map(|w| src_loc(w)).collect::<Vec<_>>(), [LB, LB2]);
    assert_eq!(split_addr(lu.src).0, LB, "the LU leaves from the locator the peer knows first");
    assert_eq!(b.ilcc.iter().next().unwrap().local_locator, LB2, "data from the new network");
    a.handle_inbound(t0, &wire(&out)[0], Csum::Complete);
    let w = wire(&a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(split_addr(ipv6::Packet::new_checked(&w[..]).unwrap().dst()).0, LB2);
    // soft handoff: B still accepts on the old locator meanwhile
    let mut to_old = w.clone();
    to_old[24..32].copy_from_slice(&LB.to_bytes());
    assert_eq!(delivered(&b.handle_inbound(t0, &to_old, Csum::Complete)).len(), 1);
}

#[test]
fn hard_handoff_ages_previous_locator_on_join() {
    let now = Instant::now();
    let mut cfg = CoreConfig::new(P, NB);
    cfg.handoff = HandoffMode::Hard;
    let mut b = Core::new(cfg, Box::new(TestRng::new(5)));
    b.set_local_locators(now, vec![local(LB)]);
    let mut a = core(NA, LA, 1, Some((NB, LB)));
    let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(delivered(&b.handle_inbound(now, &w, Csum::Complete)).len(), 1);
    // B joins a new network while the old link is still up: the LU lists only the new locator
    let out = b.set_local_locators(now + Duration::from_secs(1), vec![local(LB), local(LB2)]);
    let lu = parse_lu(&wire(&out)[0]);
    assert_eq!(lu.lu.entries.iter().map(|e| e.locator).collect::<Vec<_>>(), vec![LB2]);
    // the kernel still reports LB on the next sync: it stays aged
    b.set_local_locators(now + Duration::from_secs(2), vec![local(LB), local(LB2)]);
    assert!(delivered(&b.handle_inbound(now, &w, Csum::Complete)).is_empty());
    assert_eq!(b.stats().get("aged_local_locator"), 1);
}

#[test]
fn responder_sends_its_nonce_so_one_way_flows_can_be_updated() {
    let now = Instant::now();
    let mut a = core(NA, LA, 1, Some((NB, LB)));
    let mut b = core(NB, LB, 2, None);
    let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"one-way"), Csum::Complete)).pop().unwrap();
    let out = b.handle_inbound(now, &w, Csum::Complete);
    let back = wire(&out);
    assert_eq!(back.len(), 1, "a nonce-only packet back to the initiator");
    assert_eq!(back[0][6], 60);
    assert_eq!(back[0][40], NextHeader::NONE.0);
    let out = a.handle_inbound(now, &back[0], Csum::Complete);
    assert!(delivered(&out).is_empty(), "nothing for the stack");
    assert_eq!(a.ilcc.iter().next().unwrap().nonce_rx, Some(nonce_of(&back[0])));
    // so B's Locator Update now verifies at A
    let out = b.set_local_locators(now, vec![local(LB2)]);
    let acks = wire(&a.handle_inbound(now, &wire(&out)[0], Csum::Complete));
    assert_eq!(acks.len(), 1);
}

/// A sends B a datagram at t0; B's nonce-only answer reaches A 40 ms later: A's RTT
/// estimate for B.
fn rtt_40ms(a: &mut Core, b: &mut Core, t0: Instant) {
    let w = wire(&a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    let back = wire(&b.handle_inbound(t0, &w, Csum::Complete));
    a.handle_inbound(t0 + Duration::from_millis(40), &back[0], Csum::Complete);
}

#[test]
fn lu_timer_follows_measured_rtt_and_duplicate_acks_are_not_drops() {
    let t0 = Instant::now();
    let mut a = core(NA, LA, 1, Some((NB, LB)));
    let mut b = core(NB, LB, 2, None);
    rtt_40ms(&mut a, &mut b, t0);
    assert_eq!(a.ilcc.iter().next().unwrap().srtt_us, Some(40_000));
    // A moves: its LU is retransmitted after 2 x 40 ms, not the 250 ms default
    let t1 = t0 + Duration::from_secs(1);
    let lu1 = wire(&a.set_local_locators(t1, vec![local(Locator(0x2001_0db8_00aa_0000))]));
    assert!(wire(&a.handle_timeout(t1 + Duration::from_millis(79))).is_empty());
    let lu2 = wire(&a.handle_timeout(t1 + Duration::from_millis(80)));
    assert_eq!(lu2.len(), 1);
    // both copies are acked; the second ack is a duplicate, counted but not a drop
    let ack1 = wire(&b.handle_inbound(t1, &lu1[0], Csum::Complete));
    let ack2 = wire(&b.handle_inbound(t1, &lu2[0], Csum::Complete));
    a.handle_inbound(t1 + Duration::from_millis(90), &ack1[0], Csum::Complete);
    a.handle_inbound(t1 + Duration::from_millis(91), &ack2[0], Csum::Complete);
    assert_eq!(a.stats().get("lu_acked"), 1);
    assert_eq!(a.stats().get("lu_duplicate_ack"), 1);
    assert_eq!(a.stats().get("lu_unexpected_ack"), 0);
}

#[test]
fn fixed_lu_timer_retransmits_every_interval_whatever_the_rtt() {
    // the seeds' timer (thesis §3.3: 1 s, 5 attempts): a measured 40 ms RTT changes nothing
    let t0 = Instant::now();
    let fixed = LuTimers { mode: LuTimerMode::Fixed(Duration::from_secs(1)), max_attempts: 5, ..LuTimers::default() };
    let mut a = core_with(NA, LA, 1, Some((NB, LB)), |c| c.lu = fixed);
    let mut b = core(NB, LB, 2, None);
    rtt_40ms(&mut a, &mut b, t0);
    assert_eq!(a.ilcc.iter().next().unwrap().srtt_us, Some(40_000));
    let t1 = t0 + Duration::from_secs(1);
    assert_eq!(wire(&a.set_local_locators(t1, vec![local(Locator(0x2001_0db8_00aa_0000))])).len(), 1);
    let mut sent_at = vec![Duration::ZERO];
    for ms in (10..8000).step_by(10) {
        let t = t1 + Duration::from_millis(ms);
        if !wire(&a.handle_timeout(t)).is_empty() {
            sent_at.push(t - t1);
        }
    }
    let secs = |v: &[u64]| v.iter().map(|s| Duration::from_secs(*s)).collect::<Vec<_>>();
    assert_eq!(sent_at, secs(&[0, 1, 2, 3, 4]), "every 1 s, no backoff, 5 attempts");
    assert_eq!(a.stats().get("lu_failed"), 1);
}

pub(crate) fn dst_loc(w: &[u8]) -> Locator {
    split_addr(ipv6::Packet::new_checked(w).unwrap().dst()).0
}
pub(crate) fn src_loc(w: &[u8]) -> Locator {
    split_addr(ipv6::Packet::new_checked(w).unwrap().src()).0
}
pub(crate) fn events(actions: &[Action]) -> Vec<&Event> {
    actions.iter().filter_map(|a| if let Action::Event(e) = a { Some(e) } else { None }).collect()
}

#[test]
fn same_seed_same_nonces_other_seed_other_nonces() {
    let now = Instant::now();
    let nonce = |seed| {
        let mut a = core(NA, LA, seed, Some((NB, LB)));
        nonce_of(&wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete))[0])
    };
    assert_eq!(nonce(7), nonce(7));
    assert_ne!(nonce(7), nonce(8));
}

#[test]
fn local_icmp_error_goes_out_quoting_the_wire_form_and_comes_back_to_the_app() {
    let (mut a, mut b, _, _) = session();
    let now = Instant::now();
    // B's stack has no socket on the port: port unreachable about A's packet
    let orig = udp(NA, NB, b"to a closed port");
    let err = icmpv6::error_packet(ilnp_addr(P, NB), ilnp_addr(P, NA), Icmpv6Type::DEST_UNREACH, 4, 0, &orig);
    let w = wire(&b.handle_outbound(now, &err, Csum::Complete)).pop().expect("sent");
    assert_eq!(nonce_of(&w), b.ilcc.iter().next().unwrap().nonce_tx, "B's own nonce on the error");
    let out = a.handle_inbound(now, &w, Csum::Complete);
    let d = delivered(&out);
    assert_eq!(d.len(), 1, "{out:?}");
    let m = icmpv6::Message::new_checked(&d[0][40..]).unwrap();
    assert_eq!((m.msg_type(), m.code()), (Icmpv6Type::DEST_UNREACH, 4));
    assert_eq!(m.invoking_packet(), &orig[..], "the app's own identifier-form packet is quoted");
    assert_eq!(a.stats().get("icmp_error_translated"), 1);

    // the same error with another outer nonce is a forgery
    let mut forged = w.clone();
    forged[44] ^= 0x55;
    assert!(delivered(&a.handle_inbound(now, &forged, Csum::Complete)).is_empty());
    assert_eq!(a.stats().get("icmp_bad_nonce"), 1);
}

#[test]
fn errors_from_a_correspondent_need_its_nonce_errors_from_routers_do_not() {
    let (mut a, _b, ab, _) = session();
    let now = Instant::now();
    // "from B" without a nonce: B has shown its nonce, so this is a forgery
    let pkt = icmpv6::error_packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), Icmpv6Type::DEST_UNREACH, 4, 0, &ab);
    assert!(delivered(&a.handle_inbound(now, &pkt, Csum::Complete)).is_empty());
    assert_eq!(a.stats().get("icmp_missing_nonce"), 1);
    // a router's Packet Too Big quoting our packet (our nonce inside): believed, MTU
    // reduced by our Destination Options header
    let router: std::net::Ipv6Addr = "2001:db8:ff::1".parse().unwrap();
    let ptb = icmpv6::error_packet(router, ilnp_addr(LA, NA), Icmpv6Type::PACKET_TOO_BIG, 0, 1400, &ab);
    let d = delivered(&a.handle_inbound(now, &ptb, Csum::Complete));
    assert_eq!(d.len(), 1);
    let m = icmpv6::Message::new_checked(&d[0][40..]).unwrap();
    assert_eq!(m.mtu(), Some(1384));
    // quoting a nonce that is not ours: dropped
    let mut other = ab.clone();
    other[44] ^= 1;
    let ptb = icmpv6::error_packet(router, ilnp_addr(LA, NA), Icmpv6Type::PACKET_TOO_BIG, 0, 1400, &other);
    assert!(delivered(&a.handle_inbound(now, &ptb, Csum::Complete)).is_empty());
    assert_eq!(a.stats().get("icmp_error_unverified"), 1);
}

#[test]
fn no_usable_local_locator_fails_the_application_at_once() {
    let (mut a, _b, _, _) = session();
    let now = Instant::now();
    a.set_local_locators(now, vec![]);
    let out = a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete);
    assert!(wire(&out).is_empty());
    let d = delivered(&out);
    assert_eq!(d.len(), 1);
    assert_eq!(&d[0][40..42], &[1, 3]);
    assert_eq!(a.stats().get("no_local_locator"), 1);
    // never an error about an error
    let err =
        icmpv6::error_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), Icmpv6Type::DEST_UNREACH, 4, 0, &udp(NB, NA, b"y"));
    assert!(delivered(&a.handle_outbound(now, &err, Csum::Complete)).is_empty());
    assert_eq!(a.stats().get("no_local_locator"), 2);
    // a new peer with no locator of ours: refused the same way
    a.add_peer(PeerRecord {
        name: "c".into(),
        nid: Nid(0x0200_0000_0000_0042),
        locators: vec![PeerLocator { loc: LB, pref: 1 }],
    });
    let out = a.handle_outbound(now, &udp(NA, Nid(0x0200_0000_0000_0042), b"x"), Csum::Complete);
    assert_eq!(delivered(&out).len(), 1);
    assert_eq!(a.stats().get("no_local_locator"), 3);
    // the locator comes back: traffic flows again
    a.set_local_locators(now, vec![local(LA)]);
    assert_eq!(wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).len(), 1);
}

#[test]
fn advertised_lifetimes_age_remote_locators_without_dropping_them() {
    let (mut a, mut b, _, _) = session();
    let t0 = Instant::now();
    let lb3 = Locator(0x2001_0db8_00b3_0000);
    let short = LocalLocator { lifetime_s: 30, ..local(LB2) };
    let long = LocalLocator { pref: 20, lifetime_s: 300, ..local(lb3) };
    let out = b.set_local_locators(t0, vec![short, long]);
    let lu = wire(&out);
    let parsed = parse_lu(&lu[0]);
    assert_eq!(parsed.lu.entries.iter().map(|e| e.lifetime).collect::<Vec<_>>(), vec![30, 300]);
    a.handle_inbound(t0, &lu[0], Csum::Complete);
    assert_eq!(a.poll_timeout(), Some(t0 + Duration::from_secs(30)));
    // before the lifetime ends the preferred one is used
    let w = wire(&a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(dst_loc(&w), LB2);
    let out = a.handle_timeout(t0 + Duration::from_secs(30));
    assert!(out
        .iter()
        .any(|x| matches!(x, Action::IlccUpsert(s) if s.remote_loc == lb3 && s.remote_locs.contains(&LB2))));
    assert_eq!(a.stats().get("remote_locator_aged"), 1);
    assert!(events(&out).iter().any(|e| matches!(e, Event::RemoteLocatorAged { nid: NB, locator } if *locator == LB2)));
    let e = a.ilcc.iter().next().unwrap();
    assert_eq!(e.remote_locators.iter().find(|r| r.loc == LB2).unwrap().state, LocatorState::Aged);
    let w = wire(&a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(dst_loc(&w), lb3);
    // all aged: the best aged one is still used (a live session survives a late LU)
    a.handle_timeout(t0 + Duration::from_secs(300));
    assert_eq!(a.stats().get("remote_locator_aged"), 2);
    assert_eq!(a.ilcc.iter().count(), 1, "aged, not removed");
    let w = wire(&a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(dst_loc(&w), LB2);
    // and packets from an aged locator are still accepted
    let from_aged = wire(&b.handle_outbound(t0, &udp(NB, NA, b"late"), Csum::Complete)).pop().unwrap();
    assert_eq!(delivered(&a.handle_inbound(t0, &from_aged, Csum::Complete)).len(), 1);
}

#[test]
fn lu_ack_leaves_from_our_active_locator() {
    let (mut a, mut b, _, _) = session();
    let t0 = Instant::now();
    let la2 = Locator(0x2001_0db8_00aa_0000);
    // A joins a second network (newest preferred): its entry for B now uses LA2
    a.set_local_locators(t0 + Duration::from_secs(1), vec![local(LA), local(la2)]);
    // B moves before it heard A's LU: its LU reaches A at LA
    let lu = wire(&b.set_local_locators(t0, vec![local(LB2)])).pop().unwrap();
    assert_eq!(dst_loc(&lu), LA);
    let ack = wire(&a.handle_inbound(t0, &lu, Csum::Complete)).pop().unwrap();
    assert_eq!(src_loc(&ack), la2);
    assert_eq!(dst_loc(&ack), LB2);
    // B learns LA2 from the ack's correct nonce and is done
    let out = b.handle_inbound(t0, &ack, Csum::Complete);
    assert!(events(&out).iter().any(|e| matches!(e, Event::LuAcked { .. })));
}

#[test]
fn slow_path_counters_and_view() {
    let (a, _b, ab, ba) = session();
    let t0 = Instant::now();
    let v = a.ilcc_view(t0 + Duration::from_secs(5));
    assert_eq!(v.len(), 1);
    let e = &v[0];
    assert_eq!((e.slow_pkts_out, e.slow_pkts_in), (1, 1));
    assert_eq!((e.slow_bytes_out, e.slow_bytes_in), (udp(NA, NB, b"hello").len() as u64, ba.len() as u64));
    assert!(e.age_s >= 5.0 && e.idle_s >= 5.0);
    let j = serde_json::to_value(e).unwrap();
    assert_eq!(j["nid"], NB.to_string());
    assert_eq!(j["remote_locators"][0]["state"], "active");
    assert_eq!(j["nonce_tx"], ilcc::hex(nonce_of(&ab).as_bytes()));
}

#[test]
fn events_and_stats_serialise_for_the_monitor() {
    let mut a = core(NA, LA, 1, None);
    let out = a.handle_outbound(Instant::now(), &udp(NA, NB, b"x"), Csum::Complete);
    let ev = events(&out)[0];
    let j = serde_json::to_value(ev).unwrap();
    assert_eq!(j["event"], "drop");
    assert_eq!(j["reason"], "unknown_peer");
    assert!(ev.to_string().contains("unknown_peer"), "{ev}");
    let s = serde_json::to_value(a.stats()).unwrap();
    assert_eq!(s["counters"]["unknown_peer"], 1);
    let ev = Event::NonIlnpPeer { nid: NB };
    assert_eq!(serde_json::to_value(&ev).unwrap()["nid"], NB.to_string());
    assert!(ev.to_string().contains("not ILNPv6-capable"));
}

#[test]
fn garbage_is_dropped_with_a_reason_never_a_panic() {
    let (mut a, _b, ab, _) = session();
    let now = Instant::now();
    let mut rng = TestRng::new(42);
    for len in 0..ab.len() {
        a.handle_inbound(now, &ab[..len], Csum::Complete);
        a.handle_outbound(now, &udp(NA, NB, b"hello")[..len.min(45)], Csum::Complete);
    }
    for _ in 0..2000 {
        let mut p = ab.clone();
        let i = (rng.next_u32() as usize) % p.len();
        p[i] ^= rng.next_u32() as u8 | 1;
        a.handle_inbound(now, &p, Csum::Complete);
    }
    let drops: u64 = a
        .stats()
        .counters
        .iter()
        .filter(|(k, _)| !k.starts_with("peer_") && !k.starts_with("remote_"))
        .map(|(_, v)| v)
        .sum();
    assert!(drops > 0);
    assert!(a.stats().get("malformed") > 0);
}

#[test]
fn flush_and_peer_deletion() {
    let (mut a, _b, _, _) = session();
    assert!(a.del_peer(NB));
    assert!(!a.del_peer(NB));
    assert_eq!(a.peers().count(), 0);
    // the live session outlives the static record
    assert_eq!(wire(&a.handle_outbound(Instant::now(), &udp(NA, NB, b"x"), Csum::Complete)).len(), 1);
    let out = a.flush_ilcc();
    assert!(out.contains(&Action::IlccRemove(IlccKey::stable(NB))));
    assert_eq!(a.ilcc.iter().count(), 0);
    // without the record a new session cannot start
    let out = a.handle_outbound(Instant::now(), &udp(NA, NB, b"x"), Csum::Complete);
    assert!(wire(&out).is_empty());
    assert_eq!(a.stats().get("unknown_peer"), 1);
}

// ---------------------------------------------------------------- multihoming

fn local_pref(loc: Locator, ifindex: u32, pref: u16) -> LocalLocator {
    LocalLocator {
        loc,
        ifindex,
        pref,
        lifetime_s: 30,
        state: LocatorState::Active,
        has_router: true,
        deprecated: false,
    }
}

fn lu_locs(w: &[u8]) -> Vec<(Locator, u16)> {
    parse_lu(w).lu.entries.iter().map(|e| (e.locator, e.preference)).collect()
}

#[test]
fn router_preference_sets_locator_preference_and_configuration_wins() {
    use RouterPreference::*;
    assert_eq!(locator_preference(None, Some(High)), 5);
    assert_eq!(locator_preference(None, Some(Medium)), DEFAULT_LOCATOR_PREF);
    assert_eq!(locator_preference(None, Some(Low)), 15);
    assert_eq!(locator_preference(None, None), 20, "no default router behind the uplink: demoted, kept");
    assert!(locator_preference(None, Some(High)) < locator_preference(None, Some(Low)));
    for r in [None, Some(High), Some(Low)] {
        assert_eq!(locator_preference(Some(42), r), 42, "explicit configuration wins over {r:?}");
    }
    assert_eq!(serde_json::to_value(High).unwrap(), "high");
}

/// B has two uplinks at once: LB behind a high-preference router, LB2 (newer)
/// behind a low one. The preference beats "newest wins"; when LB goes away B fails
/// over in the same step: data and the LU leave from LB2 at once, A acks.
#[test]
fn multihomed_preferred_locator_is_used_and_failover_is_immediate() {
    let (mut a, mut b, _, _) = session();
    let t0 = Instant::now();
    let out = b.set_local_locators(t0, vec![local_pref(LB, 2, 5), local_pref(LB2, 3, 15)]);
    // LB2 is newer but worse: B keeps using LB, and tells A about both
    let lus = wire(&out);
    assert_eq!(lus.len(), 1);
    assert_eq!(lu_locs(&lus[0]), vec![(LB, 5), (LB2, 15)]);
    assert_eq!(src_loc(&lus[0]), LB);
    let acks = wire(&a.handle_inbound(t0, &lus[0], Csum::Complete));
    b.handle_inbound(t0, &acks[0], Csum::Complete);
    let w = wire(&a.handle_outbound(t0, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(dst_loc(&w), LB, "A sends to B's preferred locator");
    let w = wire(&b.handle_outbound(t0, &udp(NB, NA, b"y"), Csum::Complete)).pop().unwrap();
    assert_eq!(src_loc(&w), LB);
    assert_eq!(b.ilcc.iter().next().unwrap().local_locator, LB);
    // LB's uplink goes down: the very same call switches and sends the LU
    let t1 = t0 + Duration::from_secs(1);
    let out = b.set_local_locators(t1, vec![local_pref(LB2, 3, 15)]);
    assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.local_loc == LB2)));
    let lus = wire(&out);
    assert_eq!(lus.len(), 1, "LU at once, no timer");
    assert_eq!((src_loc(&lus[0]), lu_locs(&lus[0])), (LB2, vec![(LB2, 15)]));
    let w = wire(&b.handle_outbound(t1, &udp(NB, NA, b"z"), Csum::Complete)).pop().unwrap();
    assert_eq!(src_loc(&w), LB2);
    let acks = wire(&a.handle_inbound(t1, &lus[0], Csum::Complete));
    assert_eq!(dst_loc(&acks[0]), LB2);
    let out = b.handle_inbound(t1 + Duration::from_millis(2), &acks[0], Csum::Complete);
    assert!(events(&out).iter().any(|e| matches!(e, Event::LuAcked { rtt_us: 2000, attempts: 1, .. })));
    let w = wire(&a.handle_outbound(t1, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(dst_loc(&w), LB2);
    assert_eq!(delivered(&b.handle_inbound(t1, &w, Csum::Complete)).len(), 1);
}

/// The router behind LB stops (RA router lifetime 0): LB stays configured but its
/// preference drops behind LB2's. A preference change alone is an LU and a
/// failover; lifetimes counting down are neither.
#[test]
fn router_loss_demotes_the_locator_and_fails_over() {
    let (mut a, mut b, _, _) = session();
    let t0 = Instant::now();
    let out = b.set_local_locators(t0, vec![local_pref(LB, 2, 5), local_pref(LB2, 3, 15)]);
    let acks = wire(&a.handle_inbound(t0, &wire(&out)[0], Csum::Complete));
    b.handle_inbound(t0, &acks[0], Csum::Complete);
    let mut later = vec![local_pref(LB, 2, 5), local_pref(LB2, 3, 15)];
    later[0].lifetime_s = 17;
    assert!(wire(&b.set_local_locators(t0 + Duration::from_secs(13), later)).is_empty(), "lifetime only: no LU");
    let t1 = t0 + Duration::from_secs(14);
    let out = b.set_local_locators(t1, vec![local_pref(LB, 2, locator_preference(None, None)), local_pref(LB2, 3, 15)]);
    let lus = wire(&out);
    // LB lost its preference, not its router here: the LU leaves from it (A knows
    // it), then from LB2
    assert_eq!(lus.iter().map(|w| src_loc(w)).collect::<Vec<_>>(), [LB, LB2]);
    assert_eq!((src_loc(&lus[0]), lu_locs(&lus[0])), (LB, vec![(LB2, 15), (LB, 20)]));
    assert_eq!(b.ilcc.iter().next().unwrap().local_locator, LB2);
    a.handle_inbound(t1, &lus[0], Csum::Complete);
    let e = a.ilcc.iter().next().unwrap();
    let states: Vec<(Locator, LocatorState)> = e.remote_locators.iter().map(|r| (r.loc, r.state)).collect();
    assert_eq!(states, vec![(LB2, LocatorState::Active), (LB, LocatorState::Valid)]);
    // soft: the demoted locator is still accepted meanwhile
    let mut to_old = wire(&a.handle_outbound(t1, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    assert_eq!(dst_loc(&to_old), LB2);
    to_old[24..32].copy_from_slice(&LB.to_bytes());
    assert_eq!(delivered(&b.handle_inbound(t1, &to_old, Csum::Complete)).len(), 1);
}

// ---------------------------------------------------------------- bad Locator Updates

/// A wire LU with any ICMPv6 body (checksum made correct unless `bad_csum`).
fn raw_lu(
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    nonce: &Nonce,
    mut icmp: Vec<u8>,
    bad_csum: bool,
) -> Vec<u8> {
    ts::set_icmpv6_checksum(&src, &dst, &mut icmp, u16::from(bad_csum));
    ts::with_nonce(src, dst, nonce, NextHeader::ICMPV6, &icmp)
}

fn lu_body(num: u8, entries: &[(Locator, u16)]) -> Vec<u8> {
    let mut b = vec![156, 0, 0, 0, num, 1, 0, 0];
    for (l, p) in entries {
        b.extend_from_slice(&l.to_bytes());
        b.extend_from_slice(&p.to_be_bytes());
        b.extend_from_slice(&30u16.to_be_bytes());
    }
    b
}

#[test]
fn malformed_lus_are_counted_by_kind_even_with_the_right_nonce() {
    let (mut a, _b, _, ba) = session();
    let now = Instant::now();
    let (src, dst, n) = (ilnp_addr(LB, NB), ilnp_addr(LA, NA), nonce_of(&ba));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (raw_lu(src, dst, &n, lu_body(0, &[]), false), "lu_malformed_no_locators"),
        (raw_lu(src, dst, &n, lu_body(255, &[(LB2, 1); 3]), false), "lu_malformed_length_mismatch"),
        // cut in the middle of the only entry
        (raw_lu(src, dst, &n, lu_body(1, &[(LB2, 1)])[..14].to_vec(), false), "lu_malformed_length_mismatch"),
        (raw_lu(src, dst, &n, vec![156, 0, 0, 0, 1], false), "lu_malformed_truncated"),
        (raw_lu(src, dst, &n, lu_body(1, &[(LB2, 1)]), true), "lu_malformed_bad_checksum"),
        (
            raw_lu(
                src,
                dst,
                &n,
                {
                    let mut b = lu_body(1, &[(LB2, 1)]);
                    b[5] = 9;
                    b
                },
                false,
            ),
            "lu_malformed_unknown_operation",
        ),
    ];
    for (pkt, kind) in &cases {
        let before = a.stats().get(kind);
        let out = a.handle_inbound(now, pkt, Csum::Complete);
        assert!(wire(&out).is_empty(), "{kind}: no ack");
        assert!(events(&out).iter().any(|e| matches!(e, Event::Drop { reason: "lu_malformed", .. })), "{kind}");
        assert_eq!(a.stats().get(kind), before + 1, "{kind}");
    }
    assert_eq!(a.stats().get("lu_malformed"), cases.len() as u64);
    assert_eq!(a.stats().get("lu_received"), 0);
    let e = a.ilcc.iter().next().unwrap();
    assert_eq!(e.remote_locators.iter().map(|r| r.loc).collect::<Vec<_>>(), vec![LB], "session untouched");
}

/// 255 locators is the most an LU can carry (RFC 6743 §2): accepted from the peer,
/// acknowledged whole, but only the best max_remote_locators are kept.
#[test]
fn lu_with_255_locators_keeps_the_best_and_acks_the_whole_body() {
    let (mut a, _b, _, ba) = session();
    let now = Instant::now();
    let entries: Vec<LuEntry> = (0..255u16)
        .map(|i| LuEntry { locator: Locator(0x2001_0db8_1000_0000 + u64::from(i)), preference: 1000 - i, lifetime: 60 })
        .collect();
    let lu = LocatorUpdate { operation: LuOperation::Advertisement, entries };
    let pkt = translate::lu_packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), &nonce_of(&ba), &lu).unwrap();
    let out = a.handle_inbound(now, &pkt, Csum::Complete);
    let acks = wire(&out);
    assert_eq!(acks.len(), 1);
    assert_eq!(parse_lu(&acks[0]).lu, lu.ack(), "ack identical except Operation");
    let e = a.ilcc.iter().next().unwrap();
    assert_eq!(e.remote_locators.len(), 8);
    assert_eq!(e.remote_locators[0].loc, Locator(0x2001_0db8_1000_0000 + 254), "lowest preference value first");
    assert!(e.remote_locators.windows(2).all(|w| w[0].pref <= w[1].pref));
    assert_eq!(a.stats().get("lu_locators_ignored"), 247);
    assert_eq!(dst_loc(&acks[0]), Locator(0x2001_0db8_1000_0000 + 254));
    // the peer's data from a ninth locator is still delivered, its locator not kept
    let mut w = ba.clone();
    w[8..16].copy_from_slice(&Locator(0x2001_0db8_9999_0000).to_bytes());
    assert_eq!(delivered(&a.handle_inbound(now, &w, Csum::Complete)).len(), 1);
    assert_eq!(a.ilcc.iter().next().unwrap().remote_locators.len(), 8);
    assert_eq!(a.stats().get("remote_locator_not_learned_full"), 1);
}

/// Ten thousand forged and malformed LUs, then B's real handoff: every forgery is
/// dropped and counted by reason, no state grows, and the real LU is acked.
#[test]
fn lu_flood_is_counted_and_a_real_handoff_still_completes() {
    let (mut a, mut b, _, _) = session();
    let t0 = Instant::now();
    let dst = ilnp_addr(LA, NA);
    let mut rng = TestRng::new(9);
    let lu = |l: Locator| LocatorUpdate {
        operation: LuOperation::Advertisement,
        entries: vec![LuEntry { locator: l, preference: 1, lifetime: 30 }],
    };
    let mut sent = BTreeMap::new();
    for i in 0..10_000u32 {
        let wrong = Nonce::N32(rng.next_u32().to_be_bytes());
        let evil = Locator(0x2001_0db8_dead_0000 + u64::from(i));
        let (pkt, reason) = match i % 4 {
            0 => (translate::lu_packet(ilnp_addr(LB, NB), dst, &wrong, &lu(evil)).unwrap(), "lu_bad_nonce"),
            1 => (
                translate::lu_packet(ilnp_addr(evil, Nid(u64::from(rng.next_u32()) << 1)), dst, &wrong, &lu(evil))
                    .unwrap(),
                "lu_unknown_peer",
            ),
            2 => (raw_lu(ilnp_addr(LB, NB), dst, &wrong, lu_body(0, &[]), false), "lu_malformed"),
            _ => (raw_lu(ilnp_addr(LB, NB), dst, &wrong, lu_body(255, &[(evil, 1); 4]), false), "lu_malformed"),
        };
        *sent.entry(reason).or_insert(0u64) += 1;
        let out = a.handle_inbound(t0, &pkt, Csum::Complete);
        assert!(wire(&out).is_empty(), "forgery {i} answered");
    }
    for (reason, n) in &sent {
        assert_eq!(a.stats().get(reason), *n, "{reason}");
    }
    assert_eq!(a.stats().get("lu_malformed_no_locators"), 2500);
    assert_eq!(a.stats().get("lu_malformed_length_mismatch"), 2500);
    assert_eq!(a.ilcc.iter().count(), 1, "no entry for forged peers");
    assert_eq!(a.ilcc.iter().next().unwrap().remote_locators.len(), 1);
    // the real handoff in the middle of it
    let t1 = t0 + Duration::from_millis(1);
    let lus = wire(&b.set_local_locators(t1, vec![local(LB2)]));
    let acks = wire(&a.handle_inbound(t1, &lus[0], Csum::Complete));
    assert_eq!(acks.len(), 1);
    let out = b.handle_inbound(t1, &acks[0], Csum::Complete);
    assert!(events(&out).iter().any(|e| matches!(e, Event::LuAcked { .. })));
    let w = wire(&a.handle_outbound(t1, &udp(NA, NB, b"after"), Csum::Complete)).pop().unwrap();
    assert_eq!(dst_loc(&w), LB2);
}

// ---------------------------------------------------------------- soft-handoff quiet period

/// LB's uplink lost its default router (the RA's router lifetime ran out or was 0).
fn routerless(l: LocalLocator) -> LocalLocator {
    LocalLocator { has_router: false, pref: locator_preference(None, None), ..l }
}

fn retired(actions: &[Action]) -> Vec<(Locator, u64)> {
    events(actions)
        .into_iter()
        .filter_map(|e| {
            if let Event::LocalLocatorRetired { locator, quiet_ms } = e {
                Some((*locator, *quiet_ms))
            } else {
                None
            }
        })
        .collect()
}

/// Delivers every LU in `out` to `a` and its acks back to `b`.
fn deliver_lus(a: &mut Core, b: &mut Core, out: &[Action], t: Instant) {
    for lu in wire(out) {
        for ack in wire(&a.handle_inbound(t, &lu, Csum::Complete)) {
            b.handle_inbound(t, &ack, Csum::Complete);
        }
    }
}

/// A opens a session to B on LB at `t`; B's config from `cfg`. At t + 1 s B joins
/// LB2 (newest: preferred) and A learns both. Returns (A, B, t).
fn moved(cfg: impl FnOnce(&mut CoreConfig)) -> (Core, Core, Instant) {
    let t = Instant::now();
    let mut a = core(NA, LA, 1, Some((NB, LB)));
    let mut c = CoreConfig::new(P, NB);
    cfg(&mut c);
    let mut b = Core::new(c, Box::new(TestRng::new(2)));
    b.set_local_locators(t, vec![local(LB)]);
    let ab = wire(&a.handle_outbound(t, &udp(NA, NB, b"hello"), Csum::Complete)).pop().unwrap();
    let out = b.handle_inbound(t, &ab, Csum::Complete);
    assert_eq!(delivered(&out).len(), 1);
    for w in wire(&out) {
        a.handle_inbound(t, &w, Csum::Complete); // B's nonce-only packet: A learns its nonce
    }
    let t0 = t + Duration::from_secs(1);
    let out = b.set_local_locators(t0, vec![local(LB), local(LB2)]);
    let lus = wire(&out);
    // from the locator A knows, then from the new one (lu::lu_sources); hard: LB is aged
    let from = if b.config().handoff == HandoffMode::Hard { vec![LB2] } else { vec![LB, LB2] };
    assert_eq!(lus.iter().map(|w| src_loc(w)).collect::<Vec<_>>(), from);
    assert_eq!(lu_locs(&lus[0])[0], (LB2, 10), "the newest locator is preferred");
    deliver_lus(&mut a, &mut b, &out, t0);
    (a, b, t)
}

/// A's packet to B's locator `to` (A's data goes to the active one; rewritten).
fn a_to(a: &mut Core, t: Instant, to: Locator) -> Vec<u8> {
    let mut w = wire(&a.handle_outbound(t, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
    w[24..32].copy_from_slice(&to.to_bytes());
    w
}

#[test]
fn quiet_period_retires_an_old_locator_only_when_quiet_and_routerless() {
    let (mut a, mut b, t) = moved(|_| {});
    let ms = Duration::from_millis;
    // R's RA stops at t + 2 s: LB demoted (a preference change: one LU), not retired,
    // since the last packet on it arrived at t and the quiet period is 3 s
    let t1 = t + ms(2000);
    let out = b.set_local_locators(t1, vec![routerless(local(LB)), local(LB2)]);
    assert!(retired(&out).is_empty());
    assert_eq!(lu_locs(&wire(&out)[0]), vec![(LB2, 10), (LB, 20)]);
    deliver_lus(&mut a, &mut b, &out, t1);
    // the core asks to be woken when the quiet period ends, not before
    assert_eq!(b.poll_timeout(), Some(t + ms(3000)));
    let out = b.handle_timeout(t + ms(2999));
    assert!(retired(&out).is_empty() && wire(&out).is_empty());
    // both conditions hold: retired, and an LU lists what remains
    let out = b.handle_timeout(t + ms(3000));
    assert_eq!(retired(&out), vec![(LB, 3000)]);
    let lus = wire(&out);
    assert_eq!(lus.len(), 1);
    assert_eq!((src_loc(&lus[0]), lu_locs(&lus[0])), (LB2, vec![(LB2, 10)]));
    assert_eq!(b.stats().get("local_locator_retired"), 1);
    let lb = b.local.all().iter().find(|l| l.loc == LB).unwrap().clone();
    assert_eq!(lb.state, LocatorState::Aged, "kept, not advertised, not a source");
    assert!(out.iter().any(
        |x| matches!(x, Action::LocalLocators(l) if l.iter().any(|l| l.loc == LB && l.state == LocatorState::Aged))
    ));
    deliver_lus(&mut a, &mut b, &out, t + ms(3000));
    let e = a.ilcc.iter().next().unwrap();
    assert_eq!(e.remote_locators.iter().map(|r| r.loc).collect::<Vec<_>>(), vec![LB2]);
    // a late packet to the retired locator is still accepted (soft handoff), and
    // does not bring it back: the correspondents were told it is gone
    let late = a_to(&mut a, t + ms(3100), LB);
    let out = b.handle_inbound(t + ms(3100), &late, Csum::Complete);
    assert_eq!(delivered(&out).len(), 1);
    assert_eq!(b.stats().get("retired_local_locator_rx"), 1);
    assert!(wire(&b.handle_timeout(t + ms(9000))).is_empty());
    assert_eq!(b.local.all().iter().find(|l| l.loc == LB).unwrap().state, LocatorState::Aged);
    // nothing left to retire: no timer for it
    assert!(b.poll_timeout().unwrap() > t + ms(60_000));
    // reported again without change: still retired, no LU
    let out = b.set_local_locators(t + ms(9500), vec![routerless(local(LB)), local(LB2)]);
    assert!(wire(&out).is_empty() && retired(&out).is_empty());
    // its router comes back (the host is in that cell again): advertised again
    let out = b.set_local_locators(t + ms(10_000), vec![local(LB), local(LB2)]);
    let lus = wire(&out);
    assert_eq!(lu_locs(&lus[0]), vec![(LB2, 10), (LB, 10)]);
}

#[test]
fn quiet_but_still_routed_locator_is_kept() {
    let (mut a, mut b, t) = moved(|_| {});
    // no packet on LB for a long time, but its router is still there
    let out = b.handle_timeout(t + Duration::from_secs(60));
    assert!(retired(&out).is_empty() && wire(&out).is_empty());
    assert!(b.local.all().iter().all(|l| l.state == LocatorState::Active));
    assert!(b.poll_timeout().unwrap() >= t + Duration::from_secs(600), "only the idle timer");
    let _ = &mut a;
}

#[test]
fn quiet_period_counts_from_the_last_packet_fast_or_slow_path() {
    let (mut a, mut b, t) = moved(|_| {});
    let ms = Duration::from_millis;
    let out = b.set_local_locators(t + ms(1500), vec![routerless(local(LB)), local(LB2)]);
    deliver_lus(&mut a, &mut b, &out, t + ms(1500));
    // the fast path delivered a packet on LB at t + 2.5 s (the shell read its map)
    b.note_local_activity(LB, t + ms(2500));
    b.note_local_activity(LB, t + ms(100)); // an older stamp changes nothing
    assert_eq!(b.local.last_rx(LB), Some(t + ms(2500)));
    assert_eq!(b.poll_timeout(), Some(t + ms(5500)));
    assert!(retired(&b.handle_timeout(t + ms(3000))).is_empty(), "traffic resumed: kept");
    // then a late packet through the slow path at t + 5 s
    let w = a_to(&mut a, t + ms(5000), LB);
    assert_eq!(delivered(&b.handle_inbound(t + ms(5000), &w, Csum::Complete)).len(), 1);
    assert_eq!(b.poll_timeout(), Some(t + ms(8000)));
    assert!(retired(&b.handle_timeout(t + ms(5500))).is_empty());
    assert_eq!(retired(&b.handle_timeout(t + ms(8000))), vec![(LB, 3000)]);
}

#[test]
fn router_gone_long_after_the_last_packet_retires_at_once_with_one_lu() {
    let (_a, mut b, t) = moved(|_| {});
    let t1 = t + Duration::from_secs(10);
    let out = b.set_local_locators(t1, vec![routerless(local(LB)), local(LB2)]);
    assert_eq!(retired(&out), vec![(LB, 10_000)]);
    let lus = wire(&out);
    assert_eq!(lus.len(), 1, "the demotion and the retirement are one LU");
    assert_eq!(lu_locs(&lus[0]), vec![(LB2, 10)]);
}

#[test]
fn deprecated_address_counts_as_a_stopped_ra_and_the_preferred_locator_is_never_retired() {
    let (_a, mut b, t) = moved(|_| {});
    let t1 = t + Duration::from_secs(10);
    let dep = LocalLocator { deprecated: true, ..local(LB) };
    let out = b.set_local_locators(t1, vec![dep.clone(), local(LB2)]);
    assert_eq!(retired(&out), vec![(LB, 10_000)]);
    assert_eq!(lu_locs(&wire(&out)[0]), vec![(LB2, 10)]);
    // LB2 goes away: the retired LB is all that is left, so it is preferred and back
    let out = b.set_local_locators(t1 + Duration::from_secs(1), vec![dep.clone()]);
    assert_eq!(lu_locs(&wire(&out)[0]), vec![(LB, 10)]);
    assert_eq!(b.local.all()[0].state, LocatorState::Active);
    // a preferred locator whose RA stopped is never retired, however quiet
    let out = b.handle_timeout(t1 + Duration::from_secs(100));
    assert!(retired(&out).is_empty());
    assert_eq!(b.local.best(), Some(LB));
}

#[test]
fn hard_handoff_is_unaffected_by_the_quiet_period() {
    let (mut a, mut b, t) = moved(|c| c.handoff = HandoffMode::Hard);
    // hard: LB was aged when LB2 took over, at once
    assert_eq!(b.local.all().iter().find(|l| l.loc == LB).unwrap().state, LocatorState::Aged);
    let out = b.set_local_locators(t + Duration::from_secs(2), vec![routerless(local(LB)), local(LB2)]);
    assert!(retired(&out).is_empty());
    let out = b.handle_timeout(t + Duration::from_secs(30));
    assert!(retired(&out).is_empty() && wire(&out).is_empty());
    // and a late packet to it is dropped, as before
    let late = a_to(&mut a, t + Duration::from_secs(30), LB);
    assert!(delivered(&b.handle_inbound(t + Duration::from_secs(30), &late, Csum::Complete)).is_empty());
    assert_eq!(b.stats().get("aged_local_locator"), 1);
    assert_eq!(b.stats().get("local_locator_retired"), 0);
}

#[test]
fn zero_quiet_period_keeps_todays_behaviour() {
    let (mut a, mut b, t) = moved(|c| c.soft_quiet_period = Duration::ZERO);
    let out = b.set_local_locators(t + Duration::from_secs(10), vec![routerless(local(LB)), local(LB2)]);
    assert!(retired(&out).is_empty());
    assert_eq!(lu_locs(&wire(&out)[0]), vec![(LB2, 10), (LB, 20)], "demoted, still advertised");
    deliver_lus(&mut a, &mut b, &out, t + Duration::from_secs(10));
    assert!(b.poll_timeout().unwrap() >= t + Duration::from_secs(600), "no quiet-period timer");
    let out = b.handle_timeout(t + Duration::from_secs(100));
    assert!(retired(&out).is_empty() && wire(&out).is_empty());
    assert!(b.local.all().iter().all(|l| l.state == LocatorState::Active));
}

/// Shared-nonce correspondents (FreeBSD ILNP6, the Linux 4.9 code): one nonce both
/// ways, our own reflected in replies, LUs and acks; the nonce after a Fragment
/// header; the truncated 96-bit reflection (docs/architecture.md § Nonce models).
mod shared_nonce {
    use super::*;
    use crate::challenge::CHALLENGE_MAX;
    use crate::ilcc::IlccKey;
    use ilnp_wire::checksum;

    const LA2: Locator = Locator(0x2001_0db8_000d_0000);
    const NC: Nid = Nid(0x0200_00ff_fe00_00cc);

    /// `pkt` with its nonce replaced by `n` (same length; no checksum covers it).
    fn renonce(pkt: &[u8], n: &Nonce) -> Vec<u8> {
        let off = ilnp_wire::destopts::find_nonce_in_header(&pkt[40..], 40).unwrap().unwrap().option_offset;
        let mut v = pkt.to_vec();
        v[off + 2..off + 2 + n.len()].copy_from_slice(n.as_bytes());
        v
    }

    /// B (the FreeBSD side) opens the session to A (ilnpd, the responder): returns
    /// (A, B, B's nonce, A's nonce as its hello carried it).
    fn b_opens(adopt: bool) -> (Core, Core, Nonce, Nonce) {
        let now = Instant::now();
        let mut a = core_with(NA, LA, 1, None, |c| c.adopt_initiator_nonce = adopt);
        let mut b = core(NB, LB, 2, Some((NA, LA)));
        let ba = wire(&b.handle_outbound(now, &udp(NB, NA, b"syn"), Csum::Complete)).pop().unwrap();
        let out = a.handle_inbound(now, &ba, Csum::Complete);
        assert_eq!(delivered(&out).len(), 1);
        let hello = wire(&out).pop().expect("nonce-only hello");
        (a, b, nonce_of(&ba), nonce_of(&hello))
    }

    /// A's core restarted (state file) with B now configured as a shared-nonce peer:
    /// the restored entry keeps the two values B's session began with (an upgrade
    /// from a build without `[peer_nonce]`), the one case where ours and B's differ.
    fn shared_with_two_values(a: &Core, now: Instant) -> Core {
        let snap = a.snapshot(now);
        let mut a2 = core_with(NA, LA, 1, None, |c| {
            c.peer_shared_nonce.insert(NB);
        });
        a2.restore(now, &snap).unwrap();
        assert!(a2.ilcc.get(&IlccKey::stable(NB)).unwrap().shared_nonce);
        a2
    }

    fn reply_to_echo(echo: &[u8], nonce: &Nonce) -> Vec<u8> {
        let Ok(ilnp_wire::Packet::Data(req)) = classify(echo) else { panic!() };
        let mut reply = echo[req.upper.offset..].to_vec();
        reply[0] = Icmpv6Type::ECHO_REPLY.0;
        let (src, dst) = (ilnp_addr(LB, NB), ilnp_addr(LA, NA));
        ts::set_icmpv6_checksum(&src, &dst, &mut reply, 0);
        ts::with_nonce(src, dst, nonce, NextHeader::ICMPV6, &reply)
    }

    /// Issue #42: an observer of our direction knows our nonce. From a peer that does
    /// not reflect it is refused everywhere; from a shared-nonce peer only on the ack
    /// of our own LU (and an Echo Reply to our challenge, below), never on data or an
    /// advertisement it sends unasked.
    #[test]
    fn our_nonce_reflected_is_refused_unless_a_shared_peer_replies_to_us() {
        let now = Instant::now();
        let (mut a, mut b, nb, na) = b_opens(false);
        assert_ne!(nb, na, "own mode: per-direction nonces");
        let d = wire(&b.handle_outbound(now, &udp(NB, NA, b"data"), Csum::Complete)).pop().unwrap();
        assert_eq!(delivered(&a.handle_inbound(now, &d, Csum::Complete)).len(), 1);
        // data with ours: not delivered, not a restart (no challenge), counted
        let refl = renonce(&d, &na);
        let out = a.handle_inbound(now, &refl, Csum::Complete);
        assert!(delivered(&out).is_empty() && wire(&out).is_empty(), "{out:?}");
        assert_eq!(a.stats().dropped(DropReason::ReflectedNonce), 1);
        assert_eq!(a.stats().outcome(Outcome::PeerChallengeSent), 0);
        // an LU claiming a move, with ours: refused, the session stays where it is
        let lu = LocatorUpdate {
            operation: LuOperation::Advertisement,
            entries: vec![LuEntry { locator: LB2, preference: 10, lifetime: 300 }],
        };
        let pkt = translate::lu_packet(ilnp_addr(LB2, NB), ilnp_addr(LA, NA), &na, &lu).unwrap();
        assert!(wire(&a.handle_inbound(now, &pkt, Csum::Complete)).is_empty(), "no ack");
        assert_eq!(a.stats().dropped(DropReason::LuReflectedNonce), 1);
        assert_eq!(a.ilcc.get(&IlccKey::stable(NB)).unwrap().best_remote().unwrap().loc, LB);
        // the peer's own nonce moves it
        let pkt = translate::lu_packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), &nb, &lu).unwrap();
        a.handle_inbound(now, &pkt, Csum::Complete);
        assert_eq!(a.ilcc.get(&IlccKey::stable(NB)).unwrap().best_remote().unwrap().loc, LB2);
        // a third value is a wrong nonce: dropped, counted, challenged
        let forged = renonce(&d, &Nonce::N32([0xde, 0xad, 0xbe, 0xef]));
        assert!(delivered(&a.handle_inbound(now, &forged, Csum::Complete)).is_empty());
        assert_eq!(a.stats().dropped(DropReason::BadNonce), 1);
        assert_eq!(a.stats().outcome(Outcome::PeerChallengeSent), 1);

        // the same session, B now known to reflect (two values kept from before)
        let (a, _b, nb, na) = b_opens(false);
        let mut a = shared_with_two_values(&a, now);
        let out = a.handle_inbound(now, &renonce(&d, &na), Csum::Complete);
        assert!(delivered(&out).is_empty(), "data it sends unasked carries its own");
        assert_eq!(a.stats().dropped(DropReason::ReflectedNonce), 1);
        let adv = translate::lu_packet(ilnp_addr(LB2, NB), ilnp_addr(LA, NA), &na, &lu).unwrap();
        a.handle_inbound(now, &adv, Csum::Complete);
        assert_eq!(a.stats().dropped(DropReason::LuReflectedNonce), 1, "an advertisement is not a reply");
        // our LU, and its ack reflecting ours: accepted
        let ours = wire(&a.set_local_locators(now, vec![local(LA), local(LA2)])).pop().expect("our LU");
        let sent = parse_lu(&ours).lu;
        let ack = translate::lu_packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), &na, &sent.ack()).unwrap();
        a.handle_inbound(now, &ack, Csum::Complete);
        assert_eq!(a.stats().outcome(Outcome::LuAcked), 1);
        assert_eq!(a.stats().outcome(Outcome::NonceReflectedAccepted), 1);
        // an ack of something we never sent, reflecting ours: refused
        let other = LocatorUpdate { operation: LuOperation::Acknowledgement, entries: lu.entries.clone() };
        let ack = translate::lu_packet(ilnp_addr(LB, NB), ilnp_addr(LA, NA), &na, &other).unwrap();
        a.handle_inbound(now, &ack, Csum::Complete);
        assert_eq!(a.stats().dropped(DropReason::LuReflectedNonce), 2);
        let e = a.ilcc.get(&IlccKey::stable(NB)).unwrap();
        assert_eq!((e.nonce_rx, e.nonce_tx), (Some(nb), na), "nothing replaced");
    }

    #[test]
    fn a_reflected_answer_to_a_challenge_is_the_live_peer_only_from_a_shared_peer() {
        let now = Instant::now();
        for shared in [true, false] {
            let (a, mut b, nb, na) = b_opens(false);
            let mut a = if shared { shared_with_two_values(&a, now) } else { a };
            let d = wire(&b.handle_outbound(now, &udp(NB, NA, b"data"), Csum::Complete)).pop().unwrap();
            a.handle_inbound(now, &d, Csum::Complete);
            // a forgery opens a challenge; the peer answers the echo reflecting ours
            let forged = renonce(&d, &Nonce::N32([9, 9, 9, 9]));
            let echo = wire(&a.handle_inbound(now, &forged, Csum::Complete)).pop().expect("challenge echo");
            assert_eq!(nonce_of(&echo), na);
            a.handle_inbound(now, &reply_to_echo(&echo, &na), Csum::Complete);
            let answered = a.stats().outcome(Outcome::PeerChallengeAnswered);
            assert_eq!(answered, u64::from(shared), "shared {shared}: the live peer answered");
            assert_eq!(a.stats().dropped(DropReason::ReflectedNonce), u64::from(!shared));
            // never a restart, whoever sent it
            a.handle_timeout(now + CHALLENGE_MAX);
            assert_eq!(a.stats().outcome(Outcome::PeerRestartReplaced), 0);
            let e = a.ilcc.get(&IlccKey::stable(NB)).unwrap();
            assert_eq!((e.nonce_rx, e.nonce_tx), (Some(nb), na), "our own nonce never becomes the peer's");
        }
    }

    /// A configured shared-nonce peer that opens the session gets its own nonce back
    /// (we adopt it): FreeBSD's entry, which takes the first nonce it receives, then
    /// holds the one value its socket uses, so its unsolicited LUs carry the nonce we
    /// require.
    #[test]
    fn a_shared_peer_that_opens_the_session_gets_its_nonce_adopted() {
        let now = Instant::now();
        let mut a = core_with(NA, LA, 1, None, |c| {
            c.peer_shared_nonce.insert(NB);
        });
        let mut b = core(NB, LB, 2, Some((NA, LA)));
        let ba = wire(&b.handle_outbound(now, &udp(NB, NA, b"syn"), Csum::Complete)).pop().unwrap();
        let hello = wire(&a.handle_inbound(now, &ba, Csum::Complete)).pop().expect("hello");
        assert_eq!(nonce_of(&hello), nonce_of(&ba));
        let e = a.ilcc.get(&IlccKey::stable(NB)).unwrap();
        assert!(e.shared_nonce && e.nonce_rx == Some(e.nonce_tx));
        // another peer is not shared: our own nonce
        let mut c = core(NC, LB2, 3, Some((NA, LA)));
        let ca = wire(&c.handle_outbound(now, &udp(NC, NA, b"syn"), Csum::Complete)).pop().unwrap();
        let hello = wire(&a.handle_inbound(now, &ca, Csum::Complete)).pop().expect("hello");
        assert_ne!(nonce_of(&hello), nonce_of(&ca));
    }

    #[test]
    fn adopt_mode_uses_the_initiators_nonce_both_ways() {
        let now = Instant::now();
        let (mut a, mut b, nb, na) = b_opens(true);
        assert_eq!(na, nb, "the hello carries the initiator's nonce");
        let e = a.ilcc.get(&IlccKey::stable(NB)).unwrap();
        assert_eq!((e.nonce_rx, e.nonce_tx), (Some(nb), nb));
        let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"x"), Csum::Complete)).pop().unwrap();
        assert_eq!(nonce_of(&w), nb);
        // B (an RFC peer) learns our nonce = its own and keeps talking
        let out = b.handle_inbound(now, &w, Csum::Complete);
        assert_eq!(delivered(&out).len(), 1);
        assert_eq!(b.stats().dropped(DropReason::BadNonce), 0);
    }

    /// A UDP datagram `NB@LB -> NA@LA` as FreeBSD fragments it: IPv6 | Fragment |
    /// DestOpts(nonce) | UDP...; the transport checksum with locators zeroed.
    fn freebsd_fragments(n: &Nonce, payload: &[u8], first_len: usize) -> (Vec<u8>, Vec<u8>) {
        let (src, dst) = (ilnp_addr(LB, NB), ilnp_addr(LA, NA));
        let mut u = Vec::new();
        u.extend_from_slice(&0x9c41u16.to_be_bytes());
        u.extend_from_slice(&0x1770u16.to_be_bytes());
        u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(payload);
        let c = checksum::compute(&checksum::nid_only(&src), &checksum::nid_only(&dst), NextHeader::UDP, &u);
        checksum::write_field(&mut u, 6, c);
        let mut frag_part = vec![17, 0, 0x8b, n.len() as u8];
        frag_part.extend_from_slice(n.as_bytes());
        frag_part.resize(ilnp_wire::destopts::header_len(n.len()).max(8), 0);
        frag_part.truncate(4 + n.len() + (8 - (4 + n.len()) % 8) % 8);
        if frag_part.len() > 4 + n.len() {
            let pad = frag_part.len() - 4 - n.len();
            frag_part[4 + n.len()] = if pad == 1 { 0 } else { 1 };
            if pad > 1 {
                frag_part[5 + n.len()] = (pad - 2) as u8;
            }
        }
        frag_part.extend_from_slice(&u);
        let frag = |off: usize, more: bool, data: &[u8]| {
            let mut body = vec![60, 0];
            body.extend_from_slice(&(((off / 8) << 3) as u16 | more as u16).to_be_bytes());
            body.extend_from_slice(&0x1234_5678u32.to_be_bytes());
            body.extend_from_slice(data);
            ts::ipv6_packet(src, dst, NextHeader::FRAGMENT, &body)
        };
        (frag(0, true, &frag_part[..first_len]), frag(first_len, false, &frag_part[first_len..]))
    }

    #[test]
    fn a_nonce_after_the_fragment_header_is_recognised_and_later_fragments_follow() {
        let now = Instant::now();
        let (mut a, mut b, nb, _) = b_opens(false);
        let payload: Vec<u8> = (0..200u8).collect();
        let (f1, f2) = freebsd_fragments(&nb, &payload, 96);
        let out = a.handle_inbound(now, &f1, Csum::Complete);
        let d1 = delivered(&out).pop().expect("first fragment delivered");
        assert_eq!(a.stats().outcome(Outcome::FragmentNonceAfterFrag), 1);
        let out = a.handle_inbound(now, &f2, Csum::Complete);
        let d2 = delivered(&out).pop().expect("later fragment delivered");
        assert_eq!(a.stats().outcome(Outcome::FragmentAccepted), 1);
        // identifier form, and reassembled it is the datagram with a PadN-only header
        // and an identifier-form checksum the kernel accepts
        let (s, d) = (ilnp_addr(P, NB), ilnp_addr(P, NA));
        for f in [&d1, &d2] {
            let p = ilnp_wire::ipv6::Packet::new_checked(&f[..]).unwrap();
            assert_eq!((p.src(), p.dst(), p.next_header()), (s, d, NextHeader::FRAGMENT));
        }
        let mut whole = d1[48..].to_vec();
        whole.extend_from_slice(&d2[48..]);
        assert_eq!(whole.len() % 8, (8 + 8 + payload.len()) % 8);
        let h = ilnp_wire::destopts::find_nonce_in_header(&whole, 0).unwrap();
        assert!(h.is_none(), "the nonce is gone: {h:?}");
        assert_eq!(&whole[2..4], &[1, 4], "PadN over the option");
        assert!(checksum::verify(&s, &d, NextHeader::UDP, &whole[8..]), "UDP checksum for the identifier addresses");
        // a later fragment from a locator the peer never used: not believed
        let mut stray = f2.clone();
        stray[8..16].copy_from_slice(&LB2.0.to_be_bytes());
        let out = a.handle_inbound(now, &stray, Csum::Complete);
        assert!(delivered(&out).is_empty());
        assert_eq!(a.stats().dropped(DropReason::FragmentUnverified), 1);
        // a first fragment with a wrong nonce is a wrong nonce
        let (g1, _) = freebsd_fragments(&Nonce::N32([7, 7, 7, 7]), &payload, 96);
        assert!(delivered(&a.handle_inbound(now, &g1, Csum::Complete)).is_empty());
        assert_eq!(a.stats().dropped(DropReason::BadNonce), 1);
        let _ = &mut b;
    }

    #[test]
    fn a_96_bit_nonce_truncated_in_an_8_byte_header_has_its_own_drop_reason() {
        let now = Instant::now();
        let mut a = core_with(NA, LA, 1, Some((NB, LB)), |c| c.nonce_len = 12);
        let w = wire(&a.handle_outbound(now, &udp(NA, NB, b"ping"), Csum::Complete)).pop().unwrap();
        let na = nonce_of(&w);
        // FreeBSD's icmp6_reflect: ip6d_len = 0, the 14-byte option cut after 4 nonce bytes
        let (src, dst) = (ilnp_addr(LB, NB), ilnp_addr(LA, NA));
        let mut reply = ts::icmpv6(src, dst, Icmpv6Type::ECHO_REPLY, 0, 0x0001_0001, b"x")[40..].to_vec();
        ts::set_icmpv6_checksum(&src, &dst, &mut reply, 0);
        let mut body = vec![58, 0, 0x8b, 12];
        body.extend_from_slice(&na.as_bytes()[..4]);
        let pkt = ts::with_destopts(src, dst, &body, &reply);
        let out = a.handle_inbound(now, &pkt, Csum::Complete);
        assert!(delivered(&out).is_empty());
        assert_eq!(a.stats().dropped(DropReason::NonceOverrun), 1);
        assert_eq!(a.stats().dropped(DropReason::Malformed), 0);
    }
}

/// Transport checksum rule per correspondent (issue #25 item 3).
#[test]
fn full_address_checksum_per_peer_and_the_fast_path_is_told() {
    use ilnp_wire::checksum::{self, ChecksumRule};
    let now = Instant::now();
    let full = |c: &mut CoreConfig| c.transport_checksum = ChecksumRule::FullAddress;
    let mut a = core_with(NA, LA, 1, Some((NB, LB)), full);
    let mut b = core_with(NB, LB, 2, None, |c| {
        c.peer_checksum.insert(NA, ChecksumRule::FullAddress);
    });
    let out = a.handle_outbound(now, &udp(NA, NB, b"full"), Csum::Complete);
    assert!(out.iter().any(|x| matches!(x, Action::IlccUpsert(s) if s.full_address_checksum)));
    let w = wire(&out).pop().unwrap();
    let Ok(ilnp_wire::Packet::Data(d)) = classify(&w) else { panic!() };
    let seg = &w[d.upper.offset..];
    let (s, t) = (ilnp_addr(LA, NA), ilnp_addr(LB, NB));
    assert!(checksum::verify(&s, &t, NextHeader::UDP, seg), "full addresses on the wire");
    assert!(!checksum::verify(&checksum::nid_only(&s), &checksum::nid_only(&t), NextHeader::UDP, seg));
    let out = b.handle_inbound(now, &w, Csum::Complete);
    assert_eq!(delivered(&out), vec![udp(NA, NB, b"full")], "identifier form, checksum right");
    assert!(b.ilcc.get(&IlccKey::stable(NA)).unwrap().checksum_rule == ChecksumRule::FullAddress);
    // a receiver on the other rule hands its stack a segment whose checksum fails
    let mut c = core(NB, LB, 3, None);
    let bad = delivered(&c.handle_inbound(now, &w, Csum::Complete)).pop().unwrap();
    assert!(!checksum::verify(&ilnp_addr(P, NA), &ilnp_addr(P, NB), NextHeader::UDP, &bad[40..]));
    assert!(!c.ilcc.get(&IlccKey::stable(NA)).unwrap().snapshot().unwrap().full_address_checksum);
}

/// Each named enum's names as the control socket, the config file and the logs have
/// always shown them; serde says the same as `as_str` (one list: `ilnp_wire::named_enum!`).
#[test]
fn named_enums_keep_their_names() {
    fn names<T: Copy + Serialize>(all: &[T], as_str: fn(T) -> &'static str) -> Vec<&'static str> {
        for &v in all {
            assert_eq!(serde_json::to_value(v).unwrap(), as_str(v));
        }
        all.iter().map(|&v| as_str(v)).collect()
    }
    assert_eq!(names(Admission::ALL, Admission::as_str), ["socket", "open"]);
    assert_eq!(names(Policy::ALL, Policy::as_str), ["failover", "per-flow", "per-packet"]);
    assert_eq!(names(FallbackReason::ALL, FallbackReason::as_str), ["parameter_problem", "no_answer"]);
    assert_eq!(names(PeerState::ALL, PeerState::as_str), ["ilnp", "non-ilnp", "probing", "fallback"]);
    assert_eq!(
        names(DnsPeerResult::ALL, DnsPeerResult::as_str),
        ["learned", "session_kept", "static_kept", "own_nid", "no_locator", "full", "other_name"]
    );
    assert_eq!(ChecksumRule::ALL.iter().map(|r| r.as_str()).collect::<Vec<_>>(), ["rfc6741", "full-address"]);
    assert_eq!(names(DropReason::ALL, DropReason::as_str).len(), DropReason::COUNT);
    assert_eq!(names(Outcome::ALL, Outcome::as_str).len(), Outcome::COUNT);
}
