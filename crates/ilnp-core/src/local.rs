//! This host's locators: the set the shell reports, ordered by preference, with the
//! handoff rules on top (RFC 6740 §6): hard handoff ages a locator a newer one took
//! over from; soft handoff retires a non-preferred locator once it went quiet and its
//! RA stopped. Also which kernel addresses are locators (`derive_local_locators`).

use crate::config::{HandoffMode, DEFAULT_LOCATOR_PREF};
use crate::event::DropReason;
use crate::locator::{LocalLocator, LocatorState, RouterPreference};
use ilnp_wire::icmpv6::LuEntry;
use ilnp_wire::{split_addr, Locator, Nid};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

/// The preference we give (and advertise in LUs for) a local locator.
///
/// An explicit per-uplink configuration wins. Otherwise the uplink's best default
/// router preference decides: high 5, medium 10 (the default), low 15; an uplink
/// with no default router at all gets 20, so a locator whose router went away (RA
/// router lifetime 0) is demoted behind every routed one without being dropped (its
/// prefix may still be valid, RFC 4861 §6.3.4) — that demotion is a failover.
/// With equal preferences the newest locator wins (see `LocalLocators::set`).
pub fn locator_preference(configured: Option<u16>, router: Option<RouterPreference>) -> u16 {
    match (configured, router) {
        (Some(p), _) => p,
        (None, Some(RouterPreference::High)) => DEFAULT_LOCATOR_PREF - 5,
        (None, Some(RouterPreference::Medium)) => DEFAULT_LOCATOR_PREF,
        (None, Some(RouterPreference::Low)) => DEFAULT_LOCATOR_PREF + 5,
        (None, None) => DEFAULT_LOCATOR_PREF + 10,
    }
}

/// The preference of a v4-path locator (an IPv4 address on an uplink, `v4path.rs`):
/// behind every IPv6 locator (5-20), so IPv6 carries sessions whenever the host has
/// it; one whose uplink lost its IPv4 default route behind that.
pub fn v4_path_preference(router4: bool) -> u16 {
    if router4 {
        DEFAULT_LOCATOR_PREF + 20
    } else {
        DEFAULT_LOCATOR_PREF + 30
    }
}

/// What the shell knows about one uplink, as the locator derivation needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UplinkFacts {
    pub ifindex: u32,
    /// the link is up (administratively and operationally)
    pub up: bool,
    /// best default-router preference behind the uplink; None: no default route
    pub router: Option<RouterPreference>,
    /// the uplink has an IPv4 default route (for its v4-path locators)
    pub router4: bool,
    /// locator preference configured for this uplink
    pub configured_pref: Option<u16>,
}

/// One kernel address, as the locator derivation needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAddress {
    pub ifindex: u32,
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
    /// global scope
    pub global: bool,
    /// valid lifetime, seconds (u32::MAX infinite)
    pub valid_lft: u32,
    /// preferred lifetime 0 (RFC 4862 §5.5.4)
    pub deprecated: bool,
    /// an L64:NID address the shell added itself (not evidence of a locator)
    pub added_by_us: bool,
}

/// Which kernel addresses are locators: a global /64 on an uplink that is up, whose
/// prefix is not the identifier prefix. An L64:NID address the shell added is not
/// evidence of a locator; one the kernel made itself (SLAAC with NID = EUI-64 of the
/// MAC) is. The preference comes from `locator_preference`; the first address of a
/// prefix wins, except that the prefix counts as deprecated only if all its
/// addresses are; the result is ordered by locator.
pub fn derive_local_locators(
    id_prefix: Locator,
    local_nid: Nid,
    uplinks: &[UplinkFacts],
    addrs: &[KernelAddress],
) -> Vec<LocalLocator> {
    let mut locs: BTreeMap<Locator, LocalLocator> = BTreeMap::new();
    for u in uplinks {
        for a in addrs.iter().filter(|a| a.ifindex == u.ifindex && a.global && a.prefix_len == 64) {
            let (l, n) = split_addr(a.addr);
            if (n == local_nid && a.added_by_us) || !u.up || l == id_prefix {
                continue;
            }
            let (pref, has_router) = if l.is_v4_path() {
                (u.configured_pref.unwrap_or(v4_path_preference(u.router4)), u.router4)
            } else {
                (locator_preference(u.configured_pref, u.router), u.router.is_some())
            };
            let e = locs.entry(l).or_insert(LocalLocator {
                loc: l,
                ifindex: u.ifindex,
                pref,
                lifetime_s: a.valid_lft,
                state: LocatorState::Active,
                has_router,
                deprecated: a.deprecated,
            });
            // the prefix is deprecated only when every address in it is: the
            // shell's own L64:NID is always added deprecated (kept out of plain
            // IPv6 source selection), and one left by an earlier run is no
            // longer known to be ours
            e.deprecated &= a.deprecated;
        }
    }
    locs.into_values().collect()
}

