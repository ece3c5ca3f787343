//! ilnpd as a library: the parts the daemon binary (src/main.rs) and the tests share.

pub mod bpf;
pub mod cli;
