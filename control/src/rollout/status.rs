//! What the API shows of a rollout: its state, the last gate readings and
//! its history of transitions, each with the evidence that decided it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::fleet::{DiscoveryStatus, TargetStatus};
use super::gates::GateReading;
use super::policy::State;

/// One transition in a rollout's history.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct RolloutEvent {
    /// Milliseconds since the rollout was created (tokio's clock).
    pub at_ms: u64,
    /// Wall clock, milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub from: State,
    pub to: State,
    /// 1-based position in `steps` after the transition (0: not started).
    pub step: usize,
    /// Canary weight after the transition.
    pub weight: u32,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<GateReading>,
    /// The event's lineage id and where it sits; absent in histories saved
    /// before lineage, and when a cluster of the rollout had left the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<EventLineage>,
}

/// Where a rollout event sits in the lineage DAG: below the rollout `rollout`
/// (its id when the event happened), the `seq`-th event (from 0) of its
/// history. `id` is [`crate::event_artifact`]'s of the three.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct EventLineage {
    pub id: sluice_filters::ContentId,
    pub rollout: sluice_filters::ContentId,
    pub seq: usize,
}

/// The body of `GET /v1/rollouts/{name}`.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RolloutStatus {
    pub name: String,
    pub route: String,
    pub stable: String,
    pub canary: String,
    pub state: State,
    /// 1-based position in `steps` (0: not started).
    pub step: usize,
    pub steps: Vec<u32>,
    /// The canary weight the rollout set last; stable has `100 - weight`.
    pub weight: u32,
    /// Evaluations in a row with a breached gate.
    pub breaches: u32,
    /// The last evaluation, by gate name.
    pub gates: BTreeMap<&'static str, GateReading>,
    /// Fleet mode: where the gates are read, and what failed there.
    pub source: Option<SourceStatus>,
    /// Fleet mode: each target's control API and whether it has the weight.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetStatus>,
    /// Fleet mode with `targets: { dns: ... }`: the name, the last answer
    /// and why the last lookup failed.
    pub discovery: Option<DiscoveryStatus>,
    /// `plan: auto`: the plan, with the rule behind each part.
    pub plan: Option<sluice_filters::Plan>,
    /// The current step's prompt coverage, where the route's mirror
    /// measures it (`compare.embeddings.coverage`).
    pub coverage: Option<CoverageStatus>,
    /// Each step reached, oldest first: the canary's figures at the last
    /// evaluation there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub step_history: Vec<StepFigures>,
    /// Oldest first; left out of the list (`GET /v1/rollouts`).
    pub events: Option<Vec<RolloutEvent>>,
}

/// A rollout's `source`, as the status shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceStatus {
    /// The Prometheus base URL.
    pub prometheus: String,
    /// The last evaluation's failed queries, by gate name (or `requests`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, String>,
}

/// A step's prompt coverage: clusters of prompts the canary served at the
/// step, against every cluster seen since the rollout started.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CoverageStatus {
    /// 1-based position in `steps`.
    pub step: usize,
    pub canary_clusters: usize,
    pub clusters_seen: usize,
    /// `canary_clusters / clusters_seen` in percent; `None` before any.
    pub percent: Option<f64>,
    /// The canary's prompts embedded at the step.
    pub prompts: u64,
    /// Every prompt embedded since the rollout started.
    pub prompts_seen: u64,
}

/// What the canary did at one step, as of the last evaluation there (the
/// error rate and p99 over the rollout's `window`).
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepFigures {
    /// 1-based position in `steps`.
    pub step: usize,
    pub weight: u32,
    /// Canary requests in the window.
    pub requests: u64,
    /// Percent of those answered 5xx.
    pub error_rate: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub coverage: Option<CoverageStatus>,
}
