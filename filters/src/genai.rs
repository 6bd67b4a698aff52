//! The OpenTelemetry GenAI client metrics (Prometheus names) and a per
//! (route, cluster) cache of their handles by model and operation, so the
//! request path resolves labels with one lock-free lookup instead of a label
//! hash. The operation is one of [`Operation`]'s names, or a gRPC call's
//! method (`package.Service/Method`).

use std::sync::Arc;

use arc_swap::ArcSwap;
use prometheus::{Histogram, HistogramVec, Registry};

use crate::load::Source;
use crate::metrics::register_histogram;

/// Time to first token (TTFT), seconds: the family name the proxy exports
/// and the fleet rollouts' PromQL reads.
pub const TTFT_METRIC: &str = "gen_ai_client_operation_time_to_first_chunk_seconds";
/// Gap between content chunks (vLLM's "ITL"), seconds.
pub const GAP_METRIC: &str = "gen_ai_client_operation_time_per_output_chunk_seconds";
/// Tokens per operation, by `gen_ai_token_type` (input or output).
pub const TOKEN_USAGE_METRIC: &str = "gen_ai_client_token_usage";
/// Time per output token (vLLM's "TPOT"), seconds.
pub const TPOT_METRIC: &str = "sluice_time_per_output_token_seconds";

/// (model, operation) pairs kept per (route, cluster) before new ones are
/// folded into model `other` (and a gRPC method into operation `other`): the
/// model name and the method come from clients, so their cardinality must be
/// bounded.
const MAX_MODELS: usize = 64;

// Bucket boundaries recommended by the OpenTelemetry GenAI semantic conventions.
const DURATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];
const PER_CHUNK_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
];
const TOKEN_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

const LABELS: &[&str] = &[
    "route",
    "cluster",
    "version",
    "gen_ai_request_model",
    "gen_ai_operation_name",
    Source::LABEL,
];

/// `gen_ai.operation.name`, from the request path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Chat,
    TextCompletion,
    Embeddings,
    Other,
}

impl Operation {
    pub fn from_path(path: &str) -> Operation {
        if path.contains("/chat") || path.ends_with("/messages") {
            Operation::Chat
        } else if path.contains("embed") {
            Operation::Embeddings
        } else if path.contains("completions") || path.contains("generate") {
            Operation::TextCompletion
        } else {
            Operation::Other
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Chat => "chat",
            Operation::TextCompletion => "text_completion",
            Operation::Embeddings => "embeddings",
            Operation::Other => "other",
        }
    }

    /// Whether `name` is one of the operations above (not a gRPC method).
    fn is_named(name: &str) -> bool {
        matches!(name, "chat" | "text_completion" | "embeddings" | "other")
    }
}

#[derive(Clone)]
pub struct GenAiMetrics {
    duration: HistogramVec,
    ttft: HistogramVec,
    per_chunk: HistogramVec,
    tpot: HistogramVec,
    tokens: HistogramVec,
}

/// The handles of one (route, cluster, version, model, operation).
pub struct GenAiHandles {
    pub duration: Histogram,
    pub ttft: Histogram,
    pub per_chunk: Histogram,
    pub tpot: Histogram,
    pub input_tokens: Histogram,
    pub output_tokens: Histogram,
    pub output_tokens_estimated: Histogram,
}

impl GenAiMetrics {
    pub fn new(registry: &Registry) -> prometheus::Result<GenAiMetrics> {
        let mut token_labels = LABELS.to_vec();
        token_labels.extend(["gen_ai_token_type", "estimated"]);
        Ok(GenAiMetrics {
            duration: register_histogram(
                registry,
                "gen_ai_client_operation_duration_seconds",
                "GenAI operation duration, request start to last byte.",
                DURATION_BUCKETS,
                LABELS,
            )?,
            ttft: register_histogram(
                registry,
                TTFT_METRIC,
                "Time from request start to the first chunk that carries content.",
                TTFT_BUCKETS,
                LABELS,
            )?,
            per_chunk: register_histogram(
                registry,
                GAP_METRIC,
                "Gap between consecutive content chunks of a streamed answer.",
                PER_CHUNK_BUCKETS,
                LABELS,
            )?,
            tpot: register_histogram(
                registry,
                TPOT_METRIC,
                "(E2E - TTFT) / (output tokens - 1) per streamed answer.",
                PER_CHUNK_BUCKETS,
                LABELS,
            )?,
            tokens: register_histogram(
                registry,
                TOKEN_USAGE_METRIC,
                "Tokens per operation; estimated=true when counted from chunks, not read from usage.",
                TOKEN_BUCKETS,
                &token_labels,
            )?,
        })
    }

    fn handles(&self, labels: &[&str; 6]) -> GenAiHandles {
        let token = |kind: &str, estimated: &str| {
            let mut l: Vec<&str> = labels.to_vec();
            l.extend([kind, estimated]);
            self.tokens.with_label_values(&l)
        };
        GenAiHandles {
            duration: self.duration.with_label_values(labels),
            ttft: self.ttft.with_label_values(labels),
            per_chunk: self.per_chunk.with_label_values(labels),
            tpot: self.tpot.with_label_values(labels),
            input_tokens: token("input", "false"),
            output_tokens: token("output", "false"),
            output_tokens_estimated: token("output", "true"),
        }
    }

