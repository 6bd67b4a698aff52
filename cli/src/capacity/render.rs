//! What `sluice capacity` prints: a line per stage as it ends, the stages
//! and the recommendation at the end, and the rollout gates it implies.

use std::time::Duration;

use sluice_filters::{format_duration, Gate, GateUnit};
use sluice_workload::{CapacityReport, Purpose, StageResult};

/// `probe 12.0 req/s: held (worst margin 0.41) ttft_p95 312 ms/800 …`.
pub(super) fn stage_line(s: &StageResult) -> String {
    let verdict = match (s.early_stop, s.passed) {
        (Some(why), _) => format!("stopped early ({})", why.replace('_', "-")),
        (None, true) => "held".to_owned(),
        (None, false) => "failed".to_owned(),
    };
    let checks: Vec<String> = s
        .sla
        .iter()
        .map(|c| {
            format!(
                "{} {}/{}",
                c.gate.as_str(),
                c.value.map_or("-".to_owned(), |v| value(c.gate, v)),
                value(c.gate, c.bound)
            )
        })
        .collect();
    format!(
        "capacity: {} {:.2} req/s for {:.0} s: {verdict} (worst margin {:.2})  {}  {:.0} tok/s{}",
        purpose(s.purpose),
        s.rate,
        s.duration_s,
        s.worst_margin,
        checks.join("  "),
        s.token_throughput,
        s.p99_slope_ms_per_token
            .map_or(String::new(), |m| format!("  p99 slope {m:.2} ms/token"))
    )
}

/// The stages by rate and the answer.
pub(super) fn summary(r: &CapacityReport) -> String {
    let mut lines = vec![
        format!("{} capacity (run {})", r.scenario, r.run_id),
        format!(
            "{:<8} {:>10} {:>10} {:>10} {:>12} {:>10} {:>10} {:>7}  sla",
            "stage", "rate", "achieved", "tok/s", "p99 ms/tok", "excess", "$/1k tok", "score"
        ),
    ];
    let mut order: Vec<&StageResult> = r.stages.iter().collect();
    order.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let num = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    for s in order {
        lines.push(format!(
            "{:<8} {:>10.2} {:>10.2} {:>10.0} {:>12} {:>10} {:>10} {:>7}  {}",
            purpose(s.purpose),
            s.rate,
            s.achieved_rate,
            s.token_throughput,
            num(s.p99_slope_ms_per_token, 2),
            num(s.p99_excess_ms_per_token, 2),
            num(s.cost_per_1k, 5),
            num(s.scored.map(|x| x.score), 2),
            match (s.early_stop, s.passed) {
                (Some(_), _) => "stopped",
                (None, true) => "held",
                (None, false) => "FAILED",
            }
        ));
    }
    lines.push(format!(
        "throughput knee: {}",
        r.knee
            .rate
            .map_or("not reached in the probed range".to_owned(), |k| format!(
                "{k:.2} req/s"
            ))
    ));
    let rate = |v: Option<f64>| v.map_or("none".to_owned(), |v| format!("{v:.2} req/s"));
    lines.push(format!("max_rate (every SLA held): {}", rate(r.max_rate)));
    lines.push(format!("recommended_rate: {}", rate(r.recommended_rate)));
    lines.push(format!("why: {}", r.binding));
    if let Some(why) = r.stopped {
        lines.push(format!(
            "the search stopped early: {why}, so the rate is not confirmed"
        ));
    }
    lines.join("\n")
}

/// The rollout's `gates:` this result implies: the SLAs it was searched
/// under, with what each measured at the recommended rate as a comment,
/// and the cost bound (a rollout gate too, priced by the canary
/// cluster's `cost:`).
pub(super) fn rollout_gates(r: &CapacityReport) -> String {
    let at = r
        .recommended_arrival_rate
        .and_then(|rate| r.stages.iter().rev().find(|s| s.rate == rate && s.passed));
    let mut gates: Vec<(Gate, f64, Option<f64>)> = r
        .sla
        .iter()
        .map(|b| {
            let measured = at
                .and_then(|s| s.sla.iter().find(|c| c.gate == b.gate))
                .and_then(|c| c.value);
            (b.gate, b.bound, measured)
        })
        .collect();
    if let Some(max) = r.bounds.cost_per_1k_max {
        gates.push((Gate::CostPer1kMax, max, at.and_then(|s| s.cost_per_1k)));
    }
    gates_block(&r.scenario, r.recommended_rate, &gates)
}

/// The `gates:` block of [`rollout_gates`]: each gate's bound, and what
/// it measured as a comment.
pub(super) fn gates_block(
    scenario: &str,
    recommended_rate: Option<f64>,
    gates: &[(Gate, f64, Option<f64>)],
) -> String {
    let mut lines = vec![match recommended_rate {
        Some(rate) => format!(
            "# from sluice capacity on `{scenario}`: recommended {rate:.2} req/s; measured there in comments"
        ),
        None => format!("# from sluice capacity on `{scenario}`: no rate held every SLA"),
    }];
    lines.push("gates:".to_owned());
    for &(gate, b, measured) in gates {
        let measured = measured.map_or(String::new(), |v| format!("  # {}", value(gate, v)));
        lines.push(format!("  {}: {}{measured}", gate.as_str(), bound(gate, b)));
    }
    lines.join("\n")
}

fn purpose(p: Purpose) -> &'static str {
    match p {
        Purpose::Probe => "probe",
        Purpose::Confirm => "confirm",
    }
}

/// A measured value in its gate's unit, for people.
fn value(gate: Gate, v: f64) -> String {
    match gate.unit() {
        GateUnit::Ms => format!("{v:.0}ms"),
        GateUnit::Percent => format!("{v:.2}%"),
        GateUnit::Ratio | GateUnit::Requests => format!("{v:.2}"),
        GateUnit::Usd => format!("${v:.5}"),
    }
}

/// A bound as the config writes it (`800ms`, `1%`).
fn bound(gate: Gate, v: f64) -> String {
    match gate.unit() {
        GateUnit::Ms => format_duration(Duration::from_secs_f64(v / 1000.0)),
        GateUnit::Percent => format!("{v}%"),
        GateUnit::Ratio | GateUnit::Requests | GateUnit::Usd => format!("{v}"),
    }
}
