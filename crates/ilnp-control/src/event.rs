//! The monitor stream: after `{"ok": true, "data": "monitoring"}`, one event
//! object per line, `{"event": NAME, ...fields}` (the tag first, then the fields in
//! the order below). NIDs and locators are `ilnp_wire::Nid` / `Locator`, their
//! display text on the wire, as in replies.

use ilnp_wire::{Locator, Nid};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// a session (ILCC entry) began
    PeerCreated {
        nid: Nid,
        initiator: bool,
        local_locator: Locator,
        remote_locator: Locator,
    },
    /// an ILCC entry went away (`reason`: idle, flushed, evicted, ...)
    PeerRemoved {
        nid: Nid,
        reason: String,
    },
    /// the peer answered our nonce with a Parameter Problem (RFC 6744 §6)
    NonIlnpPeer {
        nid: Nid,
    },
    /// the peer does not speak ILNPv6: from now on plain IPv6 to `address` for its
    /// identifier address (`reason`: `parameter_problem` or `no_answer`)
    PeerFallback {
        nid: Nid,
        reason: String,
        address: String,
    },
    /// a packet with the correct nonce came from a new locator of the peer
    RemoteLocatorLearned {
        nid: Nid,
        locator: Locator,
    },
    /// the peer's active locator `from` drew Destination Unreachables: the session
    /// moved to `to`, which had shown the peer's nonce more recently
    RemoteLocatorFailover {
        nid: Nid,
        from: Locator,
        to: Locator,
    },
    /// a peer's locator outlived its advertised lifetime (kept, not preferred)
    RemoteLocatorAged {
        nid: Nid,
        locator: Locator,
    },
    /// our locator set changed: `L64(State)` each
    LocalLocatorsChanged {
        locators: Vec<String>,
    },
    /// soft handoff: a non-preferred locator went quiet and its RA stopped
    LocalLocatorRetired {
        locator: Locator,
        quiet_ms: u64,
    },
    /// a Locator Update arrived: `L64|PREF` each
    LuReceived {
        nid: Nid,
        locators: Vec<String>,
    },
    /// we sent a Locator Update: `L64|PREF` each
    LuSent {
        nid: Nid,
        attempt: u32,
        locators: Vec<String>,
    },
    LuAcked {
        nid: Nid,
        rtt_us: u64,
        attempts: u32,
    },
    LuFailed {
        nid: Nid,
        attempts: u32,
    },
    /// a known NID showed a new nonce: its old locators were challenged (`outcome`:
    /// sent; answered = the new nonce was forged; answered with a new nonce = the peer
    /// restarted; unanswered = the session kept, the new nonce refused)
    PeerChallenge {
        nid: Nid,
        outcome: String,
    },
    /// a correspondent's v4 path (UDP/IPv4, `locator` = `v4:ADDR:PORT`) seen behind a
    /// NAT at `via`, challenged after a rebinding, rebound, or kept (`outcome`)
    V4Path {
        nid: Nid,
        locator: Locator,
        via: String,
        outcome: String,
    },
    /// the resolver proxy found a name's NID + locator records (`L64|PREF` each);
    /// `result`: learned, session_kept, static_kept, own_nid, no_locator
    DnsPeer {
        name: String,
        nid: Nid,
        locators: Vec<String>,
        ttl_s: u32,
        result: String,
    },
    /// a packet was dropped (`reason` as in `stats`)
    Drop {
        reason: String,
        detail: String,
    },
    /// this client read too slowly: `missed` events were not sent to it
    Lagged {
        missed: u64,
    },
}

impl Event {
    /// The event as one line (with its newline).
    pub fn to_line(&self) -> String {
        crate::framing::line(self)
    }

    /// Parses one monitor line.
    pub fn from_line(line: &str) -> Result<Event, serde_json::Error> {
        serde_json::from_str(line)
    }
}
