//! `clusters[].circuit_breakers` and `retry_budget`: Envoy's defaults for
//! what is not set, at least 1 request, a share within 0..=100, and none on
//! a cache cluster (tcp listeners do not read them).

use sluice_filters::{Breaker, BreakerLimits, RetryBudget, DEFAULT_RETRY_BUDGET};

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
        (
            Breaker::Connections,
            raw.max_connections,
            &mut out.max_connections,
        ),
    ] {
        match value {
            Some(0) => errs.push(format!("{at}.{}", breaker.name()), "must be at least 1"),
            Some(n) => *slot = usize::try_from(n).unwrap_or(usize::MAX),
            None => {}
        }
    }
    out
}

pub(super) fn retry_budget(at: &str, cluster: &RawCluster, errs: &mut Errors) -> RetryBudget {
    let mut out = DEFAULT_RETRY_BUDGET;
    let Some(raw) = &cluster.retry_budget else {
        return out;
    };
    let at = format!("{at}.retry_budget");
    if cluster.kind == RawClusterKind::Cache {
        errs.push(
            at,
            "not allowed on a cache cluster (tcp listeners do not retry)",
        );
        return out;
    }
    if let Some(p) = errs.percent(format!("{at}.percent"), raw.percent.as_ref()) {
        out.percent = p;
    }
    if let Some(n) = raw.min_concurrent {
        out.min_concurrent = usize::try_from(n).unwrap_or(usize::MAX);
    }
    out
}
