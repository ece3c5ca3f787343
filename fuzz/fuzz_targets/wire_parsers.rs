#![no_main]
//! IPv6 header, extension-header walk, nonce option, ICMPv6 and Locator Update parsers.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ilnp_wire::ipv6::Packet::new_checked(data).map(|p| (p.src(), p.dst(), p.payload().len()));
    let _ = ilnp_wire::ipv6::upper_layer(data);
    let _ = ilnp_wire::destopts::find_nonce(data);
    if let Ok(m) = ilnp_wire::icmpv6::Message::new_checked(data) {
        let _ = (m.msg_type(), m.code(), m.data_word(), m.invoking_packet().len());
    }
    if let Ok(lu) = ilnp_wire::icmpv6::LocatorUpdate::parse(data) {
        // what parses must re-emit to the same body (RESERVED and checksum aside)
        let mut v = Vec::new();
        lu.emit(&mut v).expect("a parsed LU re-emits");
        assert_eq!(v.len(), data.len());
        assert_eq!(&v[8..], &data[8..]);
    }
});
