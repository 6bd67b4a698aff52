//! `routes[].mirror` as written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;
/// Shadow copies with a share of the user text's words changed, for the
/// robustness score: the spec `sluice load`'s steps read too.
pub use sluice_filters::PerturbSpec as RawPerturb;

use super::RawPercent;

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMirror {
    /// The shadow cluster copies go to.
    pub cluster: String,
    /// Share of requests mirrored, 0..=100 (default 100).
    pub percent: Option<RawPercent>,
    /// Copies per mirrored request; fractional allowed (default 1).
    pub copies: Option<f64>,
    /// Larger request bodies are not mirrored: `1MiB`, `512KiB`, bytes (default 1MiB).
    pub max_body: Option<RawSize>,
    /// Copies per second the route may send; more are dropped (default unlimited).
    pub rate_limit: Option<f64>,
    /// Copies the route may have outstanding at once (default 64).
    pub max_in_flight: Option<u32>,
    /// Header whose value decides sampling, so a session is mirrored whole.
    pub sample_by: Option<String>,
    /// How long a copy may take, answer read to its end (default 30s).
    pub timeout: Option<String>,
    pub rewrite: Option<RawRewrite>,
    pub compare: Option<RawCompare>,
    pub perturb: Option<RawPerturb>,
    /// Embed the shadow copies' answers to each prompt and record how far
    /// they spread (needs `copies` of at least 2 and `compare.embeddings`).
    pub stability: Option<bool>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRewrite {
    /// Headers set on every copy (replacing the client's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Put in the JSON body's `model` field.
    pub model: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompare {
    /// JSON pointer with `*` to the ids of a JSON answer, for recall@k.
    pub ids: Option<String>,
    /// Extra copies to the primary's own cluster, to learn the noise floor.
    pub noise_copies: Option<u32>,
    /// Keep prompt and answer text in `/v1/mirror/diffs` (default false).
    pub keep_text: Option<bool>,
    /// Text similarity below this is a difference (default 1.0: any change).
    pub min_similarity: Option<f64>,
    /// Embed both answers and compare them by cosine similarity.
    pub embeddings: Option<RawEmbeddings>,
}

/// `compare.embeddings`: an OpenAI-compatible `/v1/embeddings` cluster.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbeddings {
    /// A cluster of kind `llm` serving `/v1/embeddings`.
    pub cluster: String,
    /// The `model` field of the embedding requests.
    pub model: Option<String>,
    /// A pair below this cosine similarity raises a drift event (default 0.82).
    pub similarity_min: Option<f64>,
    /// A window this far (KL, nats) from the baseline raises one (default 0.38).
    pub kl_max: Option<f64>,
    /// Pairs in the baseline, and in the window compared with it (default 50).
    pub window: Option<u32>,
    /// A saved baseline (`GET /v1/routes/{route}/mirror/embedding-baseline`)
    /// to compare with instead of the first `window` pairs: a path, read
    /// when the config is loaded (relative to sluice's working directory,
    /// like `admin.token_file`).
    pub baseline: Option<String>,
    /// Prompt-diversity coverage of the route's rollout steps: the user
    /// text of sampled requests embedded and clustered.
    pub coverage: Option<RawCoverage>,
}

/// `compare.embeddings.coverage`: which prompts are embedded, and how they
/// are clustered.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawCoverage {
    /// Share of the route's requests whose prompt is embedded, 0 (excluded)
    /// ..= 1 (default 0.2).
    pub sample: Option<f64>,
    /// Prompts embedded per second at most; more are dropped and counted
    /// (default 20).
    pub max_per_second: Option<u32>,
    /// Cosine similarity at which a prompt joins a cluster (default 0.82).
    pub similarity: Option<f64>,
    /// Clusters kept at most (default 256).
    pub max_clusters: Option<u32>,
}

/// A byte size: a number of bytes or text like `1MiB`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RawSize {
    Bytes(u64),
    Text(String),
}

impl RawMirror {
    /// One mirror policy as `PUT /v1/routes/{route}/mirror` takes it, YAML
    /// or JSON; paths in errors are relative to it.
    pub fn from_yaml(text: &str) -> Result<RawMirror, super::ConfigErrors> {
        super::parse_item(text, "a mirror policy", "`routes[].mirror`")
    }
}
