//! The result of a run: per step, per stage and for the run, counts and
//! latency summaries with vLLM's field names, the HDR histograms
//! (serialised, so that shards merge exactly), the lineage, the thresholds
//! and whether they held. Warm-up requests are sent and left out of all of it.

mod group;
mod merge;
mod sweep;

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_filters::Gate;

use group::Group;
pub use group::{GroupSummary, MEASURES};
pub use merge::merge_runs;

use super::engine::RunOutput;
use super::scenario::Scenario;
use super::schedule::Shard;

/// The result file's version.
pub const RUN_VERSION: u32 = 1;
/// The exit code when a threshold fails (k6's).
pub const THRESHOLDS_FAILED: u8 = 99;
/// The exit code of a run stopped by Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: u8 = 130;

/// vLLM's `--goodput ttft:800 tpot:50 e2el:5000`, in ms: a request is
/// good when it meets every bound given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Goodput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2el_ms: Option<f64>,
}

impl Goodput {
    /// Reads `KEY:MS` items, KEY one of ttft, tpot, e2el.
    pub fn parse<'a>(items: impl IntoIterator<Item = &'a str>) -> Result<Goodput, String> {
        let mut g = Goodput::default();
        for item in items.into_iter().flat_map(str::split_whitespace) {
            let (key, ms) = item
                .split_once(':')
                .ok_or_else(|| format!("`{item}` is not KEY:MS like ttft:800"))?;
            let ms: f64 = match ms.parse() {
                Ok(v) if v > 0.0 && f64::is_finite(v) => v,
                _ => return Err(format!("`{item}`: `{ms}` is not a number of ms > 0")),
            };
            match key {
                "ttft" => g.ttft_ms = Some(ms),
                "tpot" => g.tpot_ms = Some(ms),
                "e2el" => g.e2el_ms = Some(ms),
                other => {
                    return Err(format!(
                        "`{item}`: unknown goodput key `{other}` (expected ttft, tpot or e2el)"
                    ))
                }
            }
        }
        Ok(g)
    }
}

/// Where the run comes from.
#[derive(Clone, Debug, Serialize)]
pub struct Lineage {
    pub scenario_sha256: String,
    /// The base URL; header values (secrets) are never written.
    pub target: String,
    pub sluice_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_model: Option<String>,
    /// The run's lineage id (see `docs/lineage.md`), set once the run is
    /// over: its parents include the cluster versions that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<sluice_filters::ContentId>,
    /// The scenario's id, the answering cluster versions' and any other
    /// parent the caller names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<sluice_filters::ContentId>,
}

impl Lineage {
    /// The lineage of a run of `scenario`, read from the file at `path`.
    pub fn of(scenario: &Scenario, path: &std::path::Path) -> std::io::Result<Lineage> {
        Ok(Lineage {
            scenario_sha256: crate::files::sha256_file(path)?,
            target: scenario.target.base_url.clone(),
            sluice_version: env!("CARGO_PKG_VERSION").to_owned(),
            from_model: scenario.from_model.clone(),
            id: None,
            parents: Vec::new(),
        })
    }
}

/// Who answered a step's measured requests: the cluster and version a
/// sluice proxy named, and the model the answers named (`seen` in the
/// result, one entry per distinct combination).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Seen {
    pub step: String,
    pub cluster: Option<String>,
    pub version: Option<String>,
    pub model: Option<String>,
    /// The lineage id of the cluster version (sluice's `x-sluice-lineage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage_id: Option<String>,
    pub requests: u64,
}

/// The `seen` list of measured outcomes; those that named nothing are
/// left out, so a run against a bare server has none.
fn seen(scenario: &Scenario, outcomes: &[super::client::Outcome]) -> Vec<Seen> {
    // (step, cluster, version, model, lineage id)
    type Who<'a> = (
        usize,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
    );
    let mut counts: BTreeMap<Who<'_>, u64> = BTreeMap::new();
    for o in outcomes.iter().filter(|o| !o.warmup) {
        let key = (
            o.step,
            o.cluster.as_deref(),
            o.version.as_deref(),
            o.model.as_deref(),
            o.lineage_id.as_deref(),
        );
        if key.1.is_some() || key.2.is_some() || key.3.is_some() {
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(
            |((step, cluster, version, model, lineage_id), requests)| Seen {
                step: scenario
                    .steps
                    .get(step)
                    .map_or_else(|| step.to_string(), |s| s.name.clone()),
                cluster: cluster.map(str::to_owned),
                version: version.map(str::to_owned),
                model: model.map(str::to_owned),
                lineage_id: lineage_id.map(str::to_owned),
                requests,
            },
        )
        .collect()
}

/// What a replay ran (`replay` in the result): the trace and the flags.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayRun {
    /// As the scenario names it.
    pub file: String,
    pub trace_sha256: String,
    pub speed: f64,
    /// `--from` / `--to` as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<f64>,
    /// Requests in the trace.
    pub recorded_requests: usize,
    /// Of the whole run (every shard): the requests and journeys planned
    /// after the window and the sample.
    pub planned_requests: usize,
    pub planned_journeys: usize,
}

