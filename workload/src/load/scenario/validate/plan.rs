//! `workload:`: the arrival process (or a fitted model's), the rate over
//! time (stages, the model's rate curve, or a steady rate), the warm-up
//! and the seed, as a schedule [`Plan`].

use std::path::Path;
use std::time::Duration;

use sluice_filters::{parse_duration, Arrival};

use super::super::raw::{RawArrival, RawWorkload};
use super::super::{Dist, Sessions};
use super::Errors;
use crate::fit::{RateCurve, SessionModel, ThinkTime, TokenLengths, WorkloadModel};
use crate::load::schedule::{Plan, Process, Segment};

/// The kinds `arrival.kind` takes: [`Arrival`]'s and two of sugar.
const KINDS: [&str; 8] = [
    "constant",
    "poisson",
    "exponential",
    "gamma",
    "weibull",
    "lognormal",
    "weibull_mixture",
    "trace",
];

/// What a model brings besides its arrivals.
#[derive(Default)]
pub(super) struct FromModel {
    pub(super) file: Option<String>,
    pub(super) sessions: Option<Sessions>,
    /// Its output lengths: the `max_tokens` of llm steps that set none.
    pub(super) output_tokens: Option<Dist>,
    /// Its input lengths: the `prompt.input_tokens` of llm steps that set none.
    pub(super) input_tokens: Option<Dist>,
    /// `token_correlation.rho`: the copula joining the two.
    pub(super) token_rho: Option<f64>,
}

/// A model's token lengths as the distribution they are drawn from.
fn lengths(l: &TokenLengths) -> Dist {
    Dist::Lengths {
        mu: l.mu,
        sigma: l.sigma,
        min: l.min as f64,
        max: l.max as f64,
        cap: l.cap.map_or(l.max as f64, |c| c.tokens as f64),
        cap_share: l.cap.map_or(0.0, |c| c.share),
    }
}

/// The plan, and what the model file brings when there is one.
pub(super) fn plan(w: &RawWorkload, dir: &Path, e: &mut Errors) -> (Option<Plan>, FromModel) {
    let mut from = FromModel {
        file: w.from_model.clone(),
        ..FromModel::default()
    };
    let mut curve = None;
    let mut constant_rate = None;
    let process = match (&w.arrival, &w.from_model) {
        (Some(a), None) => arrival(a, e).map(|(p, rate)| {
            constant_rate = rate;
            p
        }),
        (None, Some(file)) => match WorkloadModel::read(&dir.join(file)) {
            Ok(model) => {
                // Its arrivals are then session starts.
                from.sessions = model.sessions.as_ref().map(model_sessions);
                from.output_tokens = model.output_tokens.as_ref().map(lengths);
                from.input_tokens = model.input_tokens.as_ref().map(lengths);
                from.token_rho = model.token_correlation.map(|c| c.rho);
                curve = model.arrival.rate_curve.clone();
                Some(Process::Renewal(model.arrival.process))
            }
            Err(errors) => {
                for m in errors.0 {
                    e.add("workload.from_model", format!("{file}: {m}"));
                }
                None
            }
        },
        _ => {
            e.add(
                "workload",
                "needs one of `arrival`, `from_model` and `replay`",
            );
            None
        }
    };
    let duration = w.duration.as_deref().and_then(|d| {
        let d = e.check("workload.duration", parse_duration(d))?;
        if d.is_zero() {
            e.add("workload.duration", "must be greater than 0");
            return None;
        }
        Some(d)
    });
    let warmup = warmup(w, e);
    let Some(process) = process else {
        return (None, from);
    };
    let segments = if let Some(stages) = &w.stages {
        if w.duration.is_some() {
            e.add(
                "workload.duration",
                "stages replace duration: give one of them",
            );
        }
        stage_segments(stages, e)
    } else if let Some(curve) = curve {
        curve_segments(&curve, duration)
    } else {
        let rate = constant_rate.or_else(|| process.rate());
        match (duration, rate) {
            (Some(d), Some(rate)) => vec![Segment {
                span: d,
                from: rate,
                to: rate,
                stage: 0,
            }],
            (None, _) => {
                if w.duration.is_none() {
                    e.add("workload", "needs `duration` or `stages`");
                }
                Vec::new()
            }
            (Some(_), None) => Vec::new(),
        }
    };
    let span: Duration = segments.iter().map(|s| s.span).sum();
    if !segments.is_empty() && warmup >= span {
        e.add(
            "workload.warmup",
            format!(
                "must be shorter than the run ({}), found {}",
                sluice_filters::format_duration(span),
                sluice_filters::format_duration(warmup)
            ),
        );
    }
    let plan = (!segments.is_empty()).then(|| Plan {
        process,
        segments,
        warmup,
        seed: w.seed.unwrap_or(0),
    });
    (plan, from)
}

