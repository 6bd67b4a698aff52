#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use super::*;
use crate::load::client::{Failure, Outcome};

fn scenario(thresholds: &str) -> Scenario {
    scenario_with(thresholds, "")
}

/// With `step` inside the one step's map (`, thresholds: {...}`).
fn scenario_with(thresholds: &str, step: &str) -> Scenario {
    let text = format!(
        "scenario: s\ntarget: {{ base_url: 'http://127.0.0.1:1' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 11s, warmup: 1s }}\n\
         steps: [ {{ name: answer, service: llm, prompt: hi{step} }} ]\n{thresholds}"
    );
    Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap()
}

/// A streamed answer: intended at `i` ms, sent `lag` ms later, first
/// content `ttft` ms after sending, 11 tokens at 10 ms each.
fn answer(i: u64, lag: u64, ttft: u64) -> Outcome {
    let ms = 1000;
    let sent = i * ms + lag * ms;
    let first = sent + ttft * ms;
    Outcome {
        index: i,
        intended_us: i * ms,
        sent_us: sent,
        first_byte_us: Some(first),
        first_content_us: Some(first),
        end_us: first + 100 * ms,
        gaps_us: vec![10 * ms; 10],
        status: Some(200),
        input_tokens: Some(5),
        output_tokens: Some(11),
        ..Outcome::default()
    }
}

fn output(outcomes: Vec<Outcome>) -> RunOutput {
    RunOutput {
        outcomes,
        closed: None,
        journeys: 0,
        span_us: 11_000_000,
        ran_us: 11_000_000,
        queued: 0,
        cut_in_flight: 0,
        cut_waiting: 0,
        elapsed: Duration::from_secs(11),
        interrupted: false,
        setup: Vec::new(),
        teardown: Vec::new(),
    }
}

fn info(goodput: Goodput) -> RunInfo {
    RunInfo {
        run_id: "r".into(),
        shard: "0/1".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        lineage: Lineage {
            scenario_sha256: "0".repeat(64),
            target: "http://127.0.0.1:1".into(),
            sluice_version: "0".into(),
            from_model: None,
            id: None,
            parents: Vec::new(),
        },
        goodput,
        detailed: false,
    }
}

fn close(a: f64, b: f64) -> bool {
    // HDR's three significant digits.
    (a - b).abs() <= 1e-3 * b.abs() + 1e-3
}

#[test]
fn fields_are_vllms_and_measured_from_the_intended_time() {
    // 100 answers: TTFT from sending 50 ms, the dispatch lag i % 10 ms.
    let mut outcomes: Vec<Outcome> = (0..100).map(|i| answer(i, i % 10, 50)).collect();
    let mut warm = answer(1000, 0, 5000);
    warm.warmup = true;
    outcomes.push(warm);
    let mut limited = answer(2000, 0, 50);
    (limited.status, limited.failure) = (Some(429), Some(Failure::RateLimited));
    outcomes.push(limited);
    let mut broken = answer(3000, 0, 50);
    (broken.status, broken.failure) = (Some(500), Some(Failure::Status));
    outcomes.push(broken);
    let s = scenario("");
    let r = summarize(&s, &output(outcomes), info(Goodput::default()));
    let m = &r.summary.metrics;
    assert_eq!(r.dispatch.warmup_requests, 1);
    assert_eq!(
        (
            r.summary.requests,
            r.summary.completed,
            r.summary.failed,
            r.summary.rate_limited
        ),
        (102, 100, 1, 1)
    );
    assert_eq!(r.summary.total_output_tokens, 1100);
    assert!(close(m["mean_ttft_sent_ms"], 50.0));
    // From the intended time: 50 + the mean lag of 4.5 ms.
    assert!(close(m["mean_ttft_ms"], 54.5), "{}", m["mean_ttft_ms"]);
    assert!(
        close(m["p99_dispatch_lag_ms"], 9.0),
        "{}",
        m["p99_dispatch_lag_ms"]
    );
    // TPOT = (100 ms after the first token) / 10.
    assert!(close(m["mean_tpot_ms"], 10.0));
    assert!(close(m["p99_itl_ms"], 10.0));
    assert!(close(m["mean_service_time_ms"], 150.0));
    assert!(close(m["median_e2el_ms"], 154.0), "{}", m["median_e2el_ms"]);
    // 10 s measured (11 less the 1 s warm-up).
    assert!(close(m["duration"], 10.0));
    assert!(close(m["request_throughput"], 10.0));
    assert!(close(m["output_throughput"], 110.0));
    assert_eq!(r.steps.len(), 1);
    assert_eq!(r.steps[0].summary.completed, 100);
    assert_eq!(r.stages.len(), 1);
    assert!(r.passed);
    assert_eq!(r.exit_code(), 0);
    // The histograms decode to what was recorded.
    let text = &r.summary.histograms["ttft_sent_us"];
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .unwrap();
    assert_eq!(h.len(), 100);
    assert!(close(h.mean(), 50_000.0));
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("requests").is_none());
    assert_eq!(json["summary"]["completed"], 100);
    assert!(json["summary"]["p99_ttft_ms"].is_number());
    assert_eq!(json["lineage"]["target"], "http://127.0.0.1:1");
}

