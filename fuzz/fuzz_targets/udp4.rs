#![no_main]
//! The v4 path's UDP/IPv4 parse (`parse_udp4`): what the ingress program hands ilnpd
//! through ilnp0 when it does not take a v4-path datagram itself (issue #42 item 7).
use ilnp_wire::v4path::parse_udp4;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((src, dst, payload)) = parse_udp4(data) {
        let total = usize::from(u16::from_be_bytes([data[2], data[3]]));
        let udp_len = usize::from(u16::from_be_bytes([data[24], data[25]]));
        assert!(total <= data.len() && 28 + payload.len() <= total, "payload inside the datagram");
        assert_eq!(payload.len() + 8, udp_len, "the UDP length decides the payload");
        assert_eq!(
            (src.port(), dst.port()),
            (u16::from_be_bytes([data[20], data[21]]), u16::from_be_bytes([data[22], data[23]]))
        );
        assert_eq!(data[0], 0x45);
    }
});
