//! Replay scenarios: `workload.replay` (or `arrival: { kind: trace, file }`)
//! reads the trace whole into one implicit step, and refuses what a
//! recording already shapes, each refusal named by its path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use super::*;

/// Three requests, two in session `a`, the first 1 s before the rest.
const TRACE: &str = r#"{"v":1,"request_id":"r0","session_id":"a","method":"POST","path":"/v1/chat/completions","arrival_us":0,"body":{"model":"m","messages":[{"role":"user","content":"hi"}]},"output_tokens":4}
{"v":1,"request_id":"r1","method":"POST","path":"/v1/completions","arrival_us":1000000}
{"v":1,"request_id":"r2","session_id":"a","arrival_us":1500000}
"#;

const REPLAY: &str = r#"
scenario: replayed
target: { base_url: "http://127.0.0.1:8080" }
workload: { replay: trace.jsonl, warmup: 1s, seed: 5 }
thresholds: { error_rate: 1% }
"#;

/// A directory holding `trace.jsonl` with `text`.
fn trace_dir(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-replay-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("trace.jsonl"), text).unwrap();
    dir
}

fn replay_errors(text: &str, dir: &Path) -> Vec<String> {
    Scenario::from_yaml(text, dir, &env)
        .unwrap_err()
        .0
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_replay_reads_the_trace_into_one_implicit_step() {
    let dir = trace_dir("good", TRACE);
    let s = Scenario::from_yaml(REPLAY, &dir, &env).unwrap();
    let source = s.replay.as_ref().unwrap();
    assert_eq!(source.file, "trace.jsonl");
    let r = &source.recording.requests;
    assert_eq!(r.len(), 3);
    assert_eq!(
        (r[1].method.as_str(), r[1].path.as_str()),
        ("POST", "/v1/completions")
    );
    // The planner set max_tokens from the recorded output_tokens.
    let body: serde_json::Value = serde_json::from_slice(r[0].body.as_ref().unwrap()).unwrap();
    assert_eq!(body["max_tokens"], 4);
    assert!(source.recording.warnings.is_empty());
    assert_eq!(s.steps.len(), 1);
    assert_eq!(s.steps[0].name, REPLAY_STEP);
    assert_eq!(s.steps[0].service, Service::Llm);
    assert_eq!(s.steps[0].timeout, DEFAULT_TIMEOUT);
    // Only the seed and the warm-up of the plan count.
    assert_eq!((s.plan.seed, s.plan.warmup), (5, Duration::from_secs(1)));
    assert!(s.plan.segments.is_empty());
    assert_eq!(s.thresholds.len(), 1);

    // `kind: trace` is the same replay.
    let text = REPLAY.replace(
        "replay: trace.jsonl",
        "arrival: { kind: trace, file: trace.jsonl }",
    );
    let t = Scenario::from_yaml(&text, &dir, &env).unwrap();
    assert_eq!(t, s);
}

#[test]
fn a_quantised_trace_warns_as_trace_stats_does() {
    let lines: String = (0..10)
        .map(|i| {
            format!(
                "{{\"v\":1,\"request_id\":\"r{i}\",\"arrival_us\":{}}}\n",
                i / 5 * 1_000_000
            )
        })
        .collect();
    let dir = trace_dir("quantised", &lines);
    let s = Scenario::from_yaml(REPLAY, &dir, &env).unwrap();
    let warnings = &s.replay.unwrap().recording.warnings;
    let times: Vec<u64> = (0..10).map(|i| i / 5 * 1_000_000).collect();
    assert_eq!(
        warnings,
        &[crate::trace::quantised_warning(&times).unwrap()]
    );
    assert!(warnings[0].starts_with("88.9% of inter-arrival times are exactly 0"));
}

#[test]
fn a_missing_or_bad_trace_is_named_with_its_line() {
    let dir = trace_dir("bad", TRACE);
    assert_eq!(
        replay_errors(&REPLAY.replace("trace.jsonl", "nope.jsonl"), &dir),
        ["workload.replay: nope.jsonl: No such file or directory (os error 2)"]
    );
    let bad = TRACE.replace("\"arrival_us\":1000000", "\"arrival_us\":-1");
    let dir = trace_dir("badline", &bad);
    assert_eq!(
        replay_errors(REPLAY, &dir),
        ["workload.replay: trace.jsonl:2: column 81: invalid value: integer `-1`, expected u64"]
    );
    let text = REPLAY.replace(
        "replay: trace.jsonl",
        "arrival: { kind: trace, file: nope.jsonl }",
    );
    assert_eq!(
        replay_errors(&text, &dir),
        ["workload.arrival.file: nope.jsonl: No such file or directory (os error 2)"]
    );
}

#[test]
fn a_replay_refuses_what_the_recording_shapes() {
    let dir = trace_dir("refuse", TRACE);
    let text = REPLAY
        .replace(
            "replay: trace.jsonl,",
            "replay: trace.jsonl, arrival: { kind: poisson, rate: 2 }, duration: 10s,\n    \
             stages: [ { rate: 1, for: 1s } ],",
        )
        .replace(
            "thresholds:",
            "sessions: { turns: 2 }\n\
             steps: [ { name: a, service: http, path: /x } ]\n\
             data: { q: { values: [x] } }\n\
             thresholds:",
        );
    assert_eq!(
        replay_errors(&text, &dir),
        [
            "workload: give one of `arrival`, `from_model` and `replay`",
            "workload.duration: a replay keeps the recorded times (window them with --from and --to)",
            "workload.stages: a replay keeps the recorded times (window them with --from and --to)",
            "sessions: a replay keeps the recorded sessions",
            "steps: a replay sends the recorded requests (as the one step `replay`): leave `steps` out",
            "data: a replay sends the recorded bodies: no step reads `data`",
        ]
    );
}

#[test]
fn kind_trace_takes_its_file_alone() {
    let dir = trace_dir("kind", TRACE);
    let with = |arrival: &str| REPLAY.replace("replay: trace.jsonl", arrival);
    assert_eq!(
        replay_errors(&with("arrival: { kind: trace }, duration: 1s"), &dir),
        [
            "workload.arrival: `trace` takes file, found none",
            "steps: needs at least one step",
        ]
    );
    assert_eq!(
        replay_errors(
            &with("arrival: { kind: trace, file: trace.jsonl, rate: 3 }"),
            &dir
        ),
        ["workload.arrival: `trace` takes file alone, found rate, file"]
    );
    assert_eq!(
        errors(&GOOD.replace("burstiness: 0.5", "burstiness: 0.5, file: t.jsonl")),
        [
            "workload.arrival: `gamma` takes rate and burstiness, or shape and scale, found rate, \
          burstiness, file"
        ]
    );
    // Without a replay, steps are needed.
    let start = GOOD.find("steps:").unwrap();
    let end = GOOD.find("data:").unwrap();
    let no_steps = format!("{}{}", &GOOD[..start], &GOOD[end..]);
    assert_eq!(errors(&no_steps), ["steps: needs at least one step"]);
}

#[test]
fn replay_step_sets_the_implicit_steps_timeout_thresholds_and_request() {
    let dir = trace_dir("rstep", TRACE);
    let text = REPLAY.replace(
        "thresholds:",
        "replay_step: { timeout: 30s, thresholds: { ttft_p95: 800ms }, model: smol, \
         ignore_eos: true }\nthresholds:",
    );
    let s = Scenario::from_yaml(&text, &dir, &env).unwrap();
    let step = &s.steps[0];
    assert_eq!(step.name, REPLAY_STEP);
    assert_eq!(step.timeout, Duration::from_secs(30));
    assert_eq!(step.thresholds, [(Gate::TtftP95, 800.0)]);
    assert_eq!(step.model.as_deref(), Some("smol"));
    assert!(step.ignore_eos);
    // The run-wide thresholds stay the run's.
    assert_eq!(s.thresholds, [(Gate::ErrorRate, 1.0)]);

    let bad = REPLAY.replace(
        "thresholds:",
        "replay_step: { timeout: 0s, thresholds: { gpu_memory_max: 1% }, model: '' }\n\
         thresholds:",
    );
    let refused = replay_errors(&bad, &dir);
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert_eq!(refused[0], "replay_step.timeout: must be greater than 0");
    assert!(
        refused[1].starts_with(
            "replay_step.thresholds.gpu_memory_max: `gpu_memory_max` is not measured by a load \
             client"
        ),
        "{refused:?}"
    );
    assert_eq!(
        refused[2],
        "replay_step.model: must be a model name, found an empty one"
    );
    let unknown = REPLAY.replace("thresholds:", "replay_step: { path: /x }\nthresholds:");
    let refused = replay_errors(&unknown, &dir);
    assert!(
        refused[0].starts_with("replay_step.path: unknown field `path`"),
        "{refused:?}"
    );
    // Without a replay the key is refused: the steps are written out.
    let synthetic = GOOD.replace("thresholds:", "replay_step: { timeout: 5s }\nthresholds:");
    assert_eq!(
        errors(&synthetic),
        ["replay_step: is for a replay (`workload.replay`); give a step's settings in `steps`"]
    );
}

#[test]
fn the_replay_example_in_the_docs_reads() {
    let docs = include_str!("../../../../../docs/workload.md");
    let after = docs.split("### Replay from a trace").nth(1).unwrap();
    let yaml = after.split("```yaml\n").nth(1).unwrap();
    let yaml = yaml.split("```").next().unwrap();
    let s = Scenario::from_yaml(yaml, &trace_dir("docs", TRACE), &env).unwrap();
    assert_eq!(s.name, "replay-prod");
    let step = &s.steps[0];
    assert_eq!(step.timeout, Duration::from_secs(120));
    assert_eq!(step.thresholds, [(Gate::TtftP95, 2000.0)]);
    assert_eq!(
        (step.model.as_deref(), step.ignore_eos),
        (Some("smollm2"), true)
    );
}