#[test]
fn goodput_counts_the_requests_that_meet_every_bound() {
    // TTFT 20..119 ms from the intended time; all with TPOT 10, e2el +100.
    let outcomes: Vec<Outcome> = (0..100).map(|i| answer(i, 0, 20 + i)).collect();
    let s = scenario("");
    let g = Goodput::parse(["ttft:69.5 tpot:50", "e2el:5000"]).unwrap();
    let r = summarize(&s, &output(outcomes.clone()), info(g));
    // 50 of 100 in 10 s.
    assert!(close(r.summary.metrics["request_goodput"], 5.0));
    let g = Goodput::parse(["tpot:5"]).unwrap();
    let r = summarize(&s, &output(outcomes), info(g));
    assert!(close(r.summary.metrics["request_goodput"], 0.0));
    assert_eq!(
        Goodput::parse(["ttft=800"]).unwrap_err(),
        "`ttft=800` is not KEY:MS like ttft:800"
    );
    assert_eq!(
        Goodput::parse(["itl:5"]).unwrap_err(),
        "`itl:5`: unknown goodput key `itl` (expected ttft, tpot or e2el)"
    );
    assert_eq!(
        Goodput::parse(["ttft:-1"]).unwrap_err(),
        "`ttft:-1`: `-1` is not a number of ms > 0"
    );
}

#[test]
fn thresholds_fail_the_run_with_exit_99() {
    let outcomes: Vec<Outcome> = (0..100).map(|i| answer(i, 0, 50)).collect();
    let s = scenario("thresholds: { ttft_p95: 40ms, error_rate: 1%, latency_p99: 1s }\n");
    let r = summarize(&s, &output(outcomes.clone()), info(Goodput::default()));
    let judged: Vec<(&str, bool)> = r.thresholds.iter().map(|t| (t.name, t.passed)).collect();
    assert_eq!(
        judged,
        [
            ("error_rate", true),
            ("latency_p99", true),
            ("ttft_p95", false)
        ]
    );
    assert_eq!(r.thresholds[0].value, Some(0.0));
    assert!(close(r.thresholds[2].value.unwrap(), 50.0));
    assert!(!r.passed);
    assert_eq!(r.exit_code(), THRESHOLDS_FAILED);
    // Interrupted: partial, whatever the thresholds say.
    let mut stopped = output(outcomes);
    (stopped.interrupted, stopped.ran_us) = (true, 6_000_000);
    let r = summarize(&scenario(""), &stopped, info(Goodput::default()));
    assert!(r.interrupted && r.passed);
    // Measured over the 5 s that ran after the warm-up.
    assert!(close(r.summary.metrics["duration"], 5.0));
    assert!(close(r.summary.metrics["request_throughput"], 20.0));
    assert_eq!(r.exit_code(), INTERRUPTED);
    // Nothing measured: a threshold cannot hold.
    let r = summarize(&s, &output(Vec::new()), info(Goodput::default()));
    assert!(r.thresholds.iter().all(|t| t.value.is_none() && !t.passed));
}

