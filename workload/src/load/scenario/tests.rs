#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use sluice_filters::{Arrival, Gate};

use super::*;
use crate::load::schedule::{Process, Segment};

const GOOD: &str = r#"
scenario: rag-chat
target: { base_url: "http://127.0.0.1:8080/", headers: { authorization: "Bearer ${API_KEY}" } }
workload:
  arrival: { kind: gamma, rate: 20, burstiness: 0.5 }
  warmup: 30s
  stages: [ { rate: 10, for: 1m }, { rate: 40, ramp: 2m } ]
  max_in_flight: 64
  seed: 7
sessions: { turns: { lognormal: { median: 3, sigma: 0.6 } }, think_time: 2s-8s }
steps:
  - { name: search, service: http, method: POST, path: /api/v2/collections/docs/query,
      body: { query_texts: ["{{query}}"], n_results: 3 } }
  - { name: answer, service: llm, depends_on: search, delay: 50ms-200ms,
      prompt: { template: "Question: {{query}} ({{query_hash}})" },
      max_tokens: 256, timeout: 30s }
data: { query: { values: [what is sluice, why open loop], order: sequential } }
thresholds: { ttft_p95: 800ms, error_rate: 1% }
"#;

fn env(name: &str) -> Option<String> {
    (name == "API_KEY").then(|| "sekret".to_owned())
}

fn parse(text: &str) -> Result<Scenario, Vec<String>> {
    Scenario::from_yaml(text, Path::new("."), &env)
        .map_err(|e| e.0.iter().map(ToString::to_string).collect())
}

fn errors(text: &str) -> Vec<String> {
    parse(text).unwrap_err()
}

#[test]
fn a_good_scenario_reads_whole() {
    let s = parse(GOOD).unwrap();
    assert_eq!(s.name, "rag-chat");
    assert_eq!(s.target.base_url, "http://127.0.0.1:8080");
    assert_eq!(s.target.max_connections, None, "one per request in flight");
    let capped = parse(&GOOD.replace("headers: {", "max_connections: 64, headers: {")).unwrap();
    assert_eq!(capped.target.max_connections, Some(64));
    assert_eq!(
        s.target.headers,
        vec![("authorization".to_owned(), "Bearer sekret".to_owned())]
    );
    // The secret stays out of the debug form that logs might show.
    assert!(!format!("{:?}", s.target).contains("sekret"));
    assert_eq!(
        s.plan.process,
        Process::Renewal(Arrival::Gamma {
            shape: 0.5,
            scale: 0.1
        })
    );
    assert_eq!(
        s.plan.segments,
        vec![
            Segment {
                span: Duration::from_secs(60),
                from: 10.0,
                to: 10.0,
                stage: 0
            },
            Segment {
                span: Duration::from_secs(120),
                from: 10.0,
                to: 40.0,
                stage: 1
            },
        ]
    );
    assert_eq!(s.plan.warmup, Duration::from_secs(30));
    assert_eq!(s.plan.seed, 7);
    assert_eq!(s.max_in_flight, 64);
    let sessions = s.sessions.clone().unwrap();
    assert_eq!(sessions.think_time, Dist::Uniform { lo: 2.0, hi: 8.0 });
    assert_eq!(
        sessions.turns,
        Dist::Lognormal {
            mu: 3f64.ln(),
            sigma: 0.6
        }
    );
    let names: Vec<&str> = s.steps.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["search", "answer"]);
    let answer = &s.steps[1];
    assert_eq!(answer.service, Service::Llm);
    assert_eq!(answer.method, "POST");
    assert_eq!(
        answer.path,
        Template::parse("/v1/chat/completions").unwrap()
    );
    assert!(answer.stream);
    assert_eq!(answer.timeout, Duration::from_secs(30));
    assert_eq!(answer.max_tokens, Some(Dist::Fixed(256.0)));
    assert_eq!(answer.delay, Some(Dist::Uniform { lo: 0.05, hi: 0.2 }));
    let mut vars = std::collections::BTreeMap::new();
    vars.insert("query".to_owned(), "q".to_owned());
    vars.insert("query_hash".to_owned(), "h".to_owned());
    match &answer.body {
        Body::Prompt(t) => assert_eq!(t.render(&vars), "Question: q (h)"),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.steps[0].service, Service::Http);
    assert!(!s.steps[0].stream);
    assert_eq!(s.data["query"].values, ["what is sluice", "why open loop"]);
    assert!(s.data["query"].sequential);
    assert_eq!(
        s.thresholds,
        vec![(Gate::ErrorRate, 1.0), (Gate::TtftP95, 800.0)]
    );
}

#[test]
fn steps_run_in_the_order_of_depends_on() {
    let text = GOOD.replace(
        "  - { name: search,",
        "  - { name: last, service: http, path: /x, depends_on: [answer, search] }\n  - { name: search,",
    );
    let s = parse(&text).unwrap();
    let names: Vec<&str> = s.steps.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["search", "answer", "last"]);
}

