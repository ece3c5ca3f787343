//! What the core reports: events (logs, `ilnpctl monitor`) and counters (`ilnpctl stats`).
//!
//! Every counter is a variant of [`DropReason`] (a packet the core refused) or
//! [`Outcome`] (something notable that happened); each list is defined once, below,
//! and counted by index. The names are the JSON keys the control socket shows.

use ilnp_wire::named_enum;
use ilnp_wire::{Locator, Nid};
use serde::{Serialize, Serializer};
use std::fmt;

pub(crate) fn ser_display<T: fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

named_enum! {
    #[serde_names]
    /// Why the core dropped a packet. Where the BPF data path (`ILNP_REASONS` in
    /// `bpf/ilnp_maps.h`) has the same case its name is noted; the core's names are
    /// kept as the control socket has always shown them (`ilnpctl stats` "core").
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
    pub enum DropReason {
        /// two nonce options (RFC 6744 §2); BPF: `ingress_drop_multi_nonce`
        MultiNonce = "drop_multi_nonce",
        /// a wire-form packet that does not parse; BPF: `ingress_drop_malformed`
        Malformed = "malformed",
        /// an identifier-form packet from the stack that cannot be translated
        OutMalformed = "out_malformed",
        /// the destination NID is not ours
        NotForUs = "not_for_us",
        /// the destination locator is not one of ours
        UnknownLocalLocator = "unknown_local_locator",
        /// the destination locator is ours but aged (hard handoff)
        AgedLocalLocator = "aged_local_locator",
        /// the nonce differs from the one the correspondent showed; BPF punts these
        /// as `ingress_punt_bad_nonce` for the core to judge
        BadNonce = "bad_nonce",
        /// our own nonce for the peer on a packet that needs the peer's (data, a
        /// nonce-only packet), or from a peer that does not reflect: what an
        /// observer of our direction could send; dropped, no challenge
        ReflectedNonce = "reflected_nonce",
        IlccFull = "ilcc_full",
        /// no peer record for a destination NID
        UnknownPeer = "unknown_peer",
        /// the peer answered our nonce with a Parameter Problem before
        NonIlnpPeerBlocked = "non_ilnp_peer_blocked",
        NoLocalLocator = "no_local_locator",
        NoRemoteLocator = "no_remote_locator",
        IcmpUnrelated = "icmp_unrelated",
        IcmpMissingNonce = "icmp_missing_nonce",
        IcmpBadNonce = "icmp_bad_nonce",
        IcmpErrorUnverified = "icmp_error_unverified",
        IcmpUntranslatable = "icmp_untranslatable",
        /// every malformed LU (the `Outcome::LuMalformed*` counters break it down)
        LuMalformed = "lu_malformed",
        LuUnknownPeer = "lu_unknown_peer",
        LuBadNonce = "lu_bad_nonce",
        /// an LU carrying our own nonce: an advertisement, an ack of nothing we
        /// sent, or from a peer that does not reflect (docs/security.md)
        LuReflectedNonce = "lu_reflected_nonce",
        LuUnexpectedAck = "lu_unexpected_ack",
        /// a plain packet punted for a fallback (or probed) peer that is not its
        /// session's: another locator or destination, or not the probe's reply
        FallbackUnexpected = "fallback_unexpected",
        /// an LU from an embryonic (unconfirmed) entry: only established peers move
        LuEmbryonic = "lu_embryonic",
        /// an LU in the Linux 4.9 prototype's layout from a peer not marked `linux49`
        /// (`CoreConfig::peer_linux49`)
        LuLinux49Unmarked = "lu_linux49_unmarked",
        /// admission = socket: a TCP RST or ICMPv6 error our stack raised towards a
        /// NID with no ILCC entry (the answer to a packet no socket took, which the
        /// fast path passed up statelessly) with no fresh hint of where that packet
        /// came from (`admission::AnswerHint`): not sent
        AnswerUnadmitted = "answer_unadmitted",
        /// ... with a hint, but the global budget towards unconfirmed sources had
        /// no token: not sent
        AnswerRateLimited = "answer_rate_limited",
        /// a packet towards an embryonic (unconfirmed) entry, the application's own
        /// (a SYN-ACK, an RST, a UDP answer), with no token of that budget: not sent
        /// (the hellos' and refusals' budget covers every packet towards one)
        TxEmbryonicRateLimited = "tx_embryonic_rate_limited",
        /// a Destination Options header whose nonce option runs past the header's
        /// end: FreeBSD ILNP6's reflected ICMPv6 with a 96-bit nonce (an 8-byte header
        /// holding a 14-byte option, `ilnp6.c` `ilnp6_nonce_output_mbuf`); only 4 of
        /// its 12 nonce bytes are on the wire, so it cannot be verified as 96-bit.
        /// BPF: `ingress_drop_nonce_overrun`
        NonceOverrun = "nonce_overrun",
        /// a later fragment (no nonce: RFC 8200 puts a Destination Options header after
        /// the Fragment header only in the first) from a known correspondent that did
        /// not come from one of its known locators to one of ours, or before its nonce
        /// is known
        FragmentUnverified = "fragment_unverified",
        /// an identifier-form packet from the stack whose source NID is not ours
        /// (an expired temporary NID's socket)
        OutSrcNotOurs = "out_src_not_ours",
    }
}