/// Answered by the canary (v2) when `canary`, else by stable (v1); both
/// name the model `m`.
fn served(mut o: Outcome, canary: bool) -> Outcome {
    let (cluster, version) = if canary {
        ("canary", "v2")
    } else {
        ("stable", "v1")
    };
    o.cluster = Some(cluster.into());
    o.version = Some(version.into());
    o.model = Some("m".into());
    o
}

/// `seen` counts the measured answers per cluster, version and model;
/// warm-up answers and answers that named nothing are left out.
#[test]
fn seen_counts_who_answered_the_measured_requests() {
    let mut all: Vec<Outcome> = (0..30).map(|i| served(answer(i, 0, 20), i < 10)).collect();
    all[0].warmup = true;
    all.push(answer(30, 0, 20));
    let mut bare_model = answer(31, 0, 20);
    bare_model.model = Some("llama".into());
    all.push(bare_model);
    let r = summarize(&scenario(""), &output(all), info(Goodput::default()));
    let seen = |cluster: Option<&str>, version: Option<&str>, model: &str, requests| Seen {
        step: "answer".into(),
        cluster: cluster.map(str::to_owned),
        version: version.map(str::to_owned),
        model: Some(model.into()),
        lineage_id: None,
        requests,
    };
    assert_eq!(
        r.seen,
        [
            seen(None, None, "llama", 1),
            seen(Some("canary"), Some("v2"), "m", 9),
            seen(Some("stable"), Some("v1"), "m", 20),
        ]
    );
    let none = summarize(
        &scenario(""),
        &output(vec![answer(0, 0, 20)]),
        info(Goodput::default()),
    );
    assert!(none.seen.is_empty());
}

/// The 4 shards' result files merge into the one run's summary: the same
/// counts, the same histograms, so the same percentiles to the last digit.
#[test]
fn shards_merge_exactly_into_the_one_run() {
    let all: Vec<Outcome> = (0..200)
        .map(|i| served(answer(i, i % 7, 20 + (i * 37) % 300), i % 3 == 0))
        .collect();
    let s = scenario_with(
        "thresholds: { ttft_p95: 250ms }\n",
        ", thresholds: { ttft_p99: 1s, error_rate: 0% }",
    );
    let g = Goodput::parse(["ttft:200"]).unwrap();
    let whole = serde_json::to_value(summarize(&s, &output(all.clone()), info(g))).unwrap();
    let shards: Vec<serde_json::Value> = (0..4u64)
        .map(|k| {
            let part: Vec<Outcome> = all.iter().filter(|o| o.index % 4 == k).cloned().collect();
            let mut i = info(g);
            i.shard = format!("{k}/4");
            serde_json::to_value(summarize(&s, &output(part), i)).unwrap()
        })
        .collect();
    let merged = merge_runs(&shards).unwrap();
    for key in ["summary", "steps", "stages", "thresholds", "passed", "seen"] {
        assert_eq!(merged[key], whole[key], "{key}");
    }
    assert_eq!(merged["summary"]["completed"], 200);
    assert_eq!(merged["shard"], "merged 4");
    let judged: Vec<(&str, &str, bool)> = merged["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let step = t.get("step").and_then(|s| s.as_str()).unwrap_or("-");
            (t["name"].as_str().unwrap(), step, t["passed"] == true)
        })
        .collect();
    assert_eq!(
        judged,
        [
            ("ttft_p95", "-", false),
            ("error_rate", "answer", true),
            ("ttft_p99", "answer", true)
        ]
    );
    // Not the shards of one run.
    assert_eq!(
        merge_runs(&shards[..3]).unwrap_err(),
        "shards 0/4, 1/4, 2/4 given: a merge needs each of 0/4 to 3/4 once"
    );
    let mut other = shards.clone();
    other[2]["scenario"] = "another".into();
    assert_eq!(
        merge_runs(&other).unwrap_err(),
        "file 2: `scenario` is Some(\"another\"), not Some(\"s\") as in file 0: not a shard of \
         the same run"
    );
    let mut twice = shards.clone();
    twice[3]["shard"] = "1/4".into();
    assert_eq!(
        merge_runs(&twice).unwrap_err(),
        "file 3: shard 1/4 is given twice"
    );
}

