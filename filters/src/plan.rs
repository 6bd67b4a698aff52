//! Rollout plans from the change itself: how carefully a new version is
//! released follows from what changed (the semantic version, the
//! checkpoint, the prompt template) and how much traffic the route takes.
//! Pure: `sluice plan` and a rollout's `plan: auto` both call [`plan`].

mod semver;

use std::time::Duration;

use serde::Serialize;

use crate::{format_duration, Gate, ModelLineage};

pub use semver::Semver;

/// How big a change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Patch,
    Minor,
    Major,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Patch => "patch",
            Change::Minor => "minor",
            Change::Major => "major",
        }
    }
}

/// What one size of change gets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassRule {
    pub steps: Vec<u32>,
    #[serde(serialize_with = "as_duration")]
    pub hold: Duration,
    /// The gates judged; a rollout's own bounds apply, and [`default_bound`]
    /// where it sets none.
    pub gates: Vec<Gate>,
    /// A capacity run of the canary before the first step.
    pub capacity_run: bool,
    /// The new version's throughput checked on the route's paths.
    pub throughput_check: bool,
}

/// The rules, Envoy-like in spirit: the bigger the change, the smaller the
/// first step and the longer each hold. Every field can be overridden in
/// the config's `plans:`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanRules {
    pub major: ClassRule,
    pub minor: ClassRule,
    pub patch: ClassRule,
    /// A route above this many requests a second gets `p99_vs_stable`.
    pub high_traffic_rps: f64,
    /// A prompt template change whose prompt-length spread moves by more
    /// than this fraction adds an input-length load stage.
    pub prompt_spread_change: f64,
}

/// Health (the serving machine) and errors.
const HEALTH_AND_ERRORS: [Gate; 4] = [
    Gate::ErrorRate,
    Gate::GrpcSuccessRateMin,
    Gate::GpuMemoryMax,
    Gate::UpstreamQueueMax,
];
/// Latency, absolute and against stable.
const LATENCY: [Gate; 6] = [
    Gate::TtftP95,
    Gate::TtftP99,
    Gate::GapP99,
    Gate::TpotP95,
    Gate::LatencyP99,
    Gate::TtftVsStable,
];

impl Default for PlanRules {
    fn default() -> PlanRules {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        PlanRules {
            major: ClassRule {
                steps: vec![1, 5, 20, 50, 100],
                hold: minutes(10),
                gates: Gate::ALL.to_vec(),
                capacity_run: true,
                throughput_check: true,
            },
            minor: ClassRule {
                steps: vec![5, 20, 50, 100],
                hold: minutes(5),
                gates: HEALTH_AND_ERRORS.iter().chain(&LATENCY).copied().collect(),
                capacity_run: false,
                throughput_check: true,
            },
            patch: ClassRule {
                steps: vec![20, 100],
                hold: minutes(1),
                gates: HEALTH_AND_ERRORS.to_vec(),
                capacity_run: false,
                throughput_check: false,
            },
            high_traffic_rps: 500.0,
            prompt_spread_change: 0.15,
        }
    }
}

impl PlanRules {
    pub fn class(&self, change: Change) -> &ClassRule {
        match change {
            Change::Major => &self.major,
            Change::Minor => &self.minor,
            Change::Patch => &self.patch,
        }
    }
}

/// The bound a plan gives a gate the rollout does not bound itself: only
/// the scale-free ones have one (an absolute latency bound is the
/// service's to choose). Error rate in percent, ratios as ratios.
pub fn default_bound(gate: Gate) -> Option<f64> {
    match gate {
        Gate::ErrorRate => Some(1.0),
        Gate::P99VsStable => Some(1.2),
        Gate::TtftVsStable => Some(1.25),
        _ => None,
    }
}

/// One side of the change: a cluster's version and lineage.
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    pub version: &'a str,
    pub lineage: &'a ModelLineage,
}

/// The spread of prompt lengths (input tokens) in recorded traffic: the
/// interquartile range, robust to the odd huge prompt.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub requests: usize,
    pub p25: f64,
    pub p75: f64,
}

