//! The capacity search, driven: each stage is one open-loop load run of
//! the scenario at the stage's rate (the scenario's arrival process, its
//! warm-up, then `stage` measured, with the SLAs as the run's thresholds),
//! watched every half second for over-saturation and read every second
//! for the live signals. The search's moves come from
//! [`super::search::next`]; after each stage the signals, the knee and the
//! recommendation are computed over the stages run so far, and once more
//! at the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sluice_filters::{calm_baseline, token_cost_excess, Gate, SlopeAt};

use super::knee::{knee, Knee};
use super::score::{recommend, score, Bounds, StageSignals, Weights};
use super::search::{next, Next, Probe, SearchRules};
use super::signals::StageProgress;
use super::stage::{measure, Purpose, StageResult};
use super::watch::{watch, Reader};
use crate::load::{
    run as run_load, summarize, AnswerTap, EngineError, Goodput, Lineage, Live, RunInfo,
    RunOptions, Scenario, ScheduleError, Segment,
};

/// Why a search could not go on.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error("stage {index} at {rate} req/s: {source}")]
    Engine {
        index: usize,
        rate: f64,
        source: EngineError,
    },
    #[error("stage {index} at {rate} req/s: {source}")]
    Schedule {
        index: usize,
        rate: f64,
        source: ScheduleError,
    },
}

/// The capacity file's version.
pub const CAPACITY_VERSION: u32 = 1;

/// What the search tells as it goes: a reading of the running stage every
/// second (called from the stage's watcher thread), and, as each stage
/// ends, the answer over the stages run so far (the stage is the last of
/// its `stages`).
pub struct Observer<'a> {
    pub progress: &'a mut (dyn FnMut(&StageProgress) + Send),
    pub stage: &'a mut dyn FnMut(&CapacityReport),
}

/// How to search.
#[derive(Clone, Debug)]
pub struct CapacityOptions {
    /// The hard SLAs, in each gate's unit.
    pub sla: Vec<(Gate, f64)>,
    pub weights: Weights,
    pub bounds: Bounds,
    pub knee_bound: f64,
    /// The measured length of a probe and of the confirmation.
    pub stage: Duration,
    pub confirm: Duration,
    /// The whole search's time, stages and their drains together.
    pub budget: Duration,
    pub rules: SearchRules,
    pub drain: Duration,
    pub threads: usize,
    pub run_id: String,
    pub started_at: String,
    pub lineage: Lineage,
}

