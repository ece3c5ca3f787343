//! Requests: `{"cmd": NAME, ...fields}`.

use ilnp_wire::{named_enum, Locator, LocatorPref, Nid};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// The group that may use the control socket besides root (socket mode 0660), for
/// the read-only requests.
pub const CONTROL_GROUP: &str = "ilnp";

/// Preference of a peer locator sent without one (lower preferred; the peer files'
/// default too).
pub const DEFAULT_PREF: u16 = 10;

named_enum! {
    #[serde_names]
    #[with_data]
    /// One request line: `{"cmd": NAME, ...fields}`, NAME written beside its variant
    /// (`Request::NAMES`, `as_str`).
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "cmd")]
    pub enum Request {
        /// identity, mode, uplinks, locators and counts → [`crate::Status`]
        Status = "status",
        /// the ILCC → `[`[`crate::IlccEntry`]`]`
        IlccShow = "ilcc_show",
        /// remove every ILCC entry → [`crate::Flushed`]
        IlccFlush = "ilcc_flush",
        /// this node's locators → `[`[`crate::LocatorInfo`]`]`
        LocatorShow = "locator_show",
        /// add (or replace) a static peer → [`crate::PeerAdded`]
        PeerAdd {
            /// for logs and tables; "" when absent
            #[serde(default)]
            name: String,
            nid: Spelled<Nid>,
            /// at least one
            #[serde(default)]
            locators: Vec<PeerLocatorArg>,
        } = "peer_add",
        /// delete a static peer → [`crate::PeerDeleted`]
        PeerDel { nid: Spelled<Nid> } = "peer_del",
        /// the static peers → `[`[`crate::PeerInfo`]`]`
        PeerShow = "peer_show",
        /// counters → [`crate::Stats`]
        Stats = "stats",
        /// `"monitoring"`, then one [`crate::Event`] per line until the client closes
        Monitor = "monitor",
        /// the load-balancing configuration and tables → [`crate::BalanceInfo`]
        PolicyShow = "policy_show",
        /// set the balancing policy of one peer (name or NID) or, without `peer`, the
        /// default: `failover`, `per-flow` or `per-packet` → [`crate::BalanceInfo`]
        PolicySet {
            #[serde(default)]
            peer: Option<String>,
            policy: ilnp_wire::Policy,
        } = "policy_set",
        /// set an uplink's balancing weight (0 = backup only) → [`crate::BalanceInfo`]
        LocatorSet { dev: String, weight: u32 } = "locator_set",
        /// the resolver proxy and the dynamic update of our L64 records → [`crate::DnsStatus`]
        DnsStatus = "dns_status",
    }
}

/// One locator of `peer_add`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerLocatorArg {
    pub l64: Spelled<Locator>,
    #[serde(default = "default_pref", deserialize_with = "pref")]
    pub pref: u16,
}

impl PeerLocatorArg {
    /// A locator argument as people type it, `L64[/PREF]` or `L64|PREF`
    /// (`ilnp_wire::LocatorPref`: `2001:0db8:000b:0000/20`, `2001:db8:b::/64/20`;
    /// `2001:db8:b::/48` is refused, not read as preference 48). The locator keeps
    /// its spelling.
    pub fn parse(arg: &str) -> Result<PeerLocatorArg, String> {
        let p = LocatorPref::parse(arg, DEFAULT_PREF).map_err(|e| e.to_string())?;
        Ok(PeerLocatorArg { l64: Spelled { value: p.loc, text: p.text }, pref: p.pref })
    }
}

fn default_pref() -> u16 {
    DEFAULT_PREF
}

/// A preference 0-65535; the error names the field and the value.
fn pref<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
    let v = u64::deserialize(d)?;
    u16::try_from(v).map_err(|_| serde::de::Error::custom(format!("pref {v} > 65535")))
}

impl Request {
    /// Whether the request changes the daemon's state (sessions, peers, policy,
    /// weights): those are root's only; the others only read, and members of group
    /// `ilnp` may send them (the daemon decides from the client's SO_PEERCRED). Every
    /// variant is listed, so a new request has to be classified.
    pub fn is_mutating(&self) -> bool {
        match self {
            Request::IlccFlush
            | Request::PeerAdd { .. }
            | Request::PeerDel { .. }
            | Request::PolicySet { .. }
            | Request::LocatorSet { .. } => true,
            Request::Status
            | Request::IlccShow
            | Request::LocatorShow
            | Request::PeerShow
            | Request::Stats
            | Request::Monitor
            | Request::PolicyShow
            | Request::DnsStatus => false,
        }
    }