/// What one `LocalLocators::set` changed.
#[derive(Debug, Default)]
pub struct LocalUpdate {
    /// soft handoff: locators retired now, with how long they were quiet
    pub retired: Vec<(Locator, Duration)>,
    /// the advertised set (usable locators and their preferences) changed
    pub advertised_changed: bool,
    /// the preferred locator before the change
    pub old_best: Option<Locator>,
}

/// The local locator set and its handoff bookkeeping.
#[derive(Debug)]
pub struct LocalLocators {
    handoff: HandoffMode,
    quiet_period: Duration,
    /// in preference order (lower pref, then newest first); Aged ones included
    list: Vec<LocalLocator>,
    /// when each local locator first appeared: among equal preferences the
    /// newest wins, so a host that moves uses the network it just joined
    /// (make-before-break; the seeds' kernels did the same with route metrics)
    first_seen: HashMap<Locator, Instant>,
    /// hard handoff: locators still configured but aged because a newer one took over
    hard_aged: BTreeSet<Locator>,
    /// the locators as the shell last reported them (re-evaluated when a quiet period ends)
    reported: Vec<LocalLocator>,
    /// soft handoff: locators still configured but retired (quiet, RA stopped):
    /// not advertised, not used as a source, late packets to them still accepted
    soft_retired: BTreeSet<Locator>,
    /// last packet that arrived on each local locator (fast path via
    /// `note_activity`, slow path via `note_rx`)
    last_rx: HashMap<Locator, Instant>,
}

fn is_usable(l: &LocalLocator) -> bool {
    matches!(l.state, LocatorState::Active | LocatorState::Valid)
}

impl LocalLocators {
    /// `quiet_period` zero: soft handoff never retires a locator.
    pub fn new(handoff: HandoffMode, quiet_period: Duration) -> LocalLocators {
        LocalLocators {
            handoff,
            quiet_period,
            list: Vec::new(),
            first_seen: HashMap::new(),
            hard_aged: BTreeSet::new(),
            reported: Vec::new(),
            soft_retired: BTreeSet::new(),
            last_rx: HashMap::new(),
        }
    }

    /// Every local locator, preferred first (Aged ones too).
    pub fn all(&self) -> &[LocalLocator] {
        &self.list
    }

    /// Locators we may use as a source and advertise, preferred first.
    pub fn usable(&self) -> impl Iterator<Item = &LocalLocator> {
        self.list.iter().filter(|l| is_usable(l))
    }

    pub fn best(&self) -> Option<Locator> {
        self.usable().next().map(|l| l.loc)
    }

    pub fn is_usable(&self, loc: Locator) -> bool {
        self.usable().any(|l| l.loc == loc)
    }

    /// The source locator for a correspondent with these locators (IPv6 and v4
    /// paths, `v4path.rs`): the family is that of the correspondent's most preferred
    /// locator we can reach (not aged first, then its preference); within it
    /// `current` if usable, else our preferred usable locator of that family. None:
    /// no usable locator of ours reaches any of theirs.
    pub fn fitting(&self, current: Locator, remote: &[crate::ilcc::RemoteLocator]) -> Option<Locator> {
        let mut live: Vec<&crate::ilcc::RemoteLocator> =
            remote.iter().filter(|r| r.state != LocatorState::Expired).collect();
        live.sort_by_key(|r| (r.state == LocatorState::Aged, r.pref));
        let r = live.into_iter().find(|r| self.usable().any(|l| l.loc.same_family(r.loc)))?;
        if self.is_usable(current) && current.same_family(r.loc) {
            return Some(current);
        }
        self.usable().map(|l| l.loc).find(|l| l.same_family(r.loc))
    }

    /// Usable, and its network still offers it (a router behind it, the address not
    /// deprecated): where an LU may leave from first (`lu::lu_sources`).
    pub fn works(&self, loc: Locator) -> bool {
        self.usable().any(|l| l.loc == loc && !l.ra_stopped())
    }

    pub fn contains(&self, loc: Locator) -> bool {
        self.list.iter().any(|l| l.loc == loc)
    }

    /// Soft handoff retired `loc` (still accepted, no longer advertised).
    pub fn is_retired(&self, loc: Locator) -> bool {
        self.soft_retired.contains(&loc)
    }

    /// The uplink that carries `loc`.
    pub fn uplink_of(&self, loc: Locator) -> Option<u32> {
        self.list.iter().find(|l| l.loc == loc).map(|l| l.ifindex)
    }

