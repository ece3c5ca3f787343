//! ICMPv6 messages ILNPv6 cares about: the Locator Update (RFC 6743, type 156)
//! and the error messages that quote an invoking packet (RFC 4443).

use crate::{Error, Locator};

pub const TYPE_DEST_UNREACH: u8 = 1;
pub const TYPE_PACKET_TOO_BIG: u8 = 2;
pub const TYPE_TIME_EXCEEDED: u8 = 3;
pub const TYPE_PARAM_PROBLEM: u8 = 4;
pub const TYPE_ECHO_REQUEST: u8 = 128;
pub const TYPE_ECHO_REPLY: u8 = 129;
pub const TYPE_LOCATOR_UPDATE: u8 = 156;

pub const UNREACH_NO_ROUTE: u8 = 0;
pub const UNREACH_ADMIN: u8 = 1;
pub const UNREACH_ADDRESS: u8 = 3;
pub const UNREACH_PORT: u8 = 4;
pub const PARAM_UNRECOGNIZED_OPTION: u8 = 2;

/// Minimum IPv6 MTU: an ICMPv6 error must fit in it (RFC 4443 §2.4 (c)).
pub const MIN_MTU: usize = 1280;

/// True for the error types (1–4) that carry an invoking packet.
pub fn is_error(t: u8) -> bool {
    (TYPE_DEST_UNREACH..=TYPE_PARAM_PROBLEM).contains(&t)
}

/// Generic ICMPv6 view: type, code, checksum, 4-byte data word, body.
#[derive(Debug, Clone, Copy)]
pub struct Message<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Message<T> {
    pub fn new_checked(buf: T) -> Result<Self, Error> {
        if buf.as_ref().len() < 8 {
            return Err(Error::Truncated);
        }
        Ok(Message { buf })
    }
    pub fn msg_type(&self) -> u8 {
        self.buf.as_ref()[0]
    }
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[1]
    }
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.buf.as_ref()[2], self.buf.as_ref()[3]])
    }
    /// Bytes 4..8: MTU (PTB), pointer (Parameter Problem), unused otherwise.
    pub fn data_word(&self) -> u32 {
        let b = self.buf.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }
    /// For error messages: the invoking packet (as much as was quoted).
    pub fn invoking_packet(&self) -> &[u8] {
        &self.buf.as_ref()[8..]
    }
}

/// Builds an ICMPv6 error (type, code, data word) quoting `invoking`, truncated so
/// the whole IPv6 packet stays within 1280 bytes. The checksum is left zero.
pub fn emit_error(msg_type: u8, code: u8, data_word: u32, invoking: &[u8], out: &mut Vec<u8>) {
    let room = MIN_MTU - crate::ipv6::HEADER_LEN - 8;
    out.push(msg_type);
    out.push(code);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&data_word.to_be_bytes());
    out.extend_from_slice(&invoking[..invoking.len().min(room)]);
}

/// LU Operation byte (RFC 6743 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LuOperation {
    Advertisement,
    Acknowledgement,
}

impl LuOperation {
    pub fn to_byte(self) -> u8 {
        match self {
            LuOperation::Advertisement => 1,
            LuOperation::Acknowledgement => 2,
        }
    }
}

/// One locator entry of an LU: 12 bytes, not 8-byte aligned after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LuEntry {
    pub locator: Locator,
    /// lower is preferred (same meaning as the L64 RR preference)
    pub preference: u16,
    /// seconds
    pub lifetime: u16,
}

/// Decoded Locator Update (advertisement or ack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatorUpdate {
    pub operation: LuOperation,
    pub entries: Vec<LuEntry>,
}

pub const LU_HEADER_LEN: usize = 8;
pub const LU_ENTRY_LEN: usize = 12;
/// Num of Locs is one byte.
pub const LU_MAX_ENTRIES: usize = 255;

