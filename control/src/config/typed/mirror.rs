//! A route's validated mirror policy.

use std::time::Duration;

use sluice_filters::Perturbation;

pub(crate) const DEFAULT_MAX_BODY: usize = 1024 * 1024;
pub(crate) const DEFAULT_MAX_IN_FLIGHT: usize = 64;
pub(crate) const DEFAULT_MIRROR_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq)]
pub struct MirrorConfig {
    pub cluster: String,
    /// 0..=100.
    pub percent: f64,
    pub copies: f64,
    pub max_body: usize,
    /// Copies per second; `None` = unlimited.
    pub rate_limit: Option<f64>,
    pub max_in_flight: usize,
    /// Lower-case header name.
    pub sample_by: Option<String>,
    pub timeout: Duration,
    /// Lower-case header names with their values.
    pub rewrite_headers: Vec<(String, String)>,
    pub rewrite_model: Option<String>,
    pub compare: CompareConfig,
    /// Shadow copies are perturbed (noise copies never are).
    pub perturb: Option<Perturbation>,
    /// Answer stability: the dispersion of each job's shadow answers.
    pub stability: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CompareConfig {
    pub ids: Option<String>,
    pub noise_copies: u32,
    pub keep_text: bool,
    pub min_similarity: f64,
    pub embeddings: Option<EmbeddingsConfig>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingsConfig {
    pub cluster: String,
    pub model: Option<String>,
    pub similarity_min: f64,
    pub kl_max: f64,
    pub window: usize,
    /// `baseline: FILE`, read at validation.
    pub baseline: Option<BaselineFile>,
    /// Prompt-diversity coverage of the route's rollout steps.
    pub coverage: Option<CoverageConfig>,
}

/// `compare.embeddings.coverage`, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct CoverageConfig {
    /// Share of requests whose prompt is embedded, 0 (excluded) ..= 1.
    pub sample: f64,
    /// Prompts embedded per second at most.
    pub max_per_second: u32,
    /// Cosine similarity at which a prompt joins a cluster.
    pub similarity: f64,
    /// Clusters kept at most.
    pub max_clusters: usize,
}

/// A saved drift baseline as the config loaded it. Its pairs take part in
/// the policy's equality: a file changed between two loads starts a new
/// drift state, as any other change of the policy does.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineFile {
    pub path: String,
    pub similarities: Vec<f64>,
}

impl Default for CompareConfig {
    fn default() -> Self {
        CompareConfig {
            ids: None,
            noise_copies: 0,
            keep_text: false,
            min_similarity: 1.0,
            embeddings: None,
        }
    }
}