#[test]
fn a_from_model_run_carries_the_models_arrivals_and_another_run_none() {
    let dir = std::env::temp_dir().join(format!("sluice-summary-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("model.yaml"),
        format!(
            "v: 1\narrival: {{ kind: gamma, shape: 0.5, scale: 0.2 }}\n\
             source: {{ trace: t.jsonl, sha256: {}, requests: 9, fitted_at: \
             2026-01-01T00:00:00Z }}\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    let text = "scenario: s\ntarget: { base_url: 'http://127.0.0.1:1' }\n\
                workload: { from_model: model.yaml, duration: 2s }\n\
                steps: [ { name: answer, service: llm, prompt: hi } ]\n";
    let s = Scenario::from_yaml(text, &dir, &|_| None).unwrap();
    let r = summarize(
        &s,
        &output(vec![answer(0, 0, 50)]),
        info(Goodput::default()),
    );
    assert_eq!(
        serde_json::to_value(&r).unwrap()["arrival_fit"],
        serde_json::json!({ "v": 1, "source": "model.yaml", "of": "requests", "best": "gamma",
            "candidates": [{ "kind": "gamma", "params": { "shape": 0.5, "scale": 0.2 } }] })
    );
    // A run of an `arrival:` scenario writes no `arrival_fit` at all.
    let other = summarize(&scenario(""), &output(Vec::new()), info(Goodput::default()));
    assert!(serde_json::to_value(&other)
        .unwrap()
        .get("arrival_fit")
        .is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn grpc_errors_are_counted_by_status_and_merge_across_shards() {
    use crate::load::client::GrpcReply;
    // 40 calls: every 4th UNAVAILABLE (14), every 10th RESOURCE_EXHAUSTED
    // (8, rate limited), the rest OK; one broken stream without a status.
    let all: Vec<Outcome> = (0..40)
        .map(|i| {
            let (status, failure) = match i {
                _ if i % 10 == 0 => (Some(8), Some(Failure::RateLimited)),
                _ if i % 4 == 0 => (Some(14), Some(Failure::Status)),
                39 => (None, Some(Failure::Transport)),
                _ => (Some(0), None),
            };
            Outcome {
                failure,
                grpc: Some(GrpcReply {
                    status,
                    messages: 1,
                    bytes: 5,
                }),
                ..answer(i, 0, 10)
            }
        })
        .collect();
    let s = scenario("");
    let whole = serde_json::to_value(summarize(
        &s,
        &output(all.clone()),
        info(Goodput::default()),
    ))
    .unwrap();
    let summary = &whole["summary"];
    // 14: i = 4, 8, 12, 16, 24, 28, 32, 36; 8: i = 0, 10, 20, 30.
    assert_eq!(summary["grpc_errors"], serde_json::json!({"14": 8, "8": 4}));
    assert_eq!(summary["failed"], 9);
    assert_eq!(summary["rate_limited"], 4);
    assert_eq!(summary["completed"], 27);
    assert_eq!(whole["steps"][0]["grpc_errors"], summary["grpc_errors"]);
    let shards: Vec<serde_json::Value> = (0..2u64)
        .map(|k| {
            let part: Vec<Outcome> = all.iter().filter(|o| o.index % 2 == k).cloned().collect();
            let mut i = info(Goodput::default());
            i.shard = format!("{k}/2");
            serde_json::to_value(summarize(&s, &output(part), i)).unwrap()
        })
        .collect();
    let merged = merge_runs(&shards).unwrap();
    for key in ["summary", "steps", "stages"] {
        assert_eq!(merged[key], whole[key], "{key}");
    }
    // Without grpc errors the key is absent.
    let plain = serde_json::to_value(summarize(
        &s,
        &output(vec![answer(0, 0, 10)]),
        info(Goodput::default()),
    ))
    .unwrap();
    assert!(plain["summary"].get("grpc_errors").is_none());
}
