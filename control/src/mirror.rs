//! Shadow traffic's state in the control plane: each route's mirror policy
//! as the data plane reads it (built once with the snapshot), and the ring
//! of recent differing pairs that `GET /v1/mirror/diffs` shows. The sender
//! that holds the sockets lives in the proxy.

mod coverage;
mod diffs;
#[cfg(test)]
mod tests;

pub use coverage::PromptCoverage;
pub use diffs::{DiffLeg, DiffRecord, MirrorDiffs, DIFF_CAPACITY};

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use sluice_filters::{
    hash_bytes, mix64, Dispersion, DriftReading, DriftWindow, Metrics, MirrorResult,
    MirrorRouteMetrics, MirrorSampler, RecentValues, StabilityMetrics,
};

use crate::config::MirrorConfig;
use crate::snapshot::ClusterRuntime;

/// A route's mirror policy, resolved for the data plane.
pub struct MirrorRuntime {
    pub route: String,
    /// The version of the snapshot it was built with.
    pub version: u64,
    pub config: MirrorConfig,
    /// The shadow cluster, shared with the snapshot's cluster list.
    pub shadow: Arc<ClusterRuntime>,
    pub sampler: MirrorSampler,
    pub metrics: MirrorRouteMetrics,
    pub gate: ShadowGate,
    /// The `compare.embeddings` cluster, when the policy names one.
    pub embedder: Option<Arc<ClusterRuntime>>,
    /// The embedding similarity's drift, kept across snapshots while the
    /// policy is unchanged (a rollout step must not restart the baseline).
    pub drift: Arc<Mutex<EmbeddingDrift>>,
    /// With `stability: true`: the dispersion histograms of the shadow
    /// cluster at its version.
    pub stability: Option<StabilityMetrics>,
    /// `compare.embeddings.coverage`: the prompt clusters of the route's
    /// rollout, kept across snapshots while the coverage policy and its
    /// embedder are unchanged (a step must not forget the clusters seen).
    pub coverage: Option<Arc<PromptCoverage>>,
}

/// A route's embedding comparison so far.
#[derive(Debug)]
pub struct EmbeddingDrift {
    pub window: DriftWindow,
    /// A drift event was raised and has not cleared since.
    pub drifting: bool,
    /// Answer stability: the dispersion of the last `window` prompts.
    pub dispersion: RecentValues,
}

/// What a route's mirror has measured of its shadow, for the rollout
/// gates that read it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShadowReading {
    /// The drift window: its p10, KL and the pairs behind them.
    pub drift: DriftReading,
    /// The mean dispersion of the last `window` prompts' answers.
    pub dispersion: Option<f64>,
    /// The prompts that mean is over.
    pub prompts: usize,
}

/// Whether copies are worth collecting. The sender closes the gate when
/// they could not go anyway: while every endpoint of the shadow cluster is
/// down (`shadow_down`), or while the route has `max_in_flight` copies out
/// (`in_flight`); it opens it when an endpoint is due back or a copy
/// finishes. While it is closed the request path counts the copies with the
/// gate's reason and keeps no body and queues no job, so a failing shadow
/// costs the primary one atomic load. A new snapshot starts with it open.
#[derive(Debug, Default)]
pub struct ShadowGate {
    /// 0: open; else why it is closed (`GATE_REASONS[n - 1]`).
    closed: AtomicU8,
}

const GATE_REASONS: [MirrorResult; 2] = [MirrorResult::ShadowDown, MirrorResult::InFlight];

impl ShadowGate {
    /// Why copies are not collected now; `None` when the gate is open.
    pub fn closed(&self) -> Option<MirrorResult> {
        match self.closed.load(Ordering::Relaxed) {
            0 => None,
            n => GATE_REASONS.get(usize::from(n) - 1).copied(),
        }
    }

