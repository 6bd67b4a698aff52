//! Making a metric family and registering it, as one step: every family of
//! the proxy and the control plane is made here, so none is made and then
//! left out of the registry.

use prometheus::core::Collector;
use prometheus::{
    CounterVec, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

/// A family of counters or gauges with labels, as prometheus builds one.
pub trait LabelledFamily: Collector + Clone + Sized + 'static {
    fn build(opts: Opts, labels: &[&str]) -> Result<Self, prometheus::Error>;
}

impl LabelledFamily for IntCounterVec {
    fn build(opts: Opts, labels: &[&str]) -> Result<Self, prometheus::Error> {
        Self::new(opts, labels)
    }
}

impl LabelledFamily for CounterVec {
    fn build(opts: Opts, labels: &[&str]) -> Result<Self, prometheus::Error> {
        Self::new(opts, labels)
    }
}

impl LabelledFamily for IntGaugeVec {
    fn build(opts: Opts, labels: &[&str]) -> Result<Self, prometheus::Error> {
        Self::new(opts, labels)
    }
}

impl LabelledFamily for GaugeVec {
    fn build(opts: Opts, labels: &[&str]) -> Result<Self, prometheus::Error> {
        Self::new(opts, labels)
    }
}

fn register<C: Collector + Clone + 'static>(
    registry: &Registry,
    family: C,
) -> Result<C, prometheus::Error> {
    registry.register(Box::new(family.clone()))?;
    Ok(family)
}

/// A counter or gauge family with `labels`, registered in `registry`.
pub fn register_family<F: LabelledFamily>(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<F, prometheus::Error> {
    register(registry, F::build(Opts::new(name, help), labels)?)
}

/// A histogram family with `labels`, registered in `registry`.
pub fn register_histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    buckets: &[f64],
    labels: &[&str],
) -> Result<HistogramVec, prometheus::Error> {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    register(registry, HistogramVec::new(opts, labels)?)
}

/// One gauge without labels, registered in `registry`.
pub fn register_gauge(
    registry: &Registry,
    name: &str,
    help: &str,
) -> Result<IntGauge, prometheus::Error> {
    register(registry, IntGauge::new(name, help)?)
}
