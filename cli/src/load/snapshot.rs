//! What `sluice load` shows and pushes while it runs: a [`Snapshot`] of the
//! engine's live counters at one moment, the [`Rates`] between two of them,
//! and the [`LoadRun`] that `--report-to` sends. Pure but for
//! [`Shape::take`], which reads the engine's atomics and the clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use sluice_filters::{Gate, LoadRun, LoadRunState, LoadRunThreshold};
use sluice_workload::{Intended, Live, Plan, ThresholdResult};

/// What does not change while the run goes on: the schedule's stages and
/// arrivals (this shard's), and the thresholds to judge.
pub(crate) struct Shape<'a> {
    /// This shard's intended starts, in time order; empty in a closed loop.
    arrivals: &'a [Intended],
    /// Where each segment of the rate ends (µs from the start), and its stage.
    ends: Vec<(u64, usize)>,
    stages: usize,
    span_us: u64,
    closed: bool,
    /// Run-wide ones first, then each step's, as the result lists them.
    thresholds: Vec<(Gate, Option<String>, f64)>,
}

impl<'a> Shape<'a> {
    pub(crate) fn new(
        scenario: &sluice_workload::Scenario,
        arrivals: &'a [Intended],
        span_us: u64,
        closed: bool,
    ) -> Shape<'a> {
        let mut thresholds: Vec<_> = scenario
            .thresholds
            .iter()
            .map(|(g, b)| (*g, None, *b))
            .collect();
        for step in &scenario.steps {
            let own = step.thresholds.iter();
            thresholds.extend(own.map(|(g, b)| (*g, Some(step.name.clone()), *b)));
        }
        Shape {
            arrivals: if closed { &[] } else { arrivals },
            ends: ends(&scenario.plan),
            stages: scenario
                .plan
                .segments
                .iter()
                .map(|s| s.stage + 1)
                .max()
                .unwrap_or(1),
            span_us,
            closed,
            thresholds,
        }
    }

    /// The schedule's length, µs.
    pub(crate) fn span_us(&self) -> u64 {
        self.span_us
    }

    /// The stage at `us` from the start; `None` past the schedule's end.
    fn stage_at(&self, us: u64) -> Option<usize> {
        if us >= self.span_us {
            return None;
        }
        let i = self.ends.partition_point(|(end, _)| *end <= us);
        // Past the plan's stages (saved `--feedback` requests that run on):
        // the last stage, as the schedule marks them.
        let at = self.ends.get(i).or(self.ends.last());
        Some(at.map_or(0, |(_, stage)| *stage))
    }

    /// The live counters now.
    pub(crate) fn take(&self, live: &Live) -> Snapshot {
        let elapsed_us = live.began.get().map(|b| {
            u64::try_from(Instant::now().saturating_duration_since(*b).as_micros())
                .unwrap_or(u64::MAX)
        });
        self.at(live, elapsed_us)
    }

    /// The live counters, `elapsed_us` into the schedule (`None`: in the setup).
    fn at(&self, live: &Live, elapsed_us: Option<u64>) -> Snapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Acquire);
        let m = &live.measures;
        let thresholds = self
            .thresholds
            .iter()
            .map(|(gate, step, bound)| {
                // A step's value needs its own histograms: only the result has them.
                let value = step.is_none().then(|| m.gate_value(*gate)).flatten();
                LoadRunThreshold {
                    name: gate.as_str().to_owned(),
                    step: step.clone(),
                    bound: *bound,
                    value,
                    passed: value.is_none_or(|v| v <= *bound),
                }
            })
            .collect();
        let at = elapsed_us.unwrap_or(0);
        // `started` first: a journey that starts between the two reads is
        // then in `journeys` only, so `ended` never counts one still running.
        let started = get(&live.started);
        let journeys = get(&live.journeys);
        Snapshot {
            elapsed_us,
            span_us: self.span_us,
            stage: self.stage_at(at),
            stages: self.stages,
            due: (!self.closed).then(|| self.arrivals.partition_point(|a| a.at_us <= at) as u64),
            ended: started.saturating_sub(journeys),
            sent: get(&live.sent),
            done: get(&live.done),
            failed: get(&live.failed),
            in_flight: get(&live.in_flight),
            waiting: get(&live.waiting),
            queued: get(&live.queued),
            ttft_p95_ms: m.gate_value(Gate::TtftP95),
            error_rate: m.error_rate(),
            thresholds,
        }
    }
}

