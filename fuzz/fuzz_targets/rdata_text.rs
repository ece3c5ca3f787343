#![no_main]
//! RFC 6742 presentation form: what parses prints, parses back equal, and emits.
use ilnp_wire::rdata::Rdata;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for ty in ["NID", "L32", "L64", "LP", "nid", "X"] {
        if let Ok(r) = Rdata::from_presentation(ty, text) {
            let again = Rdata::from_presentation(ty, &r.to_string()).expect("printed form parses");
            assert_eq!(again, r);
            let mut w = Vec::new();
            r.emit(&mut w).expect("a parsed record emits");
            assert_eq!(Rdata::parse(r.rr_type(), &w).as_ref(), Ok(&r));
        }
    }
});
