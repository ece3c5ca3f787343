#![no_main]
//! ICMPv6 message view, Locator Update view/parser (body) and LU packets (whole IPv6).
use ilnp_wire::icmpv6::{LocatorUpdate, LuMessage, Message};
use ilnp_wire::test_support as ts;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::new_checked(data) {
        let _ = (m.msg_type(), m.code(), m.checksum(), m.mtu(), m.pointer(), m.invoking_packet().len());
    }
    if let Ok(m) = LuMessage::new_checked(data) {
        assert_eq!(m.entries().count(), m.num_locs() as usize);
    }
    if let Ok(lu) = LocatorUpdate::parse(data) {
        // what parses re-emits to the same entries (Code/Reserved/checksum aside)
        let mut v = Vec::new();
        lu.emit(&mut v).expect("a parsed LU re-emits");
        assert_eq!(v.len(), data.len());
        assert_eq!(&v[8..], &data[8..]);
        assert_eq!(LocatorUpdate::parse(&v).as_ref(), Ok(&lu));
        let mut a = Vec::new();
        lu.ack().emit(&mut a).expect("the ack emits");
        assert_eq!(&a[6..], &v[6..]);
    }
    // a whole packet: classify's LU view and its owned form agree
    if let Ok((_, lu)) = ts::lu(data) {
        assert!(!lu.entries.is_empty());
    }
});
