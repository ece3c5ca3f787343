//! ilnpctl as a library: its command-line definition (`cli`), shared by the binary
//! and the generator of the man pages and shell completions.

pub mod cli;