named_enum! {
    #[serde_names]
    /// Notable things that happened, counted next to the drops.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
    pub enum Outcome {
        PeerCreated = "peer_created",
        IlccIdleExpired = "ilcc_idle_expired",
        NonIlnpPeer = "non_ilnp_peer",
        NonceOnlyReceived = "nonce_only_received",
        /// an identifier-form packet that is not ours to carry (e.g. MLD on ilnp0)
        OutNotIdentifier = "out_not_identifier",
        RemoteLocatorLearned = "remote_locator_learned",
        RemoteLocatorNotLearnedFull = "remote_locator_not_learned_full",
        RemoteLocatorAged = "remote_locator_aged",
        LocalLocatorRetired = "local_locator_retired",
        RetiredLocalLocatorRx = "retired_local_locator_rx",
        IcmpErrorTranslated = "icmp_error_translated",
        LuReceived = "lu_received",
        LuLocatorsIgnored = "lu_locators_ignored",
        /// an LU moved a peer's active locator: the shell was asked to nudge its TCP (RFC 6069)
        TransportNudge = "transport_nudge",
        LuAcked = "lu_acked",
        LuDuplicateAck = "lu_duplicate_ack",
        LuFailed = "lu_failed",
        LuMalformedNoLocators = "lu_malformed_no_locators",
        LuMalformedLengthMismatch = "lu_malformed_length_mismatch",
        LuMalformedTruncated = "lu_malformed_truncated",
        LuMalformedBadChecksum = "lu_malformed_bad_checksum",
        LuMalformedUnknownOperation = "lu_malformed_unknown_operation",
        LuMalformedOther = "lu_malformed_other",
        /// a known NID with an unknown nonce: the old peer was challenged (`challenge.rs`)
        PeerChallengeSent = "peer_challenge_sent",
        /// the old peer answered with the old nonce: the new one was forged, still dropped
        PeerChallengeAnswered = "peer_challenge_answered",
        /// the node at one of the peer's known locators answered our challenge with
        /// a new nonce: it restarted, its entry took that nonce
        PeerRestartReplaced = "peer_restart_replaced",
        /// nobody answered the challenge: silence proves nothing, the session keeps
        /// its nonce and locators and the newcomer's packets stay dropped
        PeerChallengeUnanswered = "peer_challenge_unanswered",
        /// no challenge sent (per-NID hold-off, global rate or open bound); the packet is dropped
        PeerChallengeRateLimited = "peer_challenge_rate_limited",
        /// a DNS answer stored as a peer record (`dns.rs`)
        DnsPeerLearned = "dns_peer_learned",
        /// a DNS answer not stored (static peer, own NID, no locator)
        DnsPeerIgnored = "dns_peer_ignored",
        /// a DNS peer record past its TTL when a session wanted it, or swept
        DnsPeerExpired = "dns_peer_expired",
        /// `DNS_MAX_RECORDS` held: the record that expires first without a session made room
        DnsPeerEvicted = "dns_peer_evicted",
        /// ... every one has a session: the answer was not stored (plain answer)
        DnsPeerFull = "dns_peer_full",
        /// the NID is held for another name with other locators: not stored (plain answer)
        DnsPeerOtherName = "dns_peer_other_name",
        /// both ends moved: after our LU failed, an LU went to the re-resolved locators
        DnsRecoveryLuSent = "dns_recovery_lu_sent",
        /// ... and its ack came back from one of them with the peer's own nonce: the
        /// session moved there
        DnsPeerRecovered = "dns_peer_recovered",
        /// a correspondent is reached as plain IPv6 from now on (`fallback.rs`)
        FallbackStarted = "fallback_started",
        /// ... and showed a nonce later: ILNP again
        FallbackEnded = "fallback_ended",
        FallbackPktsOut = "fallback_pkts_out",
        FallbackPktsIn = "fallback_pkts_in",
        /// plain Echo Requests to a silent correspondent's L64:NID
        FallbackProbeSent = "fallback_probe_sent",
        /// admission (admission.rs): a new NID got an embryonic entry
        AdmittedEmbryonic = "admit_embryonic",
        /// admission = socket: a peer from the peer database, arriving from a locator
        /// the database lists, got an established entry at once
        AdmittedKnownPeer = "admit_known_peer",
        /// admission = open: a new NID got an established entry at once
        AdmittedOpen = "admit_open",
        /// an embryonic entry proved its peer is there and became established
        Promoted = "admit_promoted",
        /// ... but the established tier was full (it stays embryonic)
        PromoteRefusedFull = "admit_promote_refused_full",
        /// the oldest embryonic entry made room for a new one
        EmbryonicEvicted = "admit_embryonic_evicted",
        /// nonce-only hellos sent (one per admitted entry at most)
        HelloSent = "hello_sent",
        /// temporary NIDs taken, refused (not unicast, ours already, a known
        /// correspondent's: the shell draws another) and removed (`nids.rs`)
        TempNidAdded = "temp_nid_added",
        TempNidRefused = "temp_nid_refused",
        TempNidRemoved = "temp_nid_removed",
        /// hellos not sent: the global budget had no token
        HelloRateLimited = "hello_rate_limited",
        /// packets sent towards an embryonic (unconfirmed) entry, hellos included
        TxToEmbryonic = "tx_to_embryonic",
        /// admission = socket: our stack's refusal (TCP RST, ICMPv6 error) of a
        /// packet no socket took, sent to the hinted locator with no state
        AnswerSent = "answer_sent",
        /// a reply from a shared-nonce correspondent (FreeBSD ILNP6, the Linux 4.9
        /// code) carrying *our* nonce for it: its Echo Reply to our challenge, its
        /// ack of our LU, an error quoting our packet; accepted (docs/architecture.md
        /// § Nonce models)
        NonceReflectedAccepted = "nonce_reflected_accepted",
        /// a first fragment whose nonce sits in a Destination Options header after the
        /// Fragment header (FreeBSD's `ip6po_dest2`), translated
        FragmentNonceAfterFrag = "fragment_nonce_after_frag",
        /// a later fragment of such a datagram (no nonce) from a known correspondent's
        /// known locator, translated for the kernel to reassemble
        FragmentAccepted = "fragment_accepted",
        /// v4 path (`v4path.rs`): a correspondent's datagrams come from another
        /// address or port than its v4-path locator names (a NAT): replies go there
        V4NatDetected = "v4_nat_detected",
        /// a nonce-verified packet from a new outer address for a known v4 path:
        /// the new path was challenged (RFC 9000 §8.2-style validation)
        V4PathChallengeSent = "v4_path_challenge_sent",
        /// ... the challenge came back from the new address: replies follow it
        V4PathRebound = "v4_path_rebound",
        /// ... no answer: the old path stays
        V4PathChallengeFailed = "v4_path_challenge_failed",
        /// ... not sent (the validations' own limits: `v4path::V4_VALIDATION_*`)
        V4PathChallengeRateLimited = "v4_path_challenge_rate_limited",
        /// ... not sent: that candidate address was refused or unanswered for this
        /// peer less than a second ago (`V4_CANDIDATE_HOLDOFF`)
        V4PathChallengeHeldOff = "v4_path_challenge_held_off",
        /// ... the confirmation sent over the old path came back from the old
        /// address: the peer is still there, the candidate refused (a replay)
        V4PathRefusedOldPath = "v4_path_refused_old_path",
        /// ... it came back from the candidate: the peer moved there
        V4PathConfirmedOldPath = "v4_path_confirmed_old_path",
        /// ... it did not come back within a few round trips of the candidate's
        /// answer (the old mapping is gone): the candidate's answer sufficed
        V4PathOldPathSilent = "v4_path_old_path_silent",
        /// a verified packet from a path not (yet) validated: delivered, not answered there
        V4PathUnvalidatedRx = "v4_path_unvalidated_rx",
        /// NAT keepalives: nonce-only packets on a quiet session over a v4 path
        V4KeepaliveSent = "v4_keepalive_sent",
        /// a new v4 path of ours warmed up: a nonce-only packet to a correspondent's
        /// v4 path while the session still runs elsewhere (`V4Paths::locals_changed`)
        V4PathWarmed = "v4_path_warmed",
        /// a v4-path datagram whose inner source locator is not a v4 path (delivered
        /// if its nonce is right; no path learned from it)
        V4InnerNotV4Path = "v4_inner_not_v4_path",
        /// the active locator of a peer drew Destination Unreachables and another
        /// locator had shown the peer's nonce more recently: the session moved
        /// there (`failover.rs`)
        RemoteLocatorFailover = "remote_locator_failover",
        /// ... but no other locator had: nothing changed (the error went to the stack)
        FailoverNoProvenLocator = "failover_no_proven_locator",
    }
}

