//! The mirror's metric families, and per-route handles resolved when a
//! snapshot is built.

use prometheus::{Gauge, GaugeVec, Histogram, HistogramVec, IntCounter, IntCounterVec, Registry};

use crate::metrics::{register_family, register_histogram};

/// What became of one shadow copy: sent and answered, or dropped and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorResult {
    /// Sent, and an answer (any status) was read to its end.
    Ok,
    /// The bounded queue to the sender was full at the end of the request.
    QueueFull,
    /// The request body was over `max_body`.
    BodyTooLarge,
    /// Over the route's `rate_limit`.
    Rate,
    /// The route already had `max_in_flight` copies out.
    InFlight,
    /// The shadow refused the connection (or TLS failed).
    ConnectError,
    /// The connection was not up within the sender's connect timeout: a
    /// slow shadow, or a sender starved of CPU (it runs at idle priority).
    ConnectTimeout,
    /// No full answer within the policy's `timeout`.
    Timeout,
    /// Anything else: the shadow reset the connection, sent garbage.
    Error,
    /// Not sent: every endpoint of the shadow cluster failed just before
    /// and is skipped for a while, so the request kept nothing for a copy.
    ShadowDown,
    /// Not sent: the shadow cluster was at its `circuit_breakers.max_connections`.
    Overflow,
}

impl MirrorResult {
    pub const ALL: [MirrorResult; 11] = [
        MirrorResult::Ok,
        MirrorResult::QueueFull,
        MirrorResult::BodyTooLarge,
        MirrorResult::Rate,
        MirrorResult::InFlight,
        MirrorResult::ConnectError,
        MirrorResult::ConnectTimeout,
        MirrorResult::Timeout,
        MirrorResult::Error,
        MirrorResult::ShadowDown,
        MirrorResult::Overflow,
    ];

    pub fn label(self) -> &'static str {
        match self {
            MirrorResult::Ok => "ok",
            MirrorResult::QueueFull => "queue_full",
            MirrorResult::BodyTooLarge => "body_too_large",
            MirrorResult::Rate => "rate",
            MirrorResult::InFlight => "in_flight",
            MirrorResult::ConnectError => "connect_error",
            MirrorResult::ConnectTimeout => "connect_timeout",
            MirrorResult::Timeout => "timeout",
            MirrorResult::Error => "error",
            MirrorResult::ShadowDown => "shadow_down",
            MirrorResult::Overflow => "overflow",
        }
    }
}

/// The histogram of embedding similarities, primary against shadow.
pub const EMBEDDING_SIMILARITY_METRIC: &str = "sluice_mirror_embedding_similarity";
/// The gauge of the drift window's KL divergence from its baseline.
pub const EMBEDDING_KL_METRIC: &str = "sluice_mirror_embedding_drift_kl";
/// The histogram of answer dispersion per prompt (`mirror.stability`).
pub const ANSWER_DISPERSION_METRIC: &str = "sluice_mirror_answer_dispersion";
/// The histogram of the mean pairwise similarity of one prompt's answers.
pub const ANSWER_PAIRWISE_METRIC: &str = "sluice_mirror_answer_pairwise_similarity";

/// Kinds of difference counted in `sluice_mirror_diff_total`.
const DIFF_KINDS: [&str; 5] = ["status", "text", "ids", "grpc_status", "message"];

#[derive(Clone)]
pub struct MirrorMetrics {
    requests: IntCounterVec,
    noise: IntCounterVec,
    compared: IntCounterVec,
    diffs: IntCounterVec,
    similarity: HistogramVec,
    recall: HistogramVec,
    latency_ratio: HistogramVec,
    ttft_ratio: HistogramVec,
    output_tokens: HistogramVec,
    perturbed_similarity: HistogramVec,
    noise_similarity: HistogramVec,
    robustness: GaugeVec,
    embedding_similarity: HistogramVec,
    embedding_kl: GaugeVec,
    embedding_requests: IntCounterVec,
    coverage_prompts: IntCounterVec,
    answer_dispersion: HistogramVec,
    answer_pairwise: HistogramVec,
}

/// One route's answer-stability handles, for its shadow cluster and version.
#[derive(Clone)]
pub struct StabilityMetrics {
    /// Variance of each answer's similarity to the centroid, per prompt.
    pub dispersion: Histogram,
    /// Mean cosine similarity over the pairs of one prompt's answers.
    pub pairwise: Histogram,
}

/// One route's handles.
#[derive(Clone)]
pub struct MirrorRouteMetrics {
    requests: [IntCounter; MirrorResult::ALL.len()],
    noise: [IntCounter; MirrorResult::ALL.len()],
    pub compared: IntCounter,
    diffs: [IntCounter; DIFF_KINDS.len()],
    pub similarity: Histogram,
    pub recall: Histogram,
    pub latency_ratio: Histogram,
    pub ttft_ratio: Histogram,
    pub output_tokens: Histogram,
    /// Perturbed shadow answers against the primary's (`mirror.perturb`).
    pub perturbed_similarity: Histogram,
    /// Noise copies' answers against the primary's.
    pub noise_similarity: Histogram,
    robustness: Gauge,
    /// Cosine similarity of the embedded primary and shadow answers.
    pub embedding_similarity: Histogram,
    /// The drift window's KL divergence from its baseline.
    pub embedding_kl: Gauge,
    embedding_requests: [IntCounter; EMBEDDING_RESULTS.len()],
    coverage_prompts: [IntCounter; COVERAGE_RESULTS.len()],
}

