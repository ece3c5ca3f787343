//! This node's NID when the configuration does not spell it out (issue #44 item 1).
//!
//! `nid = "auto"` (the default) is a **stable-privacy NID**: RFC 7217's construction
//! adapted to a NID. RFC 7217 hashes the prefix, the interface and the network with a
//! host secret so that an interface identifier is stable on one network and unlinkable
//! across networks; a NID must be the same on every network (it names the node, the
//! locators say where it is), so only the secret and a counter go in:
//!
//! `NID = HMAC-SHA-256(secret, "ILNPv6 stable-privacy NID" || counter)`, its first 64
//! bits, with the u bit cleared (not a universally unique identifier: RFC 4291 App. A,
//! RFC 6740 §3) and the g bit cleared (unicast), drawn again with the next counter
//! while ilnp-wire's unicast rules refuse it (`Nid::check_unicast`). With u = g = 0 the
//! reserved interface identifiers of RFC 5453's registry other than zero (the IANA
//! Ethernet block, u = 1; RFC 2526's subnet anycast range, g = 1) cannot come out.
//!
//! The secret is 32 bytes from the kernel's CSPRNG (getrandom) in `<state_dir>/nid-secret`,
//! made on first need (new file only, 0600, never through a symlink) and read with a
//! check (a regular file of 32 bytes, owned by us, no access for group or others). It
//! appears in no log. The NID "auto" resolved to is recorded in `<state_dir>/nid` the
//! first time, and later starts use that record: the NID survives a lost secret, and an
//! upgraded host keeps the NID it already used (`resolve_auto`).
//!
//! `nid = "eui64"`: the modified EUI-64 of the first uplink's MAC (the default before),
//! a permanent hardware identifier in every packet; nothing recorded.

use anyhow::{anyhow, bail, Context, Result};
use ilnp_wire::Nid;
use rand::RngCore;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The host secret's file in the state directory.
pub const SECRET_FILE: &str = "nid-secret";
/// The record of the NID "auto" resolved to, in the state directory.
pub const NID_FILE: &str = "nid";
pub const SECRET_LEN: usize = 32;

/// What the hash is over besides the counter: names what the output is for, so the
/// same secret could key another derivation without giving this one away.
const LABEL: &[u8] = b"ILNPv6 stable-privacy NID";

/// How the configuration names this node's NID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NidChoice {
    /// `nid = "xxxx:xxxx:xxxx:xxxx"`
    Configured(Nid),
    /// `nid = "auto"` (the default): stable privacy, recorded in the state directory
    Auto,
    /// `nid = "eui64"`: the modified EUI-64 of the first uplink's MAC
    Eui64,
}

ilnp_wire::named_enum! {
    /// Where this run's NID came from (`ilnpctl status`: `nid_source`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum NidSource {
        Configured = "configured",
        StablePrivacy = "stable-privacy",
        /// the NID of the previous run's state file, adopted when "auto" was first
        /// resolved (a host upgraded from the MAC default keeps its NID)
        KeptFromUpgrade = "kept-from-upgrade",
        Eui64 = "eui64",
    }
}

impl NidSource {
    /// A source the NID record names (only those "auto" resolves to).
    fn parse(s: &str) -> Option<NidSource> {
        NidSource::from_name(s).filter(|x| matches!(x, NidSource::StablePrivacy | NidSource::KeptFromUpgrade))
    }
}

/// The host secret. No `Debug`/`Display`: it is never printed.
pub struct Secret([u8; SECRET_LEN]);

impl Secret {
    #[cfg(test)]
    pub fn from_bytes(b: [u8; SECRET_LEN]) -> Secret {
        Secret(b)
    }
}

/// The candidate NID for one counter value: the hash's first 64 bits, u and g cleared.
fn candidate(secret: &Secret, counter: u32) -> Nid {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret.0);
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(LABEL);
    ctx.update(&counter.to_be_bytes());
    let tag = ctx.sign();
    let mut b = [0u8; 8];
    b.copy_from_slice(&tag.as_ref()[..8]);
    b[0] &= !0x03; // u = 0 (local scope), g = 0 (unicast)
    Nid::from_bytes(b)
}

