#![no_main]
//! ICMPv6 errors quoting our wire-form packets -> identifier form.
use ilnp_wire::test_support as ts;
use ilnp_wire::translate;
use ilnp_wire::{checksum, classify, ipv6, split_addr, Locator, Nonce};
use libfuzzer_sys::fuzz_target;

const P: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;

fuzz_target!(|data: &[u8]| {
    let meta = ts::icmp_error_meta(data);
    let _ = translate::quoted_nonce(data);
    if let Ok(m) = meta.as_ref().copied() {
        assert!(!m.rejects_nonce || (m.icmp_type == ilnp_wire::icmpv6::Icmpv6Type::PARAM_PROBLEM && m.icmp_code == 2));
    }
    if let Ok((out, m)) = ts::icmp_error_to_identifier(data, P) {
        assert_eq!(meta.as_ref(), Ok(&m));
        let p = ipv6::Packet::new_checked(&out[..]).expect("output is IPv6");
        assert_eq!(split_addr(p.dst()), (P, m.local_nid));
        assert!(checksum::verify_icmpv6(&p.src(), &p.dst(), &out[40..]), "outer checksum valid");
        assert!(out.len() <= data.len());
    }
    // the outbound direction: a local error made fit for the wire
    let (n, qn) = (Nonce::N32([1, 2, 3, 4]), Nonce::N96([5; 12]));
    let (la, lb) = (Locator(0x2001_0db8_000a_0000), Locator(0x2001_0db8_000b_0000));
    if let Ok(w) = ts::icmp_error_to_wire(data, P, la, lb, &n, &qn) {
        assert!(w.len() <= 1280);
        assert_eq!(classify(&w).ok().and_then(|p| p.nonce()), Some(n));
        let (_, off) = ipv6::upper_layer(&w).expect("our output walks");
        let p = ipv6::Packet::new_checked(&w[..]).unwrap();
        assert!(checksum::verify_icmpv6(&p.src(), &p.dst(), &w[off..]));
        if w.len() >= off + 8 + 40 + 16 {
            let m = ts::icmp_error_meta(&w).expect("the peer can match our error");
            assert_eq!(m.nonce, qn);
        }
    }
});
