//! `compare.embeddings`: after a job's copies are compared, the primary's
//! and the shadows' answer texts are embedded in one batched request to the
//! embedder cluster, and each shadow is scored by its cosine similarity to
//! the primary. The scores feed a histogram and the route's drift window;
//! a pair below `similarity_min`, or a window past `kl_max` from the
//! baseline, raises a drift event (once, until it clears). With
//! `stability: true` the same batch gives the shadows' answers' dispersion.
//! Runs on the sender, after the copies, under the route's `rate_limit`
//! and `max_in_flight` like a copy.

use bytes::Bytes;
use serde::Deserialize;
use sluice_control::{ClusterRuntime, EmbeddingsConfig, EventLog, MirrorDiffs};
use sluice_filters::{cosine, dispersion};
use tracing::debug;

use super::copy::Shadow;
use super::job::Job;

/// What [`super::report::report`] leaves for the embedder: the primary's
/// answer text and the unperturbed shadows'.
pub(super) struct Texts {
    pub primary: String,
    pub shadows: Vec<ShadowText>,
}

pub(super) struct ShadowText {
    pub copy: u32,
    pub text: String,
    /// The `seq` of the diff kept for this pair, if it differed.
    pub diff: Option<u64>,
}

#[derive(Deserialize)]
struct EmbeddingsAnswer {
    data: Vec<Embedding>,
}

#[derive(Deserialize)]
struct Embedding {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// Embeds `texts` and records what the comparison found.
pub(super) async fn compare(
    shadow: &Shadow,
    job: &Job,
    texts: Texts,
    (events, diffs): (&EventLog, &MirrorDiffs),
) {
    let (Some(config), Some(embedder)) = (
        job.policy.config.compare.embeddings.as_ref(),
        job.policy.embedder.as_ref(),
    ) else {
        return;
    };
    let metrics = &job.policy.metrics;
    let inputs: Vec<&str> = std::iter::once(texts.primary.as_str())
        .chain(texts.shadows.iter().map(|s| s.text.as_str()))
        .collect();
    let vectors = embed(shadow, embedder, config, &inputs, job.policy.config.timeout).await;
    let Some(vectors) = vectors else {
        metrics.count_embedding("error");
        debug!(route = %job.policy.route, "embedding request failed");
        return;
    };
    metrics.count_embedding("ok");
    // A primary that the shadow cluster itself answered (a canary taking
    // its share of the split) compares the shadow with itself: such pairs
    // would hide a drift, so they are left out of the drift and its gates.
    let shadow_answered_primary = job
        .primary_cluster
        .as_ref()
        .is_some_and(|c| c.config.name == job.policy.config.cluster);
    let pairs = if shadow_answered_primary {
        &[][..]
    } else {
        &texts.shadows[..]
    };
    for (s, vector) in pairs.iter().zip(&vectors[1..]) {
        let Some(similarity) = cosine(&vectors[0], vector) else {
            continue;
        };
        if let Some(seq) = s.diff {
            diffs.set_embedding_similarity(seq, similarity);
        }
        record(job, config, s.copy, similarity, events);
        // Counted once the drift window holds it: a scrape that counts N
        // pairs finds the KL gauge already read from them.
        metrics.embedding_similarity.observe(similarity);
    }
    // Answer stability: how far the shadows' answers to this one prompt
    // spread (the primary's is another model's, so it stays out).
    if job.policy.stability.is_some() {
        if let Some(d) = dispersion(&vectors[1..]) {
            job.policy.record_dispersion(d);
        }
    }
}

/// One vector per input, in input order; `None` unless the answer has
/// exactly that.
/// One `/v1/embeddings` request for `inputs` to the embedder cluster: a
/// vector per input, in order, or `None` when it failed, timed out or
/// answered something else (the answer-drift comparison and prompt
/// coverage both embed through it).
pub(super) async fn embed(
    shadow: &Shadow,
    embedder: &ClusterRuntime,
    config: &EmbeddingsConfig,
    inputs: &[&str],
    timeout: std::time::Duration,
) -> Option<Vec<Vec<f32>>> {
    let body = serde_json::json!({"model": config.model, "input": inputs});
    let answer = tokio::time::timeout(
        timeout,
        shadow.post_json(embedder, "/v1/embeddings", Bytes::from(body.to_string())),
    )
    .await;
    match answer {
        Ok(Some((200, bytes))) => vectors(&bytes, inputs.len()),
        _ => None,
    }
}

fn vectors(body: &[u8], inputs: usize) -> Option<Vec<Vec<f32>>> {
    let answer: EmbeddingsAnswer = serde_json::from_slice(body).ok()?;
    if answer.data.len() != inputs {
        return None;
    }
    let mut data = answer.data;
    data.sort_by_key(|e| e.index);
    Some(data.into_iter().map(|e| e.embedding).collect())
}

/// Pushes one pair into the route's drift window; raises or clears the
/// drift event.
fn record(job: &Job, config: &EmbeddingsConfig, copy: u32, similarity: f64, events: &EventLog) {
    let policy = &job.policy;
    let mut drift = policy.lock_drift();
    let reading = drift.window.push(similarity);
    if let Some(kl) = reading.kl {
        policy.metrics.embedding_kl.set(kl);
    }
    let mut why = Vec::new();
    if similarity < config.similarity_min {
        why.push(format!(
            "request {} copy {copy}: similarity {similarity:.3} is below {}",
            job.request_id, config.similarity_min
        ));
    }
    if let Some(kl) = reading.kl.filter(|kl| *kl > config.kl_max) {
        why.push(format!(
            "KL divergence {kl:.3} of the last {} pairs from the baseline is above {}",
            config.window, config.kl_max
        ));
    }
    let route = &policy.route;
    match (drift.drifting, why.is_empty()) {
        (false, false) => {
            drift.drifting = true;
            events.push(
                "mirror",
                &format!(
                    "embedding drift on route {route} (shadow {})",
                    policy.config.cluster
                ),
                policy.version,
                why,
            );
        }
        (true, true) => {
            drift.drifting = false;
            events.push(
                "mirror",
                &format!("embedding drift on route {route} cleared"),
                policy.version,
                Vec::new(),
            );
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::vectors;

    #[test]
    fn vectors_come_back_in_input_order_or_not_at_all() {
        let body =
            br#"{"data": [{"index": 1, "embedding": [0, 1]}, {"index": 0, "embedding": [1, 0]}]}"#;
        assert_eq!(
            vectors(body, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        // One vector short, not JSON, or not the OpenAI shape: no comparison.
        assert_eq!(vectors(body, 3), None);
        assert_eq!(vectors(b"<html>", 2), None);
        assert_eq!(vectors(br#"{"embedding": [1, 0]}"#, 1), None);
    }
}
