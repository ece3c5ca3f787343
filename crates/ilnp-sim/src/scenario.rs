//! Scenario files (TOML): networks, host groups with their traffic and mobility,
//! renumbering events, the core's configuration, and variants (named sets of
//! overrides applied to the file before it is read, e.g. one per loss rate).

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub title: String,
    #[serde(default = "one")]
    pub seed: u64,
    pub duration_s: f64,
    /// independent replications; run `i` uses seed `seed + i`
    #[serde(default = "one_u32")]
    pub runs: u32,
    /// one-way delay between any two networks (the backbone), added to both access links
    #[serde(default)]
    pub backbone_delay_ms: f64,
    /// period of the timeline samples (ILCC size, LUs received)
    #[serde(default = "one_f")]
    pub sample_s: f64,
    /// the group whose load is reported (`server` in the results)
    #[serde(default)]
    pub server: Option<String>,
    #[serde(default)]
    pub core: CoreOpts,
    #[serde(default)]
    pub network: Vec<NetworkSpec>,
    #[serde(default)]
    pub group: Vec<GroupSpec>,
    #[serde(default)]
    pub renumber: Vec<RenumberSpec>,
    /// named override sets; none: one variant, "base"
    #[serde(default)]
    pub variant: Vec<VariantSpec>,
    /// what `--quick` changes (the same dotted paths as a variant's `set`)
    #[serde(default)]
    pub quick: Option<toml::Table>,
}

fn one() -> u64 {
    1
}
fn one_u32() -> u32 {
    1
}
fn one_f() -> f64 {
    1.0
}

/// The core's configuration (`ilnp_core::CoreConfig`); unset fields keep the
/// core's defaults except `admission`, `fallback_probe_ms` (ilnpd's defaults: socket, 0
/// here as nothing in the simulation is non-ILNP).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreOpts {
    pub handoff: Option<String>,
    pub admission: Option<String>,
    pub nonce_bits: Option<u32>,
    pub lu_initial_rto_ms: Option<u64>,
    pub lu_min_rto_ms: Option<u64>,
    pub lu_max_rto_ms: Option<u64>,
    pub lu_max_attempts: Option<u32>,
    pub ilcc_max_entries: Option<usize>,
    pub ilcc_embryonic_max: Option<usize>,
    pub hello_rate_pps: Option<f64>,
    pub hello_burst: Option<u32>,
    pub idle_timeout_s: Option<u64>,
    pub soft_quiet_period_ms: Option<u64>,
}

impl CoreOpts {
    /// `over`'s set fields win.
    pub fn merged(&self, over: &CoreOpts) -> CoreOpts {
        macro_rules! m {
            ($($f:ident),*) => { CoreOpts { $($f: over.$f.clone().or_else(|| self.$f.clone())),* } };
        }
        m!(
            handoff,
            admission,
            nonce_bits,
            lu_initial_rto_ms,
            lu_min_rto_ms,
            lu_max_rto_ms,
            lu_max_attempts,
            ilcc_max_entries,
            ilcc_embryonic_max,
            hello_rate_pps,
            hello_burst,
            idle_timeout_s,
            soft_quiet_period_ms
        )
    }
}

/// A network (one /64, one router): its access link, both directions alike.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    pub name: String,
    #[serde(default)]
    pub delay_ms: f64,
    /// uniform extra delay in [0, jitter] per packet and direction
    #[serde(default)]
    pub jitter_ms: f64,
    #[serde(default)]
    pub loss_pct: f64,
    /// 0: unlimited; else a FIFO per direction serialising at this rate
    #[serde(default)]
    pub rate_mbit: f64,
    /// the router resolves a host address (Neighbour Discovery) before its first
    /// packet to it: NS down, NA up, over this link with its loss; packets wait;
    /// retried every `nd_retrans_ms`, `nd_max_solicit` times (Linux: 1000 ms, 3)
    #[serde(default)]
    pub nd: bool,
    #[serde(default = "nd_retrans")]
    pub nd_retrans_ms: f64,
    #[serde(default = "nd_max")]
    pub nd_max_solicit: u32,
}

fn nd_retrans() -> f64 {
    1000.0
}
fn nd_max() -> u32 {
    3
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    pub name: String,
    #[serde(default = "one_usize")]
    pub count: usize,
    /// the network the hosts start on
    pub network: String,
    /// UDP ports with a bound socket (admission = socket lets first packets to them in)
    #[serde(default)]
    pub listen: Vec<u16>,
    /// datagrams to a listened port are echoed back (the application's answer)
    #[serde(default)]
    pub echo: bool,
    /// false: not attached to its network's router (spoofed NIDs: answers go nowhere)
    #[serde(default = "yes")]
    pub reachable: bool,
    #[serde(default)]
    pub core: CoreOpts,
    #[serde(default)]
    pub traffic: Option<TrafficSpec>,
    #[serde(default)]
    pub mobility: Option<MobilitySpec>,
}

