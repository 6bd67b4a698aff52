//! Load traffic on the request path: the `x-sluice-load` mark of a trusted
//! peer labels the request with its run; any other peer's mark (or a value
//! that is not a run id) is removed before the request goes anywhere, and
//! counted, so that no client can hide its requests from the rollout gates.

use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use sluice_filters::{
    classify_load, LoadMark, Metrics, KVCACHE_RATIO_HEADER, LOAD_HEADER, SERVED_CLUSTER_HEADER,
    SERVED_LINEAGE_HEADER, SERVED_VERSION_HEADER,
};

use super::RequestCtx;

/// Decides on the request's mark, first thing in `request_filter`: before
/// the mirror or a faulted stream copies the headers.
pub(super) fn on_request(session: &mut Session, ctx: &mut RequestCtx, metrics: &Metrics) {
    let header = session.req_header().headers.get(LOAD_HEADER);
    let Some(value) = header else { return };
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip());
    let trusted = &ctx.snapshot.config.load.trusted_peers;
    match classify_load(peer, trusted, Some(value.as_bytes())) {
        LoadMark::Absent => {}
        LoadMark::Load(run) => ctx.load_run = Some(run.to_owned()),
        LoadMark::Strip(reason) => {
            metrics.load_stripped.inc(reason);
            // Every copy of the header, not only the first.
            session.req_header_mut().remove_header(LOAD_HEADER);
        }
    }
}

/// On the answer to a labelled request: which cluster and version served
/// it, for the run's lineage, and the serving endpoint's KV-cache ratio
/// when the scrape has one, so that the run records it per request. Other
/// clients' answers are left as they were.
pub(super) fn on_response(resp: &mut ResponseHeader, ctx: &RequestCtx) -> pingora::Result<()> {
    if ctx.load_run.is_none() {
        return Ok(());
    }
    if let Some(cluster) = ctx.cluster() {
        resp.insert_header(SERVED_CLUSTER_HEADER, cluster.config.name.as_str())?;
        resp.insert_header(SERVED_VERSION_HEADER, cluster.config.version.as_str())?;
        resp.insert_header(SERVED_LINEAGE_HEADER, cluster.lineage_id.as_str())?;
    }
    if let Some(ratio) = ctx.kvcache_ratio {
        resp.insert_header(KVCACHE_RATIO_HEADER, ratio.to_string())?;
    }
    Ok(())
}
