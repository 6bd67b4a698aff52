//! The rate limits' metric families, and one route's handles resolved at
//! snapshot build.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use crate::metrics::register_family;

#[derive(Clone)]
pub struct LimitMetrics {
    decisions: IntCounterVec,
    charged: IntCounterVec,
    refunded: IntCounterVec,
    store_fallbacks: IntCounterVec,
    store_up: IntGaugeVec,
    store_peers: IntGaugeVec,
}

/// One route's handles: decisions by result, tokens charged and refunded.
#[derive(Clone)]
pub struct LimitRouteMetrics {
    pub allowed: IntCounter,
    pub limited: IntCounter,
    /// Reserved at admission plus what answers cost beyond their reservation.
    pub charged: IntCounter,
    /// Reserved tokens given back when answers cost less.
    pub refunded: IntCounter,
}

/// One fleet-wide route's handles on its store's health.
#[derive(Clone)]
pub struct LimitStoreMetrics {
    /// Times the route fell back to local decisions (the store failed a sync).
    pub fallbacks: IntCounter,
    /// 1 while the last sync succeeded.
    pub up: IntGauge,
    /// The sluices sharing the route's budgets, as the last sync counted them.
    pub peers: IntGauge,
}

impl LimitMetrics {
    pub(crate) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            decisions: register_family(
                registry,
                "sluice_ratelimit_decisions_total",
                "Rate limit admissions, by route, descriptor (the key's form) and result (allowed|limited).",
                &["route", "descriptor", "result"],
            )?,
            charged: register_family(
                registry,
                "sluice_ratelimit_tokens_charged_total",
                "Tokens taken from rate limit budgets: reservations at admission, plus what answers cost beyond them.",
                &["route", "descriptor"],
            )?,
            refunded: register_family(
                registry,
                "sluice_ratelimit_tokens_refunded_total",
                "Reserved tokens given back to rate limit budgets when answers cost less.",
                &["route", "descriptor"],
            )?,
            store_fallbacks: register_family(
                registry,
                "sluice_ratelimit_store_fallbacks_total",
                "Times a fleet-wide rate limit route fell back to local decisions because its store failed a sync.",
                &["route"],
            )?,
            store_up: register_family(
                registry,
                "sluice_ratelimit_store_up",
                "1 while a fleet-wide rate limit route's last sync with its store succeeded, else 0.",
                &["route"],
            )?,
            store_peers: register_family(
                registry,
                "sluice_ratelimit_store_peers",
                "Sluices sharing a fleet-wide rate limit route's budgets, as its last sync counted them.",
                &["route"],
            )?,
        })
    }

    /// The store handles of a route with `limits.store`.
    pub fn store(&self, route: &str) -> LimitStoreMetrics {
        LimitStoreMetrics {
            fallbacks: self.store_fallbacks.with_label_values(&[route]),
            up: self.store_up.with_label_values(&[route]),
            peers: self.store_peers.with_label_values(&[route]),
        }
    }

    pub fn route(&self, route: &str, descriptor: &str) -> LimitRouteMetrics {
        LimitRouteMetrics {
            allowed: self
                .decisions
                .with_label_values(&[route, descriptor, "allowed"]),
            limited: self
                .decisions
                .with_label_values(&[route, descriptor, "limited"]),
            charged: self.charged.with_label_values(&[route, descriptor]),
            refunded: self.refunded.with_label_values(&[route, descriptor]),
        }
    }
}