fn one_usize() -> usize {
    1
}
fn yes() -> bool {
    true
}

/// UDP datagrams from each host to one host of group `to` (member `i % count`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficSpec {
    pub to: String,
    pub pps: f64,
    #[serde(default = "default_size")]
    pub size: usize,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default)]
    pub start_s: f64,
    /// each host starts at `start_s + U[0, start_spread_s]`
    #[serde(default)]
    pub start_spread_s: f64,
    /// stop after this many datagrams (0: until the end)
    #[serde(default)]
    pub count: u64,
}

fn default_size() -> usize {
    100
}
fn default_port() -> u16 {
    9000
}

/// Moves between `networks` (cyclically, from the group's network).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MobilitySpec {
    pub networks: Vec<String>,
    /// explicit move times (seconds), the same for every host of the group
    #[serde(default)]
    pub at_s: Vec<f64>,
    /// or: each host moves after `U[lo, hi]` seconds, again and again
    #[serde(default)]
    pub interval_s: Option<[f64; 2]>,
    /// "break" (leave, then join after `gap_ms`) or "make" (join, leave `overlap_s` later)
    #[serde(default = "default_move_kind")]
    pub kind: String,
    #[serde(default)]
    pub gap_ms: f64,
    #[serde(default)]
    pub overlap_s: f64,
}

fn default_move_kind() -> String {
    "break".into()
}

/// A network's prefix changes: every host on it gets the new locator at `at_s`;
/// the old one stays (deprecated) for `overlap_s`, then goes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenumberSpec {
    pub network: String,
    pub at_s: f64,
    #[serde(default)]
    pub overlap_s: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub name: String,
    /// dotted path (array elements by `name` or index, e.g. `network.r3.loss_pct`,
    /// `renumber.0.overlap_s`) → value
    #[serde(default)]
    pub set: toml::Table,
}

/// A scenario file, kept as TOML so variants can be applied before it is read.
pub struct ScenarioFile {
    pub raw: toml::Table,
}

impl ScenarioFile {
    pub fn load(path: &Path) -> Result<ScenarioFile> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<ScenarioFile> {
        let raw: toml::Table = toml::from_str(text)?;
        let f = ScenarioFile { raw };
        f.base()?.validate()?;
        Ok(f)
    }

    /// The scenario without variants (with `--quick`'s changes if `quick`).
    pub fn base(&self) -> Result<Scenario> {
        Ok(self.raw.clone().try_into::<Scenario>()?)
    }

    /// `quick`: apply the file's `[quick]` table first. Returns (variant name, scenario).
    pub fn variants(&self, quick: bool) -> Result<Vec<(String, Scenario)>> {
        let mut raw = self.raw.clone();
        let base = self.base()?;
        if quick {
            if let Some(q) = &base.quick {
                apply(&mut raw, q).context("in [quick]")?;
            }
        }
        let names: Vec<VariantSpec> = base.variant.clone();
        if names.is_empty() {
            let s: Scenario = raw.try_into()?;
            return Ok(vec![("base".into(), s)]);
        }
        let mut out = Vec::new();
        for v in names {
            let mut r = raw.clone();
            apply(&mut r, &v.set).with_context(|| format!("in variant {:?}", v.name))?;
            let s: Scenario = r.try_into().with_context(|| format!("variant {:?}", v.name))?;
            s.validate().with_context(|| format!("variant {:?}", v.name))?;
            out.push((v.name, s));
        }
        Ok(out)
    }
}

/// Sets every `path = value` of `set` in `raw`.
fn apply(raw: &mut toml::Table, set: &toml::Table) -> Result<()> {
    let mut root = toml::Value::Table(std::mem::take(raw));
    let r = set.iter().try_for_each(|(path, value)| set_path(&mut root, path, value));
    if let toml::Value::Table(t) = root {
        *raw = t;
    }
    r
}

fn set_path(root: &mut toml::Value, path: &str, value: &toml::Value) -> Result<()> {
    let parts: Vec<&str> = path.split('.').collect();
    let (last, walk) = parts.split_last().ok_or_else(|| anyhow!("empty path"))?;
    let mut cur = root;
    for p in walk {
        cur = step(cur, p).with_context(|| format!("path {path:?}"))?;
    }
    match cur {
        toml::Value::Table(t) => {
            t.insert((*last).to_string(), value.clone());
            Ok(())
        }
        _ => bail!("path {path:?}: {last:?} is not in a table"),
    }
}

