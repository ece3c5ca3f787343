#![no_main]
//! IPv6 fixed header view and the extension-header walk.
use ilnp_wire::ipv6;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = ipv6::Packet::new_checked(data) {
        let _ = (p.src(), p.dst(), p.version(), p.traffic_class(), p.flow_label(), p.hop_limit());
        assert_eq!(p.payload().len(), p.payload_len() as usize);
        assert_eq!(ipv6::Repr::parse(&p).payload_len, p.payload_len());
    }
    if let Ok(u) = ipv6::upper_layer_info(data) {
        let end = 40 + u16::from_be_bytes([data[4], data[5]]) as usize;
        assert!(u.offset >= 40 && u.offset <= end, "upper layer inside the packet");
        assert_eq!(ipv6::upper_layer(data), Ok((u.proto, u.offset)));
    }
});
