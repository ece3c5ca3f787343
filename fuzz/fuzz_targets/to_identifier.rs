#![no_main]
//! Wire form -> identifier form (the inbound slow path).
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{ipv6, split_addr, Locator};
use libfuzzer_sys::fuzz_target;

const P: Locator = Locator(0xfd69_6c6e_7000_0000);

fuzz_target!(|data: &[u8]| {
    for csum in [Csum::Complete, Csum::Partial] {
        if let Ok((out, meta)) = translate::to_identifier(data, P, csum) {
            let p = ipv6::Packet::new_checked(&out[..]).expect("output is IPv6");
            assert_eq!(split_addr(p.src()), (P, meta.src_nid));
            assert_eq!(split_addr(p.dst()), (P, meta.dst_nid));
            let n = translate::wire_nonce(data).expect("a translated packet had a nonce");
            let in_len = 40 + u16::from_be_bytes([data[4], data[5]]) as usize;
            assert_eq!(out.len(), in_len - n.header_len);
            assert_eq!(meta.nonce, n.nonce);
        }
    }
});