/// What the run's caller knows and the engine does not.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub run_id: String,
    pub shard: String,
    pub started_at: String,
    pub lineage: Lineage,
    pub goodput: Goodput,
    /// Keep every request in the report (`--detailed`).
    pub detailed: bool,
}

/// One threshold, judged on the run's measured requests.
#[derive(Clone, Debug, Serialize)]
pub struct ThresholdResult {
    pub name: &'static str,
    /// A step's own threshold; absent for the run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub bound: f64,
    /// `None` when nothing was measured: then it fails.
    pub value: Option<f64>,
    pub passed: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct StepSummary {
    pub name: String,
    pub service: &'static str,
    #[serde(flatten)]
    pub summary: GroupSummary,
}

#[derive(Clone, Debug, Serialize)]
pub struct StageSummary {
    pub stage: usize,
    #[serde(flatten)]
    pub summary: GroupSummary,
}

/// Dispatch: what was late, queued or left.
#[derive(Clone, Debug, Serialize)]
pub struct Dispatch {
    /// Journeys started.
    pub journeys: u64,
    /// Requests that waited for a `max_in_flight` slot (warm-up included).
    pub queued: u64,
    /// Requests still in flight when the drain ended: cut, not dropped.
    pub cut_in_flight: u64,
    /// Requests still waiting for a slot when the drain ended.
    pub cut_waiting: u64,
    pub warmup_requests: u64,
}

/// The result file (`-o run.json`).
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub v: u32,
    pub scenario: String,
    /// `open`, or `closed` with `users`.
    pub mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<usize>,
    pub run_id: String,
    pub seed: u64,
    pub shard: String,
    pub started_at: String,
    pub lineage: Lineage,
    pub goodput: Goodput,
    pub dispatch: Dispatch,
    pub summary: GroupSummary,
    pub steps: Vec<StepSummary>,
    pub stages: Vec<StageSummary>,
    pub thresholds: Vec<ThresholdResult>,
    pub passed: bool,
    /// Which clusters, versions and models answered each step.
    pub seen: Vec<Seen>,
    /// Stopped early (Ctrl-C): the result is partial.
    pub interrupted: bool,
    /// How each `setup:` step went (outside every summary).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<super::engine::HookResult>,
    /// How each `teardown:` step went.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub teardown: Vec<super::engine::HookResult>,
    /// With `--detailed`: every request that ended, warm-up included (marked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<super::client::Outcome>>,
    /// What the input warns of (a replay's quantised timestamps, in the
    /// words of `sluice trace stats`); empty when none.
    pub warnings: Vec<String>,
    /// A replay's trace and flags (set by the caller, who has the flags).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayRun>,
    /// `--feedback`: each saved scenario mixed in, its weight and requests
    /// (set by the caller, who read them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<crate::feedback::FeedbackRun>,
    /// The arrival kind of the scenario's `from_model:` as a fit (`"v": 1`),
    /// so that `sluice report` can draw the run's inter-arrival times
    /// against it. The model file keeps only the kind it picked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_fit: Option<crate::report::AttachedFit>,
    /// The scenario's `context_sweep:`: each stage's prompt length against
    /// its TTFT, gap, errors and truncations, and the context limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_sweep: Option<crate::load::SweepResult>,
}

impl RunReport {
    /// 0, [`THRESHOLDS_FAILED`], or [`INTERRUPTED`].
    pub fn exit_code(&self) -> u8 {
        if self.interrupted {
            INTERRUPTED
        } else if self.passed {
            0
        } else {
            THRESHOLDS_FAILED
        }
    }
}

