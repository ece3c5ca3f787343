#![no_main]
//! Wire form -> identifier form (the inbound slow path: classify, then
//! `Data::to_identifier`).
use ilnp_wire::translate::Csum;
use ilnp_wire::{classify, ipv6, split_addr, Locator, Packet};
use libfuzzer_sys::fuzz_target;

const P: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;

fuzz_target!(|data: &[u8]| {
    let Ok(Packet::Data(d) | Packet::NonceOnly(d)) = classify(data) else { return };
    for csum in [Csum::Complete, Csum::Partial] {
        if let Ok((out, meta)) = d.to_identifier(P, csum) {
            let p = ipv6::Packet::new_checked(&out[..]).expect("output is IPv6");
            assert_eq!(split_addr(p.src()), (P, meta.src_nid));
            assert_eq!(split_addr(p.dst()), (P, meta.dst_nid));
            let n = d.nonce;
            let in_len = 40 + u16::from_be_bytes([data[4], data[5]]) as usize;
            // the header is kept (as padding) after a Fragment header
            assert_eq!(out.len(), in_len - if d.after_fragment { 0 } else { n.header_len });
            assert_eq!(meta.nonce, n.nonce);
        }
    }
});
