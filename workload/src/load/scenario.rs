//! A load scenario (`sluice load SCENARIO`): the target, the workload (an
//! arrival process and the rate over time, or a fitted model), sessions,
//! the steps of one user journey, data dictionaries and thresholds. Read in
//! two stages: serde with unknown keys refused (the path of the first
//! problem), then `validate`, which names every wrong value by its path:
//! `steps[1].depends_on: unknown step `nope``.

mod dist;
mod jsonpath;
mod raw;
mod sweep;
mod template;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use sluice_filters::{Gate, PathErrors};

use super::replay::Recording;
use super::schedule::Plan;
use crate::trace::PromptField;

pub(crate) use dist::correlated_pair;
pub use dist::{Dist, QUANTILE_PROBS};
pub use jsonpath::JsonPath;
pub(crate) use sweep::{context_from_models, context_from_props};
pub use sweep::{
    context_limit, ContextLimit, ContextSweep, LimitReason, SweepResult, SweepStage,
    TTFT_JUMP_FACTOR, TTFT_JUMP_MIN_MS,
};
pub use template::Template;
pub(crate) use validate::recorded_step;
pub use validate::REPLAY_STEP;

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub target: Target,
    /// The schedule's plan (the seed included). With `replay`, only its
    /// seed and warm-up count: the schedule is the recording's.
    pub plan: Plan,
    /// Requests sent at once; beyond it they queue, counted.
    pub max_in_flight: usize,
    pub sessions: Option<Sessions>,
    /// In the order they run: every step after the steps it depends on.
    pub steps: Vec<Step>,
    /// Run once, in order, before the load (outside every measurement).
    pub setup: Vec<Step>,
    /// Run once, in order, after the load (also after a failed setup or a
    /// stop), outside every measurement.
    pub teardown: Vec<Step>,
    pub data: BTreeMap<String, Data>,
    /// Run-wide upper bounds, in each gate's unit (ms for durations).
    pub thresholds: Vec<(Gate, f64)>,
    /// The model file of `from_model`, as written.
    pub from_model: Option<String>,
    /// `cost:`, the price table of `sluice capacity`.
    pub cost: Option<sluice_filters::Price>,
    /// `workload.replay`: the trace whose requests are sent (as the one
    /// step [`REPLAY_STEP`]).
    pub replay: Option<ReplaySource>,
    /// `context_sweep:`: stage k of the run sends the llm steps' prompts
    /// sized to the sweep's k-th length.
    pub context_sweep: Option<ContextSweep>,
}

/// A replay's trace, read whole.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaySource {
    /// As written in the scenario (relative to it).
    pub file: String,
    pub recording: Recording,
}

/// Where the load goes. Header values may come from the environment
/// (`${VAR}`); they are sent and never written to results.
#[derive(Clone, PartialEq)]
pub struct Target {
    /// `http://host:port` or `https://…` (and any path prefix), without a
    /// trailing `/`.
    pub base_url: String,
    pub headers: Vec<(String, String)>,
    /// The certificates (DER) of `target.ca_file`: an https target is
    /// trusted by them alone; when empty, by Mozilla's roots (webpki-roots).
    pub ca_certs: Vec<Vec<u8>>,
    /// HTTP/1.1 connections per origin at most (`target.max_connections`):
    /// beyond them requests wait for one. `None`: one per request in flight.
    pub max_connections: Option<usize>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may be secrets: only their names.
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Target")
            .field("base_url", &self.base_url)
            .field("headers", &names)
            .field("ca_certs", &self.ca_certs.len())
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

/// With `sessions:`, each arrival starts a session of `turns` journeys,
/// the next starting `think_time` seconds after the last one ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Sessions {
    pub turns: Dist,
    /// Seconds.
    pub think_time: Dist,
    /// Each llm prompt step sends the session's earlier prompts and the
    /// live answers to them as its messages: the context grows turn by turn.
    pub carry_history: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// An OpenAI-compatible chat completion, streamed or not.
    Llm,
    /// Any HTTP request (a plain service).
    Http,
    /// An HTTP request to a vector store's REST API: sent as `http`,
    /// reported apart so that the report attributes time by layer.
    Vector,
    /// A RESP command (`command:`) to a Redis server (`target: HOST:PORT`).
    Redis,
    /// A unary or server-streaming gRPC call (raw protobuf bytes) over
    /// HTTP/2 to `target`.
    Grpc,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Llm => "llm",
            Service::Http => "http",
            Service::Vector => "vector",
            Service::Redis => "redis",
            Service::Grpc => "grpc",
        }
    }
}