/// Counters, one per drop reason and outcome, counted by index.
#[derive(Clone, Debug)]
pub struct Stats {
    pub counters: Counters,
}

/// The counter arrays. `iter()` yields the non-zero counters by name.
#[derive(Clone, Debug)]
pub struct Counters {
    drops: [u64; DropReason::COUNT],
    outcomes: [u64; Outcome::COUNT],
}

impl Default for Stats {
    fn default() -> Self {
        Stats { counters: Counters { drops: [0; DropReason::COUNT], outcomes: [0; Outcome::COUNT] } }
    }
}

impl Counters {
    /// The non-zero counters as `(name, value)`, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &u64)> {
        let drops = DropReason::ALL.iter().map(|r| (r.as_str(), &self.drops[*r as usize]));
        let outcomes = Outcome::ALL.iter().map(|o| (o.as_str(), &self.outcomes[*o as usize]));
        let mut v: Vec<_> = drops.chain(outcomes).filter(|(_, n)| **n > 0).collect();
        v.sort_by_key(|(k, _)| *k);
        v.into_iter()
    }
}

impl Serialize for Counters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Stats", 1)?;
        st.serialize_field("counters", &self.counters)?;
        st.end()
    }
}

impl Stats {
    pub fn drop(&mut self, r: DropReason) {
        self.counters.drops[r as usize] += 1;
    }
    pub fn bump(&mut self, o: Outcome) {
        self.add(o, 1);
    }
    pub fn add(&mut self, o: Outcome, n: u64) {
        self.counters.outcomes[o as usize] += n;
    }
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.counters.drops[r as usize]
    }
    pub fn outcome(&self, o: Outcome) -> u64 {
        self.counters.outcomes[o as usize]
    }
    /// A counter by name (0 for a name that is not a counter).
    pub fn get(&self, name: &str) -> u64 {
        if let Some(r) = DropReason::ALL.iter().find(|r| r.as_str() == name) {
            return self.dropped(*r);
        }
        Outcome::ALL.iter().find(|o| o.as_str() == name).map_or(0, |o| self.outcome(*o))
    }
}

