//! `context_sweep:` read and checked, and the plan cut into its stages.

use super::super::raw::{RawContextSweep, RawScenario, RawSweepTo};
use super::super::{Body, ContextSweep, Service, Step};
use super::Errors;
use crate::load::schedule::{Plan, Segment};

/// The sweep, or `None` with its errors added: `from < to` (checked when
/// `to: auto` is resolved, before the run), `steps >= 2`, an arrival rate
/// over a `duration` (not `stages`, not a replay) and an llm step with a
/// prompt to size.
pub(super) fn sweep(
    raw: &RawContextSweep,
    scenario: &RawScenario,
    steps: &[Step],
    e: &mut Errors,
) -> Option<ContextSweep> {
    let before = e.0.len();
    if raw.from == 0 {
        e.add("context_sweep.from", "must be at least 1 token, found 0");
    }
    let (to, to_auto) = match &raw.to {
        RawSweepTo::Tokens(to) => (*to, false),
        RawSweepTo::Word(word) if word == "auto" => (0, true),
        RawSweepTo::Word(word) => {
            e.add(
                "context_sweep.to",
                format!("must be a number of tokens or `auto`, found `{word}`"),
            );
            (0, true)
        }
    };
    if !to_auto && raw.from >= to {
        e.add(
            "context_sweep.to",
            format!(
                "must be above context_sweep.from ({}), found {to}",
                raw.from
            ),
        );
    }
    if raw.steps < 2 {
        e.add(
            "context_sweep.steps",
            format!("must be at least 2, found {}", raw.steps),
        );
    }
    let w = &scenario.workload;
    if w.stages.is_some() {
        e.add(
            "context_sweep",
            "runs its own stages (`duration` / `steps` each): remove workload.stages",
        );
    }
    if w.replay.is_some() || w.arrival.as_ref().is_some_and(|a| a.kind == "trace") {
        e.add(
            "context_sweep",
            "sizes the prompts of llm steps; a replay sends the recorded ones",
        );
    }
    let prompts = steps
        .iter()
        .any(|s| s.service == Service::Llm && matches!(s.body, Body::Prompt(_)));
    if !prompts {
        e.add(
            "context_sweep",
            "needs an llm step with a `prompt` to size, found none",
        );
    }
    (e.0.len() == before).then_some(ContextSweep {
        from: raw.from,
        to,
        steps: raw.steps,
        to_auto,
    })
}

/// The plan's run cut into `steps` stages of equal length, each at the
/// rate the run had there.
pub(super) fn staged(plan: Plan, sweep: ContextSweep) -> Plan {
    let n = u32::try_from(sweep.steps).unwrap_or(u32::MAX).max(1);
    let mut segments = Vec::with_capacity(plan.segments.len() * n as usize);
    let total: std::time::Duration = plan.segments.iter().map(|s| s.span).sum();
    let each = total / n;
    // Cut the run's segments at every stage boundary (a constant rate has
    // one segment; a model's rate curve several).
    let mut at = std::time::Duration::ZERO;
    for s in &plan.segments {
        let (start, end) = (at, at + s.span);
        at = end;
        let mut from = start;
        while from < end {
            let stage = ((from.as_nanos() / each.as_nanos().max(1)) as usize).min(n as usize - 1);
            let boundary = if stage + 1 == n as usize {
                end
            } else {
                (each * (stage as u32 + 1)).min(end)
            };
            let rate_at = |t: std::time::Duration| {
                let f = (t - start).as_secs_f64() / s.span.as_secs_f64().max(f64::MIN_POSITIVE);
                s.from + (s.to - s.from) * f
            };
            segments.push(Segment {
                span: boundary - from,
                from: rate_at(from),
                to: rate_at(boundary),
                stage,
            });
            from = boundary;
        }
    }
    Plan { segments, ..plan }
}