/// The report of a run.
pub fn summarize(scenario: &Scenario, out: &RunOutput, info: RunInfo) -> RunReport {
    let goodput = info.goodput;
    let mut run = Group::new();
    let mut steps: Vec<Group> = scenario.steps.iter().map(|_| Group::new()).collect();
    let mut stages: BTreeMap<usize, Group> = BTreeMap::new();
    let mut warmup_requests = 0;
    for o in &out.outcomes {
        if o.warmup {
            warmup_requests += 1;
            continue;
        }
        run.add(o, &goodput);
        if let Some(g) = steps.get_mut(o.step) {
            g.add(o, &goodput);
        }
        stages
            .entry(o.stage)
            .or_insert_with(Group::new)
            .add(o, &goodput);
    }
    // An interrupted run is measured over the part that ran.
    let measured_us = out
        .ran_us
        .saturating_sub(u64::try_from(scenario.plan.warmup.as_micros()).unwrap_or(0));
    let duration_s = measured_us as f64 / 1e6;
    let judge = |group: &Group, step: Option<&str>, (gate, bound): &(Gate, f64)| {
        let value = gate_value(group, *gate);
        ThresholdResult {
            name: gate.as_str(),
            step: step.map(str::to_owned),
            bound: *bound,
            value,
            passed: value.is_some_and(|v| v <= *bound),
        }
    };
    let mut thresholds: Vec<ThresholdResult> = scenario
        .thresholds
        .iter()
        .map(|t| judge(&run, None, t))
        .collect();
    for (step, group) in scenario.steps.iter().zip(&steps) {
        thresholds.extend(
            step.thresholds
                .iter()
                .map(|t| judge(group, Some(&step.name), t)),
        );
    }
    let passed = thresholds.iter().all(|t| t.passed);
    RunReport {
        v: RUN_VERSION,
        scenario: scenario.name.clone(),
        mode: if out.closed.is_some() {
            "closed"
        } else {
            "open"
        },
        users: out.closed,
        run_id: info.run_id,
        seed: scenario.plan.seed,
        shard: info.shard,
        started_at: info.started_at,
        lineage: info.lineage,
        goodput,
        dispatch: Dispatch {
            journeys: out.journeys,
            queued: out.queued,
            cut_in_flight: out.cut_in_flight,
            cut_waiting: out.cut_waiting,
            warmup_requests,
        },
        summary: run.summary(duration_s),
        steps: scenario
            .steps
            .iter()
            .zip(&steps)
            .map(|(s, g)| StepSummary {
                name: s.name.clone(),
                service: s.service.as_str(),
                summary: g.summary(duration_s),
            })
            .collect(),
        stages: stages
            .iter()
            .map(|(k, g)| StageSummary {
                stage: *k,
                summary: g.summary(duration_s),
            })
            .collect(),
        thresholds,
        passed,
        seen: seen(scenario, &out.outcomes),
        interrupted: out.interrupted,
        setup: out.setup.clone(),
        teardown: out.teardown.clone(),
        requests: info.detailed.then(|| out.outcomes.clone()),
        warnings: scenario.warnings(),
        replay: None,
        feedback: Vec::new(),
        arrival_fit: arrival_fit(scenario),
        context_sweep: scenario
            .context_sweep
            .map(|c| sweep::sweep_result(c, &stages)),
    }
}

/// The model's arrivals, when the scenario's come from one.
fn arrival_fit(scenario: &Scenario) -> Option<crate::report::AttachedFit> {
    let file = scenario.from_model.as_deref()?;
    match &scenario.plan.process {
        super::schedule::Process::Renewal(a) => Some(crate::report::AttachedFit::of_arrival(
            file,
            a.clone(),
            scenario.sessions.is_some(),
        )),
        super::schedule::Process::Constant => None,
    }
}

/// A gate's value on the run: latencies in ms from the intended start
/// (`latency_p99` is the response time), `error_rate` in percent of the
/// measured requests, 429s left out.
fn gate_value(run: &Group, gate: Gate) -> Option<f64> {
    match gate {
        Gate::TtftP95 => run.quantile_ms("ttft", 0.95),
        Gate::TtftP99 => run.quantile_ms("ttft", 0.99),
        Gate::GapP99 => run.quantile_ms("itl", 0.99),
        Gate::TpotP95 => run.quantile_ms("tpot", 0.95),
        Gate::LatencyP99 => run.quantile_ms("e2el", 0.99),
        Gate::ErrorRate => {
            (run.requests > 0).then(|| 100.0 * run.failed as f64 / run.requests as f64)
        }
        Gate::P99VsStable
        | Gate::TtftVsStable
        | Gate::GpuMemoryMax
        | Gate::UpstreamQueueMax
        | Gate::CostPer1kMax
        | Gate::GrpcSuccessRateMin
        | Gate::EmbeddingSimilarityP10Min
        | Gate::EmbeddingDriftKlMax
        | Gate::AnswerDispersionMax
        | Gate::MinCoverage => None,
    }
}

#[cfg(test)]
mod tests;