#[test]
fn every_bad_value_is_named_by_its_path() {
    let text = GOOD
        .replace(
            "kind: gamma, rate: 20, burstiness: 0.5",
            "kind: gamma, rate: 20, shape: 2",
        )
        .replace("warmup: 30s", "warmup: 30 parsecs")
        .replace(
            "{ rate: 40, ramp: 2m }",
            "{ rate: -4, ramp: 2m }, { rate: 1 }",
        )
        .replace("max_in_flight: 64", "max_in_flight: 0")
        .replace("think_time: 2s-8s", "think_time: 8s-2s")
        .replace("depends_on: search", "depends_on: nope")
        .replace("delay: 50ms-200ms", "delay: 50")
        .replace("{{query_hash}}", "{{answer_text}}")
        .replace("timeout: 30s", "timeout: 0s")
        .replace(
            "error_rate: 1%",
            "error_rate: 150%, ttft_p50: 1s, gpu_memory_max: 90%",
        )
        .replace("${API_KEY}", "${NOT_SET}")
        .replace("headers: {", "max_connections: 0, headers: {");
    assert_eq!(
        errors(&text),
        [
            "target.headers.authorization: environment variable `NOT_SET` is not set",
            "target.max_connections: must be at least 1, found 0",
            "workload.arrival: `gamma` takes rate and burstiness, or shape and scale, found \
             rate, shape",
            "workload.warmup: `30 parsecs` has unknown unit ` parsecs` (use us, ms, s, m or h)",
            "workload.max_in_flight: must be at least 1, found 0",
            "sessions.think_time: `8s-2s`: the range's low end is above its high end",
            "steps[1].prompt.template: unknown variable `answer_text` (known: query, \
             query_hash)",
            "steps[1].delay: `50` has no unit (use us, ms, s, m or h)",
            "steps[1].timeout: must be greater than 0",
            "steps[1].depends_on: unknown step `nope`",
            "thresholds.error_rate: must be within 0..=100, found 150",
            "thresholds.gpu_memory_max: `gpu_memory_max` is not measured by a load client (use \
             one of ttft_p95, ttft_p99, gap_p99, tpot_p95, latency_p99, error_rate)",
            "thresholds.ttft_p50: unknown gate `ttft_p50` (expected one of ttft_p95, ttft_p99, \
             gap_p99, tpot_p95, latency_p99, error_rate, p99_vs_stable, ttft_vs_stable, \
             gpu_memory_max, upstream_queue_max, cost_per_1k_max, grpc_success_rate_min, embedding_similarity_p10_min, embedding_drift_kl_max, answer_dispersion_max, min_coverage)",
        ]
    );
    // The stage errors, once the arrival reads.
    let text = GOOD.replace(
        "{ rate: 40, ramp: 2m }",
        "{ rate: -4, ramp: 2m }, { rate: 1 }",
    );
    assert_eq!(
        errors(&text),
        [
            "workload.stages[1].rate: must be a finite number >= 0, found -4",
            "workload.stages[2]: needs one of `for` and `ramp`",
        ]
    );
}

#[test]
fn unknown_keys_and_kinds_are_refused_with_their_path() {
    assert_eq!(
        errors(&GOOD.replace("seed: 7", "seed: 7\n  speed: 2")),
        [
            "workload.speed: unknown field `speed`, expected one of `arrival`, `from_model`, \
          `replay`, `duration`, `warmup`, `stages`, `max_in_flight`, `seed` at line 10 column 3"
        ]
    );
    assert_eq!(
        errors(&GOOD.replace("kind: gamma", "kind: pareto")),
        [
            "workload.arrival.kind: unknown kind `pareto` (expected one of constant, poisson, \
          exponential, gamma, weibull, lognormal, weibull_mixture, trace)"
        ]
    );
    assert_eq!(
        errors(&GOOD.replace(
            "kind: gamma, rate: 20, burstiness: 0.5",
            "kind: weibull, shape: 0, scale: 1"
        )),
        ["workload.arrival.shape: must be a finite number > 0, found 0"]
    );
}

#[test]
fn a_step_has_thresholds_of_its_own() {
    let text = GOOD.replace(
        "timeout: 30s }",
        "timeout: 30s, thresholds: { tpot_p95: 40ms } }",
    );
    let s = parse(&text).unwrap();
    assert_eq!(s.steps[1].thresholds, vec![(Gate::TpotP95, 40.0)]);
    assert!(s.steps[0].thresholds.is_empty());
    let text = GOOD.replace(
        "timeout: 30s }",
        "timeout: 30s, thresholds: { tpot_p95: 40 } }",
    );
    assert_eq!(
        errors(&text),
        ["steps[1].thresholds.tpot_p95: `40` has no unit (use us, ms, s, m or h)"]
    );
}