/// The capacity file.
#[derive(Clone, Debug, Serialize)]
pub struct CapacityReport {
    pub v: u32,
    pub kind: &'static str,
    pub scenario: String,
    pub run_id: String,
    pub started_at: String,
    pub lineage: Lineage,
    pub sla: Vec<SlaBound>,
    pub weights: Weights,
    pub bounds: Bounds,
    /// The highest rate at which every SLA held, requests a second.
    pub max_rate: Option<f64>,
    /// The highest of those whose joint score is ≥ 0, requests a second.
    pub recommended_rate: Option<f64>,
    /// The same two as the scenario's arrivals (journeys) a second.
    pub max_arrival_rate: Option<f64>,
    pub recommended_arrival_rate: Option<f64>,
    pub binding: String,
    pub knee: KneeResult,
    /// Why the search ended before its confirmation, if it did:
    /// `budget`, `interrupted`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<&'static str>,
    pub elapsed_s: f64,
    pub stages: Vec<StageResult>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct SlaBound {
    pub gate: Gate,
    pub bound: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct KneeResult {
    /// Offered arrivals a second at the knee.
    pub rate: Option<f64>,
    /// The first stage whose second derivative fell below the bound.
    pub first_below: Option<f64>,
    pub bound: f64,
    /// By stage in order of rate.
    pub rates: Vec<f64>,
    pub second_derivative: Vec<Option<f64>>,
}

/// Runs the search; `observer` hears it as it goes, `interrupt` (Ctrl-C)
/// stops the stage running and the search.
pub fn search(
    scenario: &Scenario,
    opts: &CapacityOptions,
    interrupt: &AtomicBool,
    observer: Observer<'_>,
) -> Result<CapacityReport, CapacityError> {
    let start = Instant::now();
    let mut stages: Vec<StageResult> = Vec::new();
    let mut probes: Vec<Probe> = Vec::new();
    let mut stopped = None;
    let warmup = scenario.plan.warmup;
    // Bounded: every move narrows the bracket or doubles, and the budget
    // ends it; 64 stages is far past any real search.
    for index in 0..64 {
        let (rate, purpose) = match next(&probes, &opts.rules) {
            Next::Probe(r) => (r, Purpose::Probe),
            Next::Confirm(r) => (r, Purpose::Confirm),
            Next::Done(_) => break,
        };
        let length = match purpose {
            Purpose::Probe => opts.stage,
            Purpose::Confirm => opts.confirm,
        };
        if start.elapsed() + warmup + length > opts.budget {
            stopped = Some("budget");
            break;
        }
        if interrupt.load(Ordering::Acquire) {
            stopped = Some("interrupted");
            break;
        }
        let stage = StageRun {
            index,
            rate,
            purpose,
            length,
            base: base_slope(&stages, opts.bounds.p99_excess_ms_per_token),
        };
        let result = run_stage(scenario, opts, &stage, interrupt, &mut *observer.progress)?;
        let passed = result.passed;
        let worst_margin = result.worst_margin;
        stages.push(result);
        (observer.stage)(&conclude(
            scenario,
            opts,
            stages.clone(),
            None,
            start.elapsed(),
        ));
        probes.push(Probe {
            rate,
            worst_margin,
            passed,
            confirm: purpose == Purpose::Confirm,
        });
        if interrupt.load(Ordering::Acquire) {
            stopped = Some("interrupted");
            break;
        }
    }
    Ok(conclude(scenario, opts, stages, stopped, start.elapsed()))
}

/// One stage to run.
pub(super) struct StageRun {
    pub index: usize,
    pub rate: f64,
    pub purpose: Purpose,
    pub length: Duration,
    /// The slope of the lowest-rate stage run before, and its rate.
    pub base: Option<SlopeAt>,
}

/// The slope at the lowest rate that has one that can be read against
/// `bound`, and that rate.
fn base_slope(stages: &[StageResult], bound: f64) -> Option<SlopeAt> {
    calm_baseline(
        stages
            .iter()
            .filter(|s| s.slope_readable(bound))
            .filter_map(|s| {
                Some(SlopeAt {
                    rate: s.rate,
                    ms_per_token: s.p99_slope_ms_per_token?,
                })
            }),
    )
}

fn run_stage(
    scenario: &Scenario,
    opts: &CapacityOptions,
    stage: &StageRun,
    interrupt: &AtomicBool,
    on_progress: &mut (dyn FnMut(&StageProgress) + Send),
) -> Result<StageResult, CapacityError> {
    let StageRun {
        index,
        rate,
        purpose,
        length,
        ..
    } = *stage;
    let mut s = scenario.clone();
    s.thresholds = opts.sla.clone();
    s.plan.segments = vec![Segment {
        span: s.plan.warmup + length,
        from: rate,
        to: rate,
        stage: 0,
    }];
    // A rate too high for one schedule is a stage that cannot be run.
    let schedule = s
        .plan
        .schedule()
        .map_err(|source| CapacityError::Schedule {
            index,
            rate,
            source,
        })?;
    let run_id = format!("{}-s{index}", opts.run_id);
    let options = RunOptions {
        closed: None,
        drain: opts.drain,
        run_id: run_id.clone(),
        threads: opts.threads,
    };
    let live = Arc::new(Live::default());
    let _ = live.answers.set(AnswerTap::default());
    let done = Arc::new(AtomicBool::new(false));
    let saturated = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let mut reader = Reader {
                scenario: &s,
                opts,
                stage,
                answers: Vec::new(),
                on_progress,
            };
            watch(&live, &done, s.plan.warmup, interrupt, &mut reader)
        });
        let out = run_load(&s, &schedule, &options, live.clone());
        done.store(true, Ordering::Release);
        let saturated = watcher.join().unwrap_or(false);
        out.map(|o| (o, saturated))
    });
    let (out, saturated) = saturated.map_err(|source| CapacityError::Engine {
        index,
        rate,
        source,
    })?;
    let report = summarize(
        &s,
        &out,
        RunInfo {
            run_id,
            shard: "0/1".into(),
            started_at: opts.started_at.clone(),
            lineage: opts.lineage.clone(),
            goodput: Goodput::default(),
            detailed: false,
        },
    );
    let early = saturated.then_some("over_saturated");
    Ok(measure(&s, rate, purpose, &out, report, early))
}

