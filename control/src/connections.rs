//! `sluice_upstream_connections{cluster}`: the upstream connections each
//! cluster of the live config has open now (its `max_connections` count),
//! read from the clusters' breakers at scrape time. The store hands over
//! every snapshot it swaps in.

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts, Registry};
use sluice_filters::{Breaker, Breakers};

use crate::snapshot::Snapshot;

pub(crate) const METRIC: &str = "sluice_upstream_connections";

/// The live clusters' counts, by name.
pub(crate) struct OpenConnections {
    clusters: Mutex<Vec<(String, Arc<Breakers>)>>,
    gauge: IntGaugeVec,
}

impl OpenConnections {
    pub(crate) fn new(registry: &Registry) -> Result<Arc<Self>, prometheus::Error> {
        let gauge = IntGaugeVec::new(
            Opts::new(
                METRIC,
                "Upstream connections each cluster has open now (pooled or in use), under its circuit_breakers.max_connections; read at scrape time.",
            ),
            &["cluster"],
        )?;
        let open = Arc::new(OpenConnections {
            clusters: Mutex::new(Vec::new()),
            gauge,
        });
        registry.register(Box::new(Scrape(open.clone())))?;
        Ok(open)
    }

    /// Reports the clusters of `snapshot` from now on.
    pub(crate) fn watch(&self, snapshot: &Snapshot) {
        *self.clusters.lock() = snapshot
            .clusters
            .iter()
            .map(|c| (c.config.name.clone(), c.breakers.clone()))
            .collect();
    }
}

/// The registry's view: reads every cluster's count when scraped.
struct Scrape(Arc<OpenConnections>);

impl Collector for Scrape {
    fn desc(&self) -> Vec<&Desc> {
        self.0.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // A cluster taken out of the config is no longer reported.
        self.0.gauge.reset();
        for (name, breakers) in self.0.clusters.lock().iter() {
            let open = breakers.taken(Breaker::Connections);
            self.0
                .gauge
                .with_label_values(&[name.as_str()])
                .set(i64::try_from(open).unwrap_or(i64::MAX));
        }
        self.0.gauge.collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::shared::Shared;
    use crate::store::SnapshotStore;

    fn gauge(shared: &Shared) -> Vec<(String, f64)> {
        shared
            .metrics
            .registry()
            .gather()
            .iter()
            .filter(|f| f.name() == METRIC)
            .flat_map(|f| f.get_metric().iter())
            .map(|m| {
                (
                    m.get_label()[0].value().to_string(),
                    m.get_gauge().get_value(),
                )
            })
            .collect()
    }

    const B: &str = "  - { name: b, kind: llm, endpoints: [127.0.0.1:18002] }\n";

    fn yaml(b: &str) -> String {
        format!(
            "listeners:\n  - {{ name: public, listen: 127.0.0.1:18080, protocol: http }}\n\
             clusters:\n  - {{ name: a, kind: llm, endpoints: [127.0.0.1:18001] }}\n{b}\
             routes:\n  - {{ name: r, listener: public, split: {{ a: 100 }} }}\n"
        )
    }

    #[test]
    fn each_live_cluster_reports_its_open_connections_at_scrape_time() {
        let shared = Shared::new().unwrap();
        let store = SnapshotStore::new(Config::from_yaml(&yaml(B)).unwrap(), &shared);
        assert_eq!(gauge(&shared), [("a".into(), 0.0), ("b".into(), 0.0)]);
        let a = store.load().clusters[0].breakers.clone();
        assert!(a.open_connection(4) && a.open_connection(4));
        assert_eq!(gauge(&shared), [("a".into(), 2.0), ("b".into(), 0.0)]);
        // A reload keeps the count; a cluster taken out is no longer shown.
        let raw = Config::from_yaml(&yaml("")).unwrap().raw;
        store.replace("test", raw).unwrap();
        a.close_connection();
        assert_eq!(gauge(&shared), [("a".into(), 1.0)]);
    }
}
