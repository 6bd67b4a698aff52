//! A whole fit of a trace with sessions and lengths, the model file it
//! writes read back, and a bad model file's errors by path.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};
use sluice_filters::{Arrival, TraceLine, TRACE_VERSION};

use super::super::{FitBuilder, FitOptions, Source, ThinkTime, WorkloadModel};
use super::near;

/// 2,000 sessions starting as a Poisson process of 2 per second, 1 to 6
/// turns, think time lognormal(mu 1, sigma 0.5) s after a 1 s answer;
/// prompts lognormal(6, 0.8) and answers lognormal(4, 1) tokens, the answer
/// growing with the prompt.
fn session_lines() -> Vec<TraceLine> {
    let mut rng = StdRng::seed_from_u64(11);
    let gap = Exp::new(2.0).unwrap();
    let think = LogNormal::new(1.0, 0.5).unwrap();
    let prompt = LogNormal::new(6.0, 0.8).unwrap();
    let mut lines = Vec::new();
    let mut start = 0.0;
    for s in 0..2_000 {
        start += gap.sample(&mut rng);
        let mut at = start;
        for t in 0..rng.random_range(1..=6) {
            let input: f64 = prompt.sample(&mut rng);
            let output = (input / 8.0 * LogNormal::new(0.0, 0.7).unwrap().sample(&mut rng)).ceil();
            let think_s = if t == 0 { 0.0 } else { think.sample(&mut rng) };
            at += think_s;
            lines.push(TraceLine {
                v: TRACE_VERSION,
                request_id: format!("s{s}t{t}"),
                session_id: Some(format!("s{s}")),
                arrival_us: (at * 1e6) as u64,
                e2e_ms: Some(1000.0),
                input_tokens: Some(input.ceil() as u64),
                output_tokens: Some(output as u64),
                ..TraceLine::default()
            });
            at += 1.0;
        }
    }
    lines.sort_by_key(|l| l.arrival_us);
    lines
}

fn source() -> Source {
    Source {
        trace: "sessions.jsonl".into(),
        sha256: "ab".repeat(32),
        requests: 0,
        fitted_at: "2026-12-02T15:00:00.000000Z".into(),
    }
}

