#![no_main]
//! classify(): never panics, and what it accepts is consistent: a data packet
//! translates to identifier form without our header, an LU view parses as its owned
//! form, an error's meta is the one its translation reports.
use ilnp_wire::icmpv6::LocatorUpdate;
use ilnp_wire::translate::Csum;
use ilnp_wire::{classify, destopts, ipv6, split_addr, Locator, Packet};
use libfuzzer_sys::fuzz_target;

const P: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = classify(data) else { return };
    assert!(p.ip().payload_len as usize + 40 <= data.len());
    match p {
        Packet::Data(d) | Packet::NonceOnly(d) => {
            assert!(d.nonce.only_nonce);
            for csum in [Csum::Complete, Csum::Partial] {
                if let Ok((id, meta)) = d.to_identifier(P, csum) {
                    assert_eq!(meta.nonce, d.nonce.nonce);
                    // our header stripped (kept as padding after a Fragment header, so
                    // later fragments' offsets hold), both addresses in the identifier prefix
                    let stripped = if d.after_fragment { 0 } else { d.nonce.header_len };
                    assert_eq!(id.len(), d.bytes().len() - stripped);
                    if d.after_fragment {
                        let h = &id[48..];
                        assert_eq!(destopts::find_nonce_in_header(h, 48).map(|n| n.is_some()), Ok(false));
                    }
                    let q = ipv6::Packet::new_checked(&id[..]).expect("output is IPv6");
                    assert_eq!((split_addr(q.src()).0, split_addr(q.dst()).0), (P, P));
                }
            }
        }
        Packet::Lu(l) => {
            assert_eq!(LocatorUpdate::parse(l.lu.as_bytes()), Ok(l.to_owned()));
        }
        Packet::IcmpError(e) => {
            assert!(e.message.is_error());
            if let Ok((_, m)) = e.to_identifier(P) {
                assert_eq!(e.meta(), Ok(m));
            }
            if let Some(q) = e.quoted {
                assert!(!q.rejects_nonce || q.nonce.is_some());
            }
        }
        Packet::Plain(p) => {
            if p.ip.next_header == ipv6::NextHeader::DSTOPTS {
                let h = &p.bytes()[40..];
                assert_eq!(destopts::find_nonce_in_header(h, 40).map(|n| n.is_some()), Ok(false));
            }
        }
    }
});
