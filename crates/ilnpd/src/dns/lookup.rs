//! A name's ILNP records (RFC 6742): NID and L64 asked at once, LP followed
//! (§2.4) to the names holding the L64 records, with a loop check and a depth
//! limit. The RDATA is `ilnp_wire::rdata`'s; hickory only frames the messages.
//! Any bad record makes the whole answer bad (nothing from it is used).

use super::upstream::{Upstream, UpstreamError};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use ilnp_core::PeerLocator;
use ilnp_wire::rdata::{Rdata, TYPE_L32, TYPE_L64, TYPE_LP, TYPE_NID};
use ilnp_wire::{Locator, Nid};

/// LP records followed one after another at most this many times.
pub const LP_MAX_DEPTH: usize = 4;
/// LP records of one name followed at most (the best by preference).
pub const LP_MAX_TARGETS: usize = 4;

/// What a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// owner of the NID records (the end of a CNAME chain)
    pub owner: Name,
    pub nid: Nid,
    pub locators: Vec<PeerLocator>,
    /// smallest TTL of the records used
    pub ttl: u32,
    /// CNAME records that led to `owner`, to answer with
    pub cnames: Vec<Record>,
}

/// Why a name's ILNP records were not used: the name, the record and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad {
    pub name: String,
    pub record: &'static str,
    pub why: String,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} record: {}", self.name, self.record, self.why)
    }
}

fn bad(name: &Name, record: &'static str, why: impl Into<String>) -> Bad {
    Bad { name: name.to_string(), record, why: why.into() }
}

/// The ILNP records of `rtype` in an answer, parsed; (records, smallest TTL).
/// Ok(empty) for NXDOMAIN / no data.
pub fn ilnp_records(name: &Name, record: &'static str, m: &Message) -> Result<(Vec<(Rdata, Name)>, u32), Bad> {
    let code = match record {
        "NID" => TYPE_NID,
        "L64" => TYPE_L64,
        "L32" => TYPE_L32,
        _ => TYPE_LP,
    };
    match m.response_code() {
        ResponseCode::NoError | ResponseCode::NXDomain => {}
        rc => return Err(bad(name, record, format!("the server answered {rc}"))),
    }
    if m.truncated() {
        return Err(bad(name, record, "answer truncated"));
    }
    let mut out = Vec::new();
    let mut ttl = u32::MAX;
    for r in m.answers() {
        if u16::from(r.record_type()) != code {
            continue;
        }
        let raw: &[u8] = match r.data() {
            RData::Unknown { rdata, .. } => rdata.anything(),
            RData::Update0(_) => &[],
            other => return Err(bad(name, record, format!("unexpected data {other}"))),
        };
        let rd = Rdata::parse(code, raw)
            .map_err(|e| bad(name, record, format!("malformed RDATA ({} bytes): {e}", raw.len())))?;
        if let Rdata::Nid { nid, .. } = &rd {
            if nid.is_group() || nid.0 == 0 {
                return Err(bad(name, record, format!("{nid} is not a unicast NID")));
            }
        }
        ttl = ttl.min(r.ttl());
        out.push((rd, r.name().clone()));
    }
    Ok((out, ttl))
}

/// L64 records → locators, and L32 records → v4 paths to the default port
/// (`ilnp_wire::v4path`: ILNPv6 in UDP/IPv4, docs/architecture.md § IPv4 and NAT);
/// appends to `locs`, lowers `ttl`.
fn add_l64(recs: &[(Rdata, Name)], rec_ttl: u32, locs: &mut Vec<PeerLocator>, ttl: &mut u32) {
    for (r, _) in recs {
        let (loc, pref) = match r {
            Rdata::L64 { preference, locator } => (*locator, *preference),
            Rdata::L32 { preference, locator } => {
                (Locator::v4_path(*locator, ilnp_wire::v4path::DEFAULT_PORT), *preference)
            }
            _ => continue,
        };
        if !locs.iter().any(|l| l.loc == loc) {
            locs.push(PeerLocator { loc, pref });
        }
    }
    if !recs.is_empty() {
        *ttl = (*ttl).min(rec_ttl);
    }
}