/// What happened, for logs and `ilnpctl monitor`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    PeerCreated {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        initiator: bool,
        #[serde(serialize_with = "ser_display")]
        local_locator: Locator,
        #[serde(serialize_with = "ser_display")]
        remote_locator: Locator,
    },
    PeerRemoved {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        reason: &'static str,
    },
    NonIlnpPeer {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
    },
    /// the peer is reached as plain IPv6 at `address` (`reason`: a `FallbackReason`)
    PeerFallback {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        reason: &'static str,
        #[serde(serialize_with = "ser_display")]
        address: std::net::Ipv6Addr,
    },
    RemoteLocatorLearned {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        #[serde(serialize_with = "ser_display")]
        locator: Locator,
    },
    /// the active locator `from` drew Destination Unreachables: the session moved to
    /// `to`, which had shown the peer's current nonce more recently (`failover.rs`)
    RemoteLocatorFailover {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        #[serde(serialize_with = "ser_display")]
        from: Locator,
        #[serde(serialize_with = "ser_display")]
        to: Locator,
    },
    /// a correspondent's locator outlived its advertised lifetime: kept, not preferred
    RemoteLocatorAged {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        #[serde(serialize_with = "ser_display")]
        locator: Locator,
    },
    LocalLocatorsChanged {
        locators: Vec<String>,
    },
    /// soft handoff: a non-preferred locator went quiet and its RA stopped
    LocalLocatorRetired {
        #[serde(serialize_with = "ser_display")]
        locator: Locator,
        quiet_ms: u64,
    },
    LuReceived {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        locators: Vec<String>,
    },
    LuSent {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        attempt: u32,
        locators: Vec<String>,
    },
    LuAcked {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        rtt_us: u64,
        attempts: u32,
    },
    LuFailed {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        attempts: u32,
    },
    /// a peer-restart challenge was sent or ended (`challenge.rs`)
    PeerChallenge {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        outcome: &'static str,
    },
    /// a correspondent's v4 path changed or was checked (`v4path.rs`)
    V4Path {
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        #[serde(serialize_with = "ser_display")]
        locator: Locator,
        via: String,
        outcome: &'static str,
    },
    /// a name's NID + locator records, from the resolver proxy (`result`: a
    /// `DnsPeerResult` name)
    DnsPeer {
        name: String,
        #[serde(serialize_with = "ser_display")]
        nid: Nid,
        locators: Vec<String>,
        ttl_s: u32,
        result: &'static str,
    },
    /// `reason` is a [`DropReason`]'s name
    Drop {
        reason: &'static str,
        detail: String,
    },
}

