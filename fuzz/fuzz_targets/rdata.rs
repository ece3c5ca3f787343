#![no_main]
//! RFC 6742 RDATA: wire form (any type) and presentation form round trips.
use ilnp_wire::rdata::Rdata;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let t = 104 + (data[0] % 5) as u16; // 104..=108: the four ILNP types and one other
    if let Ok(r) = Rdata::parse(t, &data[1..]) {
        let mut v = Vec::new();
        if r.emit(&mut v).is_ok() {
            assert_eq!(Rdata::parse(t, &v).expect("emitted RDATA parses"), r);
        }
    }
    if let Ok(text) = std::str::from_utf8(&data[1..]) {
        for ty in ["NID", "L32", "L64", "LP"] {
            if let Ok(r) = Rdata::from_presentation(ty, text) {
                let again = Rdata::from_presentation(ty, &r.to_string()).expect("printed form parses");
                assert_eq!(again, r);
            }
        }
    }
});