/// One step of a journey.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub name: String,
    pub service: Service,
    /// The HTTP method (`POST` for grpc steps).
    pub method: String,
    /// The URL path (a grpc step's `/package.Service/Method`).
    pub path: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Body,
    pub depends_on: Vec<String>,
    /// Seconds waited before the step starts (think time within a journey).
    pub delay: Option<Dist>,
    pub model: Option<String>,
    pub max_tokens: Option<Dist>,
    /// The prompt's size in tokens (`prompt.input_tokens`, or a model's
    /// input lengths): the prompt is padded or cut to it by
    /// [`crate::load::sized_prompt`].
    pub input_tokens: Option<Dist>,
    /// `prompt.prefix: shared`: every request's filler is drawn from the
    /// same seeded stream, so prompts share their start (a prefix cache
    /// hits); else each journey draws its own.
    pub shared_prefix: bool,
    /// The normal correlation of a Gaussian copula joining `input_tokens`
    /// and `max_tokens` (a model's `token_correlation.rho`, set when both
    /// lengths are the model's); else they are drawn independently.
    pub token_rho: Option<f64>,
    pub stream: bool,
    pub timeout: Duration,
    /// Upper bounds judged on this step's requests alone.
    pub thresholds: Vec<(Gate, f64)>,
    /// Sent only when the step it names (one it depends on) ended so.
    pub when: Option<When>,
    /// `ignore_eos: true` in an llm request, for servers that read it
    /// (vLLM, llama.cpp): the answer runs to `max_tokens`.
    pub ignore_eos: bool,
    /// Variables taken from the JSON answer for the steps after it.
    pub extract: Vec<(String, JsonPath)>,
    /// `target:`: the base URL of this step's requests instead of
    /// `target.base_url` (llm, http, vector), or the `HOST:PORT` of the
    /// Redis server (redis, where it is required).
    pub target: Option<String>,
    /// A redis step's command, each argument a template.
    pub command: Vec<Template>,
    /// A later step uses `{{NAME.text}}`: the answer is kept for it.
    pub keep_text: bool,
    /// An llm step's user text reworded before it is sent, the request
    /// marked `x-sluice-perturbed: <rate>`.
    pub perturb: Option<sluice_filters::Perturbation>,
}

impl Step {
    /// Every variable its templates use.
    pub fn vars(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |t: &Template| out.extend(t.vars().map(str::to_owned));
        add(&self.path);
        self.headers.iter().for_each(|(_, t)| add(t));
        self.command.iter().for_each(&mut add);
        match &self.body {
            Body::Prompt(t) => add(t),
            Body::Json(j) => {
                let mut strings = Vec::new();
                validate::collect_strings(j, &mut strings);
                for text in strings {
                    if let Ok(t) = Template::parse(&text) {
                        add(&t);
                    }
                }
            }
            Body::None | Body::Grpc(_) => {}
        }
        out
    }
}

/// How a step ended, as `when:` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// A 2xx answer (or a RESP reply that is not an error).
    Ok,
    /// Any failure.
    Error,
    /// A redis step's reply that is not nil (nor an empty array).
    Hit,
    /// A redis step's nil reply (or empty array).
    Miss,
}