impl Event {
    pub fn drop(reason: DropReason, detail: String) -> Event {
        Event::Drop { reason: reason.as_str(), detail }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::PeerCreated { nid, initiator, local_locator, remote_locator } => write!(
                f,
                "ILNP session with {nid} ({}) via {local_locator} -> {remote_locator}",
                if *initiator { "initiated" } else { "accepted" }
            ),
            Event::PeerRemoved { nid, reason } => write!(f, "ILCC entry {nid} removed: {reason}"),
            Event::PeerChallenge { nid, outcome } => write!(f, "peer restart challenge to {nid}: {outcome}"),
            Event::V4Path { nid, locator, via, outcome } => {
                write!(f, "v4 path {locator} of {nid} via {via}: {outcome}")
            }
            Event::NonIlnpPeer { nid } => {
                write!(f, "peer {nid} is not ILNPv6-capable (Parameter Problem on the nonce option)")
            }
            Event::PeerFallback { nid, reason, address } => {
                write!(
                    f,
                    "peer {nid} does not speak ILNPv6 ({reason}): plain IPv6 to {address} for its identifier address"
                )
            }
            Event::RemoteLocatorLearned { nid, locator } => {
                write!(f, "learned locator {locator} of {nid} (correct nonce)")
            }
            Event::RemoteLocatorFailover { nid, from, to } => {
                write!(f, "locator {from} of {nid} unreachable: moved to {to} (it showed the peer's nonce)")
            }
            Event::RemoteLocatorAged { nid, locator } => {
                write!(f, "locator {locator} of {nid} outlived its lifetime (aged, kept until the next LU)")
            }
            Event::LocalLocatorsChanged { locators } => write!(f, "local locators: [{}]", locators.join(", ")),
            Event::LocalLocatorRetired { locator, quiet_ms } => write!(
                f,
                "local locator {locator} retired: no packet for {quiet_ms} ms and no router (no longer advertised)"
            ),
            Event::LuReceived { nid, locators } => write!(f, "LU from {nid}: [{}]", locators.join(", ")),
            Event::LuSent { nid, attempt, locators } => {
                write!(f, "LU to {nid} (attempt {attempt}): [{}]", locators.join(", "))
            }
            Event::LuAcked { nid, rtt_us, attempts } => {
                write!(f, "LU to {nid} acked in {:.2} ms after {attempts} attempt(s)", *rtt_us as f64 / 1e3)
            }
            Event::LuFailed { nid, attempts } => write!(f, "LU to {nid} not acked after {attempts} attempts"),
            Event::DnsPeer { name, nid, locators, ttl_s, result } => {
                write!(f, "DNS: {name} is NID {nid} at [{}] TTL {ttl_s} s: {result}", locators.join(", "))
            }
            Event::Drop { reason, detail } => write!(f, "drop ({reason}): {detail}"),
        }
    }
}

/// `src -> dst` of a packet, for logs.
pub(crate) fn packet_summary(pkt: &[u8]) -> String {
    match ilnp_wire::ipv6::Packet::new_checked(pkt) {
        Ok(p) => format!("{} -> {}", p.src(), p.dst()),
        Err(e) => format!("{} bytes ({e})", pkt.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_indices_dense() {
        let mut names: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
        names.extend(Outcome::ALL.iter().map(|o| o.as_str()));
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a counter name is used twice");
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
    }

    #[test]
    fn counted_by_index_shown_by_name() {
        let mut s = Stats::default();
        s.drop(DropReason::BadNonce);
        s.drop(DropReason::BadNonce);
        s.add(Outcome::LuLocatorsIgnored, 5);
        assert_eq!(s.get("bad_nonce"), 2);
        assert_eq!(s.get("lu_locators_ignored"), 5);
        assert_eq!(s.get("lu_acked"), 0);
        assert_eq!(s.get("no_such_counter"), 0);
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["counters"]["bad_nonce"], 2);
        assert_eq!(j["counters"].as_object().unwrap().len(), 2, "zero counters are not shown: {j}");
        let ev = Event::drop(DropReason::MultiNonce, "x".into());
        assert_eq!(serde_json::to_value(&ev).unwrap()["reason"], "drop_multi_nonce");
    }
}
