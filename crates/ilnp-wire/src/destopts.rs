//! IPv6 Destination Options header carrying the ILNPv6 Nonce option (RFC 6744).
//!
//! Layout of the header we emit: always 16 bytes, the nonce first, no padding.
//! ```text
//!  0: Next Header | 1: Hdr Ext Len (1) | 2: Opt Type 0x8B | 3: Opt Data Len (4|12) | 4..: nonce
//!  32-bit nonce: 8: option 0x1E (OPT_FILLER), data length 6, six zero bytes
//! ```
//! Why not PadN after a 32-bit nonce: Linux's option parser (`ip6_parse_tlv`,
//! `net/ipv6/exthdrs.c`, the same rule 4.9..6.18) drops a header holding a run of
//! Pad1/PadN longer than 7 bytes (RFC 4942 §2.1.9.5), and 8 bytes must follow a
//! 32-bit nonce in 16: every Linux receiver that parses the header (the authors'
//! ILNPv6 kernel) dropped it. Those 8 bytes are one option that every receiver
//! skips instead: type 0x1E (RFC 4727's experimental type whose action bits 00 say
//! "skip if unknown", chg bit 0), which Linux, FreeBSD and both ILNP kernels
//! pass over (`ip6_tlvopt_unknown`, `ip6_unknown_opt`). We read a 0x1E option as
//! padding ([`find_nonce_in_header`], the fast path's walk); [`fill`] writes every
//! span of filler we lay out. `test_support::linux_tlv` checks every header we
//! emit against Linux's rules. docs/design/gso-extension-headers.md.
//!
//! Why 16 bytes and not 8 for a 32-bit nonce, and why header byte 12 must have
//! its top bit clear (`GSO_DOFF_BYTE`): Linux routers measure a forwarded GSO
//! packet (TSO from a host, or built by GRO on their ingress) as if its first
//! extension header were the TCP header (`ip6_forward` → `ip6_pkt_too_big` →
//! `skb_gso_validate_network_len` → `skb_gso_transport_seglen` →
//! `tcp_hdrlen`, whose `doff` is the high nibble of byte 12 of that header:
//! `ip6_rcv_core` points the transport header right after the fixed header).
//! A `doff` larger than (this header + the real TCP header) / 4 makes every such
//! packet "too big": a Packet Too Big storm and a black hole
//! (`bench/gso_exthdr.py`, `tests/test_gso_exthdr.py`). An 8-byte header would
//! put the TCP sequence number's top byte there; our 16-byte header puts a zero
//! data byte of the filler option (32-bit nonce) or nonce byte 8, whose top bit
//! the core keeps clear (`ilnp_core`'s nonce generation), so `doff` ≤ 7 · 4 = 28 ≤ 16 + 20.

use crate::error::Error;
use crate::ipv6::{self, NextHeader};
use core::fmt;
use std::net::Ipv6Addr;

/// Value of an RFC 6744 Nonce option: 32-bit or 96-bit (both MUST be supported).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum Nonce {
    N32([u8; 4]),
    N96([u8; 12]),
}

impl Nonce {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Nonce::N32(b) => b,
            Nonce::N96(b) => b,
        }
    }
    /// Builds a nonce from 4 or 12 bytes; any other length is not a valid nonce.
    pub fn from_slice(b: &[u8]) -> Option<Nonce> {
        match b.len() {
            4 => Some(Nonce::N32(b.try_into().ok()?)),
            12 => Some(Nonce::N96(b.try_into().ok()?)),
            _ => None,
        }
    }
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }
    /// Never true: a nonce has 4 or 12 bytes.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl fmt::Debug for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nonce(0x")?;
        for b in self.as_bytes() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

pub const OPT_PAD1: u8 = 0;
pub const OPT_PADN: u8 = 1;
/// The option we fill spans of more than 7 bytes with (module doc): RFC 4727's
/// experimental type 0x1E, action bits 00 (a receiver that does not know it skips
/// it), chg 0. Read as padding wherever it is.
pub const OPT_FILLER: u8 = 0x1e;
/// Longest run of Pad1/PadN Linux accepts in one header (`ip6_parse_tlv`).
pub const MAX_PAD_RUN: usize = 7;
/// RFC 6744 §8: act = 10 (discard + Parameter Problem code 2), chg = 0.
pub const OPT_NONCE: u8 = 0x8b;

/// Bytes of every DestOpts header we emit.
pub const HEADER_LEN: usize = 16;

