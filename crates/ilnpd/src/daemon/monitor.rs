//! The core's events as the monitor stream carries them (`ilnpctl monitor`;
//! the JSON shapes live in `ilnp_control::Event`).

use ilnp_control as ctl;
use ilnp_core::Event;

/// A core event as the monitor stream carries it.
pub(super) fn monitor_event(ev: &Event) -> ctl::Event {
    let s = |x: &dyn std::fmt::Display| x.to_string();
    match ev {
        Event::PeerCreated { nid, initiator, local_locator, remote_locator } => ctl::Event::PeerCreated {
            nid: *nid,
            initiator: *initiator,
            local_locator: *local_locator,
            remote_locator: *remote_locator,
        },
        Event::PeerRemoved { nid, reason } => ctl::Event::PeerRemoved { nid: *nid, reason: s(reason) },
        Event::NonIlnpPeer { nid } => ctl::Event::NonIlnpPeer { nid: *nid },
        Event::PeerFallback { nid, reason, address } => {
            ctl::Event::PeerFallback { nid: *nid, reason: s(reason), address: s(address) }
        }
        Event::RemoteLocatorLearned { nid, locator } => {
            ctl::Event::RemoteLocatorLearned { nid: *nid, locator: *locator }
        }
        Event::RemoteLocatorAged { nid, locator } => ctl::Event::RemoteLocatorAged { nid: *nid, locator: *locator },
        Event::RemoteLocatorFailover { nid, from, to } => {
            ctl::Event::RemoteLocatorFailover { nid: *nid, from: *from, to: *to }
        }
        Event::LocalLocatorsChanged { locators } => ctl::Event::LocalLocatorsChanged { locators: locators.clone() },
        Event::LocalLocatorRetired { locator, quiet_ms } => {
            ctl::Event::LocalLocatorRetired { locator: *locator, quiet_ms: *quiet_ms }
        }
        Event::LuReceived { nid, locators } => ctl::Event::LuReceived { nid: *nid, locators: locators.clone() },
        Event::LuSent { nid, attempt, locators } => {
            ctl::Event::LuSent { nid: *nid, attempt: *attempt, locators: locators.clone() }
        }
        Event::LuAcked { nid, rtt_us, attempts } => {
            ctl::Event::LuAcked { nid: *nid, rtt_us: *rtt_us, attempts: *attempts }
        }
        Event::LuFailed { nid, attempts } => ctl::Event::LuFailed { nid: *nid, attempts: *attempts },
        Event::PeerChallenge { nid, outcome } => ctl::Event::PeerChallenge { nid: *nid, outcome: s(outcome) },
        Event::V4Path { nid, locator, via, outcome } => {
            ctl::Event::V4Path { nid: *nid, locator: *locator, via: via.clone(), outcome: s(outcome) }
        }
        Event::DnsPeer { name, nid, locators, ttl_s, result } => ctl::Event::DnsPeer {
            name: name.clone(),
            nid: *nid,
            locators: locators.clone(),
            ttl_s: *ttl_s,
            result: s(result),
        },
        Event::Drop { reason, detail } => ctl::Event::Drop { reason: s(reason), detail: detail.clone() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ilnp_wire::{Locator, Nid};

    #[test]
    fn monitor_events_keep_the_core_serialisation() {
        // the core's own Serialize was the stream before the protocol was typed
        let (n, l) = (Nid(0x0200_00ff_fe00_000d), Locator(0x2001_0db8_000b_0000));
        let evs = [
            Event::PeerCreated { nid: n, initiator: true, local_locator: l, remote_locator: Locator(7) },
            Event::PeerRemoved { nid: n, reason: "idle" },
            Event::NonIlnpPeer { nid: n },
            Event::PeerFallback { nid: n, reason: "no_answer", address: "2001:db8::1".parse().unwrap() },
            Event::RemoteLocatorLearned { nid: n, locator: l },
            Event::RemoteLocatorAged { nid: n, locator: l },
            Event::RemoteLocatorFailover { nid: n, from: l, to: Locator(7) },
            Event::LocalLocatorsChanged { locators: vec!["a".into()] },
            Event::LocalLocatorRetired { locator: l, quiet_ms: 9 },
            Event::LuReceived { nid: n, locators: vec!["a|1".into()] },
            Event::LuSent { nid: n, attempt: 2, locators: vec![] },
            Event::LuAcked { nid: n, rtt_us: 812, attempts: 1 },
            Event::LuFailed { nid: n, attempts: 7 },
            Event::PeerChallenge { nid: n, outcome: "sent" },
            Event::DnsPeer {
                name: "mn.lab".into(),
                nid: n,
                locators: vec!["a|10".into()],
                ttl_s: 5,
                result: "learned",
            },
            Event::Drop { reason: "bad_nonce", detail: "x -> y".into() },
        ];
        for ev in evs {
            let before = serde_json::to_string(&ev).unwrap();
            assert_eq!(monitor_event(&ev).to_line().trim_end(), before);
        }
    }
}
