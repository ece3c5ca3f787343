//! Segmentation of GSO super-packets the slow path reads from the TUN.
//!
//! In eBPF mode ilnp0 has TSO, so the kernel hands it TCP super-packets (up to
//! 64 KiB, one virtio-net header). Established sessions are translated by the tc
//! program and never reach the TUN; a super-packet that misses the fast path
//! (first burst after `ilcc flush`, an entry aged or just created) comes to us.
//! The raw IPv6 socket cannot send it whole, so it is cut into gso_size segments
//! with complete checksums (tun-rs's port of wireguard-go's `gsoSplit`), and each
//! segment then goes through the core like any other packet.

use ilnp_wire::l4::{self, TCP_MAX_HEADER_LEN, UDP_HEADER_LEN};
use std::io;
use tun_rs::{gso_split, VirtioNetHdr, VIRTIO_NET_HDR_GSO_TCPV6, VIRTIO_NET_HDR_GSO_UDP_L4};

/// Splits one IPv6 GSO packet into MTU-sized IPv6 packets with complete checksums.
pub fn split(pkt: &[u8], vnet_hdr: &[u8]) -> io::Result<Vec<Vec<u8>>> {
    let mut hdr = VirtioNetHdr::decode(vnet_hdr)?;
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let start = usize::from(hdr.csum_start);
    // The kernel's hdr_len is not to be trusted (it can span the whole first
    // segment, see wireguard-go tun_linux.go): the transport header starts at
    // csum_start, and its length comes from the header itself.
    let l4_len = match hdr.gso_type & !VIRTIO_NET_HDR_GSO_ECN {
        VIRTIO_NET_HDR_GSO_TCPV6 => l4::Tcp::new_checked(pkt.get(start..).unwrap_or_default())
            .map_err(|e| bad(&format!("GSO packet's TCP header: {e}")))?
            .header_len(),
        VIRTIO_NET_HDR_GSO_UDP_L4 => UDP_HEADER_LEN,
        _ => return Err(bad("GSO type is not TCPv6 or UDP")),
    };
    if !(UDP_HEADER_LEN..=TCP_MAX_HEADER_LEN).contains(&l4_len) {
        return Err(bad("transport header length out of range"));
    }
    hdr.hdr_len = u16::try_from(start + l4_len).map_err(|_| bad("header length overflow"))?;
    let (hdr_len, gso) = (usize::from(hdr.hdr_len), usize::from(hdr.gso_size));
    if gso == 0 || pkt.len() < hdr_len {
        return Err(bad("GSO packet without segment size or shorter than its headers"));
    }
    let n = (pkt.len() - hdr_len).div_ceil(gso).max(1);
    let mut input = pkt.to_vec();
    let mut bufs = vec![vec![0u8; hdr_len + gso]; n];
    let mut sizes = vec![0usize; n];
    let got = gso_split(&mut input, hdr, &mut bufs, &mut sizes, 0, true)?;
    bufs.truncate(got);
    for (b, &len) in bufs.iter_mut().zip(&sizes) {
        b.truncate(len);
    }
    Ok(bufs)
}

/// "TCP has ECN set" bit of gso_type (linux/virtio_net.h); tun-rs does not export it.
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_wire::checksum;
    use ilnp_wire::ipv6::NextHeader;

    /// An IPv6/TCP super-packet as the kernel hands it to a TUN with TSO:
    /// checksum field = pseudo-header sum only (NEEDS_CSUM).
    fn super_packet(payload: usize, mss: u16) -> (Vec<u8>, Vec<u8>) {
        let src: std::net::Ipv6Addr = "fd69:6c6e:7000::c".parse().unwrap();
        let dst: std::net::Ipv6Addr = "fd69:6c6e:7000::d".parse().unwrap();
        let mut p = vec![0u8; 40 + 20 + payload];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
        p[6] = 6;
        p[7] = 64;
        p[8..24].copy_from_slice(&src.octets());
        p[24..40].copy_from_slice(&dst.octets());
        p[40..42].copy_from_slice(&40000u16.to_be_bytes());
        p[42..44].copy_from_slice(&5201u16.to_be_bytes());
        p[44..48].copy_from_slice(&1000u32.to_be_bytes());
        p[52] = 5 << 4;
        p[53] = 0x18; // PSH|ACK
        for (i, b) in p[60..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let hdr = VirtioNetHdr {
            flags: 1,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV6,
            hdr_len: (40 + 20 + payload) as u16, // the untrustworthy value
            gso_size: mss,
            csum_start: 40,
            csum_offset: 16,
        };
        let mut h = vec![0u8; 10];
        hdr.encode(&mut h).unwrap();
        (p, h)
    }

    #[test]
    fn splits_into_mss_segments_with_valid_checksums() {
        let (p, h) = super_packet(3000, 1400);
        let segs = split(&p, &h).unwrap();
        assert_eq!(segs.iter().map(|s| s.len() - 60).collect::<Vec<_>>(), vec![1400, 1400, 200]);
        let mut seq = 1000u32;
        for s in &segs {
            let src: [u8; 16] = s[8..24].try_into().unwrap();
            let dst: [u8; 16] = s[24..40].try_into().unwrap();
            assert_eq!(u16::from_be_bytes([s[4], s[5]]) as usize, s.len() - 40, "payload length");
            assert_eq!(
                checksum::compute(&src.into(), &dst.into(), NextHeader::TCP, &s[40..]),
                0,
                "segment checksum verifies"
            );
            assert_eq!(u32::from_be_bytes(s[44..48].try_into().unwrap()), seq);
            seq += (s.len() - 60) as u32;
        }
        assert_eq!(segs[0][53] & 0x08, 0, "PSH only on the last segment");
        assert_eq!(segs[2][53] & 0x08, 0x08);
    }

    #[test]
    fn rejects_garbage() {
        let (p, mut h) = super_packet(100, 1400);
        h[1] = 3; // UDP (IPv4 UFO)
        assert!(split(&p, &h).is_err());
        assert!(split(&p[..45], &super_packet(100, 1400).1).is_err());
    }
}
