//! Mobility and renumbering: when hosts move and where to, how (break before
//! make, or make before break), and how long a renumbered network keeps its old
//! prefix. It decides; the simulator carries the decisions out (attachments on
//! the `Network`, locators to the cores).

use crate::network::Network;
use crate::rng::SimRng;
use crate::scenario::{GroupSpec, Scenario};
use crate::time::secs;

/// How a move is made.
#[derive(Clone, Copy)]
pub(crate) enum How {
    /// join the new network; leave the old ones this long (ns) later
    Make { overlap: u64 },
    /// leave the old networks; join the new one this long (ns) later (0: in the
    /// same change of the locator set)
    Break { gap: u64 },
}

/// One group's mobility, its networks resolved.
struct Plan {
    networks: Vec<u32>,
    how: How,
    /// moves at fixed times (ns)
    at: Vec<u64>,
    /// or every U[lo, hi] s
    interval_s: Option<[f64; 2]>,
}

pub(crate) struct Mobility {
    /// per group
    plans: Vec<Option<Plan>>,
    /// per host: the index in its group's `networks` to try first at its next move
    next: Vec<u32>,
    /// per network: how long (s) a renumbering keeps the old prefix (the first
    /// `[[renumber]]` naming it; 0: a flash renumbering)
    renumber_overlap: Vec<f64>,
    /// the renumberings: (when, network)
    renumberings: Vec<(u64, u32)>,
}

impl Mobility {
    pub(crate) fn new(s: &Scenario, net: &Network) -> Mobility {
        let plans = s
            .group
            .iter()
            .map(|g| {
                g.mobility.as_ref().map(|m| Plan {
                    networks: m.networks.iter().map(|n| net.index(n)).collect(),
                    how: if m.kind == "make" {
                        How::Make { overlap: secs(m.overlap_s) }
                    } else {
                        How::Break { gap: secs(m.gap_ms / 1e3) }
                    },
                    at: m.at_s.iter().map(|&a| secs(a)).collect(),
                    interval_s: m.interval_s,
                })
            })
            .collect();
        let mut next = Vec::new();
        for g in &s.group {
            let first = start_index(g) as u32;
            next.extend(std::iter::repeat_n(first, g.count));
        }
        let renumber_overlap = s
            .network
            .iter()
            .map(|n| s.renumber.iter().find(|r| r.network == n.name).map_or(0.0, |r| r.overlap_s))
            .collect();
        let renumberings = s.renumber.iter().map(|r| (secs(r.at_s), net.index(&r.network))).collect();
        Mobility { plans, next, renumber_overlap, renumberings }
    }

    /// The first moves of a host of group `g`: `at(t)` for each (the fixed times,
    /// then the first of the intervals, drawn from `rng`).
    pub(crate) fn first_moves(&self, g: u16, rng: &mut SimRng, mut at: impl FnMut(u64)) {
        let Some(p) = &self.plans[g as usize] else { return };
        for &t in &p.at {
            at(t);
        }
        if let Some([lo, hi]) = p.interval_s {
            at(secs(rng.uniform(lo, hi)));
        }
    }

    /// True if group `g`'s hosts move.
    pub(crate) fn moves(&self, g: u16) -> bool {
        self.plans[g as usize].is_some()
    }

    /// Host `h` of group `g` (which moves) moves now: the next network of its list
    /// that it is not attached to, and how; None: it is on all of them.
    pub(crate) fn step(&mut self, h: u32, g: u16, attached: &[u32]) -> Option<(u32, How)> {
        let p = self.plans[g as usize].as_ref().expect("a mobile group");
        let len = p.networks.len() as u32;
        for _ in 0..len {
            let i = self.next[h as usize];
            self.next[h as usize] = (i + 1) % len;
            let n = p.networks[i as usize];
            if !attached.contains(&n) {
                return Some((n, p.how));
            }
        }
        None
    }

    /// How long (ns) until a host of group `g` moves again, if its moves are
    /// periodic (drawn from `rng`).
    pub(crate) fn next_move(&self, g: u16, rng: &mut SimRng) -> Option<u64> {
        let [lo, hi] = self.plans[g as usize].as_ref()?.interval_s?;
        Some(secs(rng.uniform(lo, hi)))
    }

    /// The renumberings: (when, network).
    pub(crate) fn renumberings(&self) -> &[(u64, u32)] {
        &self.renumberings
    }

    /// How long (s) a renumbering of `net` keeps the old prefix (0: flash).
    pub(crate) fn renumber_overlap(&self, net: u32) -> f64 {
        self.renumber_overlap[net as usize]
    }
}

/// Where in its list a host of `g` starts: after the network it starts on.
fn start_index(g: &GroupSpec) -> usize {
    g.mobility
        .as_ref()
        .map_or(0, |m| m.networks.iter().position(|n| *n == g.network).map_or(0, |p| (p + 1) % m.networks.len()))
}
