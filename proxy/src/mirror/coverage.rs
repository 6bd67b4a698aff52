//! `compare.embeddings.coverage`: the user text of the requests sampled on
//! the request path is embedded here, in batches, by the route's embedder,
//! and each vector goes into the route's prompt clusters with the step it
//! was sampled at and the cluster that served it. Rate-limited per route
//! (`max_per_second`); whatever is over is dropped and counted.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_control::{MirrorRuntime, PromptCoverage};
use sluice_filters::user_text;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::copy::Shadow;
use super::job::Job;

/// Prompts per embeddings request at most.
const MAX_BATCH: usize = 32;
/// Characters of a prompt embedded at most: the head says what it is
/// about, and a small embedder's context is short.
const MAX_CHARS: usize = 2000;

/// One prompt waiting for the embedder.
pub(super) struct Prompt {
    policy: Arc<MirrorRuntime>,
    coverage: Arc<PromptCoverage>,
    text: String,
    step: usize,
    served_by: String,
}

/// `job`'s prompt, if the request path sampled it for coverage; counts
/// `no_text` when its body has no user text.
pub(super) fn prompt_of(job: &Job) -> Option<Prompt> {
    let step = job.coverage_step?;
    let coverage = job.policy.coverage.clone()?;
    let body: Vec<u8> = job.body.iter().flat_map(|b| b.iter().copied()).collect();
    let Some(mut text) = user_text(&body) else {
        job.policy.metrics.count_coverage("no_text", 1);
        return None;
    };
    if let Some((cut, _)) = text.char_indices().nth(MAX_CHARS) {
        text.truncate(cut);
    }
    Some(Prompt {
        policy: job.policy.clone(),
        coverage,
        text,
        step,
        served_by: job
            .primary_cluster
            .as_ref()
            .map(|c| c.config.name.clone())
            .unwrap_or_default(),
    })
}

/// Prompts gathered between two drains of the sender's queue, per route.
#[derive(Default)]
pub(super) struct Batcher {
    routes: HashMap<String, RouteBatch>,
}

struct RouteBatch {
    rate: u32,
    tokens: f64,
    refilled: Instant,
    pending: Vec<Prompt>,
}

impl RouteBatch {
    fn new(rate: u32) -> RouteBatch {
        RouteBatch {
            rate,
            tokens: f64::from(rate),
            refilled: Instant::now(),
            pending: Vec::new(),
        }
    }

    /// A token of `max_per_second` (a second's worth may go at once).
    fn take_token(&mut self) -> bool {
        let now = Instant::now();
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = (self.tokens + elapsed * f64::from(self.rate)).min(f64::from(self.rate));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Batcher {
    /// Keeps `prompt` for the next flush, or drops it as `rate`.
    pub(super) fn add(&mut self, prompt: Prompt) {
        let rate = prompt.coverage.config.max_per_second;
        let route = self
            .routes
            .entry(prompt.policy.route.clone())
            .or_insert_with(|| RouteBatch::new(rate));
        if route.rate != rate {
            *route = RouteBatch::new(rate);
        }
        if route.take_token() {
            route.pending.push(prompt);
        } else {
            prompt.policy.metrics.count_coverage("rate", 1);
        }
    }

    /// Sends what was gathered: one embeddings request per route and
    /// `MAX_BATCH` prompts, each on its own task.
    pub(super) fn flush(&mut self, shadow: &Shadow, tracker: &TaskTracker) {
        for route in self.routes.values_mut() {
            while !route.pending.is_empty() {
                let n = route.pending.len().min(MAX_BATCH);
                let batch: Vec<Prompt> = route.pending.drain(..n).collect();
                let shadow = shadow.clone();
                tracker.spawn(async move { embed(&shadow, batch).await });
            }
        }
    }
}

/// Embeds one batch and records each prompt's cluster.
async fn embed(shadow: &Shadow, batch: Vec<Prompt>) {
    let Some(first) = batch.first() else { return };
    let policy = first.policy.clone();
    let n = batch.len() as u64;
    let (Some(config), Some(embedder)) = (
        policy.config.compare.embeddings.as_ref(),
        policy.embedder.as_ref(),
    ) else {
        return;
    };
    let inputs: Vec<&str> = batch.iter().map(|p| p.text.as_str()).collect();
    let vectors =
        super::embed::embed(shadow, embedder, config, &inputs, policy.config.timeout).await;
    let Some(vectors) = vectors else {
        policy.metrics.count_coverage("error", n);
        debug!(route = %policy.route, prompts = n, "coverage embedding failed");
        return;
    };
    for (p, v) in batch.iter().zip(&vectors) {
        p.coverage.record(v, p.step, &p.served_by);
    }
    policy.metrics.count_coverage("embedded", n);
}