    /// May a packet addressed to locator `loc` be accepted? Unknown locators are
    /// not; aged ones are not, except a soft-retired one (late packets, RFC 6740 §6).
    pub fn accepts(&self, loc: Locator) -> Result<(), DropReason> {
        match self.list.iter().find(|l| l.loc == loc) {
            None => Err(DropReason::UnknownLocalLocator),
            Some(l) if !is_usable(l) && !self.soft_retired.contains(&l.loc) => Err(DropReason::AgedLocalLocator),
            Some(_) => Ok(()),
        }
    }

    /// What an LU advertises: every usable locator, its lifetime capped at `cap_s`.
    pub fn lu_entries(&self, cap_s: u16) -> Vec<LuEntry> {
        self.usable()
            .map(|l| LuEntry {
                locator: l.loc,
                preference: l.pref,
                lifetime: l.lifetime_s.min(u32::from(cap_s)) as u16,
            })
            .collect()
    }

    fn soft_retiring(&self) -> bool {
        self.handoff == HandoffMode::Soft && !self.quiet_period.is_zero()
    }

    /// The shell's (or the last reported) view of our locators at `now`: orders them,
    /// applies the handoff rules, reports what changed.
    pub fn set(&mut self, now: Instant, mut locs: Vec<LocalLocator>) -> LocalUpdate {
        self.reported = locs.clone();
        for l in &locs {
            self.first_seen.entry(l.loc).or_insert(now);
        }
        self.first_seen.retain(|k, _| locs.iter().any(|l| l.loc == *k));
        self.last_rx.retain(|k, _| locs.iter().any(|l| l.loc == *k));
        let seen = &self.first_seen;
        locs.sort_by_key(|l| (l.pref, std::cmp::Reverse(seen.get(&l.loc).copied()), l.loc));
        let mut update = LocalUpdate::default();
        if self.soft_retiring() {
            update.retired = self.retire_quiet(now, &mut locs);
        } else {
            self.soft_retired.clear();
        }
        let old: BTreeSet<Locator> = self.usable().map(|l| l.loc).collect();
        // what an LU advertises: a preference change alone (a router came or went, its
        // RA preference changed) is a change too; lifetimes counting down are not
        let old_adv: BTreeSet<(Locator, u16)> = self.usable().map(|l| (l.loc, l.pref)).collect();
        update.old_best = self.best();
        // hard handoff: locators that disappeared are kept as Aged so late packets
        // to them are recognised and dropped (and counted)
        if self.handoff == HandoffMode::Hard {
            // and when a new locator takes over, the previous ones are aged at once
            // (break-before-make, RFC 6740 §6): not advertised, not accepted
            self.hard_aged.retain(|a| locs.iter().any(|n| n.loc == *a));
            let newest = locs.iter().find(|l| !self.hard_aged.contains(&l.loc)).map(|l| l.loc);
            if let Some(nb) = newest.filter(|nb| !old.is_empty() && !old.contains(nb)) {
                self.hard_aged.extend(old.iter().copied().filter(|o| *o != nb));
            }
            for l in &mut locs {
                if self.hard_aged.contains(&l.loc) {
                    l.state = LocatorState::Aged;
                }
            }
            for l in &self.list {
                if !locs.iter().any(|n| n.loc == l.loc) {
                    let mut aged = l.clone();
                    aged.state = LocatorState::Aged;
                    locs.push(aged);
                }
            }
        }
        self.list = locs;
        let new_adv: BTreeSet<(Locator, u16)> = self.usable().map(|l| (l.loc, l.pref)).collect();
        update.advertised_changed = old_adv != new_adv;
        update
    }

    /// A quiet period ended by `now`: the last reported set is judged again.
    pub fn reevaluate(&mut self, now: Instant) -> Option<LocalUpdate> {
        if self.next_retirement().is_none_or(|t| t > now) {
            return None;
        }
        let reported = self.reported.clone();
        Some(self.set(now, reported))
    }

    /// When a packet last arrived on `loc` (its first appearance if none has).
    fn last_activity(&self, loc: Locator) -> Option<Instant> {
        [self.last_rx.get(&loc), self.first_seen.get(&loc)].into_iter().flatten().max().copied()
    }

