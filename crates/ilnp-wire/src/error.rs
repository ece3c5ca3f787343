//! The one error type of the wire crate's parsers and builders.

use core::fmt;

/// Why a packet or record could not be parsed or built. Parsers never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Truncated,
    NotIpv6,
    Malformed(&'static str),
    MoreThanOneNonce,
    BadNonceLength(u8),
    NoNonce,
    UnsupportedOptions,
    NotIdentifierForm,
    BadChecksum,
    LuNoLocators,
    LuLengthMismatch {
        num_locs: u8,
        len: usize,
    },
    UnknownLuOperation {
        code: u8,
        operation: u8,
    },
    /// a nonce option running past the end of its header: FreeBSD ILNP6 reflects a
    /// 96-bit nonce in an 8-byte header (`ilnp6_nonce_output_mbuf` sets
    /// `ip6d_len = 0`), so only 4 of the 12 nonce bytes are on the wire
    NonceOverrun,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => write!(f, "truncated packet"),
            Error::NotIpv6 => write!(f, "not an IPv6 packet"),
            Error::Malformed(w) => write!(f, "malformed: {w}"),
            Error::MoreThanOneNonce => write!(f, "more than one nonce option (authentication failed)"),
            Error::BadNonceLength(l) => write!(f, "nonce option of {l} bytes (want 4 or 12)"),
            Error::NoNonce => write!(f, "no nonce option"),
            Error::UnsupportedOptions => write!(f, "destination options other than the nonce"),
            Error::NotIdentifierForm => write!(f, "addresses are not in the identifier prefix"),
            Error::BadChecksum => write!(f, "bad ICMPv6 checksum"),
            Error::LuNoLocators => write!(f, "Locator Update with Num of Locs = 0"),
            Error::LuLengthMismatch { num_locs, len } => {
                write!(f, "Locator Update says {num_locs} locators but is {len} bytes long")
            }
            Error::UnknownLuOperation { code, operation } => {
                write!(f, "Locator Update with code {code} operation {operation}")
            }
            Error::NonceOverrun => write!(f, "nonce option runs past its Destination Options header"),
        }
    }
}

impl std::error::Error for Error {}
