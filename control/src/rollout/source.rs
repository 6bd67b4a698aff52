//! Where a rollout's gates are read: [`ObservationSource`], with this
//! instance's stats windows and observers ([`LocalSource`], the default)
//! and a Prometheus that scrapes the whole fleet ([`PrometheusSource`],
//! `source: {prometheus: ...}`). Gathering is async and runs outside the
//! rollout's lock, since a query may take up to its timeout; the policy
//! then judges what was gathered.

mod prom;

use std::collections::BTreeMap;

use async_trait::async_trait;

pub(crate) use prom::PrometheusSource;

use super::controller::Env;
use super::gates::{measures, Figures, Observation};
use crate::config::{Config, RolloutConfig, RolloutSource};
use crate::mirror::ShadowReading;
use crate::observers::Observers;
use crate::stats::{Measure, WindowView};

/// What the gates read besides the stats windows: the observers in a
/// running sluice, set values in tests.
pub trait Signals: Send + Sync {
    /// Percent of memory used on the fullest GPU.
    fn gpu_memory_percent(&self) -> Option<f64>;
    /// Requests waiting at `cluster`'s model servers.
    fn upstream_waiting(&self, cluster: &str) -> Option<f64>;
}

impl Signals for Observers {
    fn gpu_memory_percent(&self) -> Option<f64> {
        self.gpu.as_ref()?.memory_used_percent_max()
    }

    fn upstream_waiting(&self, cluster: &str) -> Option<f64> {
        self.upstreams.as_ref()?.latest(cluster)?.waiting
    }
}

/// What one evaluation's gates are judged on, owned.
// One per evaluation, moved once into `tick`: boxing the windows would
// only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Gathered {
    Windows {
        canary: WindowView,
        stable: WindowView,
        gpu_memory_percent: Option<f64>,
        upstream_waiting: Option<f64>,
        shadow: Option<ShadowReading>,
    },
    Figures {
        figures: Figures,
        /// Queries that failed, by gate name (or `requests`): their gates
        /// are not judged.
        errors: BTreeMap<String, String>,
    },
}

impl Gathered {
    pub(super) fn observation(&self) -> Observation<'_> {
        match self {
            Gathered::Windows {
                canary,
                stable,
                gpu_memory_percent,
                upstream_waiting,
                shadow,
            } => Observation::Windows {
                canary,
                stable,
                gpu_memory_percent: *gpu_memory_percent,
                upstream_waiting: *upstream_waiting,
                shadow: *shadow,
                // The controller adds it: it depends on the rollout's step.
                coverage: None,
            },
            Gathered::Figures { figures, .. } => Observation::Figures(figures),
        }
    }

    /// The failed queries; empty for local windows.
    pub(super) fn errors(&self) -> BTreeMap<String, String> {
        match self {
            Gathered::Windows { .. } => BTreeMap::new(),
            Gathered::Figures { errors, .. } => errors.clone(),
        }
    }
}

#[async_trait]
pub(crate) trait ObservationSource: Send + Sync {
    /// Reads what `config`'s gates need, now.
    async fn gather(&self, env: &Env, config: &RolloutConfig) -> Gathered;
}

/// The sources a controller picks from, per evaluation, by the rollout's
/// `source` (which a reload may change).
pub(crate) struct Sources {
    local: LocalSource,
    prometheus: PrometheusSource,
}

impl Sources {
    pub(super) fn new() -> Sources {
        Sources {
            local: LocalSource,
            prometheus: PrometheusSource::new(),
        }
    }

    pub(super) fn of(&self, config: &RolloutConfig) -> &dyn ObservationSource {
        match config.source {
            Some(RolloutSource::Prometheus { .. }) => &self.prometheus,
            None => &self.local,
        }
    }
}

/// This instance's stats windows, keyed by each cluster's version label,
/// and its GPU and model-server observers.
pub(crate) struct LocalSource;

#[async_trait]
impl ObservationSource for LocalSource {
    async fn gather(&self, env: &Env, config: &RolloutConfig) -> Gathered {
        let live = env.store.load();
        let (canary, stable) = views(env, &live.config, config);
        // The mirror gates read the route's mirror while its shadow is the
        // canary (validation sees to it; a reload may have changed it since).
        let shadow = live
            .route(&config.route)
            .and_then(|r| r.mirror.as_ref())
            .filter(|m| m.config.cluster == config.canary)
            .map(|m| m.reading());
        Gathered::Windows {
            canary,
            stable,
            gpu_memory_percent: env.signals.gpu_memory_percent(),
            upstream_waiting: env.signals.upstream_waiting(&config.canary),
            shadow,
        }
    }
}

/// The canary and stable windows, with only the distributions the gates
/// read.
fn views(env: &Env, live: &Config, c: &RolloutConfig) -> (WindowView, WindowView) {
    let (mut canary, stable) = measures(&c.gates);
    // The status's step history shows the canary's latency p99 whatever
    // the gates read.
    if !canary.contains(&Measure::Latency) {
        canary.push(Measure::Latency);
    }
    let view = |cluster: &str, measures: &[Measure]| {
        let version = live.cluster(cluster).map_or("", |x| x.version.as_str());
        let key = env.shared.stats.key(&c.route, cluster, version);
        env.shared
            .stats
            .view_of(key, c.window, measures, !c.gates.exclude_load)
    };
    (view(&c.canary, &canary), view(&c.stable, &stable))
}