/// What became of a prompt sampled for coverage: `embedded`, `error` (the
/// embedder did not answer one vector per prompt), `rate` (over
/// `coverage.max_per_second`), `queue_full` (the sender's queue), `no_text`
/// (no user text in the body).
pub(crate) const COVERAGE_RESULTS: [&str; 5] =
    ["embedded", "error", "rate", "queue_full", "no_text"];

/// What became of a job's embedding request: `ok`, `error` (no answer, or
/// not one vector per input), `rate` and `in_flight` (over the route's
/// `rate_limit` or `max_in_flight`).
pub(crate) const EMBEDDING_RESULTS: [&str; 4] = ["ok", "error", "rate", "in_flight"];

impl MirrorRouteMetrics {
    /// Counts prompts sampled for coverage by result (one of
    /// [`COVERAGE_RESULTS`]).
    pub fn count_coverage(&self, result: &str, n: u64) {
        if let Some(i) = COVERAGE_RESULTS.iter().position(|r| *r == result) {
            self.coverage_prompts[i].inc_by(n);
        }
    }

    /// Counts one embedding request by result (one of [`EMBEDDING_RESULTS`]).
    pub fn count_embedding(&self, result: &str) {
        if let Some(i) = EMBEDDING_RESULTS.iter().position(|r| *r == result) {
            self.embedding_requests[i].inc();
        }
    }

    /// Sets the robustness score from the similarities observed so far.
    pub fn update_robustness(&self) {
        let mean = |h: &Histogram| {
            let n = h.get_sample_count();
            (n > 0).then(|| h.get_sample_sum() / n as f64)
        };
        if let Some(score) = robustness(
            mean(&self.perturbed_similarity),
            mean(&self.noise_similarity),
        ) {
            self.robustness.set(score);
        }
    }

    /// Counts `copies` shadow copies with one result.
    pub fn count(&self, result: MirrorResult, copies: u32) {
        self.requests[result as usize].inc_by(u64::from(copies));
    }

    /// Counts a noise copy (sent to the primary's own cluster).
    pub fn count_noise(&self, result: MirrorResult) {
        self.noise[result as usize].inc();
    }

    /// Counts one difference beyond the noise floor: `status`, `text` or `ids`.
    pub fn count_diff(&self, kind: &str) {
        if let Some(i) = DIFF_KINDS.iter().position(|k| *k == kind) {
            self.diffs[i].inc();
        }
    }
}

const RATIO_BUCKETS: &[f64] = &[0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0, 10.0];
const SHARE_BUCKETS: &[f64] = &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0];
/// Fine near 1, where embeddings of related answers fall.
const EMBEDDING_BUCKETS: &[f64] = &[
    0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.82, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0,
];
/// Variances of similarities: near 0 for a stable model.
const DISPERSION_BUCKETS: &[f64] = &[
    0.0, 0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];
const DELTA_BUCKETS: &[f64] = &[
    -256.0, -64.0, -16.0, -4.0, -1.0, 0.0, 1.0, 4.0, 16.0, 64.0, 256.0,
];

/// A histogram family labelled by route.
fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    buckets: &[f64],
) -> Result<HistogramVec, prometheus::Error> {
    register_histogram(registry, name, help, buckets, &["route"])
}

