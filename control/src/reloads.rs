//! `sluice_config_reloads_total{source,result}`: whole configs loaded after
//! the start (the file changed on disk or on SIGHUP, `PUT /v1/config`),
//! applied or rejected. Every series is exported at 0 from the start, so
//! that `increase()` sees the first reload: the Grafana dashboard annotates
//! each one. Run-time edits (a split, a rollout step) are not reloads; they
//! count in `sluice_config_changes_total` only.

use std::sync::Arc;

use prometheus::{IntCounterVec, Registry};
use sluice_filters::register_family;

pub(crate) const METRIC: &str = "sluice_config_reloads_total";

/// The ways a whole config is loaded after the start.
const SOURCES: [&str; 3] = ["file", "sighup", "api"];

pub(crate) struct ConfigReloads(IntCounterVec);

impl ConfigReloads {
    pub(crate) fn new(registry: &Registry) -> Result<Arc<Self>, prometheus::Error> {
        let family: IntCounterVec = register_family(
            registry,
            METRIC,
            "Whole configs loaded after the start, by source (file: changed on disk, sighup, api: PUT /v1/config) and result (applied|rejected).",
            &["source", "result"],
        )?;
        for source in SOURCES {
            for result in ["applied", "rejected"] {
                family.with_label_values(&[source, result]).inc_by(0);
            }
        }
        Ok(Arc::new(ConfigReloads(family)))
    }

    /// Counts one reload from `source` and whether it was applied.
    pub(crate) fn count(&self, source: &str, applied: bool) {
        let result = if applied { "applied" } else { "rejected" };
        self.0.with_label_values(&[source, result]).inc();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use sluice_filters::Metrics;

    #[test]
    fn every_source_is_exported_at_zero_and_counts_by_result() {
        let metrics = Metrics::new().unwrap();
        let reloads = ConfigReloads::new(metrics.registry()).unwrap();
        let text = metrics.encode();
        for source in SOURCES {
            for result in ["applied", "rejected"] {
                let series = format!("{METRIC}{{result=\"{result}\",source=\"{source}\"}} 0");
                assert!(text.contains(&series), "{series} missing:\n{text}");
            }
        }
        reloads.count("file", true);
        reloads.count("file", true);
        reloads.count("api", false);
        let text = metrics.encode();
        assert!(text.contains(&format!("{METRIC}{{result=\"applied\",source=\"file\"}} 2")));
        assert!(text.contains(&format!("{METRIC}{{result=\"rejected\",source=\"api\"}} 1")));
        assert!(text.contains(&format!("{METRIC}{{result=\"applied\",source=\"api\"}} 0")));
    }
}
