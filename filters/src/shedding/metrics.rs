//! The shedding metric families, and one route's handles resolved at
//! snapshot build (one shed counter per priority, by rank).

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec, Registry};

use crate::metrics::register_family;

#[derive(Clone)]
pub struct SheddingMetrics {
    level: GaugeVec,
    shed: IntCounterVec,
}

/// One route's handles.
#[derive(Clone)]
pub struct SheddingRouteMetrics {
    /// `sluice_shedding_level{route}`.
    pub level: Gauge,
    /// `sluice_shed_requests_total{route,priority}`, by the priority's rank.
    pub shed: Vec<IntCounter>,
}

impl SheddingMetrics {
    pub(crate) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            level: register_family(
                registry,
                "sluice_shedding_level",
                "Adaptive shedding level of a route: how many of its lowest priorities are answered 503 (0.75: three quarters of the lowest).",
                &["route"],
            )?,
            shed: register_family(
                registry,
                "sluice_shed_requests_total",
                "Requests answered 503 by adaptive shedding, by route and priority.",
                &["route", "priority"],
            )?,
        })
    }

    /// The handles of `route`, whose priorities are `levels` (highest first).
    pub fn route(&self, route: &str, levels: &[String]) -> SheddingRouteMetrics {
        SheddingRouteMetrics {
            level: self.level.with_label_values(&[route]),
            shed: levels
                .iter()
                .map(|p| self.shed.with_label_values(&[route, p.as_str()]))
                .collect(),
        }
    }
}