impl Spread {
    /// The spread of `lengths`; `None` when there are none.
    pub fn of(lengths: &[u64]) -> Option<Spread> {
        let mut sorted = lengths.to_vec();
        sorted.sort_unstable();
        let q = |p: f64| -> Option<f64> {
            let last = sorted.len().checked_sub(1)?;
            let at = p * last as f64;
            let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
            let (a, b) = (*sorted.get(lo)? as f64, *sorted.get(hi)? as f64);
            Some(a + (b - a) * (at - lo as f64))
        };
        Some(Spread {
            requests: sorted.len(),
            p25: q(0.25)?,
            p75: q(0.75)?,
        })
    }

    pub fn iqr(&self) -> f64 {
        self.p75 - self.p25
    }
}

/// What a plan is made from.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    pub from: Side<'a>,
    pub to: Side<'a>,
    /// The route's request rate now; `None` when unknown (the traffic
    /// rule is then left to the rollout, see [`Plan::p99_vs_stable_above_rps`]).
    pub route_rps: Option<f64>,
    /// Prompt lengths recorded for each side; `None` when no traffic was given.
    pub prompt_spread: Option<(Option<Spread>, Option<Spread>)>,
}

/// A check run by `sluice plan --run` before the rollout is posted (the
/// rollout controller never generates load).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum Check {
    CapacityRun,
    Throughput,
    InputLengthStage,
}

/// Which rule set one part of the plan, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reason {
    /// `steps`, `hold`, `gates.NAME` or `checks.NAME`.
    pub part: String,
    /// `major`, `minor`, `patch`, `checkpoint`, `prompt_template` or `traffic`.
    pub rule: String,
    pub why: String,
}

/// A rollout plan: steps, holds, gates and checks, each with its reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub from: String,
    pub to: String,
    pub change: Change,
    pub steps: Vec<u32>,
    #[serde(serialize_with = "as_duration")]
    pub hold: Duration,
    pub gates: Vec<Gate>,
    pub checks: Vec<Check>,
    /// With the rate unknown: `p99_vs_stable` is judged only while the
    /// route takes more than this many requests a second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_vs_stable_above_rps: Option<f64>,
    pub reasons: Vec<Reason>,
}

impl Plan {
    /// One line for events and logs: `plan patch (v1.4.2 → v1.4.3): steps
    /// [20, 100], hold 1m by rule patch; gates error_rate by rule patch,
    /// p99_vs_stable by rule traffic; checks none`.
    pub fn summary(&self) -> String {
        let rule_of = |part: &str| {
            self.reasons
                .iter()
                .find(|r| r.part == part)
                .map_or("?", |r| r.rule.as_str())
        };
        let gates: Vec<String> = self
            .gates
            .iter()
            .map(|g| format!("{g} ({})", rule_of(&format!("gates.{g}"))))
            .collect();
        let checks: Vec<String> = self
            .checks
            .iter()
            .map(|c| {
                let name = c.as_str();
                format!("{name} ({})", rule_of(&format!("checks.{name}")))
            })
            .collect();
        format!(
            "plan {} ({} → {}): steps {:?} and hold {} by rule {}; gates {}; checks {}",
            self.change.as_str(),
            self.from,
            self.to,
            self.steps,
            format_duration(self.hold),
            rule_of("steps"),
            gates.join(", "),
            if checks.is_empty() {
                "none".to_owned()
            } else {
                checks.join(", ")
            }
        )
    }
}

impl Check {
    pub fn as_str(&self) -> &'static str {
        match self {
            Check::CapacityRun => "capacity_run",
            Check::Throughput => "throughput",
            Check::InputLengthStage => "input_length_stage",
        }
    }
}

