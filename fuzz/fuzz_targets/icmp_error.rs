#![no_main]
//! ICMPv6 errors quoting our wire-form packets -> identifier form.
use ilnp_wire::translate;
use ilnp_wire::{checksum, ipv6, split_addr, Locator};
use libfuzzer_sys::fuzz_target;

const P: Locator = Locator(0xfd69_6c6e_7000_0000);

fuzz_target!(|data: &[u8]| {
    let meta = translate::icmp_error_meta(data);
    let _ = translate::quoted_nonce(data);
    if let Some(m) = translate::quoted_nonce_pointer(data) {
        assert!(m.rejects_nonce && m.icmp_type == 4 && m.icmp_code == 2);
    }
    if let Ok((out, m)) = translate::icmp_error_to_identifier(data, P) {
        assert_eq!(meta.as_ref(), Ok(&m));
        let p = ipv6::Packet::new_checked(&out[..]).expect("output is IPv6");
        assert_eq!(split_addr(p.dst()), (P, m.local_nid));
        assert!(checksum::verify_icmpv6(&p.src(), &p.dst(), &out[40..]), "outer checksum valid");
        assert!(out.len() <= data.len());
    }
});