impl MirrorMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            requests: register_family(
                registry,
                "sluice_mirror_requests_total",
                "Shadow copies by result: ok (answered) or the reason it was dropped.",
                &["route", "result"],
            )?,
            noise: register_family(
                registry,
                "sluice_mirror_noise_requests_total",
                "Noise copies (sent to the primary's own cluster) by result.",
                &["route", "result"],
            )?,
            compared: register_family(
                registry,
                "sluice_mirror_diff_compared_total",
                "Shadow answers compared with the primary's.",
                &["route"],
            )?,
            diffs: register_family(
                registry,
                "sluice_mirror_diff_total",
                "Shadow answers that differ from the primary's beyond the noise floor, by kind.",
                &["route", "kind"],
            )?,
            similarity: histogram(
                registry,
                "sluice_mirror_diff_similarity",
                "Text similarity of shadow and primary answers (token-set Jaccard, 1 = same words).",
                SHARE_BUCKETS,
            )?,
            recall: histogram(
                registry,
                "sluice_mirror_diff_recall",
                "Recall@k of the shadow's ids against the primary's (compare.ids).",
                SHARE_BUCKETS,
            )?,
            latency_ratio: histogram(
                registry,
                "sluice_mirror_diff_latency_ratio",
                "Shadow latency over primary latency.",
                RATIO_BUCKETS,
            )?,
            ttft_ratio: histogram(
                registry,
                "sluice_mirror_diff_ttft_ratio",
                "Shadow time to first token over the primary's.",
                RATIO_BUCKETS,
            )?,
            output_tokens: histogram(
                registry,
                "sluice_mirror_diff_output_tokens",
                "Shadow output tokens minus the primary's.",
                DELTA_BUCKETS,
            )?,
            perturbed_similarity: histogram(
                registry,
                "sluice_mirror_perturbed_similarity",
                "Text similarity of perturbed shadow answers (mirror.perturb) and the primary's.",
                SHARE_BUCKETS,
            )?,
            noise_similarity: histogram(
                registry,
                "sluice_mirror_noise_similarity",
                "Text similarity of noise copies' answers (the primary's cluster again) and the primary's.",
                SHARE_BUCKETS,
            )?,
            embedding_similarity: histogram(
                registry,
                EMBEDDING_SIMILARITY_METRIC,
                "Cosine similarity of the embedded shadow and primary answers (compare.embeddings).",
                EMBEDDING_BUCKETS,
            )?,
            embedding_kl: register_family(
                registry,
                EMBEDDING_KL_METRIC,
                "KL divergence (nats) of the last window of embedding similarities from the baseline window.",
                &["route"],
            )?,
            embedding_requests: register_family(
                registry,
                "sluice_mirror_embedding_requests_total",
                "Embedding requests of the mirror sender by result: ok, error, rate.",
                &["route", "result"],
            )?,
            coverage_prompts: register_family(
                registry,
                "sluice_mirror_coverage_prompts_total",
                "Prompts sampled for rollout coverage by result: embedded, error, rate, queue_full, no_text.",
                &["route", "result"],
            )?,
            answer_dispersion: register_histogram(
                registry,
                ANSWER_DISPERSION_METRIC,
                "Per prompt, the variance of each shadow answer's embedding similarity to their centroid (mirror.stability).",
                DISPERSION_BUCKETS,
                &["route", "cluster", "version"],
            )?,
            answer_pairwise: register_histogram(
                registry,
                ANSWER_PAIRWISE_METRIC,
                "Per prompt, the mean embedding similarity over pairs of shadow answers (mirror.stability).",
                EMBEDDING_BUCKETS,
                &["route", "cluster", "version"],
            )?,
            robustness: register_family(
                registry,
                "sluice_mirror_robustness",
                "Mean similarity of perturbed answers over that of noise copies (1 with no noise copies): 1 = rewording moves answers no more than asking again.",
                &["route"],
            )?,
        })
    }

    /// Resolves one route's answer-stability handles for its shadow
    /// `cluster` at `version`; called when a snapshot is built.
    pub fn stability(&self, route: &str, cluster: &str, version: &str) -> StabilityMetrics {
        let labels = [route, cluster, version];
        StabilityMetrics {
            dispersion: self.answer_dispersion.with_label_values(&labels),
            pairwise: self.answer_pairwise.with_label_values(&labels),
        }
    }

    /// Resolves one route's handles; called when a snapshot is built.
    pub fn route(&self, route: &str) -> MirrorRouteMetrics {
        MirrorRouteMetrics {
            requests: MirrorResult::ALL
                .map(|r| self.requests.with_label_values(&[route, r.label()])),
            noise: MirrorResult::ALL.map(|r| self.noise.with_label_values(&[route, r.label()])),
            compared: self.compared.with_label_values(&[route]),
            diffs: DIFF_KINDS.map(|k| self.diffs.with_label_values(&[route, k])),
            similarity: self.similarity.with_label_values(&[route]),
            recall: self.recall.with_label_values(&[route]),
            latency_ratio: self.latency_ratio.with_label_values(&[route]),
            ttft_ratio: self.ttft_ratio.with_label_values(&[route]),
            output_tokens: self.output_tokens.with_label_values(&[route]),
            perturbed_similarity: self.perturbed_similarity.with_label_values(&[route]),
            noise_similarity: self.noise_similarity.with_label_values(&[route]),
            robustness: self.robustness.with_label_values(&[route]),
            embedding_similarity: self.embedding_similarity.with_label_values(&[route]),
            embedding_kl: self.embedding_kl.with_label_values(&[route]),
            embedding_requests: EMBEDDING_RESULTS
                .map(|r| self.embedding_requests.with_label_values(&[route, r])),
            coverage_prompts: COVERAGE_RESULTS
                .map(|r| self.coverage_prompts.with_label_values(&[route, r])),
        }
    }
}

/// The robustness score: the mean similarity of perturbed answers to the
/// primary's, over the mean similarity of unperturbed noise copies (how much
/// answers move when the same prompt is asked again). Without noise copies
/// the floor is 1, so the score is the perturbed mean itself. Capped at 1: a
/// perturbed mean above the noise floor is as robust as it gets. `None` until
/// a perturbed answer was compared.
pub(crate) fn robustness(perturbed_mean: Option<f64>, noise_mean: Option<f64>) -> Option<f64> {
    let perturbed = perturbed_mean?;
    let floor = noise_mean.unwrap_or(1.0);
    if floor <= 0.0 {
        return Some(if perturbed > 0.0 { 1.0 } else { 0.0 });
    }
    Some((perturbed / floor).min(1.0))
}
