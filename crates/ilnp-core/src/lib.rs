//! Sans-IO ILNPv6 protocol core: ILCC, peers, slow-path decisions, Locator Updates.
//! No sockets, no threads, no clock reads: time (`now`) and randomness are injected.

mod action;
pub mod admission;
mod admission_terms;
pub mod balance;
mod balance_table;
mod challenge;
pub mod config;
pub mod dns;
pub mod event;
mod failover;
pub mod fallback;
mod icmp;
pub mod ilcc;
mod ilcc_key;
mod inbound;
pub mod local;
mod locator;
mod lu;
mod machine;
pub mod nids;
mod nonce_key;
mod orchestration;
mod outbound;
pub mod peers;
mod remote_locator;
pub mod snapshot;
pub mod timers;
mod v4path;

pub use action::{Action, IlccSnapshot};
pub use admission::{Admission, AnswerHint, TierCounts, TokenBucket, ANSWER_HINT_MAX_AGE};
pub use balance::{BalanceChange, BalanceError, BalanceTable, Policy};
pub use config::{CoreConfig, HandoffMode, LuTimerMode, LuTimers, DEFAULT_LOCATOR_PREF};
pub use dns::{DnsPeer, DnsPeerResult};
pub use event::{DropReason, Event, Outcome, Stats};
pub use fallback::{FallbackReason, FallbackView, PeerState};
pub use ilcc::{IlccEntry, IlccView, RemoteLocator, Tier};
pub use ilcc_key::IlccKey;
pub use ilnp_wire::checksum::ChecksumRule;
pub use ilnp_wire::{Locator, Nid, Nonce};
pub use local::{
    derive_local_locators, locator_preference, v4_path_preference, KernelAddress, LocalLocators, UplinkFacts,
};
pub use locator::{LocalLocator, LocatorState, RouterPreference};
pub use machine::Core;
pub use nids::{LocalNids, NidRefused, TempNid};
pub use peers::{PeerError, PeerInfo, PeerLocator, PeerRecord, PeerSource};
/// The randomness the core takes (re-exported so shells and fuzzers use the same trait).
pub use rand_core::{Error as RngError, RngCore};
pub use snapshot::{CoreSnapshot, RestoreError, SNAPSHOT_VERSION};

#[cfg(test)]
mod tests;
