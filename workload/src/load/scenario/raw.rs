//! The scenario as written: serde structs that refuse unknown keys. Values
//! stay as text (`250ms`, `1%`, `2s-8s`) until `validate` reads them, so
//! that every bad value is named by its path.

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_filters::WeibullComponent;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub(crate) scenario: String,
    pub(crate) target: RawTarget,
    pub(crate) workload: RawWorkload,
    #[serde(default)]
    pub(crate) sessions: Option<RawSessions>,
    /// Optional only for a replay (which sends the recorded requests);
    /// `validate` asks for at least one otherwise.
    #[serde(default)]
    pub(crate) steps: Option<Vec<RawStep>>,
    #[serde(default)]
    pub(crate) data: BTreeMap<String, RawData>,
    #[serde(default)]
    pub(crate) thresholds: BTreeMap<String, RawValue>,
    #[serde(default)]
    pub(crate) setup: Vec<RawStep>,
    #[serde(default)]
    pub(crate) teardown: Vec<RawStep>,
    /// The price table `sluice capacity` prices throughput by.
    #[serde(default)]
    pub(crate) cost: Option<sluice_filters::RawPrice>,
    /// A replay's implicit step: its timeout, thresholds and the settings
    /// of the requests it builds for rows without a body.
    #[serde(default)]
    pub(crate) replay_step: Option<RawReplayStep>,
    /// Grows the llm steps' prompts stage by stage.
    #[serde(default)]
    pub(crate) context_sweep: Option<RawContextSweep>,
}

/// `context_sweep: { from: 256, to: 4096, steps: 8 }` (or `to: auto`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawContextSweep {
    pub(crate) from: u64,
    pub(crate) to: RawSweepTo,
    pub(crate) steps: u64,
}

/// `to:` a number of tokens, or `auto` (the model's context, asked of the
/// target before the run).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawSweepTo {
    Tokens(u64),
    Word(String),
}

/// `replay_step:`, the keys of a step that a replay's one step takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReplayStep {
    #[serde(default)]
    pub(crate) timeout: Option<String>,
    #[serde(default)]
    pub(crate) thresholds: BTreeMap<String, RawValue>,
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default)]
    pub(crate) ignore_eos: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTarget {
    pub(crate) base_url: String,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) ca_file: Option<String>,
    #[serde(default)]
    pub(crate) max_connections: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkload {
    #[serde(default)]
    pub(crate) arrival: Option<RawArrival>,
    #[serde(default)]
    pub(crate) from_model: Option<String>,
    /// A trace file to replay, relative to the scenario.
    #[serde(default)]
    pub(crate) replay: Option<String>,
    #[serde(default)]
    pub(crate) duration: Option<String>,
    #[serde(default)]
    pub(crate) warmup: Option<String>,
    #[serde(default)]
    pub(crate) stages: Option<Vec<RawStage>>,
    #[serde(default)]
    pub(crate) max_in_flight: Option<u64>,
    #[serde(default)]
    pub(crate) seed: Option<u64>,
}

/// Every parameter any kind takes; `validate` checks that a kind gets its
/// own and no other.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawArrival {
    pub(crate) kind: String,
    pub(crate) rate: Option<f64>,
    pub(crate) burstiness: Option<f64>,
    pub(crate) shape: Option<f64>,
    pub(crate) scale: Option<f64>,
    pub(crate) mu: Option<f64>,
    pub(crate) sigma: Option<f64>,
    pub(crate) components: Option<Vec<WeibullComponent>>,
    /// `kind: trace`'s file, the same as `workload.replay`.
    pub(crate) file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStage {
    pub(crate) rate: f64,
    #[serde(default, rename = "for")]
    pub(crate) hold: Option<String>,
    #[serde(default)]
    pub(crate) ramp: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSessions {
    pub(crate) turns: RawValue,
    #[serde(default)]
    pub(crate) think_time: Option<RawValue>,
    #[serde(default)]
    pub(crate) carry_history: Option<bool>,
}

/// A number, a text (`250ms`, `2s-8s`, `1%`), or a lognormal.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawValue {
    Number(f64),
    Text(String),
    Lognormal { lognormal: RawLognormal },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLognormal {
    pub(crate) median: RawScalar,
    pub(crate) sigma: f64,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawScalar {
    Number(f64),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStep {
    pub(crate) name: String,
    pub(crate) service: String,
    #[serde(default)]
    pub(crate) method: Option<String>,
    #[serde(default)]
    pub(crate) path: Option<String>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) body: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) body_file: Option<String>,
    #[serde(default)]
    pub(crate) depends_on: Option<RawNames>,
    #[serde(default)]
    pub(crate) delay: Option<RawValue>,
    #[serde(default)]
    pub(crate) prompt: Option<RawPrompt>,
    #[serde(default)]
    pub(crate) model: Option<String>,
    #[serde(default)]
    pub(crate) max_tokens: Option<RawValue>,
    #[serde(default)]
    pub(crate) stream: Option<bool>,
    #[serde(default)]
    pub(crate) timeout: Option<String>,
    #[serde(default)]
    pub(crate) thresholds: BTreeMap<String, RawValue>,
    #[serde(default)]
    pub(crate) when: Option<String>,
    #[serde(default)]
    pub(crate) extract: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) ignore_eos: Option<bool>,
    #[serde(default)]
    pub(crate) command: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) target: Option<String>,
    /// A grpc step's request message.
    #[serde(default)]
    pub(crate) message: Option<RawMessage>,
    /// A grpc step's metadata (sent as headers).
    #[serde(default)]
    pub(crate) metadata: BTreeMap<String, String>,
    /// An llm step's user text reworded (`filters::PerturbSpec`, as
    /// `mirror.perturb` reads it).
    #[serde(default)]
    pub(crate) perturb: Option<sluice_filters::PerturbSpec>,
}

/// A grpc message: raw protobuf bytes (`{ base64: ... }` or `{ hex: ... }`),
/// or `{ json: ..., descriptor_set: file }`, encoded at load by the
/// method's input type.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMessage {
    #[serde(default)]
    pub(crate) base64: Option<String>,
    #[serde(default)]
    pub(crate) hex: Option<String>,
    /// The message in protobuf's canonical JSON mapping.
    #[serde(default)]
    pub(crate) json: Option<serde_json::Value>,
    /// A binary `FileDescriptorSet`, relative to the scenario.
    #[serde(default)]
    pub(crate) descriptor_set: Option<String>,
}

/// `depends_on: a` or `depends_on: [a, b]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawNames {
    One(String),
    Many(Vec<String>),
}

/// `prompt: "text"` or `prompt: { template: "text" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawPrompt {
    Text(String),
    Template(RawTemplate),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTemplate {
    pub(crate) template: String,
    #[serde(default)]
    pub(crate) input_tokens: Option<RawValue>,
    #[serde(default)]
    pub(crate) prefix: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawData {
    #[serde(default)]
    pub(crate) file: Option<String>,
    #[serde(default)]
    pub(crate) values: Option<Vec<String>>,
    /// A trace whose recorded bodies give the values, relative to the scenario.
    #[serde(default)]
    pub(crate) trace: Option<String>,
    /// Which prompt of a trace's body (`last_user`, `all_user`, `prompt`).
    #[serde(default)]
    pub(crate) field: Option<String>,
    #[serde(default)]
    pub(crate) order: Option<String>,
}