/// `when: STEP.ok`, `STEP.error`, `STEP.hit` or `STEP.miss`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct When {
    pub step: String,
    pub ended: Ended,
}

/// What a step sends.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    None,
    /// JSON, with `{{var}}` replaced in every string.
    Json(serde_json::Value),
    /// An LLM step's chat completion built around the prompt.
    Prompt(Template),
    /// A grpc step's request message: raw protobuf bytes, sent in one
    /// length-prefixed frame.
    Grpc(Vec<u8>),
}

/// The values of one data variable, drawn per journey.
#[derive(Clone, Debug, PartialEq)]
pub struct Data {
    pub values: Vec<String>,
    /// In file order (journey k takes value k mod n), else uniform with the seed.
    pub sequential: bool,
    /// `trace:` only: how many of its lines gave a value.
    pub from_trace: Option<TraceData>,
}

/// The lines of a `data` trace, and why those that gave no value did not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceData {
    /// As written in the scenario.
    pub file: String,
    /// Which prompt of each body the values are.
    pub field: PromptField,
    pub lines: u64,
    /// Lines without a `body` (a Mooncake, Azure or BurstGPT trace has none).
    pub without_body: u64,
    /// Lines whose body holds no prompt of the `field` asked for.
    pub without_prompt: u64,
}

/// The step timeout when none is written.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// `max_in_flight` when none is written.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 512;

impl Scenario {
    /// Reads and validates a scenario. `dir` is where `body_file`, data
    /// files and `from_model` are found; `env` reads `${VAR}`.
    pub fn from_yaml(
        text: &str,
        dir: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Scenario, PathErrors> {
        let raw: raw::RawScenario = crate::files::from_yaml(text)?;
        validate::validate(raw, dir, env)
    }

    /// What the input warns of, said on stderr and in run.json: a replay's
    /// quantised timestamps, and the lines of a `data` trace that gave no
    /// value.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .replay
            .iter()
            .flat_map(|r| r.recording.warnings.iter().cloned())
            .collect();
        for (name, data) in &self.data {
            out.extend(data.from_trace.as_ref().and_then(|t| t.warning(name)));
        }
        out
    }

    /// [`Scenario::from_yaml`] of a file, with the process's environment.
    pub fn read(path: &Path) -> Result<Scenario, PathErrors> {
        let text = crate::files::read_text(path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Scenario::from_yaml(&text, dir, &|name| std::env::var(name).ok())
    }
}

/// `--sla ttft_p95=800ms,error_rate=1%`: run-wide thresholds read by the
/// same code and rules as `thresholds:` (a value is read as the YAML
/// scalar it would be there); each error as `--sla: NAME: what`.
pub fn parse_sla(text: &str) -> Result<Vec<(Gate, f64)>, Vec<String>> {
    let mut errors = Vec::new();
    let mut out: Vec<(Gate, f64)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, value)) = item.split_once('=') else {
            errors.push(format!(
                "--sla: `{item}` is not NAME=VALUE like ttft_p95=800ms"
            ));
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        let raw = match serde_norway::from_str::<raw::RawValue>(value) {
            Ok(v @ (raw::RawValue::Number(_) | raw::RawValue::Text(_))) => v,
            _ => {
                errors.push(format!(
                    "--sla: {name}: `{value}` is not a duration like 800ms or a percent like 1%"
                ));
                continue;
            }
        };
        let mut e = validate::Errors::default();
        let one = BTreeMap::from([(name.to_owned(), raw)]);
        let read = validate::thresholds(&one, "--sla", &mut e);
        errors.extend(e.0.iter().map(|e| format!("--sla: {name}: {}", e.message)));
        for (gate, bound) in read {
            if out.iter().any(|(g, _)| *g == gate) {
                errors.push(format!("--sla: {name}: given twice"));
            } else {
                out.push((gate, bound));
            }
        }
    }
    match errors.is_empty() {
        true => Ok(out),
        false => Err(errors),
    }
}

#[cfg(test)]
mod tests;