impl LocatorUpdate {
    /// Parses the ICMPv6 message body starting at the Type byte.
    /// Sent form: Code 0 + Operation 1/2. Also accepted (Dupont's branch, erratum
    /// 5911 reading): Code 1/2 with Operation 0.
    pub fn parse(icmp: &[u8]) -> Result<LocatorUpdate, Error> {
        if icmp.len() < LU_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if icmp[0] != TYPE_LOCATOR_UPDATE {
            return Err(Error::Malformed("not a Locator Update"));
        }
        let (code, num, op) = (icmp[1], icmp[4] as usize, icmp[5]);
        let operation = match (code, op) {
            (0, 1) | (1, 0) => LuOperation::Advertisement,
            (0, 2) | (2, 0) => LuOperation::Acknowledgement,
            _ => return Err(Error::UnknownLuOperation { code, operation: op }),
        };
        if num == 0 {
            return Err(Error::LuNoLocators);
        }
        if icmp.len() != LU_HEADER_LEN + LU_ENTRY_LEN * num {
            return Err(Error::LuLengthMismatch { num_locs: num as u8, len: icmp.len() });
        }
        let entries = icmp[LU_HEADER_LEN..]
            .chunks_exact(LU_ENTRY_LEN)
            .map(|e| LuEntry {
                locator: Locator(u64::from_be_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]])),
                preference: u16::from_be_bytes([e[8], e[9]]),
                lifetime: u16::from_be_bytes([e[10], e[11]]),
            })
            .collect();
        Ok(LocatorUpdate { operation, entries })
    }

    /// Emits the ICMPv6 message (checksum zero; fill it with `checksum::icmpv6_checksum`).
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        if self.entries.is_empty() {
            return Err(Error::LuNoLocators);
        }
        if self.entries.len() > LU_MAX_ENTRIES {
            return Err(Error::Malformed("more than 255 locators"));
        }
        out.extend_from_slice(&[
            TYPE_LOCATOR_UPDATE,
            0,
            0,
            0,
            self.entries.len() as u8,
            self.operation.to_byte(),
            0,
            0,
        ]);
        for e in &self.entries {
            out.extend_from_slice(&e.locator.0.to_be_bytes());
            out.extend_from_slice(&e.preference.to_be_bytes());
            out.extend_from_slice(&e.lifetime.to_be_bytes());
        }
        Ok(())
    }

    /// The ack for this advertisement: identical body except Operation (RFC 6743 §2).
    pub fn ack(&self) -> LocatorUpdate {
        LocatorUpdate { operation: LuOperation::Acknowledgement, entries: self.entries.clone() }
    }

    pub fn len(&self) -> usize {
        LU_HEADER_LEN + LU_ENTRY_LEN * self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lu_literal_bytes() {
        let lu = LocatorUpdate {
            operation: LuOperation::Advertisement,
            entries: vec![
                LuEntry { locator: Locator(0x2001_0db8_0002_0000), preference: 10, lifetime: 30 },
                LuEntry { locator: Locator(0x2001_0db8_0003_0000), preference: 20, lifetime: 300 },
            ],
        };
        let mut v = Vec::new();
        lu.emit(&mut v).unwrap();
        assert_eq!(
            v,
            [
                156, 0, 0, 0, 2, 1, 0, 0, //
                0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 10, 0, 30, //
                0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, 0, 0, 20, 1, 44
            ]
        );
        assert_eq!(LocatorUpdate::parse(&v).unwrap(), lu);
        let mut a = Vec::new();
        lu.ack().emit(&mut a).unwrap();
        assert_eq!(a[5], 2);
        assert_eq!(a[6..], v[6..]);
    }

    #[test]
    fn lu_errors() {
        assert_eq!(LocatorUpdate::parse(&[156, 0, 0, 0, 0, 1, 0, 0]).unwrap_err(), Error::LuNoLocators);
        assert_eq!(
            LocatorUpdate::parse(&[156, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err(),
            Error::LuLengthMismatch { num_locs: 2, len: 20 }
        );
        assert!(matches!(
            LocatorUpdate::parse(&[156, 0, 0, 0, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::UnknownLuOperation { .. })
        ));
        assert_eq!(LocatorUpdate::parse(&[156, 0, 0]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn lu_accepts_code_variant() {
        let v = [156, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 10, 0, 30];
        assert_eq!(LocatorUpdate::parse(&v).unwrap().operation, LuOperation::Acknowledgement);
    }

    #[test]
    fn lu_255_entries_roundtrip() {
        let entries: Vec<LuEntry> =
            (0..255u64).map(|i| LuEntry { locator: Locator(i << 16), preference: i as u16, lifetime: 1 }).collect();
        let lu = LocatorUpdate { operation: LuOperation::Advertisement, entries };
        let mut v = Vec::new();
        lu.emit(&mut v).unwrap();
        assert_eq!(v.len(), 3068);
        assert_eq!(LocatorUpdate::parse(&v).unwrap(), lu);
    }

    #[test]
    fn error_quote_is_bounded() {
        let mut v = Vec::new();
        emit_error(TYPE_DEST_UNREACH, UNREACH_ADDRESS, 0, &[0u8; 3000], &mut v);
        assert_eq!(v.len() + 40, MIN_MTU);
    }
}
