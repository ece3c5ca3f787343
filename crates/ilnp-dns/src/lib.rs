//! The resolver proxy's DNS messages, without sockets or a runtime (RFC 6742 names for
//! unmodified applications; docs/architecture.md § Names): what a client's query asks
//! and what it is answered (`reply`), a name's ILNP records and the questions that
//! find them (`lookup`, a sans-IO resolution the caller drives), and whether an
//! upstream's answer answers our query (`exchange`). ilnpd's `dns/` does the I/O;
//! the `dns_proxy` fuzz target drives these functions with untrusted bytes.

pub mod exchange;
pub mod lookup;
pub mod reply;

pub use hickory_proto::op::Message;
pub use hickory_proto::rr::Name;
