#![no_main]
//! Wire-form and ICMPv6-error translation, LU packets: never panic; a successful
//! to_identifier of a to_wire output gives the input back (checksum twin aside).
use ilnp_wire::test_support as ts;
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{classify, ipv6, Locator, Nonce, Packet};
use libfuzzer_sys::fuzz_target;

const P: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;

fuzz_target!(|data: &[u8]| {
    let _ = ts::to_identifier(data, P, Csum::Complete);
    let _ = ts::to_identifier(data, P, Csum::Partial);
    let _ = ts::icmp_error_to_identifier(data, P);
    let _ = ts::lu(data);
    let _ = translate::quoted_nonce(data);
    let _ = translate::unreachable_to_app(data, 3);
    if let Ok(w) = translate::to_wire(
        data,
        P,
        Locator(0x2001_0db8_0001_0000),
        Locator(0x2001_0db8_0002_0000),
        &Nonce::N32([1, 2, 3, 4]),
        Csum::Complete,
    ) {
        let back = match classify(&w) {
            Ok(Packet::Data(d) | Packet::NonceOnly(d)) => {
                d.to_identifier(P, Csum::Complete).expect("our own wire form translates back").0
            }
            // an ICMPv6 error or LU (even a broken one) is not a data packet on the wire
            other => {
                assert_eq!(
                    ipv6::upper_layer_info(data).ok().map(|u| u.proto),
                    Some(ipv6::NextHeader::ICMPV6),
                    "{other:?}"
                );
                return;
            }
        };
        let n = 40 + u16::from_be_bytes([data[4], data[5]]) as usize;
        assert_eq!(back.len(), n);
        // identical except, at most, the two checksum bytes: an incremental update
        // may turn a 0xffff field into its one's-complement twin 0x0000
        let diff: Vec<usize> = (0..n).filter(|&i| back[i] != data[i]).collect();
        assert!(diff.len() <= 2 && diff.windows(2).all(|w| w[1] == w[0] + 1), "{diff:?}");
    }
});
