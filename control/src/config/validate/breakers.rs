//! `clusters[].circuit_breakers`: Envoy's 1024 for what is not set, at
//! least 1, and none on a cache cluster (tcp listeners do not read them).

use sluice_filters::{Breaker, BreakerLimits};

use super::super::raw::{RawCluster, RawClusterKind};
use super::errors::Errors;

pub(super) fn limits(at: &str, cluster: &RawCluster, errs: &mut Errors) -> BreakerLimits {
    let mut out = BreakerLimits::default();
    let Some(raw) = &cluster.circuit_breakers else {
        return out;
    };
    let at = format!("{at}.circuit_breakers");
    if cluster.kind == RawClusterKind::Cache {
        errs.push(
            at,
            "not allowed on a cache cluster (tcp listeners do not apply them)",
        );
        return out;
    }
    for (breaker, value, slot) in [
        (Breaker::Requests, raw.max_requests, &mut out.max_requests),
        (Breaker::Pending, raw.max_pending, &mut out.max_pending),
    ] {
        match value {
            Some(0) => errs.push(format!("{at}.{}", breaker.name()), "must be at least 1"),
            Some(n) => *slot = usize::try_from(n).unwrap_or(usize::MAX),
            None => {}
        }
    }
    out
}
