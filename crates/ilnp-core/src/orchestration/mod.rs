//! The `Core` methods that run one sub-machine with the rest of the core's state
//! (its `*_parts` context builders and the public entry points that need it): above
//! `machine.rs`, so no sub-machine file imports `Core`.

mod admission;
mod balance;
mod challenge;
mod fallback;
mod local;
mod nids;
mod timers;
mod v4path;