/// The end (µs from the start) and stage of each segment of the plan.
fn ends(plan: &Plan) -> Vec<(u64, usize)> {
    let mut at = 0u64;
    plan.segments
        .iter()
        .map(|s| {
            at = at.saturating_add(u64::try_from(s.span.as_micros()).unwrap_or(u64::MAX));
            (at, s.stage)
        })
        .collect()
}

/// The run at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Snapshot {
    /// From the schedule's start; `None` while the setup runs.
    pub(crate) elapsed_us: Option<u64>,
    pub(crate) span_us: u64,
    /// From 0; `None` past the schedule's end (draining).
    pub(crate) stage: Option<usize>,
    pub(crate) stages: usize,
    /// This shard's arrivals due by now; `None` in a closed loop.
    pub(crate) due: Option<u64>,
    /// Journeys ended.
    pub(crate) ended: u64,
    pub(crate) sent: u64,
    pub(crate) done: u64,
    pub(crate) failed: u64,
    pub(crate) in_flight: u64,
    pub(crate) waiting: u64,
    pub(crate) queued: u64,
    pub(crate) ttft_p95_ms: Option<f64>,
    pub(crate) error_rate: Option<f64>,
    /// Judged on what ended so far; a step's is not measured until the end.
    pub(crate) thresholds: Vec<LoadRunThreshold>,
}

/// Arrivals per second the schedule offered and journeys per second that
/// ended, between two snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Rates {
    /// `None` in a closed loop.
    pub(crate) offered: Option<f64>,
    pub(crate) achieved: f64,
}

impl Rates {
    /// From the counts of `before` and `now` over the time between them
    /// (zero when none passed).
    pub(crate) fn between(before: &Snapshot, now: &Snapshot) -> Rates {
        let from = before.elapsed_us.unwrap_or(0);
        let seconds = now.elapsed_us.unwrap_or(0).saturating_sub(from) as f64 / 1e6;
        let per_s = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        Rates {
            offered: now
                .due
                .map(|d| per_s(d.saturating_sub(before.due.unwrap_or(0)))),
            achieved: per_s(now.ended.saturating_sub(before.ended)),
        }
    }
}

/// What names the run in every push.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunMeta {
    pub(crate) run_id: String,
    pub(crate) scenario: String,
    pub(crate) shard: String,
    /// `open` or `closed`.
    pub(crate) mode: &'static str,
    /// RFC 3339.
    pub(crate) started_at: String,
}

/// The pushed summary of `now`, running.
pub(crate) fn load_run(
    meta: &RunMeta,
    now: &Snapshot,
    rates: Rates,
    updated_at: String,
) -> LoadRun {
    LoadRun {
        run_id: meta.run_id.clone(),
        scenario: meta.scenario.clone(),
        state: LoadRunState::Running,
        shard: meta.shard.clone(),
        mode: meta.mode.to_owned(),
        stage: now.stage,
        stages: now.stages,
        offered_rate: rates.offered,
        achieved_rate: rates.achieved,
        sent: now.sent,
        done: now.done,
        failed: now.failed,
        in_flight: now.in_flight,
        queued: now.queued,
        ttft_p95_ms: now.ttft_p95_ms,
        error_rate: now.error_rate,
        passed: now.thresholds.iter().all(|t| t.passed),
        thresholds: now.thresholds.clone(),
        elapsed_s: now.elapsed_us.unwrap_or(0) as f64 / 1e6,
        duration_s: now.span_us as f64 / 1e6,
        started_at: meta.started_at.clone(),
        updated_at,
    }
}

/// How the run ended, from its result: the last push says it.
#[derive(Clone, Debug)]
pub(crate) struct Settled {
    pub(crate) thresholds: Vec<ThresholdResult>,
    pub(crate) passed: bool,
    pub(crate) interrupted: bool,
}

impl Settled {
    /// `run` as the final push: its state, and the result's verdicts.
    pub(crate) fn settle(&self, run: &mut LoadRun) {
        run.state = if self.interrupted {
            LoadRunState::Interrupted
        } else {
            LoadRunState::Done
        };
        run.thresholds = self
            .thresholds
            .iter()
            .map(|t| LoadRunThreshold {
                name: t.name.to_owned(),
                step: t.step.clone(),
                bound: t.bound,
                value: t.value,
                passed: t.passed,
            })
            .collect();
        run.passed = self.passed;
    }
}

#[cfg(test)]
mod tests;