#[test]
fn when_names_a_step_depended_on_and_how_it_ended() {
    let text = GOOD.replace(
        "delay: 50ms-200ms,",
        "delay: 50ms-200ms, when: search.error,",
    );
    let s = parse(&text).unwrap();
    assert_eq!(
        s.steps[1].when,
        Some(When {
            step: "search".into(),
            ended: Ended::Error
        })
    );
    for (when, error) in [
        (
            "nope.ok",
            "`nope.ok` names `nope`, which this step does not depend on",
        ),
        (
            "search.done",
            "`search.done` is not STEP.ok, STEP.error, STEP.hit or STEP.miss",
        ),
        (
            "search.hit",
            "`search.hit`: hit and miss are of redis steps, and `search` is a http step",
        ),
    ] {
        let text = GOOD.replace(
            "delay: 50ms-200ms,",
            &format!("delay: 50ms-200ms, when: {when},"),
        );
        assert_eq!(errors(&text), [format!("steps[1].when: {error}")]);
    }
    let text = GOOD.replace("n_results: 3 }", "n_results: 3 }, ignore_eos: true");
    assert_eq!(errors(&text), ["steps[0].ignore_eos: is for llm steps"]);
}

#[test]
fn a_cycle_and_duplicates_in_steps_are_errors() {
    let text = GOOD.replace(
        "name: search, service: http,",
        "name: search, service: http, depends_on: answer,",
    );
    assert_eq!(
        errors(&text),
        ["steps: depends_on makes a cycle through search, answer"]
    );
    let text = GOOD.replace("name: answer", "name: search");
    assert_eq!(
        errors(&text),
        [
            "steps[1].name: `search` is already the name of steps[0]",
            "steps[1].depends_on: a step cannot depend on itself",
        ]
    );
}

#[test]
fn the_workload_needs_an_arrival_and_a_length() {
    let text = GOOD.replace(
        "  stages: [ { rate: 10, for: 1m }, { rate: 40, ramp: 2m } ]\n",
        "",
    );
    assert_eq!(errors(&text), ["workload: needs `duration` or `stages`"]);
    let text = GOOD.replace(
        "  stages: [ { rate: 10, for: 1m }, { rate: 40, ramp: 2m } ]\n",
        "  duration: 20s\n",
    );
    assert_eq!(
        errors(&text),
        ["workload.warmup: must be shorter than the run (20s), found 30s"]
    );
    let text = GOOD.replace("warmup: 30s", "duration: 2m").replace(
        "kind: gamma, rate: 20, burstiness: 0.5",
        "kind: constant, rate: 5",
    );
    assert_eq!(
        errors(&text),
        ["workload.duration: stages replace duration: give one of them"]
    );
    let steady = GOOD
        .replace("warmup: 30s", "duration: 2m")
        .replace(
            "  stages: [ { rate: 10, for: 1m }, { rate: 40, ramp: 2m } ]\n",
            "",
        )
        .replace(
            "kind: gamma, rate: 20, burstiness: 0.5",
            "kind: constant, rate: 5",
        );
    let s = parse(&steady).unwrap();
    assert_eq!(s.plan.process, Process::Constant);
    assert_eq!(
        s.plan.segments,
        vec![Segment {
            span: Duration::from_secs(120),
            from: 5.0,
            to: 5.0,
            stage: 0
        }]
    );
}

#[test]
fn the_example_in_the_docs_reads() {
    let docs = include_str!("../../../../docs/workload.md");
    let after = docs.split("### The scenario").nth(1).unwrap();
    let yaml = after.split("```yaml\n").nth(1).unwrap();
    let yaml = yaml.split("```").next().unwrap();
    let s = parse(yaml).unwrap();
    assert_eq!(s.name, "rag-chat");
    assert_eq!(s.steps.len(), 2);
    assert_eq!(s.max_in_flight, 512);
    assert_eq!(s.thresholds.len(), 2);
}

mod data;
mod fulllink;
mod grpc;
mod model;
mod prompt;
mod sweep;

#[test]
fn a_price_table_reads_and_a_bad_one_is_named_by_path() {
    let priced = format!("{GOOD}cost: {{ gpu_hour: 2.5, gpus: 2 }}\n");
    assert_eq!(
        parse(&priced).unwrap().cost,
        Some(sluice_filters::Price::GpuHour {
            usd_per_hour: 2.5,
            gpus: 2.0
        })
    );
    assert_eq!(parse(GOOD).unwrap().cost, None);
    let bad =
        format!("{GOOD}cost: {{ models: {{ m: {{ input_per_1k: -1, output_per_1k: 0 }} }} }}\n");
    assert_eq!(
        errors(&bad),
        ["cost.models.m.input_per_1k: must be a price ≥ 0, found -1"]
    );
}

mod replay;
