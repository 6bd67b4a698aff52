//! `sluice_faults_injected_total{experiment,kind}` and `sluice_faults_active`.

use prometheus::{IntCounterVec, IntGauge, Registry};

use crate::metrics::{register_family, register_gauge};

/// The fault families. Counter handles are resolved per experiment when a
/// snapshot is built; the gauge is set by the control plane.
#[derive(Clone)]
pub struct FaultMetrics {
    pub injected: IntCounterVec,
    /// Experiments that may fire now: not expired, not halted.
    pub active: IntGauge,
}

impl FaultMetrics {
    pub(crate) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            injected: register_family(
                registry,
                "sluice_faults_injected_total",
                "Faults injected, by experiment and kind of action.",
                &["experiment", "kind"],
            )?,
            active: register_gauge(
                registry,
                "sluice_faults_active",
                "Fault experiments that may fire now (added, not expired, not halted).",
            )?,
        })
    }
}
