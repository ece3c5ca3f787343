//! IPv6 Destination Options header carrying the ILNPv6 Nonce option (RFC 6744).
//!
//! Layout of the header we emit (nonce as the only option, no padding needed):
//! ```text
//!  0: Next Header | 1: Hdr Ext Len | 2: Opt Type 0x8B | 3: Opt Data Len (4|12) | 4..: nonce
//! ```

use crate::{ipv6, Error, Nonce};

pub const OPT_PAD1: u8 = 0;
pub const OPT_PADN: u8 = 1;
/// RFC 6744 §8: act = 10 (discard + Parameter Problem code 2), chg = 0.
pub const OPT_NONCE: u8 = 0x8b;

/// Bytes of the DestOpts header we add for a nonce of `nonce_len` bytes (4 → 8, 12 → 16).
pub const fn header_len(nonce_len: usize) -> usize {
    (4 + nonce_len).div_ceil(8) * 8
}

/// Result of looking for the nonce in the DestOpts header that directly follows
/// the IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonceHeader {
    pub nonce: Nonce,
    /// offset (from the start of the IPv6 packet) of the option type byte
    pub option_offset: usize,
    /// total length of the DestOpts header
    pub header_len: usize,
    /// protocol after the DestOpts header
    pub next_header: u8,
    /// true if the header holds only the nonce and padding
    pub only_nonce: bool,
}

/// Finds the RFC 6744 nonce in the Destination Options header directly after the
/// IPv6 header. `Ok(None)`: no such header or no nonce in it (a plain IPv6 packet).
pub fn find_nonce(pkt: &[u8]) -> Result<Option<NonceHeader>, Error> {
    let p = ipv6::Packet::new_checked(pkt)?;
    if p.next_header() != ipv6::PROTO_DSTOPTS {
        return Ok(None);
    }
    let end = ipv6::HEADER_LEN + p.payload_len() as usize;
    let base = ipv6::HEADER_LEN;
    if base + 2 > end {
        return Err(Error::Truncated);
    }
    let hlen = (pkt[base + 1] as usize + 1) * 8;
    if base + hlen > end {
        return Err(Error::Truncated);
    }
    let next_header = pkt[base];
    let mut found: Option<(Nonce, usize)> = None;
    let mut other = false;
    let mut i = base + 2;
    while i < base + hlen {
        let t = pkt[i];
        if t == OPT_PAD1 {
            i += 1;
            continue;
        }
        if i + 2 > base + hlen {
            return Err(Error::Truncated);
        }
        let len = pkt[i + 1] as usize;
        if i + 2 + len > base + hlen {
            return Err(Error::Truncated);
        }
        if t == OPT_NONCE {
            if found.is_some() {
                return Err(Error::MoreThanOneNonce);
            }
            let n = Nonce::from_slice(&pkt[i + 2..i + 2 + len]).ok_or(Error::BadNonceLength(len as u8))?;
            found = Some((n, i));
        } else if t != OPT_PADN {
            other = true;
        }
        i += 2 + len;
    }
    Ok(found.map(|(nonce, option_offset)| NonceHeader {
        nonce,
        option_offset,
        header_len: hlen,
        next_header,
        only_nonce: !other,
    }))
}

/// Emits a DestOpts header holding only `nonce`.
pub fn emit_nonce_header(next_header: u8, nonce: &Nonce, out: &mut Vec<u8>) {
    let n = nonce.as_bytes();
    let total = header_len(n.len());
    out.push(next_header);
    out.push((total / 8 - 1) as u8);
    out.push(OPT_NONCE);
    out.push(n.len() as u8);
    out.extend_from_slice(n);
    let pad = total - 4 - n.len();
    match pad {
        0 => {}
        1 => out.push(OPT_PAD1),
        _ => {
            out.push(OPT_PADN);
            out.push((pad - 2) as u8);
            out.extend(std::iter::repeat_n(0, pad - 2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt_with(opts: &[u8]) -> Vec<u8> {
        let mut v = vec![0x60, 0, 0, 0, 0, opts.len() as u8, ipv6::PROTO_DSTOPTS, 64];
        v.extend_from_slice(&[0u8; 32]);
        v.extend_from_slice(opts);
        v
    }

    #[test]
    fn emits_rfc6744_layout() {
        let mut v = Vec::new();
        emit_nonce_header(17, &Nonce::N32([0xde, 0xad, 0xbe, 0xef]), &mut v);
        assert_eq!(v, [17, 0, 0x8b, 4, 0xde, 0xad, 0xbe, 0xef]);
        let mut v = Vec::new();
        emit_nonce_header(6, &Nonce::N96([1; 12]), &mut v);
        assert_eq!(v.len(), 16);
        assert_eq!(&v[..4], &[6, 1, 0x8b, 12]);
    }

    #[test]
    fn finds_nonce_after_padding() {
        let p = pkt_with(&[17, 0, OPT_PAD1, OPT_PAD1, 0x8b, 2, 0, 0]);
        assert_eq!(find_nonce(&p).unwrap_err(), Error::BadNonceLength(2));
        let p = pkt_with(&[17, 0, 0x8b, 4, 9, 8, 7, 6]);
        let h = find_nonce(&p).unwrap().unwrap();
        assert_eq!(h.nonce, Nonce::N32([9, 8, 7, 6]));
        assert_eq!(h.option_offset, 42);
        assert_eq!(h.next_header, 17);
        assert!(h.only_nonce);
    }

    #[test]
    fn two_nonces_are_an_error() {
        let p = pkt_with(&[17, 1, 0x8b, 4, 1, 2, 3, 4, 0x8b, 4, 5, 6, 7, 8, OPT_PADN, 0]);
        assert_eq!(find_nonce(&p).unwrap_err(), Error::MoreThanOneNonce);
    }

    #[test]
    fn truncated_option() {
        let p = pkt_with(&[17, 0, 0x8b, 12, 1, 2, 3, 4]);
        assert_eq!(find_nonce(&p).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..80 {
            for seed in 0..64u8 {
                let mut v: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed).wrapping_add(seed)).collect();
                if v.len() > 6 {
                    v[0] = 0x60;
                    v[6] = 60;
                }
                let _ = find_nonce(&v);
            }
        }
    }
}
