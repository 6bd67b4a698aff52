//! A route's prompt-diversity coverage, shared by the request path (which
//! samples prompts: one atomic add), the mirror sender (which embeds them
//! and records where they went) and the route's rollout (which sets the
//! step and reads each step's coverage).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use sluice_filters::{coverage_sampled, Coverage, CoverageReading};

use crate::config::CoverageConfig;

pub struct PromptCoverage {
    pub config: CoverageConfig,
    seed: u64,
    /// Requests the sampler has seen.
    requests: AtomicU64,
    /// The route's rollout's 1-based step; 0 while no rollout runs, when
    /// nothing is sampled.
    step: AtomicUsize,
    clusters: Mutex<Coverage>,
}

impl PromptCoverage {
    pub fn new(config: &CoverageConfig, seed: u64) -> PromptCoverage {
        PromptCoverage {
            config: config.clone(),
            seed,
            requests: AtomicU64::new(0),
            step: AtomicUsize::new(0),
            clusters: Mutex::new(Coverage::new(config.similarity, config.max_clusters)),
        }
    }

    /// The request path: the step to record this request's prompt at, if
    /// it is sampled; `None` while no rollout runs or when not drawn.
    pub fn sample(&self) -> Option<usize> {
        let step = self.step.load(Ordering::Relaxed);
        if step == 0 {
            return None;
        }
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        coverage_sampled(self.seed, n, self.config.sample).then_some(step)
    }

    /// The rollout: the step it stands at (0 when it is not running). A
    /// rollout that starts (from 0 to 1) starts from no cluster seen.
    pub fn set_step(&self, step: usize) {
        let before = self.step.swap(step, Ordering::Relaxed);
        if before == 0 && step == 1 {
            *self.lock() = Coverage::new(self.config.similarity, self.config.max_clusters);
        }
    }

    /// The sender: one embedded prompt, sampled at `step`, served by
    /// `served_by`.
    pub fn record(&self, vector: &[f32], step: usize, served_by: &str) -> Option<usize> {
        self.lock().record(vector, step, served_by)
    }

    /// Step `step`'s coverage by `served_by`'s traffic.
    pub fn reading(&self, step: usize, served_by: &str) -> CoverageReading {
        self.lock().reading(step, served_by)
    }

    /// Prompts that could not lead a cluster of their own past the cap.
    pub fn over_cap(&self) -> u64 {
        self.lock().over_cap()
    }

    /// A poisoned lock still holds figures worth reading.
    fn lock(&self) -> std::sync::MutexGuard<'_, Coverage> {
        self.clusters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for PromptCoverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptCoverage")
            .field("config", &self.config)
            .field("step", &self.step.load(Ordering::Relaxed))
            .finish()
    }
}
