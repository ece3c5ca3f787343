//! What start-up builds from the configuration: the protocol core (settings,
//! peers, balancing) and this node's NID.

use super::locators::Uplink;
use crate::config::Config;
use crate::nid::{NidChoice, NidSource};
use anyhow::{bail, Context, Result};
use ilnp_core::Core;
use ilnp_wire::Nid;
use rand::SeedableRng;
use std::path::Path;

/// The protocol core with the configuration's settings, peers and policies.
pub(super) fn build_core(cfg: &Config, local_nid: Nid, uplinks: &[Uplink]) -> Result<Core> {
    // the file's core settings as config.rs filled them; the NID is known only now
    let mut cc = cfg.core.clone();
    cc.local_nid = local_nid;
    let rng: Box<dyn rand_core_compat::RngCore + Send> = match cfg.rng_seed {
        Some(s) => Box::new(rand::rngs::StdRng::seed_from_u64(s)),
        None => Box::new(rand::rngs::StdRng::from_entropy()),
    };
    let mut core = Core::new(cc, rng);
    for p in &cfg.peers {
        core.add_peer(p.clone());
    }
    // load balancing (ilnp-core `balance`); no entries yet, so no actions
    if let Some(seed) = cfg.flow_hash_seed {
        core.set_flow_seed(seed);
    }
    core.set_policy(None, cfg.balance_policy).map_err(|e| anyhow::anyhow!("balance_policy: {e}"))?;
    for (nid, p) in &cfg.peer_policy {
        core.set_policy(Some(*nid), *p).map_err(|e| anyhow::anyhow!("peer_policy: {e}"))?;
    }
    for u in uplinks {
        if let Some(&w) = cfg.locator_weight.get(&u.name) {
            core.set_uplink_weight(u.index, w).map_err(|e| anyhow::anyhow!("locator_weight.{}: {e}", u.name))?;
        }
    }
    Ok(core)
}

/// This node's NID and where it came from (`nid`: crate::nid), logged once. `macs`:
/// the uplinks' MACs in configuration order; `previous`: the local NID of the previous
/// run's state file.
pub(super) fn local_nid(cfg: &Config, macs: &[Option<[u8; 6]>], previous: Option<Nid>) -> Result<(Nid, NidSource)> {
    let eui64 = || macs.first().copied().flatten().map(Nid::from_mac);
    match cfg.nid {
        NidChoice::Configured(n) => {
            tracing::info!("NID {n}: configured");
            Ok((n, NidSource::Configured))
        }
        NidChoice::Eui64 => match eui64() {
            Some(n) => {
                tracing::info!(
                    "NID {n}: the modified EUI-64 of {}'s MAC (nid = \"eui64\"): it identifies this host's hardware \
                     on every network",
                    cfg.uplinks[0]
                );
                Ok((n, NidSource::Eui64))
            }
            None => bail!(
                "nid = \"eui64\" needs a MAC address on the first uplink {:?}; configure `nid` or use \"auto\"",
                cfg.uplinks[0]
            ),
        },
        NidChoice::Auto => {
            let dir = &cfg.state_dir;
            let r = crate::nid::resolve_auto(dir, previous).context("nid = \"auto\"")?;
            let record = dir.join(crate::nid::NID_FILE);
            match (r.source, r.new) {
                (NidSource::KeptFromUpgrade, true) => {
                    let mac = if Some(r.nid) == eui64() {
                        format!(" (the modified EUI-64 of {}'s MAC, the \"auto\" of earlier versions)", cfg.uplinks[0])
                    } else {
                        String::new()
                    };
                    tracing::info!(
                        "NID {}{mac}: kept from the previous run's state file {} and recorded in {}, so sessions \
                         and DNS records stay valid. For a stable-privacy NID instead (not derived from the \
                         hardware; the host's NID and DNS records change): stop ilnpd, delete {}, start it",
                        r.nid,
                        cfg.state_file.as_deref().unwrap_or(Path::new("")).display(),
                        record.display(),
                        record.display()
                    );
                }
                (NidSource::StablePrivacy, true) => tracing::info!(
                    "NID {}: stable-privacy, derived from the host secret {} and recorded in {}",
                    r.nid,
                    dir.join(crate::nid::SECRET_FILE).display(),
                    record.display()
                ),
                (source, _) => tracing::info!("NID {} ({}): recorded in {}", r.nid, source.as_str(), record.display()),
            }
            Ok((r.nid, r.source))
        }
    }
}

/// rand 0.8 re-exports rand_core 0.6, the trait the core takes.
mod rand_core_compat {
    pub use rand::RngCore;
}
