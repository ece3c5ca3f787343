//! Where the daemon's log lines go, and how they look there.
//!
//! * Under systemd with stderr connected to the journal ($JOURNAL_STREAM names
//!   stderr's device and inode): journald's native protocol (`tracing-journald`), so
//!   each entry carries its priority (`journalctl -p warning`) and no escape codes.
//! * Otherwise plain text on stderr, with colour only when stderr is a terminal.
//!
//! A daemon must not die of its own log stream: fds 0-2 are opened on /dev/null if
//! they were closed at exec (else the TUN or a socket would become fd 2 and receive
//! the log), and a write that fails (EPIPE: whoever read stderr went away) is
//! dropped, not reported with `eprintln!`, which panics on EPIPE.

use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Opens /dev/null on whichever of fds 0, 1 and 2 is closed.
pub fn ensure_stdio() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
                // SAFETY: dup2 onto a descriptor number that is closed; `null` is closed after.
                unsafe { libc::dup2(null.as_raw_fd(), fd) };
            }
        }
    }
}

/// Does $JOURNAL_STREAM ("<dev>:<inode>", set by systemd) name our stderr?
fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else { return false };
    let v = v.to_string_lossy();
    let Some((dev, ino)) = v.split_once(':') else { return false };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else { return false };
    // SAFETY: fstat writes into the zeroed struct we pass.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(2, &mut st) } != 0 {
        return false;
    }
    st.st_dev == dev && st.st_ino == ino
}

/// The log goes to the journal (set once by `init`).
static TO_JOURNAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

pub fn init(level: &str) {
    let filter = || {
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(format!("ilnpd={level},ilnp_core={level}")))
    };
    if stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(j) => {
                tracing_subscriber::registry().with(filter()).with(j.with_syslog_identifier("ilnpd".into())).init();
                let _ = TO_JOURNAL.set(true);
                return;
            }
            Err(e) => say(&format!("journald: {e}: logging to stderr")),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .log_internal_errors(false)
        .init();
}

/// Why the daemon exits: an error entry in the journal under systemd, else one
/// plain line on stderr (where the log goes too, so only once).
pub fn fatal(e: &anyhow::Error) {
    if TO_JOURNAL.get().copied().unwrap_or(false) {
        tracing::error!("{e:#}");
    } else {
        say(&format!("{e:#}"));
    }
}

/// A line on stderr that is lost, not a panic, if stderr is gone.
pub fn say(msg: &str) {
    let _ = writeln!(std::io::stderr(), "ilnpd: {msg}");
}
