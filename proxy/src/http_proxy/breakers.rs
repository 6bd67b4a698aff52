//! The cluster's circuit breakers on the request's path: a place among the
//! cluster's `max_requests` once the cluster is chosen, held to the
//! request's end, and a place among its `max_pending` from the pick of an
//! endpoint until the connection is made or failed. A request that finds a
//! breaker open is answered 503 `overflow` with `retry-after`. A retry (of a
//! request whose reused connection failed) is made only within the
//! cluster's `retry_budget`; past it the request fails as it would without
//! the retry.

use pingora::prelude::*;
use sluice_filters::{Breaker, Metrics};

use super::RequestCtx;

/// The error `upstream_peer` returns when `max_pending` is reached, and
/// the cluster's connector past `max_connections`; `errors::classify` reads
/// it as `Failure::Overflow`.
pub(crate) const OVERFLOW: &str = "overflow";

/// Takes a place among the cluster's requests in flight; false (counted)
/// when the breaker is open.
pub(super) fn enter_request(ctx: &mut RequestCtx, metrics: &Metrics) -> bool {
    let Some(cluster) = ctx.cluster() else {
        return true;
    };
    let max = cluster.config.circuit_breakers.max_requests;
    match cluster.breakers.try_enter(Breaker::Requests, max) {
        Some(slot) => {
            ctx.request_slot = Some(slot);
            true
        }
        None => {
            count(ctx, Breaker::Requests, metrics);
            false
        }
    }
}

/// Takes a place among the cluster's requests waiting for a connection.
pub(super) fn enter_pending(ctx: &mut RequestCtx, metrics: &Metrics) -> Result<()> {
    let Some(cluster) = ctx.cluster() else {
        return Ok(());
    };
    let max = cluster.config.circuit_breakers.max_pending;
    match cluster.breakers.try_enter(Breaker::Pending, max) {
        Some(slot) => {
            ctx.pending_slot = Some(slot);
            Ok(())
        }
        None => {
            count(ctx, Breaker::Pending, metrics);
            Error::e_explain(ErrorType::Custom(OVERFLOW), "max_pending reached")
        }
    }
}

/// Whether a retry may be made: the request already holds a place among
/// the cluster's retries in flight, or takes one within the budget (a share
/// of its requests in flight). Counted when not.
pub(super) fn may_retry(ctx: &mut RequestCtx, metrics: &Metrics) -> bool {
    if ctx.retry_slot.is_some() {
        return true;
    }
    let Some(cluster) = ctx.cluster() else {
        return true;
    };
    let in_flight = cluster.breakers.taken(Breaker::Requests);
    let max = cluster.config.retry_budget.allowed(in_flight);
    match cluster.breakers.try_enter(Breaker::Retries, max) {
        Some(slot) => {
            ctx.retry_slot = Some(slot);
            true
        }
        None => {
            count(ctx, Breaker::Retries, metrics);
            false
        }
    }
}

/// The connection is made, or failed: the request no longer waits for one.
pub(super) fn leave_pending(ctx: &mut RequestCtx) {
    ctx.pending_slot = None;
}

fn count(ctx: &RequestCtx, breaker: Breaker, metrics: &Metrics) {
    let cluster = ctx.cluster().map_or("", |c| c.config.name.as_str());
    metrics
        .breaker_overflow
        .with_label_values(&[cluster, breaker.name()])
        .inc();
}