/// The header byte a Linux router reads as the TCP data offset of a forwarded
/// GSO packet (module doc); its top bit is clear in every header we emit.
pub const GSO_DOFF_BYTE: usize = 12;

/// Bytes of the DestOpts header we add for a nonce of `nonce_len` bytes (4 or
/// 12): 16 either way (module doc: an 8-byte header for a 32-bit nonce would
/// let routers black-hole GSO TCP).
pub const fn header_len(nonce_len: usize) -> usize {
    let fit = (4 + nonce_len).div_ceil(8) * 8;
    if fit > HEADER_LEN {
        fit
    } else {
        HEADER_LEN
    }
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
    pub next_header: NextHeader,
    /// true if the header holds only the nonce and padding (filler options included)
    pub only_nonce: bool,
}

/// One TLV option of a Destination Options (or Hop-by-Hop) header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt<'a> {
    Pad1,
    /// PadN with its data length
    PadN(u8),
    /// RFC 6744 nonce value (4 or 12 bytes are valid; any length is reported here)
    Nonce(&'a [u8]),
    Other {
        opt_type: u8,
        data: &'a [u8],
    },
}

/// An option and the offset of its type byte from the start of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptAt<'a> {
    pub offset: usize,
    pub opt: Opt<'a>,
}

/// Zero-copy view of a Destination Options header (RFC 8200 §4.6).
#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>> {
    buf: T,
}

mod field {
    pub const NEXT_HEADER: usize = 0;
    pub const HDR_EXT_LEN: usize = 1;
    pub const OPTIONS: usize = 2;
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Checks that the buffer holds the whole header (`(Hdr Ext Len + 1) * 8` bytes).
    /// Bytes after the header are allowed and ignored.
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        let b = buf.as_ref();
        let units = *b.get(field::HDR_EXT_LEN).ok_or(Error::Truncated)?;
        if b.len() < (units as usize + 1) * 8 {
            return Err(Error::Truncated);
        }
        Ok(Header { buf })
    }
    pub fn next_header(&self) -> NextHeader {
        NextHeader(self.buf.as_ref()[field::NEXT_HEADER])
    }
    /// Total header length in bytes.
    pub fn header_len(&self) -> usize {
        (self.buf.as_ref()[field::HDR_EXT_LEN] as usize + 1) * 8
    }
    /// Options area (after Next Header and Hdr Ext Len).
    pub fn options_bytes(&self) -> &[u8] {
        &self.buf.as_ref()[field::OPTIONS..self.header_len()]
    }
    /// Iterates the options; yields `Err(Truncated)` once (and stops) if an option
    /// runs past the end of the header.
    pub fn options(&self) -> Options<'_> {
        Options { buf: self.options_bytes(), pos: 0, done: false }
    }
}

/// Iterator over the TLV options of a header.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    buf: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<OptAt<'a>, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.buf.len() {
            return None;
        }
        let offset = field::OPTIONS + self.pos;
        let t = self.buf[self.pos];
        if t == OPT_PAD1 {
            self.pos += 1;
            return Some(Ok(OptAt { offset, opt: Opt::Pad1 }));
        }
        let Some(&len) = self.buf.get(self.pos + 1) else {
            self.done = true;
            return Some(Err(Error::Truncated));
        };
        let Some(data) = self.buf.get(self.pos + 2..self.pos + 2 + len as usize) else {
            self.done = true;
            // its own error: the FreeBSD 96-bit reflection (Error::NonceOverrun)
            return Some(Err(if t == OPT_NONCE { Error::NonceOverrun } else { Error::Truncated }));
        };
        self.pos += 2 + len as usize;
        let opt = match t {
            OPT_PADN => Opt::PadN(len),
            OPT_NONCE => Opt::Nonce(data),
            _ => Opt::Other { opt_type: t, data },
        };
        Some(Ok(OptAt { offset, opt }))
    }
}