fn as_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// The plan for releasing `input.to` in place of `input.from`. A version
/// that is not semver is an error only when the plan needs it: a changed
/// checkpoint makes the change major whatever the versions say.
pub fn plan(input: &PlanInput<'_>, rules: &PlanRules) -> Result<Plan, String> {
    let mut reasons = Vec::new();
    let mut why_change = |rule: &str, why: String| {
        for part in ["steps", "hold"] {
            reasons.push(reason(part, rule, why.clone()));
        }
    };
    let checkpoint = changed(
        input.from.lineage.checkpoint.as_ref(),
        input.to.lineage.checkpoint.as_ref(),
    );
    let change = if let Some((a, b)) = checkpoint {
        why_change(
            "checkpoint",
            format!("the checkpoint changed ({a} → {b}): a new model counts as major"),
        );
        Change::Major
    } else {
        let from: Semver = parse_side("from", input.from.version)?;
        let to: Semver = parse_side("to", input.to.version)?;
        let change = from.change_to(&to);
        why_change(
            change.as_str(),
            format!(
                "{} → {} is a {} change",
                input.from.version,
                input.to.version,
                change.as_str()
            ),
        );
        change
    };
    let class = rules.class(change);
    let mut gates = class.gates.clone();
    for gate in &gates {
        reasons.push(reason(
            &format!("gates.{}", gate.as_str()),
            change.as_str(),
            format!("a {} change judges it", change.as_str()),
        ));
    }
    let mut checks = Vec::new();
    if class.capacity_run {
        checks.push(Check::CapacityRun);
        reasons.push(reason(
            "checks.capacity_run",
            change.as_str(),
            "the canary's capacity is searched before the first step".into(),
        ));
    }
    if class.throughput_check {
        checks.push(Check::Throughput);
        reasons.push(reason(
            "checks.throughput",
            change.as_str(),
            "the new version's throughput is checked on the route's paths".into(),
        ));
    }
    if let Some(why) = template_stage(input, rules) {
        checks.push(Check::InputLengthStage);
        reasons.push(reason("checks.input_length_stage", "prompt_template", why));
    }
    let mut above = None;
    if !gates.contains(&Gate::P99VsStable) {
        match input.route_rps {
            Some(rps) if rps > rules.high_traffic_rps => {
                gates.push(Gate::P99VsStable);
                reasons.push(reason(
                    "gates.p99_vs_stable",
                    "traffic",
                    format!(
                        "the route takes {} req/s, above {}",
                        round1(rps),
                        round1(rules.high_traffic_rps)
                    ),
                ));
            }
            Some(_) => {}
            None => {
                above = Some(rules.high_traffic_rps);
                gates.push(Gate::P99VsStable);
                reasons.push(reason(
                    "gates.p99_vs_stable",
                    "traffic",
                    format!(
                        "judged only while the route takes more than {} req/s",
                        round1(rules.high_traffic_rps)
                    ),
                ));
            }
        }
    }
    Ok(Plan {
        from: input.from.version.to_owned(),
        to: input.to.version.to_owned(),
        change,
        steps: class.steps.clone(),
        hold: class.hold,
        gates,
        checks,
        p99_vs_stable_above_rps: above,
        reasons,
    })
}

fn parse_side(side: &str, version: &str) -> Result<Semver, String> {
    version.parse().map_err(|e| format!("{side} version: {e}"))
}

fn changed<'a, T: PartialEq + std::fmt::Display>(
    from: Option<&'a T>,
    to: Option<&'a T>,
) -> Option<(String, String)> {
    let show = |x: Option<&T>| x.map_or_else(|| "none".to_owned(), ToString::to_string);
    // Unknown on both sides, or on the new one, says nothing changed.
    match (from, to) {
        (_, None) => None,
        (a, b) if a == b => None,
        (a, b) => Some((show(a), show(b))),
    }
}

/// Why a changed prompt template adds an input-length stage, if it does.
fn template_stage(input: &PlanInput<'_>, rules: &PlanRules) -> Option<String> {
    let (a, b) = changed(
        input.from.lineage.prompt_template.as_ref(),
        input.to.lineage.prompt_template.as_ref(),
    )?;
    let limit = rules.prompt_spread_change * 100.0;
    match input.prompt_spread {
        Some((Some(from), Some(to))) if from.iqr() > 0.0 => {
            let moved = (to.iqr() - from.iqr()) / from.iqr() * 100.0;
            (moved.abs() > limit).then(|| {
                format!(
                    "the prompt template changed ({a} → {b}) and the prompt-length spread \
                     (IQR) moved {:+}% ({} → {} tokens), beyond ±{}%",
                    round1(moved),
                    round1(from.iqr()),
                    round1(to.iqr()),
                    round1(limit)
                )
            })
        }
        _ => Some(format!(
            "the prompt template changed ({a} → {b}) and no recorded traffic of both \
             versions says by how much the prompt lengths moved"
        )),
    }
}

fn reason(part: &str, rule: &str, why: String) -> Reason {
    Reason {
        part: part.to_owned(),
        rule: rule.to_owned(),
        why,
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests;