fn warmup(w: &RawWorkload, e: &mut Errors) -> Duration {
    match w.warmup.as_deref() {
        None => Duration::ZERO,
        Some(t) => e
            .check("workload.warmup", parse_duration(t))
            .unwrap_or_default(),
    }
}

/// A replay's plan: its seed (of `--sample`) and warm-up (the journeys
/// that start within it are sent and kept out of every summary); the
/// schedule is the recording's, so there are no segments.
pub(super) fn replay_plan(w: &RawWorkload, e: &mut Errors) -> Plan {
    Plan {
        process: Process::Constant,
        segments: Vec::new(),
        warmup: warmup(w, e),
        seed: w.seed.unwrap_or(0),
    }
}

/// The parameters given of those any kind takes.
pub(super) fn given(a: &RawArrival) -> Vec<&'static str> {
    [
        ("rate", a.rate.is_some()),
        ("burstiness", a.burstiness.is_some()),
        ("shape", a.shape.is_some()),
        ("scale", a.scale.is_some()),
        ("mu", a.mu.is_some()),
        ("sigma", a.sigma.is_some()),
        ("components", a.components.is_some()),
        ("file", a.file.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, p)| p.then_some(n))
    .collect()
}

/// A model's sessions: turns from its quantiles, the think time from its
/// lognormal or quantiles (none: 0).
fn model_sessions(s: &SessionModel) -> Sessions {
    let quantiles = |q: &crate::fit::Quantiles| Dist::Quantiles(q.values().map(|(_, v)| v));
    Sessions {
        turns: quantiles(&s.turns),
        carry_history: false,
        think_time: match &s.think_time {
            Some(ThinkTime::Lognormal { mu, sigma }) => Dist::Lognormal {
                mu: *mu,
                sigma: *sigma,
            },
            Some(ThinkTime::Empirical { quantiles: q }) => quantiles(q),
            None => Dist::Fixed(0.0),
        },
    }
}

fn stage_segments(stages: &[super::super::raw::RawStage], e: &mut Errors) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut previous = 0.0;
    for (i, s) in stages.iter().enumerate() {
        let path = format!("workload.stages[{i}]");
        if !(s.rate.is_finite() && s.rate >= 0.0) {
            e.add(
                format!("{path}.rate"),
                format!("must be a finite number >= 0, found {}", s.rate),
            );
            continue;
        }
        let (text, ramp, key) = match (&s.hold, &s.ramp) {
            (Some(t), None) => (t, false, "for"),
            (None, Some(t)) => (t, true, "ramp"),
            _ => {
                e.add(&path, "needs one of `for` and `ramp`");
                continue;
            }
        };
        let Some(span) = e.check(&format!("{path}.{key}"), parse_duration(text)) else {
            continue;
        };
        if span.is_zero() {
            e.add(format!("{path}.{key}"), "must be greater than 0");
            continue;
        }
        out.push(Segment {
            span,
            from: if ramp { previous } else { s.rate },
            to: s.rate,
            stage: i,
        });
        previous = s.rate;
    }
    if stages.is_empty() {
        e.add("workload.stages", "is empty");
    }
    out
}