/// Looks for the nonce in one Destination Options header starting at `hdr[0]`;
/// `base` is the header's offset in the packet (added to the reported offset).
/// `Ok(None)`: no nonce option. Errors: two nonces, a nonce of neither 4 nor 12
/// bytes, an option running past the header.
pub fn find_nonce_in_header(hdr: &[u8], base: usize) -> Result<Option<NonceHeader>, Error> {
    let h = Header::new_checked(hdr)?;
    let mut found: Option<(Nonce, usize)> = None;
    let mut other = false;
    for o in h.options() {
        let o = o?;
        match o.opt {
            Opt::Nonce(v) => {
                if found.is_some() {
                    return Err(Error::MoreThanOneNonce);
                }
                let n = Nonce::from_slice(v).ok_or(Error::BadNonceLength(v.len() as u8))?;
                found = Some((n, base + o.offset));
            }
            Opt::Pad1 | Opt::PadN(_) | Opt::Other { opt_type: OPT_FILLER, .. } => {}
            Opt::Other { .. } => other = true,
        }
    }
    Ok(found.map(|(nonce, option_offset)| NonceHeader {
        nonce,
        option_offset,
        header_len: h.header_len(),
        next_header: h.next_header(),
        only_nonce: !other,
    }))
}

/// Fills `span` (option bytes of a header) with options every receiver skips:
/// nothing for 0 bytes, Pad1 for 1, PadN for 2..=7 (`MAX_PAD_RUN`), filler options
/// (`OPT_FILLER`, zero data) for more, never a padding run over 7 bytes. The caller
/// puts no padding right before the span.
pub fn fill(span: &mut [u8]) {
    span.fill(0);
    let mut rest = &mut span[..];
    while !rest.is_empty() {
        let n = rest.len();
        if n == 1 {
            rest[0] = OPT_PAD1;
            return;
        }
        // one filler option spans at most 2 + 255 bytes; what follows it starts a
        // new padding run
        let take = if n <= MAX_PAD_RUN { n } else { n.min(257) };
        rest[0] = if n <= MAX_PAD_RUN { OPT_PADN } else { OPT_FILLER };
        rest[1] = (take - 2) as u8;
        rest = &mut rest[take..];
    }
}

/// Emits a DestOpts header holding only `nonce` (and filler: [`fill`]).
pub fn emit_nonce_header(next_header: NextHeader, nonce: &Nonce, out: &mut Vec<u8>) {
    let n = nonce.as_bytes();
    let total = header_len(n.len());
    out.push(next_header.0);
    out.push((total / 8 - 1) as u8);
    out.push(OPT_NONCE);
    out.push(n.len() as u8);
    out.extend_from_slice(n);
    let at = out.len();
    out.resize(at + total - 4 - n.len(), 0);
    fill(&mut out[at..]);
}

