//! RFC 6742 RDATA (filled in below)
