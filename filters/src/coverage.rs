//! Prompt-diversity coverage of a rollout step: sampled prompts' embeddings
//! are put into clusters online (leader clustering), and each step counts
//! the clusters the canary's traffic touched against every cluster seen
//! since the rollout started. Pure: callers pass the vectors, the step and
//! the cluster that served each prompt in.
//!
//! Leader clustering is order-dependent: a prompt joins the first leader
//! it is close enough to, so the same prompts in another order may give
//! other leaders (and, near the threshold, another count). It needs one
//! pass and a bounded memory, which is what a data plane can afford.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::hash::mix64;

/// The cosine similarity at or above which a prompt joins a leader's cluster.
pub const DEFAULT_COVERAGE_SIMILARITY: f64 = 0.82;
/// Leaders kept at most; past them a prompt joins its nearest leader.
pub const DEFAULT_MAX_CLUSTERS: usize = 256;

/// Clusters of unit vectors by leader: a vector joins the first leader
/// whose cosine similarity is at least `threshold`, or leads a new cluster
/// while there are fewer than `cap`; past the cap it joins the nearest
/// leader and counts in [`PromptClusters::over_cap`].
#[derive(Clone, Debug)]
pub struct PromptClusters {
    threshold: f64,
    cap: usize,
    /// Each leader as a unit vector, in the order they were made.
    leaders: Vec<Vec<f64>>,
    over_cap: u64,
}

impl PromptClusters {
    pub fn new(threshold: f64, cap: usize) -> PromptClusters {
        PromptClusters {
            threshold,
            cap: cap.max(1),
            leaders: Vec::new(),
            over_cap: 0,
        }
    }

    /// The cluster `vector` belongs to (from 0, in the order clusters were
    /// made); `None` for a zero vector or one of another length than the
    /// leaders'.
    pub fn assign(&mut self, vector: &[f32]) -> Option<usize> {
        let unit = unit(vector)?;
        if self.leaders.first().is_some_and(|l| l.len() != unit.len()) {
            return None;
        }
        let mut nearest: Option<(usize, f64)> = None;
        for (i, leader) in self.leaders.iter().enumerate() {
            let cos = dot(leader, &unit);
            if cos >= self.threshold {
                return Some(i);
            }
            if nearest.is_none_or(|(_, best)| cos > best) {
                nearest = Some((i, cos));
            }
        }
        if self.leaders.len() < self.cap {
            self.leaders.push(unit);
            return Some(self.leaders.len() - 1);
        }
        self.over_cap += 1;
        nearest.map(|(i, _)| i)
    }

    /// Clusters made so far.
    pub fn len(&self) -> usize {
        self.leaders.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leaders.is_empty()
    }

    /// Vectors that would have led a new cluster past the cap.
    pub fn over_cap(&self) -> u64 {
        self.over_cap
    }
}

fn unit(v: &[f32]) -> Option<Vec<f64>> {
    let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| v.iter().map(|x| f64::from(*x) / norm).collect())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// What a step's coverage stands at.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CoverageReading {
    /// Clusters the cluster asked about (the canary) served at the step.
    pub touched: usize,
    /// Every cluster seen since the start, whoever served it.
    pub seen: usize,
    /// Prompts that cluster served at the step and that were embedded.
    pub prompts: u64,
    /// Prompts embedded since the start, whoever served them: the evidence
    /// behind `seen` (one prompt seen, served by the canary, is 100%).
    pub prompts_seen: u64,
}

impl CoverageReading {
    /// `touched / seen` in percent; `None` before any cluster was seen.
    pub fn percent(&self) -> Option<f64> {
        (self.seen > 0).then(|| 100.0 * self.touched as f64 / self.seen as f64)
    }
}

/// A rollout's coverage: the prompt clusters of all its traffic, and per
/// step and serving cluster the clusters touched.
#[derive(Clone, Debug)]
pub struct Coverage {
    clusters: PromptClusters,
    /// (step, serving cluster) → clusters touched, prompts embedded.
    touched: BTreeMap<(usize, String), (BTreeSet<usize>, u64)>,
    /// Prompts recorded since the start.
    prompts: u64,
}

impl Coverage {
    pub fn new(threshold: f64, cap: usize) -> Coverage {
        Coverage {
            clusters: PromptClusters::new(threshold, cap),
            touched: BTreeMap::new(),
            prompts: 0,
        }
    }

    /// One embedded prompt, served by `served_by` while the rollout stood
    /// at `step`; the cluster it went to.
    pub fn record(&mut self, vector: &[f32], step: usize, served_by: &str) -> Option<usize> {
        let cluster = self.clusters.assign(vector)?;
        self.prompts += 1;
        let entry = self
            .touched
            .entry((step, served_by.to_string()))
            .or_default();
        entry.0.insert(cluster);
        entry.1 += 1;
        Some(cluster)
    }

    /// Step `step`'s coverage by `served_by`'s traffic.
    pub fn reading(&self, step: usize, served_by: &str) -> CoverageReading {
        let (touched, prompts) = self
            .touched
            .get(&(step, served_by.to_string()))
            .map_or((0, 0), |(set, n)| (set.len(), *n));
        CoverageReading {
            touched,
            seen: self.clusters.len(),
            prompts,
            prompts_seen: self.prompts,
        }
    }

    pub fn over_cap(&self) -> u64 {
        self.clusters.over_cap()
    }
}

/// Whether the `n`-th request (counted per route) is sampled at `rate`
/// (0..=1): a seeded hash, so a run with the same seed samples the same
/// requests.
pub fn coverage_sampled(seed: u64, n: u64, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    // The top 53 bits as a fraction in 0..1.
    let draw = (mix64(seed ^ mix64(n)) >> 11) as f64 / (1u64 << 53) as f64;
    draw < rate
}

/// The user text of a request body: `messages[]` with `role: user` (a
/// string `content` or its `{type: text}` parts) and a completion's
/// `prompt` (a string or a list), joined by newlines; `None` when there is
/// none (not JSON, or no user turn).
pub fn user_text(body: &[u8]) -> Option<String> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let mut parts: Vec<&str> = Vec::new();
    if let Some(messages) = json.get("messages").and_then(Value::as_array) {
        for m in messages
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        {
            match m.get("content") {
                Some(Value::String(s)) => parts.push(s),
                Some(Value::Array(items)) => parts.extend(
                    items
                        .iter()
                        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                        .filter_map(|p| p.get("text").and_then(Value::as_str)),
                ),
                _ => {}
            }
        }
    }
    match json.get("prompt") {
        Some(Value::String(s)) => parts.push(s),
        Some(Value::Array(items)) => parts.extend(items.iter().filter_map(Value::as_str)),
        _ => {}
    }
    let text = parts.join("\n");
    (!text.trim().is_empty()).then_some(text)
}