    /// Closes an open gate for `reason` (one of `shadow_down`, `in_flight`);
    /// true when this call closed it, and so owns opening it.
    pub fn close(&self, reason: MirrorResult) -> bool {
        let Some(i) = GATE_REASONS.iter().position(|r| *r == reason) else {
            return false;
        };
        self.closed
            .compare_exchange(0, i as u8 + 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Opens the gate if it is closed for `reason`.
    pub fn open(&self, reason: MirrorResult) {
        if let Some(i) = GATE_REASONS.iter().position(|r| *r == reason) {
            let _ =
                self.closed
                    .compare_exchange(i as u8 + 1, 0, Ordering::SeqCst, Ordering::Relaxed);
        }
    }
}

impl MirrorRuntime {
    pub(crate) fn build(
        route: &str,
        config: &MirrorConfig,
        clusters: (Arc<ClusterRuntime>, Option<Arc<ClusterRuntime>>),
        previous: Option<&MirrorRuntime>,
        version: u64,
        metrics: &Metrics,
    ) -> MirrorRuntime {
        let (shadow, embedder) = clusters;
        let embeddings = config.compare.embeddings.as_ref();
        let window = embeddings.map_or(1, |e| e.window);
        let drift = previous.filter(|p| p.config == *config).map_or_else(
            || {
                let drift_window = match embeddings.and_then(|e| e.baseline.as_ref()) {
                    Some(saved) => DriftWindow::with_baseline(window, saved.similarities.clone()),
                    None => DriftWindow::new(window),
                };
                Arc::new(Mutex::new(EmbeddingDrift {
                    window: drift_window,
                    drifting: false,
                    dispersion: RecentValues::new(window),
                }))
            },
            |p| p.drift.clone(),
        );
        // A fresh start of the sampling sequence per route and version.
        let seed = mix64(hash_bytes(route.as_bytes()) ^ version);
        let embeddings = config.compare.embeddings.as_ref();
        let coverage = embeddings.and_then(|e| e.coverage.as_ref()).map(|c| {
            previous
                .and_then(|p| p.coverage.clone())
                .filter(|p| {
                    p.config == *c
                        && previous
                            .and_then(|p| p.config.compare.embeddings.as_ref())
                            .map(|e| (&e.cluster, &e.model))
                            == embeddings.map(|e| (&e.cluster, &e.model))
                })
                .unwrap_or_else(|| Arc::new(PromptCoverage::new(c, seed)))
        });
        let stability = config.stability.then(|| {
            let c = &shadow.config;
            metrics.mirror.stability(route, &c.name, &c.version)
        });
        MirrorRuntime {
            route: route.to_string(),
            version,
            config: config.clone(),
            shadow,
            sampler: MirrorSampler::new(config.percent, config.copies, seed),
            metrics: metrics.mirror.route(route),
            gate: ShadowGate::default(),
            embedder,
            drift,
            stability,
            coverage,
        }
    }

    /// Records one prompt's answer dispersion: its histograms, and the
    /// window `answer_dispersion_max` reads.
    pub fn record_dispersion(&self, d: Dispersion) {
        let Some(m) = &self.stability else {
            return;
        };
        m.dispersion.observe(d.centroid_variance);
        m.pairwise.observe(d.mean_pairwise);
        self.lock_drift().dispersion.push(d.centroid_variance);
    }

    /// What the mirror has measured of its shadow so far.
    pub fn reading(&self) -> ShadowReading {
        let drift = self.lock_drift();
        ShadowReading {
            drift: drift.window.reading(),
            dispersion: drift.dispersion.mean(),
            prompts: drift.dispersion.len(),
        }
    }

    /// The drift state; a poisoned lock still holds figures worth reading.
    pub fn lock_drift(&self) -> std::sync::MutexGuard<'_, EmbeddingDrift> {
        self.drift.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for MirrorRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorRuntime")
            .field("route", &self.route)
            .field("config", &self.config)
            .finish()
    }
}
