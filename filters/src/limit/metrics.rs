//! The rate limits' metric families, and one route's handles resolved at
//! snapshot build.

use prometheus::{IntCounter, IntCounterVec, Registry};

use crate::metrics::register_family;

#[derive(Clone)]
pub struct LimitMetrics {
    decisions: IntCounterVec,
    charged: IntCounterVec,
    refunded: IntCounterVec,
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
        })
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
