//! A synthetic run with recorded requests sent beside its journeys
//! (`sluice load --feedback DIR` on a synthetic scenario), the pure part:
//! the recording is planned as a replay from the run's start, its journeys
//! take the indices after the synthetic arrivals, and the two schedules
//! are merged in time order. One index range so picks a journey's kind,
//! and shards (index mod n) take their share of both.
//!
//! Pure: the caller passes the scenario's plan and the recording.

use std::time::Duration;

use super::replay::{Planned, Recording, ReplayOptions};
use super::schedule::{Intended, Plan, Schedule, MAX_ARRIVALS};

/// What the engine runs for a synthetic scenario with recorded requests
/// beside it ([`crate::run_mixed`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Mixed {
    /// Both kinds of arrival, in time order (the synthetic one first at a
    /// tie); the span is the longer of the two.
    pub schedule: Schedule,
    /// The requests sent beside the journeys; their `step` is the step
    /// each is measured as.
    pub recording: Recording,
    /// Recorded journey k is arrival `first + k`.
    pub journeys: Vec<Vec<Planned>>,
    /// The first recorded arrival's index: the synthetic arrivals' count.
    pub first: u64,
    /// How many of the scenario's steps are its own: a synthetic journey
    /// runs these alone; the steps after them measure recorded requests.
    pub own_steps: usize,
}

impl Mixed {
    /// `synthetic`: the scenario's whole (unsharded) schedule, from `plan`;
    /// `own_steps`: the scenario's steps before the recording's were added.
    pub fn new(
        plan: &Plan,
        synthetic: Schedule,
        own_steps: usize,
        recording: Recording,
    ) -> Result<Mixed, String> {
        let replay = recording.plan(&ReplayOptions::default(), plan.seed)?;
        let first = synthetic.arrivals.len() as u64;
        let warmup_us = micros(plan.warmup);
        // Where each stage's segment ends: a recorded arrival belongs to
        // the stage it falls in (the last one past the scenario's end).
        let mut ends = Vec::new();
        let mut end = 0u64;
        for s in &plan.segments {
            end = end.saturating_add(micros(s.span));
            ends.push((end, s.stage));
        }
        let last_stage = ends.last().map_or(0, |e| e.1);
        let stage_at = |at: u64| ends.iter().find(|e| at < e.0).map_or(last_stage, |e| e.1);
        let mut arrivals = synthetic.arrivals;
        if arrivals.len() + replay.schedule.arrivals.len() > MAX_ARRIVALS {
            return Err(format!(
                "the schedule would hold more than {MAX_ARRIVALS} arrivals with the saved \
                 requests: lower the rate or the duration"
            ));
        }
        arrivals.extend(replay.schedule.arrivals.iter().map(|a| Intended {
            index: first + a.index,
            at_us: a.at_us,
            stage: stage_at(a.at_us),
            warmup: a.at_us < warmup_us,
        }));
        // Stable: at a tie the synthetic arrival goes first.
        arrivals.sort_by_key(|a| a.at_us);
        Ok(Mixed {
            schedule: Schedule {
                arrivals,
                span_us: synthetic.span_us.max(replay.schedule.span_us),
            },
            recording,
            journeys: replay.journeys,
            first,
            own_steps,
        })
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
