//! Static peer database records: correspondents the initiator can reach before DNS
//! support exists. The core takes `PeerRecord`s; the files they come from are
//! ilnpd's configuration (`ilnpd::config::peers`).

use crate::event::ser_display;
use crate::{Locator, Nid};
use serde::Serialize;

/// One correspondent: its NID and locators with preferences (lower preferred).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeerRecord {
    pub name: String,
    #[serde(serialize_with = "ser_display")]
    pub nid: Nid,
    pub locators: Vec<PeerLocator>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PeerLocator {
    #[serde(rename = "l64", serialize_with = "ser_display")]
    pub loc: Locator,
    pub pref: u16,
}
