//! `context_sweep:`: the stages it makes, and every error with its path.

use super::*;

const SWEEP: &str = r#"
scenario: sweep
target: { base_url: "http://127.0.0.1:8080" }
workload: { arrival: { kind: constant, rate: 2 }, duration: 8s, seed: 1 }
steps:
  - { name: chat, service: llm, prompt: { template: "Say hi." }, max_tokens: 8 }
"#;

fn with(sweep: &str) -> String {
    format!("{SWEEP}context_sweep: {sweep}\n")
}

#[test]
fn a_sweep_cuts_the_run_into_its_stages_at_the_scenarios_rate() {
    let s = parse(&with("{ from: 128, to: 1024, steps: 4 }")).unwrap();
    assert_eq!(
        s.context_sweep,
        Some(ContextSweep {
            from: 128,
            to: 1024,
            steps: 4,
            to_auto: false
        })
    );
    let segments: Vec<(Duration, f64, usize)> = s
        .plan
        .segments
        .iter()
        .map(|g| (g.span, g.from, g.stage))
        .collect();
    assert_eq!(
        segments,
        [
            (Duration::from_secs(2), 2.0, 0),
            (Duration::from_secs(2), 2.0, 1),
            (Duration::from_secs(2), 2.0, 2),
            (Duration::from_secs(2), 2.0, 3),
        ]
    );
    // Each stage's arrivals carry its index: 4 a stage at 2/s for 2 s.
    let schedule = s.plan.schedule().unwrap();
    for stage in 0..4 {
        let n = schedule
            .arrivals
            .iter()
            .filter(|a| a.stage == stage)
            .count();
        assert_eq!(n, 4, "stage {stage}");
    }
    // Without it: one stage, as before.
    assert_eq!(parse(SWEEP).unwrap().plan.segments.len(), 1);
    assert_eq!(parse(SWEEP).unwrap().context_sweep, None);
}

#[test]
fn a_bad_sweep_is_named_by_its_path() {
    assert_eq!(
        errors(&with("{ from: 1024, to: 256, steps: 1 }")),
        [
            "context_sweep.to: must be above context_sweep.from (1024), found 256",
            "context_sweep.steps: must be at least 2, found 1",
        ]
    );
    assert_eq!(
        errors(&with("{ from: 0, to: 256, steps: 4 }")),
        ["context_sweep.from: must be at least 1 token, found 0"]
    );
    let staged = with("{ from: 128, to: 1024, steps: 4 }").replace(
        "duration: 8s",
        "stages: [ { rate: 1, for: 4s }, { rate: 2, for: 4s } ]",
    );
    assert_eq!(
        errors(&staged),
        ["context_sweep: runs its own stages (`duration` / `steps` each): remove workload.stages"]
    );
    let no_prompt = with("{ from: 128, to: 1024, steps: 4 }").replace(
        r#"{ name: chat, service: llm, prompt: { template: "Say hi." }, max_tokens: 8 }"#,
        "{ name: health, service: http, path: /health }",
    );
    assert_eq!(
        errors(&no_prompt),
        ["context_sweep: needs an llm step with a `prompt` to size, found none"]
    );
    // Unknown keys and missing ones: serde's path.
    assert_eq!(
        errors(&with("{ from: 128, to: 1024, steps: 4, by: 2 }")),
        ["context_sweep.by: unknown field `by`, expected one of `from`, `to`, `steps` at line 7 \
          column 49"]
    );
    let missing = errors(&with("{ from: 128, to: 1024 }"));
    assert!(
        missing[0].starts_with("context_sweep: missing field `steps`"),
        "{missing:?}"
    );
}

#[test]
fn to_auto_is_left_for_the_run_to_resolve() {
    let s = parse(&with("{ from: 128, to: auto, steps: 4 }")).unwrap();
    assert_eq!(
        s.context_sweep,
        Some(ContextSweep {
            from: 128,
            to: 0,
            steps: 4,
            to_auto: true
        })
    );
    // The stages are cut as for a number: only their lengths wait.
    assert_eq!(s.plan.segments.len(), 4);
    assert_eq!(
        errors(&with("{ from: 128, to: max, steps: 4 }")),
        ["context_sweep.to: must be a number of tokens or `auto`, found `max`"]
    );
}
