//! ILNPv6 wire formats (RFC 6740–6744): zero-copy views and builders.
//!
//! Everything that knows a byte offset lives in this crate; protocol decisions
//! live in `ilnp-core`.

#[macro_use]
mod macros;

pub mod addr;
pub mod checksum;
pub mod classify;
pub mod destopts;
pub mod error;
pub mod icmpv6;
pub mod ipv6;
pub mod l4;
pub mod locator_state;
pub mod policy;
pub mod rdata;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod translate;
pub mod unicast;
pub mod v4path;

pub use addr::{ilnp_addr, split_addr, Locator, Nid, DEFAULT_IDENTIFIER_PREFIX};
pub use classify::{classify, ClassifyError, Packet};
pub use destopts::Nonce;
pub use error::Error;
pub use locator_state::{LocatorState, RouterPreference};
pub use policy::Policy;
pub use unicast::{LocatorError, LocatorPref, LocatorPrefError, NidError};