    pub fn cache(&self, route: &str, cluster: &str, version: &str) -> ModelHandleCache {
        ModelHandleCache {
            metrics: self.clone(),
            route: route.into(),
            cluster: cluster.into(),
            version: version.into(),
            entries: ArcSwap::from_pointee(Vec::new()),
        }
    }
}

/// A (model, operation)'s handles, one set per [`Source`].
type Entry = (Box<str>, Box<str>, [Arc<GenAiHandles>; Source::ALL.len()]);

/// Handles by (model, operation, source) for one (route, cluster, version).
/// Reads are one atomic load and a scan of a short list; a new pair appends
/// once, with the handles of both sources. Looked up once per request, at its
/// end, never per chunk.
pub struct ModelHandleCache {
    metrics: GenAiMetrics,
    route: Box<str>,
    cluster: Box<str>,
    version: Box<str>,
    entries: ArcSwap<Vec<Entry>>,
}

impl ModelHandleCache {
    /// `operation`: [`Operation::as_str`], or a gRPC call's method.
    pub fn get(&self, model: &str, operation: &str, source: Source) -> Arc<GenAiHandles> {
        let entries = self.entries.load();
        if let Some((_, _, h)) = entries
            .iter()
            .find(|(m, o, _)| **m == *model && **o == *operation)
        {
            return h[source.index()].clone();
        }
        let (model, operation) = if entries.len() >= MAX_MODELS {
            let operation = if Operation::is_named(operation) {
                operation
            } else {
                "other"
            };
            ("other", operation)
        } else {
            (model, operation)
        };
        if let Some((_, _, h)) = entries
            .iter()
            .find(|(m, o, _)| **m == *model && **o == *operation)
        {
            return h[source.index()].clone();
        }
        let handles = Source::ALL.map(|s| {
            Arc::new(self.metrics.handles(&[
                &self.route,
                &self.cluster,
                &self.version,
                model,
                operation,
                s.label(),
            ]))
        });
        let added = handles.clone();
        self.entries.rcu(move |old| {
            let mut next = Vec::with_capacity(old.len() + 1);
            next.extend(old.iter().cloned());
            if !next
                .iter()
                .any(|(m, o, _)| **m == *model && **o == *operation)
            {
                next.push((model.into(), operation.into(), added.clone()));
            }
            next
        });
        handles[source.index()].clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn operation_from_path() {
        assert_eq!(
            Operation::from_path("/v1/chat/completions"),
            Operation::Chat
        );
        assert_eq!(Operation::from_path("/v1/messages"), Operation::Chat);
        assert_eq!(Operation::from_path("/api/chat"), Operation::Chat);
        assert_eq!(
            Operation::from_path("/v1/completions"),
            Operation::TextCompletion
        );
        assert_eq!(
            Operation::from_path("/generate_stream"),
            Operation::TextCompletion
        );
        assert_eq!(
            Operation::from_path("/v1/embeddings"),
            Operation::Embeddings
        );
        assert_eq!(Operation::from_path("/health"), Operation::Other);
    }

    #[test]
    fn cache_returns_the_same_handles_and_bounds_models() {
        let registry = Registry::new();
        let m = GenAiMetrics::new(&registry).unwrap();
        let cache = m.cache("chat", "a", "v1");
        let h1 = cache.get("llama", Operation::Chat.as_str(), Source::User);
        let h2 = cache.get("llama", Operation::Chat.as_str(), Source::User);
        assert!(Arc::ptr_eq(&h1, &h2));
        let load = cache.get("llama", Operation::Chat.as_str(), Source::Load);
        assert!(!Arc::ptr_eq(&h1, &load));
        load.ttft.observe(0.2);
        assert_eq!(h1.ttft.get_sample_count(), 0);
        for i in 0..100 {
            cache
                .get(
                    &format!("model-{i}"),
                    Operation::Chat.as_str(),
                    Source::User,
                )
                .ttft
                .observe(0.1);
        }
        assert_eq!(cache.entries.load().len(), MAX_MODELS + 1);
        let other = cache.get("never-seen", Operation::Chat.as_str(), Source::User);
        assert_eq!(other.ttft.get_sample_count(), 100 - (MAX_MODELS as u64 - 1));
        let method = cache.get("unknown", "pkg.Svc/Method", Source::User);
        method.ttft.observe(0.3);
        assert_eq!(method.ttft.get_sample_count(), 1, "a new method is folded");
        assert_eq!(
            other.ttft.get_sample_count(),
            100 - (MAX_MODELS as u64 - 1),
            "into model `other` and operation `other`, not chat"
        );
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        assert!(text.contains("gen_ai_client_operation_time_to_first_chunk_seconds_count{cluster=\"a\",gen_ai_operation_name=\"chat\",gen_ai_request_model=\"llama\",route=\"chat\",source=\"load\",version=\"v1\"} 1"));
        assert!(text.contains("gen_ai_client_operation_time_to_first_chunk_seconds_count{cluster=\"a\",gen_ai_operation_name=\"other\",gen_ai_request_model=\"other\",route=\"chat\",source=\"user\",version=\"v1\"} 1"));
    }
}
