#![no_main]
//! RFC 6742 RDATA, wire form: first byte picks the type (the four ILNP types + one other).
use ilnp_wire::rdata::Rdata;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rdata)) = data.split_first() else { return };
    let t = 104 + (sel % 5) as u16;
    if let Ok(r) = Rdata::parse(t, rdata) {
        let mut v = Vec::new();
        r.emit(&mut v).expect("parsed RDATA re-emits");
        assert_eq!(v, rdata, "wire round trip");
        let text = r.to_string();
        assert_eq!(Rdata::from_presentation(r.type_name(), &text).as_ref(), Ok(&r), "{text}");
    }
});
