#![no_main]
//! Destination Options: option iteration and the RFC 6744 nonce search.
use ilnp_wire::destopts::{self, Header, Opt};
use ilnp_wire::ipv6;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Header::new_checked(data) {
        let mut nonces = 0;
        for o in h.options() {
            match o {
                Ok(o) => {
                    assert!(o.offset < h.header_len());
                    if let Opt::Nonce(_) = o.opt {
                        nonces += 1;
                    }
                }
                Err(_) => break,
            }
        }
        if nonces > 1 {
            assert!(destopts::find_nonce_in_header(data, 0).is_err(), "two nonces must be refused");
        }
    }
    // the nonce of the header directly after a fixed header (classify's first step)
    let nonce = ipv6::Packet::new_checked(data)
        .ok()
        .filter(|p| p.next_header() == ipv6::NextHeader::DSTOPTS)
        .map(|p| destopts::find_nonce_in_header(p.payload(), ipv6::HEADER_LEN));
    if let Some(Ok(Some(n))) = nonce {
        assert_eq!(data[n.option_offset], destopts::OPT_NONCE);
        assert_eq!(data[n.option_offset + 1] as usize, n.nonce.len());
        assert!(n.option_offset + 2 + n.nonce.len() <= 40 + n.header_len);
        // what we find, we can emit
        let mut v = Vec::new();
        destopts::emit_nonce_header(n.next_header, &n.nonce, &mut v);
        assert_eq!(v.len(), destopts::header_len(n.nonce.len()));
    }
});
