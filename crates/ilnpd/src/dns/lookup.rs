//! A name's ILNP records, asked of the upstream: `ilnp_dns::lookup::resolve` says
//! which questions (NID, L64 and L32 at once, then LP and the LP targets' L64), and
//! decides from the answers; this asks them, all of a step at once.

use super::upstream::Upstream;
use hickory_proto::rr::{Name, RecordType};
use ilnp_dns::lookup::{resolve, Answers, Step};

pub use ilnp_dns::lookup::{Bad, Found};

/// Resolves `name`'s ILNP records. Ok(None): not an ILNP name (no NID).
pub async fn lookup(up: &Upstream, name: &Name) -> Result<Option<Found>, Bad> {
    let mut answers = Answers::default();
    loop {
        match resolve(name, &answers) {
            Step::Done(r) => {
                if let Ok(Some(Found { l32_ignored: Some(e), .. })) = &r {
                    tracing::debug!("{e}");
                }
                return r;
            }
            Step::Ask(qs) => {
                let asked = qs.iter().map(|q| up.query(&q.name, RecordType::Unknown(q.rtype)));
                let got = futures::future::join_all(asked).await;
                for (q, a) in qs.into_iter().zip(got) {
                    answers.insert(q, a.map_err(|e| e.to_string()));
                }
            }
        }
    }
}