/// Resolves `name`'s ILNP records. Ok(None): not an ILNP name (no NID).
pub async fn lookup(up: &Upstream, name: &Name) -> Result<Option<Found>, Bad> {
    let ask = |rtype: u16, record: &'static str| async move {
        up.query(name, RecordType::Unknown(rtype)).await.map_err(|e: UpstreamError| bad(name, record, e.to_string()))
    };
    let (nid_m, l64_m, l32_m) = tokio::join!(ask(TYPE_NID, "NID"), ask(TYPE_L64, "L64"), ask(TYPE_L32, "L32"));
    let nid_m = nid_m?;
    let (nids, nid_ttl) = ilnp_records(name, "NID", &nid_m)?;
    let Some((Rdata::Nid { nid, .. }, owner)) =
        nids.iter().min_by_key(|(r, _)| if let Rdata::Nid { preference, .. } = r { *preference } else { u16::MAX })
    else {
        return Ok(None);
    };
    let cnames: Vec<Record> =
        nid_m.answers().iter().filter(|r| r.record_type() == RecordType::CNAME).cloned().collect();
    let mut ttl = nid_ttl;
    for c in &cnames {
        ttl = ttl.min(c.ttl());
    }
    let mut locs = Vec::new();
    let (l64s, l64_ttl) = ilnp_records(name, "L64", &l64_m?)?;
    add_l64(&l64s, l64_ttl, &mut locs, &mut ttl);
    // L32s are the IPv4 paths beside the L64s (a server that has none answers NoError
    // with no records; one that fails the query costs the name nothing)
    match l32_m.and_then(|m| ilnp_records(name, "L32", &m)) {
        Ok((l32s, l32_ttl)) => add_l64(&l32s, l32_ttl, &mut locs, &mut ttl),
        Err(e) => tracing::debug!("{e}"),
    }
    if locs.iter().all(|l| l.loc.is_v4_path()) {
        let mut path = vec![owner.clone()];
        follow_lp(up, owner, &mut path, &mut locs, &mut ttl).await?;
    }
    if locs.is_empty() {
        return Err(bad(name, "NID", format!("NID {nid} but no L64 or LP record leading to one")));
    }
    Ok(Some(Found { owner: owner.clone(), nid: *nid, locators: locs, ttl, cnames }))
}