    /// The request as ilnpctl spells it (`ilcc flush`, `peer add`), for messages.
    pub fn words(&self) -> String {
        self.as_str().replace('_', " ")
    }

    /// The error a mutating request from a client other than root gets (its uid
    /// named); `None`: the client may send it.
    pub fn refusal(&self, uid: u32) -> Option<String> {
        if uid == 0 || !self.is_mutating() {
            return None;
        }
        Some(format!(
            "{} needs root: it changes the daemon's state, and uid {uid} is not root (members of group {CONTROL_GROUP} may only read: status, show, stats, monitor)",
            self.words()
        ))
    }

    /// Parses one request line; the error says what was wrong, with the value.
    pub fn from_line(line: &str) -> Result<Request, RequestError> {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| RequestError(format!("bad JSON: {e}")))?;
        let cmd = match v.get("cmd") {
            None => return Err(RequestError("missing field \"cmd\"".into())),
            Some(serde_json::Value::String(c)) => c.clone(),
            Some(other) => return Err(RequestError(format!("cmd {other} is not a string"))),
        };
        if !Request::NAMES.contains(&cmd.as_str()) {
            return Err(RequestError(format!("unknown command {cmd:?} (known: {})", Request::NAMES.join(", "))));
        }
        let req: Request = serde_json::from_value(v).map_err(|e| RequestError(format!("{cmd}: {e}")))?;
        req.check().map_err(|e| RequestError(format!("{cmd}: {e}")))?;
        Ok(req)
    }

    /// What a request's fields must satisfy beyond their types, without knowing the
    /// daemon's state: `peer_add` has a locator and a unicast NID
    /// (`ilnp_wire::Nid::check_unicast`; its locators were checked as they
    /// parsed; a `policy_set`'s policy is typed, checked as it parses). `from_line`
    /// (the daemon) and ilnpctl (before it asks) both check with this.
    pub fn check(&self) -> Result<(), String> {
        if let Request::PeerAdd { nid, locators, .. } = self {
            nid.value.check_unicast().map_err(|e| format!("{} {e}", Nid::NAME))?;
            if locators.is_empty() {
                return Err("at least one locator is needed".into());
            }
        }
        Ok(())
    }

    /// The request as one line (with its newline).
    pub fn to_line(&self) -> String {
        crate::framing::line(self)
    }
}

/// A request the daemon could not accept; sent back as `{"ok": false, "error": ...}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError(pub String);

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RequestError {}

/// The JSON field a value travels in (named in parse errors).
pub trait Field: FromStr<Err = String> {
    const NAME: &'static str;
    /// The value of the field's text; the error quotes the text.
    fn parse_field(text: &str) -> Result<Self, String> {
        text.parse()
    }
}

/// Any NID that parses (`peer_del` must reach whatever is there); `peer_add`'s is
/// checked by [`Request::check`].
impl Field for Nid {
    const NAME: &'static str = "nid";
}

/// A routable /64 (`ilnp_wire::Locator::parse_unicast`): no other prefix length,
/// no multicast, link-local or ::/64 prefix.
impl Field for Locator {
    const NAME: &'static str = "l64";
    fn parse_field(text: &str) -> Result<Self, String> {
        Locator::parse_unicast(text).map_err(|e| e.to_string())
    }
}

/// A NID or locator as the client spelled it (`2001:db8:b::/64` or
/// `2001:0db8:000b:0000`), parsed on arrival: requests go out with the text the
/// user typed and are rejected, naming field and value, if it does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spelled<T> {
    pub value: T,
    pub text: String,
}

impl<T: Field> Spelled<T> {
    pub fn parse(text: &str) -> Result<Spelled<T>, String> {
        match T::parse_field(text) {
            Ok(value) => Ok(Spelled { value, text: text.to_string() }),
            Err(e) => Err(format!("{} {e}", T::NAME)),
        }
    }
}

impl<T: fmt::Display> From<T> for Spelled<T> {
    fn from(value: T) -> Spelled<T> {
        let text = value.to_string();
        Spelled { value, text }
    }
}

impl<T> Serialize for Spelled<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de, T: Field> Deserialize<'de> for Spelled<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Spelled<T>, D::Error> {
        let text = String::deserialize(d)?;
        Spelled::parse(&text).map_err(serde::de::Error::custom)
    }
}
