//! A peer marked `linux49` (`CoreConfig::peer_linux49`): its Locator Updates in the
//! Linux 4.9 prototype's layout, as its `send_lu` builds them (net/ipv6/ilnp6.c:989-1086,
//! by hand here), are taken and answered in that layout, still nonce-checked; from
//! a peer not marked they are refused.

use crate::action::Action;
use crate::ilcc::IlccKey;
use crate::tests::{local, session, wire, LB2, NA, NB};
use ilnp_wire::checksum::{self, nid_only};
use ilnp_wire::icmpv6::linux49;
use ilnp_wire::ipv6::NextHeader;
use ilnp_wire::test_support::{LA, LB};
use ilnp_wire::translate::Csum;
use ilnp_wire::{ilnp_addr, Locator, Nonce};
use std::net::Ipv6Addr;
use std::time::Instant;

const LA2: Locator = Locator(0x2001_0db8_000f_0000);

/// The whole packet `send_lu` sends: IPv6, an 8-byte Destination Options header
/// holding only its 32-bit nonce option (0x8b, length 4: :1050-1059), the 24-byte
/// message with the L64 in address order and prec 10 / lifetime 30 as x86-64
/// `uint32_t`s, checksummed over the NIDs only (:1034-1043).
fn prototype_lu(src: Ipv6Addr, dst: Ipv6Addr, nonce: &[u8], op: u8, l64: Locator) -> Vec<u8> {
    let mut icmp = vec![156, 0, 0, 0, 1, op, 0, 0];
    icmp.extend_from_slice(&l64.0.to_be_bytes());
    icmp.extend_from_slice(&[10, 0, 0, 0, 30, 0, 0, 0]);
    let acc = checksum::add(
        checksum::pseudo_header(&nid_only(&src), &nid_only(&dst), NextHeader::ICMPV6, 24),
        checksum::sum(&icmp),
    );
    let c = match !checksum::fold(acc) {
        0 => 0xffff,
        c => c,
    };
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut p = vec![0x60, 0, 0, 0, 0, 32, 60, 64];
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&[58, 0, 0x8b, 4]);
    p.extend_from_slice(&nonce[..4]);
    p.extend_from_slice(&icmp);
    p
}

fn nonce_tx(c: &crate::machine::Core, nid: ilnp_wire::Nid) -> Nonce {
    c.ilcc.get(&IlccKey::stable(nid)).unwrap().nonce_tx
}

fn remote(c: &crate::machine::Core) -> Vec<Locator> {
    c.ilcc.get(&IlccKey::stable(NB)).unwrap().remote_locators.iter().map(|r| r.loc).collect()
}

#[test]
fn a_marked_peers_lu_is_taken_and_acked_in_its_layout() {
    let (mut a, b, _, _) = session();
    a.cfg.peer_linux49.insert(NB);
    let t0 = Instant::now();
    let nb = nonce_tx(&b, NA);
    let lu = prototype_lu(ilnp_addr(LB, NB), ilnp_addr(LA, NA), nb.as_bytes(), 1, LB2);
    let out = a.handle_inbound(t0, &lu, Csum::Complete);
    assert_eq!(remote(&a), [LB2]);
    assert_eq!(a.stats().get("lu_received"), 1);
    let acks = wire(&out);
    assert_eq!(acks.len(), 1);
    let ack = &acks[0];
    let icmp = &ack[ack.len() - linux49::LEN..];
    assert_eq!(icmp[..2], [156, 0]);
    assert_eq!(icmp[4..], [1, 2, 0, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0x0e, 0, 0, 10, 0, 0, 0, 30, 0, 0, 0]);
    let (src, dst) = (ilnp_addr(LA, NA), ilnp_addr(LB2, NB));
    assert_eq!(ack[8..40], [src.octets(), dst.octets()].concat());
    assert!(checksum::verify_icmpv6(&src, &dst, icmp), "what its icmpv6_rcv verifies (icmp.c:823)");
}

#[test]
fn a_wrong_nonce_is_dropped_and_counted_as_for_any_lu() {
    let (mut a, _b, _, _) = session();
    a.cfg.peer_linux49.insert(NB);
    let lu = prototype_lu(ilnp_addr(LB, NB), ilnp_addr(LA, NA), &[9, 9, 9, 9], 1, LB2);
    let out = a.handle_inbound(Instant::now(), &lu, Csum::Complete);
    assert!(wire(&out).is_empty());
    assert_eq!(remote(&a), [LB]);
    assert_eq!((a.stats().get("lu_bad_nonce"), a.stats().get("lu_received")), (1, 0));
}

#[test]
fn its_layout_from_a_peer_not_marked_is_refused() {
    let (mut a, b, _, _) = session();
    let nb = nonce_tx(&b, NA);
    let lu = prototype_lu(ilnp_addr(LB, NB), ilnp_addr(LA, NA), nb.as_bytes(), 1, LB2);
    let out = a.handle_inbound(Instant::now(), &lu, Csum::Complete);
    assert!(wire(&out).is_empty());
    assert_eq!(remote(&a), [LB]);
    assert_eq!((a.stats().get("lu_linux49_unmarked"), a.stats().get("lu_received")), (1, 0));
}

#[test]
fn ours_go_out_in_its_layout_and_its_ack_ends_them() {
    let (mut a, b, _, _) = session();
    a.cfg.peer_linux49.insert(NB);
    let t0 = Instant::now();
    let out = a.set_local_locators(t0, vec![local(LA2), local(LA)]);
    let sent = wire(&out);
    // from the locator it knows first (it drops unknown ones unread), then the new one
    assert_eq!(sent.iter().map(|w| crate::tests::src_loc(w)).collect::<Vec<_>>(), [LA, LA2]);
    let icmp = &sent[0][sent[0].len() - linux49::LEN..];
    assert_eq!(icmp[4..6], [1, 1], "one locator, an LU");
    let advertised = u64::from_be_bytes(icmp[8..16].try_into().unwrap());
    assert!(advertised == LA2.0 || advertised == LA.0);
    // its ack: to the advertised L64, that L64 back with its own constants (:1266-1274)
    let nb = nonce_tx(&b, NA);
    let ack =
        prototype_lu(ilnp_addr(LB, NB), ilnp_addr(Locator(advertised), NA), nb.as_bytes(), 2, Locator(advertised));
    let out = a.handle_inbound(t0, &ack, Csum::Complete);
    assert!(!out.iter().any(|x| matches!(x, Action::SendWire { .. })));
    assert_eq!(a.stats().get("lu_acked"), 1);
    assert!(a.ilcc.get(&IlccKey::stable(NB)).unwrap().pending_lu.is_none());
}

#[test]
fn peers_not_marked_keep_rfc_lus() {
    let (mut a, _b, _, _) = session();
    a.cfg.peer_linux49.insert(ilnp_wire::Nid(0x0200_00ff_fe00_0077));
    let w = wire(&a.set_local_locators(Instant::now(), vec![local(LA2)]));
    assert_eq!(crate::tests::parse_lu(&w[0]).lu.entries[0].locator, LA2, "an RFC 6743 LU");
}