#[test]
fn sessions_lengths_and_the_model_round_trip() {
    let lines = session_lines();
    let mut builder = FitBuilder::default();
    for line in &lines {
        builder.add(line).unwrap();
    }
    let fitted = builder
        .finish("sessions.jsonl", &FitOptions::default(), source())
        .unwrap();
    let model = &fitted.model;
    assert_eq!(model.source.requests, lines.len() as u64);
    // Session starts are the model's arrivals: Poisson at 2/s.
    let sessions = fitted.sessions.as_ref().unwrap();
    assert_eq!(sessions.sessions, 2_000);
    match &model.arrival.process {
        Arrival::Exponential { rate } => near("session rate", *rate, 2.0, 0.1),
        Arrival::Gamma { shape, scale } => {
            near("session shape", *shape, 1.0, 0.1);
            near("session rate", 1.0 / (shape * scale), 2.0, 0.1);
        }
        other => panic!("session starts fitted as {other:?}"),
    }
    let s = model.sessions.as_ref().unwrap();
    assert_eq!((s.turns.min, s.turns.max), (1.0, 6.0));
    let Some(ThinkTime::Lognormal { mu, sigma }) = s.think_time else {
        panic!("think time {:?}", s.think_time)
    };
    near("think mu", mu, 1.0, 0.1);
    near("think sigma", sigma, 0.5, 0.1);
    let input = model.input_tokens.as_ref().unwrap();
    near("input mu", input.mu, 6.0, 0.1);
    near("input sigma", input.sigma, 0.8, 0.1);
    let correlation = model.token_correlation.unwrap();
    assert!(correlation.spearman > 0.5, "{correlation:?}");
    let curve = model.arrival.rate_curve.as_ref().unwrap();
    assert_eq!(curve.window_s, 60.0);
    assert!(!curve.rates.is_empty());
    // The YAML reads back as the same model.
    let yaml = model.to_yaml();
    assert_eq!(&WorkloadModel::from_yaml(&yaml).unwrap(), model, "{yaml}");
    assert!(yaml.contains("kind: "), "{yaml}");
    // And the JSON report has the issue's shape.
    let json = serde_json::to_value(&fitted).unwrap();
    assert!(json["best"].is_string());
    let first = &json["candidates"][0];
    for key in ["kind", "params", "loglik", "aic", "bic", "ks", "kl"] {
        assert!(first.get(key).is_some(), "{key} in {first}");
    }
    let exponential = &json["candidates"][0];
    assert_eq!(exponential["kind"], "exponential");
    assert_eq!(
        exponential["params"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["rate"]
    );
    let mixture = &json["candidates"][4];
    assert_eq!(mixture["kind"], "weibull_mixture");
    let weights: f64 = mixture["params"]["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["weight"].as_f64().unwrap())
        .sum();
    near("mixture weights", weights, 1.0, 1e-3);
}

const GOOD: &str = "\
v: 1
arrival:
  kind: weibull_mixture
  components:
  - {weight: 0.7, shape: 0.8, scale: 1.0}
  - {weight: 0.3, shape: 2.5, scale: 0.05}
  rate_curve: {window_s: 60, rates: [10.5, 12.0]}
output_tokens: {mu: 4.0, sigma: 1.0, min: 1, max: 1024, cap: {tokens: 1024, share: 0.05}}
sessions:
  turns: {min: 1, p10: 1, p25: 1, p50: 2, p75: 3, p90: 5, p99: 9, max: 12}
  think_time: {kind: lognormal, mu: 1.2, sigma: 0.6}
source:
  trace: t.jsonl
  sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  requests: 100
  fitted_at: 2026-12-02T15:00:00.000000Z
";

#[test]
fn a_hand_written_model_reads() {
    let model = WorkloadModel::from_yaml(GOOD).unwrap();
    assert_eq!(model.arrival.process.kind(), "weibull_mixture");
    assert_eq!(WorkloadModel::from_yaml(&model.to_yaml()).unwrap(), model);
}

#[test]
fn every_bad_value_is_named_by_its_path() {
    let bad = GOOD
        .replace("weight: 0.3, shape: 2.5", "weight: 0.2, shape: -2.5")
        .replace("rates: [10.5, 12.0]", "rates: [10.5, .nan]")
        .replace(
            "min: 1, max: 1024, cap: {tokens: 1024",
            "min: 0, max: 1024, cap: {tokens: 2048",
        )
        .replace("p75: 3, p90: 5", "p75: 3, p90: 2")
        .replace("sha256: 0123", "sha256: 0x23");
    let errors = WorkloadModel::from_yaml(&bad).unwrap_err().to_string();
    assert_eq!(
        errors,
        "arrival.components[1].shape: must be a finite number > 0, found -2.5\n\
         arrival.components: weights sum to 0.9, not 1\n\
         arrival.rate_curve.rates[1]: must be a finite number >= 0, found NaN\n\
         output_tokens.min: must be at least 1 and at most max (1024), found 0\n\
         output_tokens.cap.tokens: must be within [min, max] = [0, 1024], found 2048\n\
         sessions.turns.p90: must be a finite number at least the quantile before (3), found 2\n\
         source.sha256: must be 64 hex digits, found \
         `0x23456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef`"
    );
}

#[test]
fn unknown_fields_are_refused_with_their_path() {
    let typo = GOOD.replace(
        "think_time: {kind: lognormal",
        "think_tme: {kind: lognormal",
    );
    assert_eq!(
        WorkloadModel::from_yaml(&typo).unwrap_err().to_string(),
        "sessions.think_tme: unknown field `think_tme`, expected `turns` or `think_time` at line 11 \
         column 3"
    );
    let param = GOOD.replace("rate_curve: {window_s", "rate_curve: {window");
    assert_eq!(
        WorkloadModel::from_yaml(&param).unwrap_err().to_string(),
        "arrival.rate_curve.window: unknown field `window`, expected `window_s` or `rates` at \
         line 7 column 16"
    );
    let extra = GOOD.replace(
        "  kind: weibull_mixture\n",
        "  kind: weibull_mixture\n  rate: 3\n",
    );
    assert_eq!(
        WorkloadModel::from_yaml(&extra).unwrap_err().to_string(),
        "arrival: unknown field `rate`, expected `components` at line 3 column 3"
    );
}

#[test]
fn the_example_in_the_docs_reads() {
    let docs = include_str!("../../../../docs/workload.md");
    let after = docs.split("### The model file").nth(1).unwrap();
    let yaml = after.split("```yaml\n").nth(1).unwrap();
    let yaml = yaml.split("```").next().unwrap();
    let model = WorkloadModel::from_yaml(yaml).unwrap();
    assert_eq!(model.token_correlation.unwrap().rho, 0.4375);
}

#[test]
fn rows_without_a_session_are_sessions_of_one_turn() {
    let mut builder = FitBuilder::default();
    for i in 0..40u64 {
        let line = TraceLine {
            v: TRACE_VERSION,
            request_id: format!("r{i}"),
            // Rows 0..20 are ten sessions of two turns; the rest have none.
            session_id: (i < 20).then(|| format!("s{}", i / 2)),
            arrival_us: i * 1_000_000 + (i % 7) * 100_000,
            ..TraceLine::default()
        };
        builder.add(&line).unwrap();
    }
    let fitted = builder
        .finish("t", &FitOptions::default(), source())
        .unwrap();
    let sessions = fitted.sessions.unwrap();
    assert_eq!(sessions.sessions, 30);
    assert_eq!((sessions.turns.min, sessions.turns.max), (1.0, 2.0));
}
