//! The `sluice_upstream_*` metric families and how one scrape's result
//! sets or removes their series.

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Registry};
use sluice_filters::register_family;

use super::parse::EndpointLoad;

pub(super) struct Families {
    pub running: GaugeVec,
    pub waiting: GaugeVec,
    pub kv_cache_usage: GaugeVec,
    pub up: IntGaugeVec,
    pub errors: IntCounterVec,
}

const LABELS: [&str; 2] = ["cluster", "endpoint"];
/// Requests queued in a model server: what the `upstream_queue_max` gate's
/// PromQL reads.
pub(crate) const WAITING_METRIC: &str = "sluice_upstream_requests_waiting";

impl Families {
    pub(super) fn new(registry: &Registry) -> Result<Families, prometheus::Error> {
        let gauge = |name: &str, help: &str| register_family(registry, name, help, &LABELS);
        Ok(Families {
            running: gauge(
                "sluice_upstream_requests_running",
                "Requests the model server is running (vLLM num_requests_running, llama.cpp requests_processing).",
            )?,
            waiting: gauge(
                WAITING_METRIC,
                "Requests queued in the model server (vLLM num_requests_waiting, llama.cpp requests_deferred).",
            )?,
            kv_cache_usage: gauge(
                "sluice_upstream_kv_cache_usage_ratio",
                "KV-cache usage of the model server (0..1).",
            )?,
            up: register_family(
                registry,
                "sluice_upstream_up",
                "1 when the last scrape of the model server's metrics succeeded, else 0.",
                &LABELS,
            )?,
            errors: register_family(
                registry,
                "sluice_upstream_scrape_errors_total",
                "Scrapes of the model server's metrics that failed.",
                &LABELS,
            )?,
        })
    }

    pub(super) fn set_load(&self, labels: &[&str; 2], load: Option<&EndpointLoad>) {
        let each = [
            (&self.running, load.and_then(|l| l.running)),
            (&self.waiting, load.and_then(|l| l.waiting)),
            (&self.kv_cache_usage, load.and_then(|l| l.kv_cache_usage)),
        ];
        for (family, value) in each {
            match value {
                Some(v) => family.with_label_values(labels).set(v),
                None => {
                    let _ = family.remove_label_values(labels);
                }
            }
        }
    }

    pub(super) fn remove(&self, labels: &[&str; 2]) {
        self.set_load(labels, None);
        let _ = self.up.remove_label_values(labels);
        let _ = self.errors.remove_label_values(labels);
    }
}