fn step<'a>(cur: &'a mut toml::Value, key: &str) -> Result<&'a mut toml::Value> {
    match cur {
        toml::Value::Table(t) => Ok(t.entry(key.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()))),
        // by index (`renumber.0`) or by the element's `name`
        toml::Value::Array(a) => match key.parse::<usize>() {
            Ok(i) => a.get_mut(i).ok_or_else(|| anyhow!("no element {i}")),
            Err(_) => a
                .iter_mut()
                .find(|v| v.get("name").and_then(|n| n.as_str()) == Some(key))
                .ok_or_else(|| anyhow!("no element named {key:?}")),
        },
        _ => bail!("{key:?}: not a table or array"),
    }
}

impl Scenario {
    pub fn validate(&self) -> Result<()> {
        if self.duration_s.is_nan() || self.duration_s <= 0.0 {
            bail!("duration_s must be > 0");
        }
        if self.sample_s.is_nan() || self.sample_s <= 0.0 {
            bail!("sample_s must be > 0");
        }
        let net = |n: &str| self.network.iter().any(|x| x.name == n);
        for n in &self.network {
            if !(0.0..=100.0).contains(&n.loss_pct) || n.delay_ms < 0.0 || n.jitter_ms < 0.0 || n.rate_mbit < 0.0 {
                bail!("network {:?}: loss_pct 0-100, delay/jitter/rate >= 0", n.name);
            }
        }
        for g in &self.group {
            if !net(&g.network) {
                bail!("group {:?}: no network {:?}", g.name, g.network);
            }
            if let Some(t) = &g.traffic {
                if !self.group.iter().any(|x| x.name == t.to) {
                    bail!("group {:?}: traffic to unknown group {:?}", g.name, t.to);
                }
                if t.pps.is_nan() || t.pps <= 0.0 || t.size < 16 {
                    bail!("group {:?}: traffic needs pps > 0 and size >= 16", g.name);
                }
            }
            if let Some(m) = &g.mobility {
                if let Some(n) = m.networks.iter().find(|n| !net(n)) {
                    bail!("group {:?}: mobility to unknown network {n:?}", g.name);
                }
                if m.networks.len() < 2 && !m.networks.iter().any(|n| *n != g.network) {
                    bail!("group {:?}: mobility needs another network", g.name);
                }
                if m.kind != "break" && m.kind != "make" {
                    bail!("group {:?}: mobility kind is \"break\" or \"make\"", g.name);
                }
                if let Some([lo, hi]) = m.interval_s {
                    if !(lo > 0.0 && hi >= lo) {
                        bail!("group {:?}: interval_s = [lo, hi] with 0 < lo <= hi", g.name);
                    }
                }
            }
            opts_check(&g.core).with_context(|| format!("group {:?}", g.name))?;
        }
        opts_check(&self.core)?;
        for r in &self.renumber {
            if !net(&r.network) {
                bail!("renumber: no network {:?}", r.network);
            }
        }
        if let Some(s) = &self.server {
            if !self.group.iter().any(|g| &g.name == s) {
                bail!("server: no group {s:?}");
            }
        }
        Ok(())
    }
}

fn opts_check(o: &CoreOpts) -> Result<()> {
    if let Some(h) = &o.handoff {
        if h != "hard" && h != "soft" {
            bail!("core.handoff is \"hard\" or \"soft\"");
        }
    }
    if let Some(a) = &o.admission {
        if a != "socket" && a != "open" {
            bail!("core.admission is \"socket\" or \"open\"");
        }
    }
    if let Some(b) = o.nonce_bits {
        if b != 32 && b != 96 {
            bail!("core.nonce_bits is 32 or 96");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = r#"
name = "t"
duration_s = 1
[[network]]
name = "a"
[[network]]
name = "b"
loss_pct = 1
[[group]]
name = "h"
network = "a"
[[variant]]
name = "v"
set = { "network.b.loss_pct" = 7.5, "core.handoff" = "hard" }
[quick]
duration_s = 0.5
"#;

    #[test]
    fn variants_override_by_dotted_path_and_names() {
        let f = ScenarioFile::parse(T).unwrap();
        let v = f.variants(true).unwrap();
        assert_eq!(v.len(), 1);
        let s = &v[0].1;
        assert_eq!(s.network[1].loss_pct, 7.5);
        assert_eq!(s.network[0].loss_pct, 0.0);
        assert_eq!(s.core.handoff.as_deref(), Some("hard"));
        assert_eq!(s.duration_s, 0.5);
        assert_eq!(f.variants(false).unwrap()[0].1.duration_s, 1.0);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = T.replace("network = \"a\"", "network = \"zz\"");
        let e = format!("{:#}", ScenarioFile::parse(&bad).err().unwrap());
        assert!(e.contains("no network \"zz\""), "{e}");
        let bad = T.replace("\"network.b.loss_pct\"", "\"network.c.loss_pct\"");
        let e = format!("{:#}", ScenarioFile::parse(&bad).unwrap().variants(false).err().unwrap());
        assert!(e.contains("no element named \"c\""), "{e}");
    }
}