    /// Soft handoff, on the sorted reported set: marks Aged every locator retired
    /// before or now, returns those retired now with how long they were quiet.
    /// The preferred locator is never retired (a retired one that becomes the
    /// preferred again is back), nor one whose router came back or whose address
    /// is no longer deprecated. Packets arriving on a retired locator do not bring
    /// it back: the correspondents were told it is gone; they are still accepted.
    fn retire_quiet(&mut self, now: Instant, locs: &mut [LocalLocator]) -> Vec<(Locator, Duration)> {
        let preferred = locs.iter().find(|l| is_usable(l)).map(|l| l.loc);
        self.soft_retired
            .retain(|r| Some(*r) != preferred && locs.iter().any(|l| l.loc == *r && is_usable(l) && l.ra_stopped()));
        let mut newly = Vec::new();
        for l in locs.iter() {
            if Some(l.loc) == preferred || !is_usable(l) || !l.ra_stopped() || self.soft_retired.contains(&l.loc) {
                continue;
            }
            let quiet = self.last_activity(l.loc).map_or(Duration::MAX, |t| now.saturating_duration_since(t));
            if quiet >= self.quiet_period {
                newly.push((l.loc, quiet));
            }
        }
        self.soft_retired.extend(newly.iter().map(|(l, _)| *l));
        for l in locs.iter_mut() {
            if self.soft_retired.contains(&l.loc) {
                l.state = LocatorState::Aged;
            }
        }
        newly
    }

    /// The next instant a soft-handoff candidate (usable, not preferred, RA
    /// stopped) will have been quiet for the quiet period, if any.
    pub fn next_retirement(&self) -> Option<Instant> {
        if !self.soft_retiring() {
            return None;
        }
        let best = self.best();
        self.usable()
            .filter(|l| Some(l.loc) != best && l.ra_stopped())
            .filter_map(|l| self.last_activity(l.loc))
            .map(|t| t + self.quiet_period)
            .min()
    }

    /// A packet arrived on `loc` at `last_rx` as the fast path saw it; older
    /// reports than what is known are ignored.
    pub fn note_activity(&mut self, loc: Locator, last_rx: Instant) {
        if !self.contains(loc) {
            return;
        }
        let t = self.last_rx.entry(loc).or_insert(last_rx);
        *t = (*t).max(last_rx);
    }

    /// The slow path verified a packet that arrived on `loc` at `now`.
    pub fn note_rx(&mut self, loc: Locator, now: Instant) {
        if self.contains(loc) {
            self.last_rx.insert(loc, now);
        }
    }

