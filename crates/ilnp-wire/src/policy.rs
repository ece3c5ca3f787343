//! The load-balancing policy (issue #12): its names, the one list of them, and the
//! fast path's code for each (`enum ilnp_policy` in bpf/ilnp_maps.h). Here, in the
//! lowest crate, so the core (which balances) and the control protocol (which names
//! a policy in `policy_set` and its replies) share it without the control protocol
//! depending on the core. How packets are spread is `ilnp_core::balance`'s.

named_enum! {
    /// How packets to a correspondent are spread over locator pairs.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Policy {
        #[default]
        Failover = "failover",
        PerFlow = "per-flow",
        PerPacket = "per-packet",
    }
}

impl Policy {
    /// The fast path's code (`enum ilnp_policy` in bpf/ilnp_maps.h).
    pub fn code(self) -> u32 {
        self as u32
    }
}

impl core::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        Policy::from_name(s).ok_or_else(|| format!("unknown policy {s:?} (failover, per-flow or per-packet)"))
    }
}

serde_by_name!(Policy);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_codes_follow_the_names() {
        assert_eq!(Policy::NAMES, ["failover", "per-flow", "per-packet"]);
        assert_eq!(Policy::ALL.iter().map(|p| p.code()).collect::<Vec<_>>(), [0, 1, 2]);
    }
}
