//! A model of the Linux receiver's Destination Options parser, written from
//! `ip6_parse_tlv` (`net/ipv6/exthdrs.c`; read in the authors' Linux 4.9.52 ILNPv6
//! tree, `ilnp/ilnp-public-1`, and in 6.x, where the rule is the same), to check
//! every header we emit against it (issue #46 item 1). What it refuses, Linux drops
//! (`Ip6InHdrErrors`, or a Parameter Problem for an unknown option whose action
//! bits say so):
//!
//! * a run of Pad1/PadN longer than 7 bytes (a run ends at any other option);
//! * a PadN data byte that is not zero;
//! * an option running past the header, or a header longer than the packet;
//! * more non-padding options than `max_dst_opts_cnt` (8 by default; since 4.16);
//! * an option Linux does not know whose action bits (top two) are not 00.
//!
//! What Linux knows in a Destination Options header: Home Address (0xC9, with
//! Mobile IPv6) and, in the authors' ILNP kernel, the nonce (0x8B), whose handler
//! reads the nonce at header offset 2 whatever the option's place
//! (`ilnp6_check_nonce`, `net/ipv6/ilnp6.c`): so a nonce that is not the first
//! option is refused there. A stock kernel does not know 0x8B (action 10: drop and
//! Parameter Problem), as RFC 6744 intends for non-ILNP hosts.

use crate::destopts::{OPT_NONCE, OPT_PAD1, OPT_PADN};

/// Which Linux receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// The authors' Linux 4.9 ILNPv6 kernel: knows the nonce (at offset 2), no
    /// option count limit.
    Ilnp49,
    /// Linux 6.x with the default `max_dst_opts_cnt` of 8, not knowing the nonce.
    Stock6,
    /// Linux 6.x that knows the nonce (what an ILNP port to it would be): the
    /// count limit and the nonce first.
    Ilnp6,
}

/// Why Linux drops the header; `at` is the option's offset in the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// shorter than its Hdr Ext Len says
    HeaderTruncated,
    /// a Pad1/PadN run of `len` bytes (> 7) ending at `at`
    PadRun { at: usize, len: usize },
    /// a PadN data byte at `at` is not zero
    PadNotZero { at: usize },
    /// an option at `at` runs past the header
    OptionPastEnd { at: usize },
    /// the 9th non-padding option (`max_dst_opts_cnt`)
    TooManyOptions { at: usize },
    /// an option the receiver does not know, action bits not 00
    UnknownOption { at: usize, opt_type: u8 },
    /// the ILNP kernel's nonce handler reads offset 2: a nonce elsewhere
    NonceNotFirst { at: usize },
}

/// Linux's default `net.ipv6.max_dst_opts_number`.
pub const MAX_DST_OPTS_CNT: usize = 8;

/// Whether `receiver` accepts the Destination Options header at `hdr[0]` (bytes
/// after the header are ignored). Ok: Linux passes on to the next header.
pub fn parse(receiver: Receiver, hdr: &[u8]) -> Result<(), Refusal> {
    let len = (*hdr.get(1).ok_or(Refusal::HeaderTruncated)? as usize + 1) * 8;
    let h = hdr.get(..len).ok_or(Refusal::HeaderTruncated)?;
    let knows_nonce = receiver != Receiver::Stock6;
    let max_count = if receiver == Receiver::Ilnp49 { usize::MAX } else { MAX_DST_OPTS_CNT };
    let (mut off, mut padlen, mut count) = (2, 0, 0);
    while off < len {
        let t = h[off];
        if t == OPT_PAD1 {
            padlen += 1;
            if padlen > 7 {
                return Err(Refusal::PadRun { at: off, len: padlen });
            }
            off += 1;
            continue;
        }
        let Some(&l) = h.get(off + 1) else { return Err(Refusal::OptionPastEnd { at: off }) };
        let optlen = l as usize + 2;
        if off + optlen > len {
            return Err(Refusal::OptionPastEnd { at: off });
        }
        if t == OPT_PADN {
            padlen += optlen;
            if padlen > 7 {
                return Err(Refusal::PadRun { at: off, len: padlen });
            }
            if let Some(i) = (off + 2..off + optlen).find(|&i| h[i] != 0) {
                return Err(Refusal::PadNotZero { at: i });
            }
        } else {
            count += 1;
            if count > max_count {
                return Err(Refusal::TooManyOptions { at: off });
            }
            let known = t == 0xc9 || (t == OPT_NONCE && knows_nonce);
            if t == OPT_NONCE && knows_nonce && off != 2 {
                return Err(Refusal::NonceNotFirst { at: off });
            }
            if !known && t >> 6 != 0 {
                return Err(Refusal::UnknownOption { at: off, opt_type: t });
            }
            padlen = 0;
        }
        off += optlen;
    }
    Ok(())
}