    /// When a packet last arrived on local locator `loc`, as far as the core knows.
    pub fn last_rx(&self, loc: Locator) -> Option<Instant> {
        self.last_rx.get(&loc).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LA: Locator = Locator(0x2001_0db8_000a_0000);
    const LB: Locator = Locator(0x2001_0db8_000b_0000);
    const P: Locator = ilnp_wire::DEFAULT_IDENTIFIER_PREFIX;
    const N: Nid = Nid(0x0200_00ff_fe00_000d);

    fn loc(l: Locator, pref: u16, has_router: bool) -> LocalLocator {
        LocalLocator {
            loc: l,
            ifindex: 2,
            pref,
            lifetime_s: 30,
            state: LocatorState::Active,
            has_router,
            deprecated: false,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn preference_order_newest_wins_ties() {
        let mut l = LocalLocators::new(HandoffMode::Soft, Duration::ZERO);
        let t = Instant::now();
        assert!(l.set(t, vec![loc(LA, 10, true)]).advertised_changed);
        let u = l.set(t + ms(1), vec![loc(LA, 10, true), loc(LB, 10, true)]);
        assert!(u.advertised_changed);
        assert_eq!((u.old_best, l.best()), (Some(LA), Some(LB)), "the newer of equals wins");
        assert!(!l.set(t + ms(2), vec![loc(LA, 10, true), loc(LB, 10, true)]).advertised_changed);
        assert!(l.set(t + ms(3), vec![loc(LA, 5, true), loc(LB, 10, true)]).advertised_changed);
        assert_eq!(l.best(), Some(LA));
        assert_eq!(l.lu_entries(20).iter().map(|e| (e.locator, e.lifetime)).collect::<Vec<_>>(), [(LA, 20), (LB, 20)]);
        assert_eq!(l.accepts(Locator(1)), Err(DropReason::UnknownLocalLocator));
    }

    #[test]
    fn hard_handoff_ages_the_old_locator() {
        let mut l = LocalLocators::new(HandoffMode::Hard, Duration::ZERO);
        let t = Instant::now();
        l.set(t, vec![loc(LA, 10, true)]);
        l.set(t + ms(1), vec![loc(LA, 10, true), loc(LB, 10, true)]);
        assert_eq!(l.usable().map(|x| x.loc).collect::<Vec<_>>(), [LB]);
        assert_eq!(l.accepts(LA), Err(DropReason::AgedLocalLocator));
        // gone from the kernel: still known, aged
        l.set(t + ms(2), vec![loc(LB, 10, true)]);
        assert_eq!(l.accepts(LA), Err(DropReason::AgedLocalLocator));
        assert_eq!(l.accepts(LB), Ok(()));
    }

    #[test]
    fn soft_handoff_retires_a_quiet_locator_without_router() {
        let mut l = LocalLocators::new(HandoffMode::Soft, ms(3000));
        let t = Instant::now();
        l.set(t, vec![loc(LA, 20, false), loc(LB, 10, true)]);
        assert_eq!(l.next_retirement(), Some(t + ms(3000)));
        assert!(l.reevaluate(t + ms(2999)).is_none());
        l.note_activity(LA, t + ms(1000));
        assert_eq!(l.next_retirement(), Some(t + ms(4000)), "traffic pushes the quiet period");
        l.note_activity(LA, t + ms(500));
        assert_eq!(l.last_rx(LA), Some(t + ms(1000)), "older stamps ignored");
        let u = l.reevaluate(t + ms(4000)).expect("due");
        assert_eq!(u.retired, vec![(LA, ms(3000))]);
        assert!(u.advertised_changed);
        assert!(l.is_retired(LA) && !l.is_usable(LA));
        assert_eq!(l.accepts(LA), Ok(()), "late packets to a retired locator are accepted");
        assert_eq!(l.next_retirement(), None);
    }

    #[test]
    fn derivation_picks_global_64s_on_live_uplinks() {
        let up = |ifindex, router| UplinkFacts { ifindex, up: true, router, router4: false, configured_pref: None };
        let addr = |ifindex, s: &str, len| KernelAddress {
            ifindex,
            addr: s.parse().unwrap(),
            prefix_len: len,
            global: true,
            valid_lft: 100,
            deprecated: false,
            added_by_us: false,
        };
        let uplinks = [
            up(2, Some(RouterPreference::High)),
            up(3, None),
            UplinkFacts { ifindex: 4, up: false, router: None, router4: false, configured_pref: None },
            UplinkFacts {
                ifindex: 5,
                up: true,
                router: Some(RouterPreference::Low),
                router4: false,
                configured_pref: Some(1),
            },
        ];
        let mut ours = addr(3, "2001:db8:c::200:ff:fe00:d", 64);
        ours.added_by_us = true;
        let addrs = [
            addr(2, "2001:db8:a::1", 64),
            addr(2, "2001:db8:a::2", 64),             // same prefix: one locator
            addr(2, "2001:db8:f::1", 48),             // not a /64
            addr(2, "fd69:6c6e:7000::1", 64),         // the identifier prefix
            addr(3, "2001:db8:b::200:ff:fe00:d", 64), // kernel-made L64:NID: a locator
            ours,                                     // one we added: not evidence
            addr(4, "2001:db8:d::1", 64),             // link down
            addr(5, "2001:db8:e::1", 64),
            addr(9, "2001:db8:9::1", 64), // not an uplink
            KernelAddress { global: false, ..addr(2, "2001:db8:8::1", 64) },
        ];
        let l = derive_local_locators(P, N, &uplinks, &addrs);
        let got: Vec<_> = l.iter().map(|x| (x.loc, x.ifindex, x.pref, x.has_router)).collect();
        assert_eq!(
            got,
            [
                (Locator(0x2001_0db8_000a_0000), 2, 5, true),
                (Locator(0x2001_0db8_000b_0000), 3, 20, false),
                (Locator(0x2001_0db8_000e_0000), 5, 1, true),
            ]
        );
    }

    #[test]
    fn a_prefix_is_deprecated_only_when_all_its_addresses_are() {
        let uplinks = [UplinkFacts { ifindex: 2, up: true, router: None, router4: false, configured_pref: None }];
        let addr = |s: &str, deprecated| KernelAddress {
            ifindex: 2,
            addr: s.parse().unwrap(),
            prefix_len: 64,
            global: true,
            valid_lft: 100,
            deprecated,
            added_by_us: false,
        };
        // a deprecated L64:NID left by an earlier run, listed before the host's own address
        let leftover = addr("2001:db8:a::200:ff:fe00:d", true);
        let l = derive_local_locators(P, N, &uplinks, &[leftover.clone(), addr("2001:db8:a::1", false)]);
        assert_eq!(l.len(), 1);
        assert!(!l[0].deprecated, "the host's own address is preferred: not deprecated");
        let l = derive_local_locators(P, N, &uplinks, &[leftover, addr("2001:db8:a::1", true)]);
        assert!(l[0].deprecated, "the RA deprecated the host's address too");
    }
}
