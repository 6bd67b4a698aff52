//! What `sluice capacity` prints: a line per stage as it ends, the stages
//! and the recommendation at the end, and the rollout gates it implies.

use std::time::Duration;

use sluice_filters::{format_duration, Gate, GateUnit};
use sluice_workload::{CapacityReport, Purpose, StageProgress, StageResult};

/// `probe 12.0 req/s for 20 s: held (worst margin 0.41)  ttft_p95 312ms/800ms
/// …  1430 tok/s  p99 slope 5.21 ms/token (excess +0.31)  score 0.42; so
/// far: knee …, recommended …`: the stage that just ended (the last of
/// `so_far`), with the signals over the stages run so far.
pub(super) fn stage_line(so_far: &CapacityReport) -> String {
    let Some(s) = so_far.stages.last() else {
        return String::new();
    };
    let verdict = match (s.early_stop, s.passed) {
        (Some(why), _) => format!("stopped early ({})", why.replace('_', "-")),
        (None, true) => "held".to_owned(),
        (None, false) => "failed".to_owned(),
    };
    let checks: Vec<String> = s
        .sla
        .iter()
        .map(|c| sla_check(c.gate, c.value, c.bound))
        .collect();
    let mut line = format!(
        "capacity: {} {:.2} req/s for {:.0} s: {verdict} (worst margin {:.2})  {}  {:.0} tok/s{}{}",
        purpose(s.purpose),
        s.rate,
        s.duration_s,
        s.worst_margin,
        checks.join("  "),
        s.token_throughput,
        slope(s.p99_slope_ms_per_token, s.p99_excess_ms_per_token),
        s.cost_per_1k
            .map_or(String::new(), |c| format!("  ${c:.5}/1k tok")),
    );
    if let Some(sc) = s.scored {
        line.push_str(&format!("  score {:.2}", sc.score));
    }
    let rate = |v: Option<f64>| v.map_or("none yet".to_owned(), |v| format!("{v:.2} req/s"));
    line.push_str(&format!(
        "; so far: knee {}, max {}, recommended {}",
        so_far
            .knee
            .rate
            .map_or("not reached".to_owned(), |k| format!("{k:.2} req/s")),
        rate(so_far.max_rate),
        rate(so_far.recommended_rate)
    ));
    line
}

/// Clears a progress line redrawn in place on a terminal.
pub(super) const CLEAR: &str = "\r\x1b[2K";

/// The running stage's signals: redrawn in place every second on a
/// terminal, a line every [`PIPED_EVERY`] readings when piped.
pub(super) struct Progress {
    terminal: bool,
    readings: u64,
}

/// Readings (one a second) between two lines when stderr is piped.
const PIPED_EVERY: u64 = 5;

impl Progress {
    pub(super) fn new(terminal: bool) -> Progress {
        Progress {
            terminal,
            readings: 0,
        }
    }

    pub(super) fn show(&mut self, p: &StageProgress) {
        self.readings += 1;
        if self.terminal {
            eprint!("{CLEAR}{}", progress_line(p));
        } else if self.readings.is_multiple_of(PIPED_EVERY) {
            eprintln!("{}", progress_line(p));
        }
    }
}

/// `  probe 12.00 req/s  8/20 s  backlog 14  11.9 req/s ended  1430 tok/s …`.
pub(super) fn progress_line(p: &StageProgress) -> String {
    let checks: Vec<String> = p
        .sla
        .iter()
        .map(|(gate, v)| {
            let v = v.map_or("-".to_owned(), |v| value(*gate, v));
            format!("  {} {v}", gate.as_str())
        })
        .collect();
    format!(
        "capacity:   {} {:.2} req/s  {:.0}/{:.0} s  backlog {}  {:.1} req/s ended  {:.0} tok/s{}{}{}",
        purpose(p.purpose),
        p.rate,
        p.elapsed_s,
        p.length_s,
        p.backlog,
        p.request_rate,
        p.token_throughput,
        slope(p.p99_slope_ms_per_token, p.p99_excess_ms_per_token),
        p.cost_per_1k
            .map_or(String::new(), |c| format!("  ${c:.5}/1k tok")),
        checks.concat(),
    )
}

/// `  p99 slope 5.21 ms/token (excess +0.31)`, or nothing without a slope.
fn slope(slope: Option<f64>, excess: Option<f64>) -> String {
    let Some(m) = slope else {
        return String::new();
    };
    let excess = excess.map_or(String::new(), |e| format!(" (excess {e:+.2})"));
    format!("  p99 slope {m:.2} ms/token{excess}")
}

/// `ttft_p95 312ms/800ms`.
fn sla_check(gate: Gate, v: Option<f64>, bound: f64) -> String {
    format!(
        "{} {}/{}",
        gate.as_str(),
        v.map_or("-".to_owned(), |v| value(gate, v)),
        value(gate, bound)
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
    let bound = r.bounds.p99_excess_ms_per_token;
    let noisy: Vec<String> = r
        .stages
        .iter()
        .filter(|s| s.p99_slope_ms_per_token.is_some() && !s.slope_readable(bound))
        .map(|s| format!("{:.2}", s.rate))
        .collect();
    if !noisy.is_empty() {
        lines.push(format!(
            "p99 slope too noisy to read (90% interval wider than 2 × {bound} ms/token), left out of \
             the score at: {} req/s",
            noisy.join(", ")
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