/// Follows the LP records of `name` (the last element of `path`): each target's L64
/// records, or its own LP records one level deeper.
async fn follow_lp(
    up: &Upstream,
    name: &Name,
    path: &mut Vec<Name>,
    locs: &mut Vec<PeerLocator>,
    ttl: &mut u32,
) -> Result<(), Bad> {
    let m = up.query(name, RecordType::Unknown(TYPE_LP)).await.map_err(|e| bad(name, "LP", e.to_string()))?;
    let (mut lps, lp_ttl) = ilnp_records(name, "LP", &m)?;
    lps.sort_by_key(|(r, _)| if let Rdata::Lp { preference, .. } = r { *preference } else { u16::MAX });
    for (r, _) in lps.iter().take(LP_MAX_TARGETS) {
        let Rdata::Lp { fqdn, .. } = r else { continue };
        let target = Name::from_ascii(format!("{fqdn}.")).map_err(|e| bad(name, "LP", format!("{fqdn:?}: {e}")))?;
        if path.iter().any(|p| p.eq_case(&target) || p == &target) {
            let chain: Vec<String> = path.iter().map(|p| p.to_string()).collect();
            return Err(bad(name, "LP", format!("loop: {} -> {target}", chain.join(" -> "))));
        }
        if path.len() > LP_MAX_DEPTH {
            return Err(bad(name, "LP", format!("more than {LP_MAX_DEPTH} LP records in a chain")));
        }
        *ttl = (*ttl).min(lp_ttl);
        let lm =
            up.query(&target, RecordType::Unknown(TYPE_L64)).await.map_err(|e| bad(&target, "L64", e.to_string()))?;
        let (l64s, l64_ttl) = ilnp_records(&target, "L64", &lm)?;
        path.push(target.clone());
        if l64s.is_empty() {
            Box::pin(follow_lp(up, &target, path, locs, ttl)).await?;
        } else {
            add_l64(&l64s, l64_ttl, locs, ttl);
        }
        path.pop();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, Query};
    use hickory_proto::rr::rdata::NULL;
    use ilnp_wire::Locator;

    fn answer(name: &str, rtype: u16, rdatas: &[Vec<u8>], rc: ResponseCode) -> Message {
        let n = Name::from_ascii(name).unwrap();
        let mut m = Message::new();
        m.set_message_type(MessageType::Response).set_response_code(rc);
        m.add_query(Query::query(n.clone(), RecordType::Unknown(rtype)));
        for rd in rdatas {
            // NULL::with debug-asserts non-empty data: an empty RDATA is NULL::new()
            let rdata = if rd.is_empty() { NULL::new() } else { NULL::with(rd.clone()) };
            let data = RData::Unknown { code: RecordType::Unknown(rtype), rdata };
            m.add_answer(Record::from_rdata(n.clone(), 30, data));
        }
        // through the wire, as the proxy gets it
        Message::from_vec(&m.to_vec().unwrap()).unwrap()
    }

    fn emit(r: Rdata) -> Vec<u8> {
        let mut v = Vec::new();
        r.emit(&mut v).unwrap();
        v
    }

    #[test]
    fn records_parse_with_the_wire_codec() {
        let n = Name::from_ascii("mn.lab.example.").unwrap();
        let l = emit(Rdata::L64 { preference: 10, locator: Locator(0x2001_0db8_000b_0000) });
        let (recs, ttl) =
            ilnp_records(&n, "L64", &answer("mn.lab.example.", TYPE_L64, &[l], ResponseCode::NoError)).unwrap();
        assert_eq!(ttl, 30);
        assert_eq!(recs[0].0, Rdata::L64 { preference: 10, locator: Locator(0x2001_0db8_000b_0000) });
        let nx = answer("mn.lab.example.", TYPE_NID, &[], ResponseCode::NXDomain);
        assert!(ilnp_records(&n, "NID", &nx).unwrap().0.is_empty());
    }

    #[test]
    fn l32_records_are_v4_paths_to_the_default_port() {
        let n = Name::from_ascii("cn.lab.example.").unwrap();
        let l32 = emit(Rdata::L32 { preference: 30, locator: "192.0.2.10".parse().unwrap() });
        let l64 = emit(Rdata::L64 { preference: 10, locator: Locator(0x2001_0db8_000a_0000) });
        let (mut locs, mut ttl) = (Vec::new(), u32::MAX);
        let (recs, t) =
            ilnp_records(&n, "L64", &answer("cn.lab.example.", TYPE_L64, &[l64], ResponseCode::NoError)).unwrap();
        add_l64(&recs, t, &mut locs, &mut ttl);
        let (recs, t) =
            ilnp_records(&n, "L32", &answer("cn.lab.example.", TYPE_L32, &[l32], ResponseCode::NoError)).unwrap();
        add_l64(&recs, t, &mut locs, &mut ttl);
        let want = [(Locator(0x2001_0db8_000a_0000), 10), ("v4:192.0.2.10:6740".parse::<Locator>().unwrap(), 30)];
        assert_eq!(locs.iter().map(|l| (l.loc, l.pref)).collect::<Vec<_>>(), want);
    }

    #[test]
    fn bad_records_name_the_name_and_the_record() {
        let n = Name::from_ascii("mn.lab.example.").unwrap();
        let short = answer("mn.lab.example.", TYPE_NID, &[vec![0, 10, 1, 2, 3]], ResponseCode::NoError);
        let e = ilnp_records(&n, "NID", &short).unwrap_err();
        assert_eq!((e.name.as_str(), e.record), ("mn.lab.example.", "NID"));
        assert!(e.to_string().contains("malformed RDATA (5 bytes)"), "{e}");
        let empty = answer("mn.lab.example.", TYPE_L64, &[vec![]], ResponseCode::NoError);
        assert!(ilnp_records(&n, "L64", &empty).unwrap_err().why.contains("malformed"));
        let group = answer("mn.lab.example.", TYPE_NID, &[vec![0, 10, 1, 0, 0, 0, 0, 0, 0, 1]], ResponseCode::NoError);
        assert!(ilnp_records(&n, "NID", &group).unwrap_err().why.contains("not a unicast NID"));
        let sf = answer("mn.lab.example.", TYPE_NID, &[], ResponseCode::ServFail);
        let e = ilnp_records(&n, "NID", &sf).unwrap_err();
        assert!(e.to_string().contains("mn.lab.example. NID record: the server answered"), "{e}");
        let lp = answer("mn.lab.example.", TYPE_LP, &[vec![0, 10, 0xc0, 0x0c]], ResponseCode::NoError);
        assert!(ilnp_records(&n, "LP", &lp).is_err(), "a compressed LP target is malformed (RFC 6742 §2.4)");
    }
}