/// A packet `src -> dst` (hop limit `hop_limit`, traffic class and flow label 0):
/// the fixed header, our DestOpts header holding `nonce` if one is given, then
/// `upper` of protocol `next_header`. Every packet the node originates (Locator
/// Updates, nonce-only packets, ICMPv6 errors) is laid out by this function.
/// `upper` must leave the payload within 64 KiB (ours stay far below).
pub fn packet(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    nonce: Option<&Nonce>,
    next_header: NextHeader,
    upper: &[u8],
) -> Vec<u8> {
    let hlen = nonce.map_or(0, |n| header_len(n.len()));
    let first = if nonce.is_some() { NextHeader::DSTOPTS } else { next_header };
    let payload_len = (hlen + upper.len()) as u16;
    let mut out = Vec::with_capacity(ipv6::HEADER_LEN + hlen + upper.len());
    ipv6::Repr { src, dst, next_header: first, payload_len, hop_limit }.emit(&mut out);
    if let Some(n) = nonce {
        emit_nonce_header(next_header, n, &mut out);
    }
    out.extend_from_slice(upper);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nonce of the Destination Options header directly after the fixed header
    /// (what `classify` does first), on its own.
    fn find_nonce(pkt: &[u8]) -> Result<Option<NonceHeader>, Error> {
        let p = ipv6::Packet::new_checked(pkt)?;
        if p.next_header() != NextHeader::DSTOPTS {
            return Ok(None);
        }
        find_nonce_in_header(p.payload(), ipv6::HEADER_LEN)
    }

    fn pkt_with(opts: &[u8]) -> Vec<u8> {
        let mut v = vec![0x60, 0, 0, 0, 0, opts.len() as u8, NextHeader::DSTOPTS.0, 64];
        v.extend_from_slice(&[0u8; 32]);
        v.extend_from_slice(opts);
        v
    }

    #[test]
    fn emits_rfc6744_layout() {
        let mut v = Vec::new();
        emit_nonce_header(NextHeader::UDP, &Nonce::N32([0xde, 0xad, 0xbe, 0xef]), &mut v);
        assert_eq!(v, [17, 1, 0x8b, 4, 0xde, 0xad, 0xbe, 0xef, OPT_FILLER, 6, 0, 0, 0, 0, 0, 0]);
        assert_eq!(v[GSO_DOFF_BYTE], 0, "a router reads this byte as the TCP data offset");
        let mut v = Vec::new();
        emit_nonce_header(NextHeader::TCP, &Nonce::N96([1; 12]), &mut v);
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
        assert_eq!(h.next_header, NextHeader::UDP);
        assert!(h.only_nonce);
    }

    #[test]
    fn two_nonces_are_an_error() {
        let p = pkt_with(&[17, 1, 0x8b, 4, 1, 2, 3, 4, 0x8b, 4, 5, 6, 7, 8, OPT_PADN, 0]);
        assert_eq!(find_nonce(&p).unwrap_err(), Error::MoreThanOneNonce);
    }

    #[test]
    fn truncated_option() {
        // FreeBSD ILNP6's reflected 96-bit nonce: an 8-byte header, a 14-byte option
        let p = pkt_with(&[17, 0, 0x8b, 12, 1, 2, 3, 4]);
        assert_eq!(find_nonce(&p).unwrap_err(), Error::NonceOverrun);
        // another option cut short is plain truncation
        let p = pkt_with(&[17, 0, 0x3e, 9, 1, 2, 3, 4]);
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

    #[test]
    fn iterates_options_with_offsets() {
        let hdr = [17, 1, OPT_PAD1, OPT_PADN, 1, 0, 0x8b, 4, 1, 2, 3, 4, 0x3e, 2, 0xaa, 0xbb];
        let h = Header::new_checked(&hdr[..]).unwrap();
        assert_eq!((h.next_header(), h.header_len()), (NextHeader::UDP, 16));
        let opts: Vec<OptAt> = h.options().map(|o| o.unwrap()).collect();
        assert_eq!(
            opts,
            [
                OptAt { offset: 2, opt: Opt::Pad1 },
                OptAt { offset: 3, opt: Opt::PadN(1) },
                OptAt { offset: 6, opt: Opt::Nonce(&[1, 2, 3, 4]) },
                OptAt { offset: 12, opt: Opt::Other { opt_type: 0x3e, data: &[0xaa, 0xbb] } },
            ]
        );
        let n = find_nonce_in_header(&hdr, 40).unwrap().unwrap();
        assert_eq!(n.option_offset, 46);
        assert!(!n.only_nonce);
        // the filler option (any data) is padding
        let mut filled = hdr;
        filled[12] = OPT_FILLER;
        assert!(find_nonce_in_header(&filled, 40).unwrap().unwrap().only_nonce);
        // an option running past the header: one Truncated, then the iterator ends
        let bad = [17, 0, 0x1e, 9, 0, 0, 0, 0];
        let h = Header::new_checked(&bad[..]).unwrap();
        let v: Vec<_> = h.options().collect();
        assert_eq!(v, [Err(Error::Truncated)]);
        assert_eq!(Header::new_checked(&[17u8, 1, 0, 0][..]).unwrap_err(), Error::Truncated);
        assert_eq!(Header::new_checked(&[17u8][..]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn nonce_96_offset_and_plain_packets() {
        let mut opts = Vec::new();
        emit_nonce_header(NextHeader::TCP, &Nonce::N96([0xab; 12]), &mut opts);
        let h = find_nonce(&pkt_with(&opts)).unwrap().unwrap();
        assert_eq!(
            (h.nonce, h.option_offset, h.header_len, h.next_header),
            (Nonce::N96([0xab; 12]), 42, 16, NextHeader::TCP)
        );
        // DestOpts without a nonce, and no DestOpts at all: no nonce, not an error
        assert_eq!(find_nonce(&pkt_with(&[17, 0, OPT_PADN, 4, 0, 0, 0, 0])).unwrap(), None);
        let mut udp = pkt_with(&[0; 8]);
        udp[6] = NextHeader::UDP.0;
        assert_eq!(find_nonce(&udp).unwrap(), None);
        // a header longer than payload_len
        let mut p = pkt_with(&[17, 1, 0x8b, 4, 1, 2, 3, 4]);
        p.extend_from_slice(&[0; 8]); // bytes beyond payload_len do not count
        assert_eq!(find_nonce(&p).unwrap_err(), Error::Truncated);
    }
}
