//! What the shell itself counts, next to the core's counters (`ilnpctl stats`,
//! the metrics endpoint's `daemon_events`).

ilnp_wire::named_enum! {
    /// What the shell itself counts (next to the core's counters in `ilnpctl stats`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub(super) enum ShellCounter {
        /// the chosen uplink had no route to the destination: the main table decided
        SendUplinkFallback = "send_uplink_fallback",
        /// the raw socket refused a wire packet
        SendError = "send_error",
        /// writing a packet to the TUN failed
        DeliverError = "deliver_error",
        /// a TUN packet shorter than an IPv6 header, or not IPv6
        TunRunt = "tun_runt",
        /// multicast (MLD...) the kernel sent on ilnp0
        TunMulticastIgnored = "tun_multicast_ignored",
        /// a GSO super-packet that missed the fast path, cut into segments
        SlowPathGsoSplit = "slow_path_gso_split",
        /// a GSO super-packet that could not be cut
        SlowPathGsoBad = "slow_path_gso_bad",
        /// RFC 6069 hints handed to our stack (`tcp_hints.rs`)
        TcpHintSent = "tcp_hint_sent",
        /// TCP connections nudged (one or more hints each)
        TcpHintConnections = "tcp_hint_connections",
        /// a nudge found more timed-out connections to the peer than it handles
        TcpHintCapped = "tcp_hint_capped",
        /// reading the fast path's per-peer counters failed (`refresh_activity`): sessions
        /// carried by the fast path alone would idle out
        ActivitySweepError = "activity_sweep_error",
        /// a datagram on the v4 path's port that is not an IPv6 packet (or, punted
        /// through ilnp0, not a UDP/IPv4 datagram)
        V4NotIlnp = "v4_not_ilnp",
        /// a packet for a v4 path while `[ipv4]` is off (a peer advertised one)
        V4Off = "v4_off",
        /// a mutating control request (`ilcc flush`, `peer add`...) from a client that
        /// is not root (a member of group `ilnp`): refused
        ControlRefusedNotRoot = "control_refused_not_root",
        /// `[privacy]`: temporary NIDs drawn and taken, and rotations not done: the
        /// bound (`max_temporary`) reached, no randomness (getrandom failed), or
        /// every draw refused (a collision each time); each logged as an error
        /// (`daemon/privacy.rs`)
        TempNidDrawn = "temp_nid_drawn",
        TempNidExhausted = "temp_nid_exhausted",
        TempNidNoEntropy = "temp_nid_no_entropy",
        TempNidCollisions = "temp_nid_collisions",
        /// a temporary NID's `L64:NID` failed Duplicate Address Detection on an
        /// uplink: removed, another drawn
        TempNidDadFailed = "temp_nid_dad_failed",
    }
}

#[cfg(test)]
mod tests {
    use super::ShellCounter;

    #[test]
    fn shell_counters_keep_their_json_names() {
        let names: Vec<&str> = ShellCounter::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "send_uplink_fallback",
                "send_error",
                "deliver_error",
                "tun_runt",
                "tun_multicast_ignored",
                "slow_path_gso_split",
                "slow_path_gso_bad",
                "tcp_hint_sent",
                "tcp_hint_connections",
                "tcp_hint_capped",
                "activity_sweep_error",
                "v4_not_ilnp",
                "v4_off",
                "control_refused_not_root",
                "temp_nid_drawn",
                "temp_nid_exhausted",
                "temp_nid_no_entropy",
                "temp_nid_collisions",
                "temp_nid_dad_failed"
            ]
        );
    }
}