/// Checks the header of a whole IPv6 packet `pkt` that directly follows its fixed
/// header (if Next Header is 60) with every ILNP receiver (`Ilnp49`, `Ilnp6`), and
/// says which refused it and why. A packet without one passes.
pub fn check_packet(pkt: &[u8]) -> Result<(), (Receiver, Refusal)> {
    if pkt.get(6) != Some(&60) {
        return Ok(());
    }
    let hdr = pkt.get(40..).unwrap_or_default();
    for r in [Receiver::Ilnp49, Receiver::Ilnp6] {
        parse(r, hdr).map_err(|e| (r, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destopts::{self, Nonce, GSO_DOFF_BYTE};
    use crate::ipv6::NextHeader;
    use crate::test_support::{NA, NB, P};
    use crate::{ilnp_addr, translate};

    /// The header we sent until issue #46: a 32-bit nonce, then 8 bytes of PadN.
    const OLD_32: [u8; 16] = [17, 1, 0x8b, 4, 1, 2, 3, 4, 1, 6, 0, 0, 0, 0, 0, 0];

    #[test]
    fn the_model_follows_ip6_parse_tlv() {
        use Receiver::*;
        // the old 32-bit layout: a padding run of 8
        for r in [Ilnp49, Ilnp6] {
            assert_eq!(parse(r, &OLD_32), Err(Refusal::PadRun { at: 8, len: 8 }), "{r:?}");
        }
        // 7 bytes of padding are fine, 8 in two options are not, a filler breaks the run
        let seven = [17, 1, 0x1e, 3, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0x1e, 0];
        assert_eq!(parse(Ilnp49, &seven), Ok(()));
        let eight = [17, 1, 0x1e, 2, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0x1e, 0];
        assert_eq!(parse(Ilnp49, &eight), Err(Refusal::PadRun { at: 7, len: 8 }));
        let broken = [17, 1, 1, 5, 0, 0, 0, 0, 0, 0x1e, 0, 1, 3, 0, 0, 0];
        assert_eq!(parse(Ilnp49, &broken), Ok(()));
        // PadN data must be zero
        assert_eq!(parse(Ilnp49, &[17, 0, 1, 4, 0, 0, 9, 0]), Err(Refusal::PadNotZero { at: 6 }));
        // an option past the end; a header longer than the bytes
        assert_eq!(parse(Ilnp49, &[17, 0, 0x1e, 5, 0, 0, 0, 0]), Err(Refusal::OptionPastEnd { at: 2 }));
        assert_eq!(parse(Ilnp49, &[17, 1, 0x8b, 4, 1, 2, 3, 4]), Err(Refusal::HeaderTruncated));
        // unknown options by their action bits; the nonce by receiver
        assert_eq!(parse(Stock6, &[17, 0, 0x3e, 4, 0, 0, 0, 0]), Ok(()));
        assert_eq!(parse(Stock6, &[17, 0, 0x5e, 4, 0, 0, 0, 0]), Err(Refusal::UnknownOption { at: 2, opt_type: 0x5e }));
        assert_eq!(parse(Stock6, &[17, 0, 0x8b, 4, 1, 2, 3, 4]), Err(Refusal::UnknownOption { at: 2, opt_type: 0x8b }));
        assert_eq!(parse(Ilnp49, &[17, 0, 0x8b, 4, 1, 2, 3, 4]), Ok(()));
        // the ILNP kernel reads the nonce at offset 2
        assert_eq!(
            parse(Ilnp49, &[17, 1, 1, 2, 0, 0, 0x8b, 4, 1, 2, 3, 4, 1, 2, 0, 0]),
            Err(Refusal::NonceNotFirst { at: 6 })
        );
        // at most 8 options in 6.x, any number in 4.9
        let mut many = vec![17, 2];
        many.extend(std::iter::repeat_n([0x1e, 0], 11).flatten());
        assert_eq!(parse(Ilnp6, &many), Err(Refusal::TooManyOptions { at: 2 + 8 * 2 }));
        assert_eq!(parse(Ilnp49, &many), Ok(()));
    }

    #[test]
    fn every_header_we_emit_passes_linux() {
        // the header on its own, both nonce sizes, and what the emitters around it make
        for n in [Nonce::N32([0xff; 4]), Nonce::N96([0xff; 12]), Nonce::N32([0; 4])] {
            let mut h = Vec::new();
            destopts::emit_nonce_header(NextHeader::UDP, &n, &mut h);
            assert_eq!(
                check_packet(&crate::test_support::with_destopts(ilnp_addr(P, NA), ilnp_addr(P, NB), &h, &[])),
                Ok(()),
                "{h:02x?}"
            );
            if n.len() == 4 {
                assert_eq!(h[GSO_DOFF_BYTE], 0, "a router reads this byte as the TCP data offset");
            }
            let p = destopts::packet(ilnp_addr(P, NA), ilnp_addr(P, NB), 64, Some(&n), NextHeader::NONE, &[]);
            assert_eq!(check_packet(&p), Ok(()));
            assert_eq!(check_packet(&translate::nonce_only_packet(ilnp_addr(P, NA), ilnp_addr(P, NB), &n)), Ok(()));
        }
        // the 32-bit layout: the nonce, then one filler option of six zero bytes
        let mut h = Vec::new();
        destopts::emit_nonce_header(NextHeader::TCP, &Nonce::N32([1, 2, 3, 4]), &mut h);
        assert_eq!(h, [6, 1, 0x8b, 4, 1, 2, 3, 4, 0x1e, 6, 0, 0, 0, 0, 0, 0]);
        // the old one fails the same check
        let old = crate::test_support::with_destopts(ilnp_addr(P, NA), ilnp_addr(P, NB), &OLD_32, &[]);
        assert_eq!(check_packet(&old), Err((Receiver::Ilnp49, Refusal::PadRun { at: 8, len: 8 })));
    }

    #[test]
    fn fill_never_makes_a_padding_run_over_seven() {
        for n in 0..600 {
            let mut span = vec![0xaa; n];
            destopts::fill(&mut span);
            // as a header's options after a nonce option (a run starts fresh there)
            let mut h = vec![59, 0, 0x8b, 4, 1, 2, 3, 4];
            h.extend_from_slice(&span);
            let pad = (8 - h.len() % 8) % 8;
            if pad == 0 {
                h[1] = (h.len() / 8 - 1) as u8;
                assert_eq!(parse(Receiver::Ilnp49, &h), Ok(()), "span {n}: {span:02x?}");
                let f = destopts::find_nonce_in_header(&h, 0).unwrap().unwrap();
                assert!(f.only_nonce, "span {n}: filler reads as padding");
            }
        }
    }
}