/// The model's windows, repeated to fill `duration` (one pass when none).
fn curve_segments(curve: &RateCurve, duration: Option<Duration>) -> Vec<Segment> {
    let window = Duration::from_secs_f64(curve.window_s);
    let one_pass = window * u32::try_from(curve.rates.len()).unwrap_or(u32::MAX);
    let total = duration.unwrap_or(one_pass);
    let mut out = Vec::new();
    let mut at = Duration::ZERO;
    // Bounded: each pass adds one window; a schedule has at most
    // MAX_ARRIVALS and a window is at least a microsecond of the run.
    for rate in curve.rates.iter().cycle().take(1_000_000) {
        if at >= total || window.is_zero() {
            break;
        }
        let span = window.min(total - at);
        out.push(Segment {
            span,
            from: *rate,
            to: *rate,
            stage: 0,
        });
        at += span;
    }
    out
}

/// The process, and the rate that `constant` (and the sugar kinds) name.
fn arrival(a: &RawArrival, e: &mut Errors) -> Option<(Process, Option<f64>)> {
    let given = given(a);
    let takes: &[&[&str]] = match a.kind.as_str() {
        "constant" | "poisson" | "exponential" => &[&["rate"]],
        "gamma" => &[&["rate", "burstiness"], &["shape", "scale"]],
        "weibull" => &[&["shape", "scale"]],
        "lognormal" => &[&["mu", "sigma"]],
        "weibull_mixture" => &[&["components"]],
        // With its file, a replay (read apart); here without it.
        "trace" => &[&["file"]],
        other => {
            e.add(
                "workload.arrival.kind",
                format!(
                    "unknown kind `{other}` (expected one of {})",
                    KINDS.join(", ")
                ),
            );
            return None;
        }
    };
    if !takes.contains(&given.as_slice()) {
        let forms: Vec<String> = takes.iter().map(|t| t.join(" and ")).collect();
        e.add(
            "workload.arrival",
            format!(
                "`{}` takes {}, found {}",
                a.kind,
                forms.join(", or "),
                if given.is_empty() {
                    "none".to_owned()
                } else {
                    given.join(", ")
                }
            ),
        );
        return None;
    }
    if a.kind == "trace" {
        // `trace` with its file is a replay, never read here.
        return None;
    }
    let v = |x: Option<f64>| x.unwrap_or(f64::NAN);
    let (process, rate) = match a.kind.as_str() {
        "constant" => (Process::Constant, a.rate),
        "poisson" | "exponential" => (
            Process::Renewal(Arrival::Exponential { rate: v(a.rate) }),
            None,
        ),
        // vLLM's `--burstiness` is the gamma shape; the scale gives the rate.
        "gamma" if a.rate.is_some() => {
            let (rate, b) = (v(a.rate), v(a.burstiness));
            (
                Process::Renewal(Arrival::Gamma {
                    shape: b,
                    scale: 1.0 / (rate * b),
                }),
                None,
            )
        }
        "gamma" => (
            Process::Renewal(Arrival::Gamma {
                shape: v(a.shape),
                scale: v(a.scale),
            }),
            None,
        ),
        "weibull" => (
            Process::Renewal(Arrival::Weibull {
                shape: v(a.shape),
                scale: v(a.scale),
            }),
            None,
        ),
        "lognormal" => (
            Process::Renewal(Arrival::Lognormal {
                mu: v(a.mu),
                sigma: v(a.sigma),
            }),
            None,
        ),
        _ => (
            Process::Renewal(Arrival::WeibullMixture {
                components: a.components.clone().unwrap_or_default(),
            }),
            None,
        ),
    };
    let mut bad = false;
    for (name, value) in [("rate", a.rate), ("burstiness", a.burstiness)] {
        if let Some(x) = value.filter(|x| !(x.is_finite() && *x > 0.0)) {
            e.add(
                format!("workload.arrival.{name}"),
                format!("must be a finite number > 0, found {x}"),
            );
            bad = true;
        }
    }
    if bad {
        return None;
    }
    if let Process::Renewal(arrival) = &process {
        if let Err(list) = arrival.validate() {
            for m in list {
                match m.split_once(": ") {
                    Some((field, what)) => e.add(format!("workload.arrival.{field}"), what),
                    None => e.add("workload.arrival", m),
                }
            }
            return None;
        }
    }
    Some((process, rate))
}
