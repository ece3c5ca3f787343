#![no_main]
//! classify(): never panics, and agrees with the entry points it supersedes.
use ilnp_wire::translate::{self, Csum};
use ilnp_wire::{classify, destopts, Locator, Packet};
use libfuzzer_sys::fuzz_target;

const P: Locator = Locator(0xfd69_6c6e_7000_0000);

fuzz_target!(|data: &[u8]| {
    let Ok(p) = classify(data) else { return };
    assert!(p.ip().payload_len as usize + 40 <= data.len());
    match p {
        Packet::Data(d) | Packet::NonceOnly(d) => {
            assert!(d.nonce.only_nonce);
            assert_eq!(d.nonce, translate::wire_nonce(data).expect("classify found a nonce"));
            for csum in [Csum::Complete, Csum::Partial] {
                assert_eq!(d.to_identifier(P, csum), translate::to_identifier(data, P, csum));
            }
        }
        Packet::Lu(l) => {
            assert!(translate::is_lu(data));
            let old = translate::parse_lu_packet(data).expect("classify's LU parses");
            assert_eq!((old.lu, old.nonce), (l.to_owned(), l.nonce.map(|n| n.nonce)));
        }
        Packet::IcmpError(e) => {
            assert!(e.message.is_error());
            assert_eq!(e.meta(), translate::icmp_error_meta(data));
            assert_eq!(e.to_identifier(P), translate::icmp_error_to_identifier(data, P));
            if let Some(q) = e.quoted {
                assert!(!q.rejects_nonce || q.nonce.is_some());
            }
        }
        Packet::Plain(_) => assert_eq!(destopts::find_nonce(data).map(|n| n.is_some()), Ok(false)),
    }
});
