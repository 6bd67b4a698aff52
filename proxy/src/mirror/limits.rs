//! Per-route admission of copies: a token bucket for `rate_limit` and a
//! semaphore for `max_in_flight`. Owned by the sender's loop alone.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_control::MirrorRuntime;
use sluice_filters::MirrorResult;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::job::Job;

/// Which request a permit is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CopyKind {
    /// Shadow copy `n` (1-based), sent to the mirror's cluster.
    Shadow(u32),
    /// A noise copy, sent to the primary's own cluster.
    Noise(u32),
    /// The job's one embeddings request (`compare.embeddings`).
    Embedding,
}

/// A copy that may go. Its in-flight slot is held until it is dropped.
pub(super) struct Admitted {
    pub kind: CopyKind,
    policy: Arc<MirrorRuntime>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Admitted {
    /// A slot frees up: if the request path stopped collecting copies because
    /// the route had none, it may start again. The slot is released first, so
    /// `admit` closing the gate at the same time sees it (or this opens it).
    fn drop(&mut self) {
        drop(self.permit.take());
        self.policy.gate.open(MirrorResult::InFlight);
    }
}

#[derive(Default)]
pub(super) struct Limits {
    routes: HashMap<String, RouteLimits>,
}

struct RouteLimits {
    rate: Option<f64>,
    max_in_flight: usize,
    tokens: f64,
    refilled: Instant,
    in_flight: Arc<Semaphore>,
}

impl RouteLimits {
    fn new(rate: Option<f64>, max_in_flight: usize) -> RouteLimits {
        RouteLimits {
            rate,
            max_in_flight,
            tokens: burst(rate),
            refilled: Instant::now(),
            in_flight: Arc::new(Semaphore::new(max_in_flight)),
        }
    }

    fn take_token(&mut self) -> bool {
        let Some(rate) = self.rate else { return true };
        let now = Instant::now();
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = (self.tokens + elapsed * rate).min(burst(self.rate));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A second's worth of copies may go at once (at least one).
fn burst(rate: Option<f64>) -> f64 {
    rate.map_or(f64::INFINITY, |r| r.max(1.0))
}

impl Limits {
    /// The copies of `job` that may go now; the others are counted as
    /// dropped (`rate` or `in_flight`).
    pub(super) fn admit(&mut self, job: &Job) -> Vec<Admitted> {
        let config = &job.policy.config;
        let route = self.route(job);
        let noise = if job.primary_cluster.is_some() {
            config.compare.noise_copies
        } else {
            0
        };
        let kinds = (1..=job.shadow_copies)
            .map(CopyKind::Shadow)
            .chain((1..=noise).map(CopyKind::Noise));
        let metrics = &job.policy.metrics;
        let mut admitted = Vec::new();
        // Shadow copies dropped, by reason: counted once per job, not per copy.
        let mut dropped = [0u32; MirrorResult::ALL.len()];
        for kind in kinds {
            let verdict = if !route.take_token() {
                Err(MirrorResult::Rate)
            } else {
                route
                    .in_flight
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| MirrorResult::InFlight)
            };
            match (verdict, kind) {
                (Ok(permit), _) => admitted.push(Admitted {
                    kind,
                    policy: job.policy.clone(),
                    permit: Some(permit),
                }),
                (Err(reason), CopyKind::Shadow(_)) => dropped[reason as usize] += 1,
                (Err(reason), CopyKind::Noise(_)) => metrics.count_noise(reason),
                (Err(_), CopyKind::Embedding) => {}
            }
        }
        if route.in_flight.available_permits() == 0
            && job.policy.gate.close(MirrorResult::InFlight)
            && route.in_flight.available_permits() > 0
        {
            // Copies of the next requests could not go either, so until one of
            // these is done the request path need not collect them. A copy
            // that finished meanwhile released its slot before it could open
            // the gate: open it here.
            job.policy.gate.open(MirrorResult::InFlight);
        }
        for (reason, n) in MirrorResult::ALL.into_iter().zip(dropped) {
            if n > 0 {
                metrics.count(reason, n);
            }
        }
        admitted
    }

    /// The slot of `job`'s embeddings request, taken like a copy's: a token
    /// of `rate_limit` and a place under `max_in_flight`.
    pub(super) fn admit_embedding(&mut self, job: &Job) -> Result<Admitted, MirrorResult> {
        let route = self.route(job);
        if !route.take_token() {
            return Err(MirrorResult::Rate);
        }
        let permit = route
            .in_flight
            .clone()
            .try_acquire_owned()
            .map_err(|_| MirrorResult::InFlight)?;
        Ok(Admitted {
            kind: CopyKind::Embedding,
            policy: job.policy.clone(),
            permit: Some(permit),
        })
    }

    fn route(&mut self, job: &Job) -> &mut RouteLimits {
        let config = &job.policy.config;
        let route = self
            .routes
            .entry(job.policy.route.clone())
            .or_insert_with(|| RouteLimits::new(config.rate_limit, config.max_in_flight));
        if route.rate != config.rate_limit || route.max_in_flight != config.max_in_flight {
            // A new policy: start over (copies out keep their old permits).
            *route = RouteLimits::new(config.rate_limit, config.max_in_flight);
        }
        route
    }
}
