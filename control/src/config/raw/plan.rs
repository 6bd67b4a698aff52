//! `plans:` as written: overrides of the rules that size a rollout from
//! its change (`plan: auto`, `sluice plan`), each part optional.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rollout::RawPercent;

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlans {
    pub major: Option<RawClassRule>,
    pub minor: Option<RawClassRule>,
    pub patch: Option<RawClassRule>,
    /// A route above this many requests a second gets `p99_vs_stable`.
    pub high_traffic_rps: Option<f64>,
    /// How far a new prompt template may move the prompt-length spread
    /// before an input-length load stage is added (`15%`).
    pub prompt_spread_change: Option<RawPercent>,
}

/// What one size of change gets; unset parts keep the built-in rule.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawClassRule {
    pub steps: Option<Vec<u32>>,
    pub hold: Option<String>,
    /// Gate names.
    pub gates: Option<Vec<String>>,
    pub capacity_run: Option<bool>,
    pub throughput_check: Option<bool>,
}

/// `plan: auto` on a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawPlanMode {
    Auto,
}
