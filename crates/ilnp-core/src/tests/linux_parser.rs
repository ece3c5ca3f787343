//! Every packet the core sends passes the Linux receiver's Destination Options parser
//! (issue #46 item 1; `ilnp_wire::test_support::linux_tlv`, a model of `ip6_parse_tlv`):
//! `wire` checks each packet any test takes from the core's actions, and the test here
//! makes each kind the core builds with a nonce header, for both nonce sizes.

use super::*;
use ilnp_wire::classify::Kind;
use ilnp_wire::test_support::linux_tlv;

/// Panics unless every ILNP Linux receiver takes `w`'s nonce header, and, for an
/// ICMPv6 error, the header of the packet it quotes (the peer's, as it went out).
pub(crate) fn linux_accepts(w: &[u8]) {
    if let Err((r, e)) = linux_tlv::check_packet(w) {
        panic!("Linux ({r:?}) drops what the core sends ({e:?}): {:02x?}", &w[..w.len().min(64)]);
    }
    if let Ok(ilnp_wire::Packet::IcmpError(_)) = classify(w) {
        let ul = ilnp_wire::ipv6::upper_layer_info(w).expect("classified");
        let quote = w.get(ul.offset + 8..).unwrap_or_default();
        if quote.len() >= 40 + ilnp_wire::destopts::HEADER_LEN {
            if let Err((r, e)) = linux_tlv::check_packet(quote) {
                panic!("Linux ({r:?}) drops the quoted header ({e:?}): {:02x?}", &quote[..56]);
            }
        }
    }
}

#[test]
fn every_packet_the_core_sends_passes_linuxs_option_parser() {
    for len in [4, 12] {
        let now = Instant::now();
        let set = |c: &mut CoreConfig| c.nonce_len = len;
        let mut a = core_with(NA, LA, 1, Some((NB, LB)), set);
        let mut b = core_with(NB, LB, 2, None, set);
        let mut seen: Vec<(Kind, usize)> = Vec::new();
        let mut sent = |out: &[Action]| {
            let w = wire(out);
            seen.extend(w.iter().map(|p| (classify(p).expect("ours").kind(), p[40..].len().min(16))));
            w
        };
        // data both ways; the responder's nonce-only hello
        let ab = sent(&a.handle_outbound(now, &udp(NA, NB, b"hello"), Csum::Complete)).pop().unwrap();
        sent(&b.handle_inbound(now, &ab, Csum::Complete));
        let ba = sent(&b.handle_outbound(now, &udp(NB, NA, b"world"), Csum::Complete)).pop().unwrap();
        a.handle_inbound(now, &ba, Csum::Complete);
        // a Locator Update and its ack
        let lu = sent(&b.set_local_locators(now, vec![local(LB2)])).pop().expect("an LU");
        sent(&a.handle_inbound(now, &lu, Csum::Complete));
        // an ICMPv6 error of B's stack about A's datagram (quoting A's wire packet)
        let closed = udp(NA, NB, b"to a closed port");
        let err = icmpv6::error_packet(ilnp_addr(P, NB), ilnp_addr(P, NA), Icmpv6Type::DEST_UNREACH, 4, 0, &closed);
        sent(&b.handle_outbound(now, &err, Csum::Complete));
        // a stateless answer of a host without an entry for A (admission = socket)
        let nc = Nid(0x0200_0000_0000_00cc);
        let mut c = core_with(nc, LB, 3, None, |cfg| {
            set(cfg);
            cfg.admission = Admission::Socket;
        });
        let hint = AnswerHint { remote_loc: LA, local_loc: LB, peer_nonce: nonce_of(&ab), at: now, via: None };
        let err = icmpv6::error_packet(ilnp_addr(P, nc), ilnp_addr(P, NA), Icmpv6Type::DEST_UNREACH, 4, 0, &closed);
        sent(&c.handle_outbound_hinted(now, &err, Csum::Complete, &mut |_| Some(hint)));
        let count = |k: Kind| seen.iter().filter(|(s, _)| *s == k).count();
        assert_eq!(
            (count(Kind::Data), count(Kind::NonceOnly), count(Kind::Lu), count(Kind::IcmpError)),
            (2, 1, 2, 2),
            "nonce of {len} bytes: {seen:?}"
        );
    }
}