/// The first candidate `accept` takes, and its counter.
fn derive_with(secret: &Secret, accept: impl Fn(Nid) -> bool) -> (Nid, u32) {
    (0..=u32::MAX)
        .map(|c| (candidate(secret, c), c))
        .find(|(n, _)| accept(*n))
        .expect("2^32 candidates all refused: the acceptance rule refuses everything")
}

/// The stable-privacy NID of a secret: the first candidate that is a unicast NID.
pub fn stable_privacy_nid(secret: &Secret) -> Nid {
    derive_with(secret, |n| n.check_unicast().is_ok()).0
}

/// A new file (O_CREAT|O_EXCL, O_NOFOLLOW: a file or symlink someone put there is
/// never written through) with `mode`.
fn create_new(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(mode)
        .open(path)
}

/// Writes `bytes` to `path` only if there is nothing there yet, and whole or not at
/// all: a temporary file (new, `mode`) written and synced, then hard-linked to `path`
/// (link(2) never replaces, even a symlink). Returns false if `path` existed (another
/// ilnpd sharing the directory was first: its file counts).
fn publish_new(path: &Path, bytes: &[u8], mode: u32) -> Result<bool> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut f = match create_new(&tmp, mode) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // a leftover of a start with our pid that died half-way: removed, never followed
            std::fs::remove_file(&tmp).with_context(|| format!("removing the leftover {}", tmp.display()))?;
            create_new(&tmp, mode)
        }
        r => r,
    }
    .with_context(|| format!("creating {}", tmp.display()))?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    drop(f);
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_context(|| format!("writing {}", path.display())),
    }
}

/// The state directory, made (0700) if it is not there.
fn ensure_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("state_dir: creating {}", dir.display()))
}

/// Reads the secret with its checks; None if there is no file.
fn read_secret(path: &Path) -> Result<Option<Secret>> {
    let mut f = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            bail!("{}: a symlink; the NID secret must be a regular file (refused)", path.display())
        }
        Err(e) => return Err(e).with_context(|| format!("reading the NID secret {}", path.display())),
    };
    let m = f.metadata().with_context(|| format!("reading the NID secret {}", path.display()))?;
    if !m.is_file() {
        bail!("{}: not a regular file; the NID secret must be one (refused)", path.display());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        bail!(
            "{}: owned by uid {}, not by ilnpd's uid {me}: another user could read or replace the NID secret \
             (refused; chown it or delete it for a new secret and NID)",
            path.display(),
            m.uid()
        );
    }
    let mode = m.mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{}: mode {mode:04o} gives group or others access to the NID secret, from which this host's NID \
             is derived (refused; chmod 600 {})",
            path.display(),
            path.display()
        );
    }
    let mut b = Vec::with_capacity(SECRET_LEN + 1);
    Read::by_ref(&mut f)
        .take(SECRET_LEN as u64 + 1)
        .read_to_end(&mut b)
        .with_context(|| format!("reading the NID secret {}", path.display()))?;
    let secret: [u8; SECRET_LEN] = b.as_slice().try_into().map_err(|_| {
        anyhow!(
            "{}: {} bytes{}, not the {SECRET_LEN} of a NID secret (refused; delete it for a new secret and NID)",
            path.display(),
            if b.len() > SECRET_LEN { m.len() } else { b.len() as u64 },
            if b.len() > SECRET_LEN { " or more" } else { "" }
        )
    })?;
    Ok(Some(Secret(secret)))
}