/// The signals over every stage, the knee, the scores and the answer.
fn conclude(
    scenario: &Scenario,
    opts: &CapacityOptions,
    mut stages: Vec<StageResult>,
    stopped: Option<&'static str>,
    elapsed: Duration,
) -> CapacityReport {
    // The excess slope: over the slope at the lowest rate that has a
    // readable one.
    // A slope too noisy to read has no excess: the signal is left out of
    // the stage's score rather than read as what load did.
    let bound = opts.bounds.p99_excess_ms_per_token;
    let base = base_slope(&stages, bound);
    for s in &mut stages {
        s.p99_excess_ms_per_token = match (s.p99_slope_ms_per_token, base) {
            (Some(v), Some(b)) if s.slope_readable(bound) => Some(token_cost_excess(v, b)),
            _ => None,
        };
    }
    let curve: Vec<(f64, f64)> = stages
        .iter()
        .map(|s| (s.rate, s.token_throughput))
        .collect();
    let Knee {
        rate: knee_rate,
        first_below,
        second_derivative,
    } = knee(&curve, opts.knee_bound);
    let mut rates: Vec<f64> = curve.iter().map(|c| c.0).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let top = rates.last().copied().unwrap_or(0.0);
    let signals: Vec<StageSignals> = stages
        .iter()
        .map(|s| StageSignals {
            rate: s.rate,
            p99_excess_ms_per_token: s.p99_excess_ms_per_token,
            cost_per_1k: s.cost_per_1k,
            sla: s.sla.clone(),
            early_stop: s.early_stop,
        })
        .collect();
    let scored: Vec<_> = signals
        .into_iter()
        .map(|sig| {
            let sc = score(&sig, knee_rate.unwrap_or(top), &opts.bounds, &opts.weights);
            (sig, sc)
        })
        .collect();
    for (s, (sig, sc)) in stages.iter_mut().zip(&scored) {
        // One rule for holding, the recommendation's: the cost bound is a
        // hard SLA too when it is given.
        s.passed = sig.held(&opts.bounds);
        s.scored = Some(*sc);
    }
    let answer = recommend(&scored, knee_rate, &opts.bounds);
    // Requests a second: the arrival rate times the stage's requests per
    // journey (1 for a one-step scenario).
    let per_request = |rate: Option<f64>| {
        let r = rate?;
        let s = stages.iter().find(|s| s.rate == r)?;
        Some(r * s.requests_per_journey)
    };
    CapacityReport {
        v: CAPACITY_VERSION,
        kind: "capacity",
        scenario: scenario.name.clone(),
        run_id: opts.run_id.clone(),
        started_at: opts.started_at.clone(),
        lineage: opts.lineage.clone(),
        sla: opts
            .sla
            .iter()
            .map(|&(gate, bound)| SlaBound { gate, bound })
            .collect(),
        weights: opts.weights,
        bounds: opts.bounds,
        max_rate: per_request(answer.max_rate),
        recommended_rate: per_request(answer.recommended_rate),
        max_arrival_rate: answer.max_rate,
        recommended_arrival_rate: answer.recommended_rate,
        binding: answer.binding,
        knee: KneeResult {
            rate: knee_rate,
            first_below,
            bound: opts.knee_bound,
            rates,
            second_derivative,
        },
        stopped,
        elapsed_s: elapsed.as_secs_f64(),
        stages,
    }
}