/// The host secret of `dir`, made (32 bytes from getrandom, 0600) if there is none.
pub fn load_or_create_secret(dir: &Path) -> Result<Secret> {
    let path = dir.join(SECRET_FILE);
    if let Some(s) = read_secret(&path)? {
        return Ok(s);
    }
    ensure_dir(dir)?;
    let mut b = [0u8; SECRET_LEN];
    rand::rngs::OsRng.try_fill_bytes(&mut b).map_err(|e| anyhow!("drawing the NID secret (getrandom): {e}"))?;
    if publish_new(&path, &b, 0o600)? {
        tracing::info!("created the NID secret {}", path.display());
    }
    // ours, or the one another ilnpd sharing the directory made first
    read_secret(&path)?.ok_or_else(|| anyhow!("{}: gone right after it was written", path.display()))
}

/// The recorded NID and its source, if there is a record.
pub fn read_record(dir: &Path) -> Result<Option<(Nid, NidSource)>> {
    let path = dir.join(NID_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading the NID record {}", path.display())),
    };
    let line = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
    let mut w = line.split_whitespace();
    let bad = || {
        anyhow!(
            "{}: {line:?} is not \"<NID> stable-privacy|kept-from-upgrade\" (delete the file for a new \
             stable-privacy NID, or configure `nid`)",
            path.display()
        )
    };
    let nid = Nid::parse_unicast(w.next().ok_or_else(bad)?).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let source = w.next().and_then(NidSource::parse).ok_or_else(bad)?;
    if w.next().is_some() {
        return Err(bad());
    }
    Ok(Some((nid, source)))
}

fn record(dir: &Path, nid: Nid, source: NidSource) -> Result<bool> {
    let text = format!(
        "# ilnpd's NID (nid = \"auto\"), used at every start; delete this file (ilnpd stopped) for a new one\n\
         {nid} {}\n",
        source.as_str()
    );
    publish_new(&dir.join(NID_FILE), text.as_bytes(), 0o644)
}

/// `nid = "auto"` resolved, and how (for the start-up log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub nid: Nid,
    pub source: NidSource,
    /// false: read from the record; true: decided (and recorded) by this start
    pub new: bool,
}

/// `nid = "auto"`: the NID recorded in `dir`; without a record, the local NID of the
/// previous run's state file (`previous`: a restart, a crash or an upgrade's handover,
/// so a host upgraded from the MAC default keeps the NID its sessions and DNS records
/// use), else the stable-privacy NID of the host secret; recorded either way.
pub fn resolve_auto(dir: &Path, previous: Option<Nid>) -> Result<Resolved> {
    if let Some((nid, source)) = read_record(dir)? {
        return Ok(Resolved { nid, source, new: false });
    }
    let (nid, source) = match previous.filter(|n| n.check_unicast().is_ok()) {
        Some(n) => (n, NidSource::KeptFromUpgrade),
        None => (stable_privacy_nid(&load_or_create_secret(dir)?), NidSource::StablePrivacy),
    };
    ensure_dir(dir)?;
    if !record(dir, nid, source)? {
        // another ilnpd sharing the directory recorded one first: that one is the host's
        let (nid, source) = read_record(dir)?.ok_or_else(|| anyhow!("{}: vanished", dir.join(NID_FILE).display()))?;
        return Ok(Resolved { nid, source, new: false });
    }
    Ok(Resolved { nid, source, new: true })
}

impl NidChoice {
    /// This node's NID and where it came from, logged once (start-up). `uplink` and
    /// `mac`: the first uplink's name and MAC; `dir`: the state directory, where "auto"
    /// keeps its secret and record; `previous`: the local NID of the previous run's state file
    /// (`state_file`).
    pub fn resolve(
        self,
        uplink: &str,
        mac: Option<[u8; 6]>,
        dir: &Path,
        state_file: Option<&Path>,
        previous: Option<Nid>,
    ) -> Result<(Nid, NidSource)> {
        let eui64 = || mac.map(Nid::from_mac);
        match self {
            NidChoice::Configured(n) => {
                tracing::info!("NID {n}: configured");
                Ok((n, NidSource::Configured))
            }
            NidChoice::Eui64 => match eui64() {
                Some(n) => {
                    tracing::info!(
                        "NID {n}: the modified EUI-64 of {uplink}'s MAC (nid = \"eui64\"): it identifies this \
                         host's hardware on every network"
                    );
                    Ok((n, NidSource::Eui64))
                }
                None => bail!(
                    "nid = \"eui64\" needs a MAC address on the first uplink {:?}; configure `nid` or use \"auto\"",
                    uplink
                ),
            },
            NidChoice::Auto => {
                let r = resolve_auto(dir, previous).context("nid = \"auto\"")?;
                let record = dir.join(NID_FILE);
                match (r.source, r.new) {
                    (NidSource::KeptFromUpgrade, true) => {
                        let mac = if Some(r.nid) == eui64() {
                            format!(" (the modified EUI-64 of {}'s MAC, the \"auto\" of earlier versions)", uplink)
                        } else {
                            String::new()
                        };
                        tracing::info!(
                            "NID {}{mac}: kept from the previous run's state file {} and recorded in {}, so \
                             sessions and DNS records stay valid. For a stable-privacy NID instead (not derived \
                             from the hardware; the host's NID and DNS records change): stop ilnpd, delete {}, \
                             start it",
                            r.nid,
                            state_file.unwrap_or(Path::new("")).display(),
                            record.display(),
                            record.display()
                        );
                    }
                    (NidSource::StablePrivacy, true) => tracing::info!(
                        "NID {}: stable-privacy, derived from the host secret {} and recorded in {}",
                        r.nid,
                        dir.join(SECRET_FILE).display(),
                        record.display()
                    ),
                    (source, _) => {
                        tracing::info!("NID {} ({}): recorded in {}", r.nid, source.as_str(), record.display())
                    }
                }
                Ok((r.nid, r.source))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn secret(x: u8) -> Secret {
        Secret::from_bytes([x; SECRET_LEN])
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn derivation_is_deterministic_local_and_unicast() {
        let a = stable_privacy_nid(&secret(1));
        assert_eq!(a, stable_privacy_nid(&secret(1)), "same secret, same NID");
        assert_ne!(a, stable_privacy_nid(&secret(2)), "another secret, another NID");
        // a fixed vector: HMAC-SHA-256(32 x 0x01, label || 0u32) begins f505:44f3:e682:7d11
        // (Python's hmac module); g cleared gives f405:... A change of the construction shows here
        assert_eq!(a, Nid(0xf405_44f3_e682_7d11));
        for x in 0..=255u8 {
            let n = stable_privacy_nid(&secret(x));
            assert!(!n.is_universal() && !n.is_group(), "{n}: u or g set");
            assert!(n.check_unicast().is_ok(), "{n}");
        }
    }

    #[test]
    fn a_refused_candidate_is_drawn_again_with_the_next_counter() {
        let s = secret(7);
        let first = candidate(&s, 0);
        let (n, c) = derive_with(&s, |n| n != first);
        assert_eq!((n, c), (candidate(&s, 1), 1));
        assert_ne!(n, first);
        let two = [candidate(&s, 0), candidate(&s, 1)];
        assert_eq!(derive_with(&s, |n| !two.contains(&n)), (candidate(&s, 2), 2));
        // the real rule takes the first one when it is unicast
        assert_eq!(derive_with(&s, |n| n.check_unicast().is_ok()), (first, 0));
    }

    #[test]
    fn the_secret_is_made_once_0600_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("var/lib/ilnp");
        let s1 = load_or_create_secret(&dir).unwrap();
        let p = dir.join(SECRET_FILE);
        assert_eq!(mode(&p), 0o600, "secret readable by others");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(std::fs::read(&p).unwrap().len(), SECRET_LEN);
        let s2 = load_or_create_secret(&dir).unwrap();
        assert_eq!(s1.0, s2.0, "a second start drew a new secret");
        assert!(std::fs::read_dir(&dir).unwrap().count() == 1, "a temporary file was left");
    }

    #[test]
    fn a_secret_others_can_read_or_of_the_wrong_size_is_refused_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(SECRET_FILE);
        load_or_create_secret(d.path()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = format!("{:#}", load_or_create_secret(d.path()).err().expect("world-readable secret taken"));
        assert!(e.contains(&p.display().to_string()) && e.contains("0644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(load_or_create_secret(d.path()).is_err(), "group-readable secret taken");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&p, [1u8; 16]).unwrap();
        let e = format!("{:#}", load_or_create_secret(d.path()).err().expect("short secret taken"));
        assert!(e.contains(&p.display().to_string()) && e.contains("16 bytes"), "{e}");
        std::fs::write(&p, [1u8; 33]).unwrap();
        assert!(load_or_create_secret(d.path()).is_err(), "long secret taken");
        // a symlink at the path is refused, never followed
        std::fs::remove_file(&p).unwrap();
        let target = d.path().join("elsewhere");
        std::fs::write(&target, [1u8; 32]).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&target, &p).unwrap();
        let e = format!("{:#}", load_or_create_secret(d.path()).err().expect("symlink followed"));
        assert!(e.contains("symlink"), "{e}");
    }

    #[test]
    fn the_secret_is_never_written_through_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let tmp = d.path().join(format!("{SECRET_FILE}.tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        load_or_create_secret(d.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&tmp).is_err(), "temporary left");
    }

    #[test]
    fn auto_derives_records_and_then_keeps_the_record() {
        let d = tempfile::tempdir().unwrap();
        let r = resolve_auto(d.path(), None).unwrap();
        assert_eq!(r.source, NidSource::StablePrivacy);
        assert!(r.new);
        let s = load_or_create_secret(d.path()).unwrap();
        assert_eq!(r.nid, stable_privacy_nid(&s));
        assert_eq!(read_record(d.path()).unwrap(), Some((r.nid, NidSource::StablePrivacy)));
        // later starts: the record, whatever the state file says
        let again = resolve_auto(d.path(), Some(Nid(0x0200_00ff_fe00_000a))).unwrap();
        assert_eq!((again.nid, again.source, again.new), (r.nid, NidSource::StablePrivacy, false));
        // the record outlives a lost secret
        std::fs::remove_file(d.path().join(SECRET_FILE)).unwrap();
        assert_eq!(resolve_auto(d.path(), None).unwrap().nid, r.nid);
    }

    #[test]
    fn an_upgraded_host_keeps_the_nid_of_its_state_file() {
        let d = tempfile::tempdir().unwrap();
        let mac_nid = Nid::from_mac([0x02, 0, 0, 0, 0, 0x0a]);
        let r = resolve_auto(d.path(), Some(mac_nid)).unwrap();
        assert_eq!((r.nid, r.source, r.new), (mac_nid, NidSource::KeptFromUpgrade, true));
        assert!(!d.path().join(SECRET_FILE).exists(), "no secret needed");
        let again = resolve_auto(d.path(), None).unwrap();
        assert_eq!((again.nid, again.source), (mac_nid, NidSource::KeptFromUpgrade));
        // deleting the record moves the host to a private NID
        std::fs::remove_file(d.path().join(NID_FILE)).unwrap();
        let fresh = resolve_auto(d.path(), None).unwrap();
        assert_eq!(fresh.source, NidSource::StablePrivacy);
        assert_ne!(fresh.nid, mac_nid);
    }

    #[test]
    fn a_bad_record_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(NID_FILE);
        for (text, word) in [
            ("0300:0000:0000:0001 stable-privacy\n", "group (g) bit"),
            ("zz stable-privacy\n", "hex"),
            ("0200:0000:0000:0001 mac\n", "is not"),
            ("0200:0000:0000:0001\n", "is not"),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = format!("{:#}", resolve_auto(d.path(), None).expect_err(text));
            assert!(e.contains(&p.display().to_string()) && e.contains(word), "{text:?}: {e}");
        }
        std::fs::write(&p, "# comment\n\n0200:0000:0000:0001 kept-from-upgrade\n").unwrap();
        assert_eq!(read_record(d.path()).unwrap(), Some((Nid(0x0200_0000_0000_0001), NidSource::KeptFromUpgrade)));
    }
}
