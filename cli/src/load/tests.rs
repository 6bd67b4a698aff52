//! `sluice load` against the mock LLM on loopback: a streamed run measured
//! end to end, thresholds and the exit code, and shards that together send
//! what one run sends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use sluice_cli::{MockLlm, MockLlmOptions};

use super::*;

/// The mock on its own runtime, so that the load engine's runtime is apart.
struct Mock {
    mock: MockLlm,
    _runtime: tokio::runtime::Runtime,
}

fn mock(ttft_ms: u64, itl_ms: u64, tokens: u32) -> Mock {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = MockLlmOptions {
        record: true,
        ..MockLlmOptions::paced_ms(ttft_ms, itl_ms, tokens)
    };
    let mock = runtime.block_on(MockLlm::start(options)).unwrap();
    Mock {
        mock,
        _runtime: runtime,
    }
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-load-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_scenario(dir: &Path, m: &Mock, rate: u32, secs: u32, extra: &str) -> PathBuf {
    let text = format!(
        "scenario: chat\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: {rate} }}, duration: {secs}s, seed: 3 }}\n\
         steps:\n\
         \x20 - {{ name: answer, service: llm, model: m, prompt: 'Say {{{{word}}}}', max_tokens: 8, ignore_eos: true }}\n\
         data: {{ word: {{ values: [a, b, c] }} }}\n{extra}",
        m.mock.addr()
    );
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn args(scenario: PathBuf, output: Option<PathBuf>, shard: Shard) -> RunArgs {
    RunArgs {
        scenario,
        output,
        shard,
        seed: None,
        sla: None,
        goodput: vec!["ttft:1000".into(), "tpot:500".into()],
        closed: None,
        start_at: None,
        detailed: true,
        drain: Duration::from_secs(5),
        report_to: None,
        token: AdminToken::default(),
        lineage_dir: None,
        speed: None,
        from: None,
        to: None,
        sample: None,
        feedback: None,
    }
}

fn ran(o: Outcome) -> RunReport {
    match o {
        Outcome::Ran(r) => *r,
        Outcome::Invalid(e) => panic!("{e:?}"),
    }
}

#[test]
fn a_streamed_run_against_the_mock_is_measured_end_to_end() {
    let m = mock(30, 5, 12);
    let d = dir("stream");
    let path = write_scenario(&d, &m, 10, 3, "");
    let good = std::fs::read_to_string(&path).unwrap();
    // `${VAR}` must be set: the scenario names a variable that is not.
    let unset = good.replace(
        "' }\n",
        "', headers: { authorization: 'Bearer ${SLUICE_TEST_UNSET}' } }\n",
    );
    std::fs::write(&path, unset).unwrap();
    let e = match execute(&args(path.clone(), None, Shard::WHOLE), false).unwrap() {
        Outcome::Invalid(e) => e,
        Outcome::Ran(_) => panic!("ran with an unset variable"),
    };
    assert_eq!(
        e,
        [format!(
            "{}: target.headers.authorization: environment variable \
             `SLUICE_TEST_UNSET` is not set",
            path.display()
        )]
    );
    std::fs::write(&path, good).unwrap();
    let out = d.join("run.json");
    let r = ran(execute(&args(path, Some(out.clone()), Shard::WHOLE), false).unwrap());
    // The schedule: 10/s for 3 s, evenly spaced.
    assert_eq!(r.dispatch.journeys, 30);
    assert_eq!(r.summary.requests, 30);
    assert_eq!(r.summary.completed, 30);
    // Token counts from the mock's usage (it honours max_tokens: 8), not
    // counted chunks.
    assert_eq!(r.summary.total_output_tokens, 30 * 8);
    assert!(!r.summary.output_tokens_estimated);
    assert!(r.summary.total_input_tokens > 0);
    let metric = |n: &str| r.summary.metrics[n];
    // The mock's 30 ms to the first token and 5 ms between tokens, with room.
    assert!(
        (25.0..500.0).contains(&metric("mean_ttft_ms")),
        "{:?}",
        r.summary.metrics
    );
    assert!(metric("mean_ttft_ms") >= metric("mean_ttft_sent_ms"));
    assert!(
        (3.0..100.0).contains(&metric("mean_tpot_ms")),
        "{:?}",
        r.summary.metrics
    );
    assert!(
        (3.0..100.0).contains(&metric("median_itl_ms")),
        "{:?}",
        r.summary.metrics
    );
    assert!(metric("request_goodput") > 0.0);
    assert!(r.passed);
    // The printed summary.
    let text = render::render(&r);
    assert!(
        text.starts_with("chat (open), shard 0/1, seed 3\nrequests 30  completed 30  failed 0"),
        "{text}"
    );
    assert!(text.contains("\nttft_sent     mean "), "{text}");
    // Every request was a chat completion with the run's id and a prompt
    // from the data.
    let seen = m.mock.seen();
    assert_eq!(seen.len(), 30);
    for s in &seen {
        assert_eq!(s.path, "/v1/chat/completions");
        assert_eq!(s.header("x-sluice-load"), Some(r.run_id.as_str()));
        assert!(s.header("traceparent").is_some());
        let body: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
        let prompt = body["messages"][0]["content"].as_str().unwrap();
        assert!(["Say a", "Say b", "Say c"].contains(&prompt), "{prompt}");
        assert_eq!(body["max_tokens"], 8);
        assert_eq!(body["stream"], true);
        assert_eq!(body["ignore_eos"], true);
    }
    // The file: the scenario, the seed, the lineage, the histograms.
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(file["scenario"], "chat");
    assert_eq!(file["seed"], 3);
    assert_eq!(file["mode"], "open");
    assert_eq!(
        file["lineage"]["scenario_sha256"].as_str().unwrap().len(),
        64
    );
    assert_eq!(file["steps"][0]["name"], "answer");
    assert_eq!(file["steps"][0]["completed"], 30);
    assert!(file["steps"][0]["histograms"]["ttft_us"].is_string());
    assert!(file["summary"]["p99_ttft_ms"].is_number());
    // `--detailed`: every request, with its times in order.
    let requests = file["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 30);
    for q in requests {
        let t = |k: &str| q[k].as_u64().unwrap();
        assert!(t("intended_us") <= t("sent_us"));
        assert!(t("sent_us") < t("first_content_us"));
        assert!(t("first_content_us") <= t("end_us"));
        assert_eq!(q["output_tokens"], 8);
        assert_eq!(q["status"], 200);
        assert!(q["failure"].is_null());
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_failed_threshold_exits_99() {
    let m = mock(30, 1, 4);
    let d = dir("thresholds");
    let path = write_scenario(
        &d,
        &m,
        20,
        1,
        "thresholds: { ttft_p95: 1ms, error_rate: 1% }\n",
    );
    let r = ran(execute(&args(path, None, Shard::WHOLE), false).unwrap());
    assert!(!r.passed);
    assert_eq!(r.exit_code(), 99);
    let judged: Vec<(&str, bool)> = r.thresholds.iter().map(|t| (t.name, t.passed)).collect();
    assert_eq!(judged, [("error_rate", true), ("ttft_p95", false)]);
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--sla` replaces the scenario's `ttft_p95` (1 ms, failing) with 10 s
/// (passing) and adds `latency_p99`; a bad `--sla` is refused before any load.
#[test]
fn sla_replaces_and_adds_run_wide_thresholds() {
    let m = mock(30, 1, 4);
    let d = dir("sla");
    let path = write_scenario(&d, &m, 20, 1, "thresholds: { ttft_p95: 1ms }\n");
    let mut a = args(path.clone(), None, Shard::WHOLE);
    a.sla = Some("ttft_p95=10s, latency_p99=1ms".into());
    let r = ran(execute(&a, false).unwrap());
    let judged: Vec<(&str, bool)> = r.thresholds.iter().map(|t| (t.name, t.passed)).collect();
    assert_eq!(judged, [("ttft_p95", true), ("latency_p99", false)]);
    assert_eq!(r.exit_code(), 99);

    a.sla = Some("ttft_p9=1s,error_rate".into());
    let Outcome::Invalid(errors) = execute(&a, false).unwrap() else {
        panic!("a bad --sla ran");
    };
    assert_eq!(
        errors,
        [
            "--sla: ttft_p9: unknown gate `ttft_p9` (expected one of ttft_p95, ttft_p99, \
             gap_p99, tpot_p95, latency_p99, error_rate, p99_vs_stable, ttft_vs_stable, \
             gpu_memory_max, upstream_queue_max, cost_per_1k_max, grpc_success_rate_min, embedding_similarity_p10_min, embedding_drift_kl_max, answer_dispersion_max, min_coverage)",
            "--sla: `error_rate` is not NAME=VALUE like ttft_p95=800ms",
        ]
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// 4 shards, run one after another against one mock, send between them
/// exactly the requests one run sends: the same count, and every arrival
/// index once (the journeys' prompts depend on the index and the seed only).
#[test]
fn four_shards_send_together_what_one_run_sends() {
    let m = mock(1, 1, 2);
    let d = dir("shards");
    let path = write_scenario(&d, &m, 40, 1, "");
    let whole = ran(execute(&args(path.clone(), None, Shard::WHOLE), false).unwrap());
    assert_eq!(whole.summary.requests, 40);
    let mut journeys = 0;
    for i in 0..4 {
        let r = ran(execute(
            &args(path.clone(), None, Shard { index: i, count: 4 }),
            false,
        )
        .unwrap());
        assert_eq!(r.shard, format!("{i}/4"));
        journeys += r.dispatch.journeys;
    }
    assert_eq!(journeys, 40);
    let seen = m.mock.seen();
    assert_eq!(seen.len(), 80);
    let prompts = |part: &[sluice_cli::SeenRequest]| -> Vec<String> {
        let mut v: Vec<String> = part
            .iter()
            .map(|s| {
                let body: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
                body["messages"][0]["content"].as_str().unwrap().to_owned()
            })
            .collect();
        v.sort();
        v
    };
    // The same multiset of prompts (drawn per arrival index with the seed).
    assert_eq!(prompts(&seen[..40]), prompts(&seen[40..]));
    let distinct: BTreeSet<String> = prompts(&seen[..40]).into_iter().collect();
    assert!(distinct.len() > 1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn validate_reads_a_scenario_and_names_its_errors() {
    let d = dir("validate");
    let path = d.join("scenario.yaml");
    let text = "scenario: v\ntarget: { base_url: 'http://127.0.0.1:9' }\n\
                workload: { arrival: { kind: poisson, rate: 5 }, duration: 10s, seed: 1 }\n\
                steps: [ { name: a, service: http, path: /x } ]\n";
    assert!(is_scenario(text));
    assert!(!is_scenario("listeners: []\n"));
    std::fs::write(&path, text).unwrap();
    let line = validate(&path).unwrap();
    assert!(
        line.starts_with(&format!(
            "{}: valid scenario `v` (1 steps, ",
            path.display()
        )),
        "{line}"
    );
    std::fs::write(&path, text.replace("duration: 10s", "duration: soon")).unwrap();
    assert_eq!(
        validate(&path).unwrap_err(),
        [format!(
            "{}: workload.duration: `soon` is not a duration like 250ms or 1s",
            path.display()
        )]
    );
    // A data trace's lines that gave no value are said under the line.
    std::fs::write(
        d.join("prod.jsonl"),
        "{\"v\":1,\"request_id\":\"a\",\"arrival_us\":0,\"body\":{\"prompt\":\"hi\"}}\n\
         {\"v\":1,\"request_id\":\"b\",\"arrival_us\":1}\n",
    )
    .unwrap();
    let with_data =
        text.replace("path: /x", "path: '/x?q={{q}}'") + "data: { q: { trace: prod.jsonl } }\n";
    std::fs::write(&path, with_data).unwrap();
    let said = validate(&path).unwrap();
    assert!(
        said.ends_with(
            ")\nwarning: data.q: 1 of 2 lines of prod.jsonl gave no value and were skipped (1 \
             without a body)"
        ),
        "{said}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn start_at_waits_for_its_time_and_refuses_one_too_far() {
    assert_eq!(wait_until(5_000_000, 2_000_000), Duration::from_secs(3));
    assert_eq!(wait_until(1_000_000, 2_000_000), Duration::ZERO);
    assert_eq!(start_at("2026-01-01T00:00:00Z"), Ok(1_767_225_600_000_000));
    assert_eq!(
        start_at("9999-01-01T00:00:00Z").unwrap_err(),
        "`9999-01-01T00:00:00Z` is more than a day ahead"
    );
    assert!(start_at("tomorrow").is_err());
    // A run told to start 300 ms from now starts then.
    let m = mock(1, 1, 2);
    let d = dir("start-at");
    let path = write_scenario(&d, &m, 10, 1, "");
    let mut a = args(path, None, Shard::WHOLE);
    a.start_at = Some(unix_us() + 300_000);
    let began = std::time::Instant::now();
    let r = ran(execute(&a, false).unwrap());
    assert!(
        began.elapsed() >= Duration::from_millis(1300),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(r.summary.requests, 10);
    std::fs::remove_dir_all(&d).unwrap();
}

/// `carry_history`: each turn of a session sends the prompts before it and
/// the mock's live answers to them, so the messages grow 1, 3, 5.
#[test]
fn carry_history_grows_the_messages_turn_by_turn() {
    let m = mock(1, 1, 3);
    let d = dir("history");
    let path = write_scenario(
        &d,
        &m,
        5,
        1,
        "sessions: { turns: 3, think_time: 10ms, carry_history: true }\n",
    );
    let r = ran(execute(&args(path, None, Shard::WHOLE), false).unwrap());
    assert_eq!(r.summary.completed, 15);
    let mut lengths: Vec<usize> = Vec::new();
    for s in m.mock.seen() {
        let body: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
        let messages = body["messages"].as_array().unwrap().clone();
        lengths.push(messages.len());
        for (k, msg) in messages.iter().enumerate() {
            let role = if k % 2 == 0 { "user" } else { "assistant" };
            assert_eq!(msg["role"], role);
            // The live answers, not placeholders.
            assert!(!msg["content"].as_str().unwrap().is_empty(), "{messages:?}");
        }
    }
    lengths.sort_unstable();
    assert_eq!(lengths, [1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 5, 5, 5, 5, 5]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_flags_of_report_to_parse_beside_the_scenario() {
    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }
    use clap::Parser as _;
    let cli = Cli::try_parse_from([
        "load",
        "s.yaml",
        "--report-to",
        "http://127.0.0.1:9901/",
        "--token",
        "t0k",
    ])
    .unwrap();
    let run = cli.load.run.unwrap();
    assert_eq!(run.scenario, PathBuf::from("s.yaml"));
    assert_eq!(run.report_to.as_deref(), Some("http://127.0.0.1:9901"));
    assert_eq!(cli.load.token.token, "t0k");
    let e = Cli::try_parse_from(["load", "s.yaml", "--report-to", "https://x:1"]).unwrap_err();
    assert!(e.to_string().contains("is not an http:// URL"), "{e}");
}

mod replay;

#[test]
fn feedback_needs_a_readable_directory() {
    let m = mock(1, 1, 2);
    let d = dir("feedback-refused");
    let path = write_scenario(&d, &m, 10, 1, "");
    let mut a = args(path, None, Shard::WHOLE);
    let missing = d.join("no-such-dir");
    a.feedback = Some(missing.clone());
    let Outcome::Invalid(errors) = execute(&a, false).unwrap() else {
        panic!("ran with a missing --feedback dir");
    };
    assert_eq!(
        errors,
        [format!(
            "--feedback: {}: No such file or directory (os error 2)",
            missing.display()
        )]
    );
    assert!(m.mock.seen().is_empty(), "nothing was sent");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A saved scenario `name` under `dir`: weight 2 (saved an hour from now,
/// so undecayed), its `n` requests 100 ms apart, each a chat for model
/// `saved`.
fn save_feedback(dir: &Path, name: &str, n: usize) {
    use sluice_filters::{
        Cause, FeedbackLineage, FeedbackManifest, FeedbackTrigger, FeedbackWindow, TriggerKind,
    };
    let artifact = Artifact::new(
        ArtifactKind::Feedback,
        "chat",
        serde_json::json!({"route": "chat", "saved": name}),
        Vec::new(),
    );
    let created = unix_us() + 3_600_000_000;
    let manifest = FeedbackManifest {
        v: 1,
        id: artifact.id.clone(),
        trigger: FeedbackTrigger {
            kind: TriggerKind::RolloutBreach,
            cause: Cause::UpstreamTimeout,
            gate: "error_rate".into(),
            value: Some(10.0),
            bound: 1.0,
            unit: "%".into(),
            reason: "error_rate 10% > 1%".into(),
        },
        route: "chat".into(),
        rollout: Some("chat-v2".into()),
        fault: None,
        cluster: Some("llm-canary".into()),
        version: Some("v2".into()),
        lineage: FeedbackLineage::default(),
        window: FeedbackWindow {
            from: format_rfc3339(created - 60_000_000),
            to: format_rfc3339(created),
        },
        requests: n as u64,
        errors: 0,
        error_rate: 0.1,
        initial_weight: 2.0,
        half_life: "72h".into(),
        created: format_rfc3339(created),
        trace: "trace.jsonl".into(),
        notes: Vec::new(),
        artifact,
    };
    let trace: Vec<String> = (0..n)
        .map(|k| {
            format!(
                r#"{{"v":1,"request_id":"q{k}","method":"POST","path":"/v1/chat/completions","arrival_us":{},"status":504,"body":{{"model":"saved","messages":[{{"role":"user","content":"again"}}]}},"output_tokens":4}}"#,
                7_000_000 + k as u64 * 100_000
            )
        })
        .collect();
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    std::fs::write(d.join("trace.jsonl"), trace.join("\n")).unwrap();
}

#[test]
fn a_synthetic_scenario_sends_the_saved_requests_beside_its_journeys() {
    let m = mock(1, 1, 4);
    let d = dir("feedback-synthetic");
    let path = write_scenario(&d, &m, 10, 1, "");
    let fb = d.join("feedback");
    save_feedback(&fb, "a", 3);
    let out = d.join("run.json");
    let mut a = args(path, Some(out.clone()), Shard::WHOLE);
    a.feedback = Some(fb);
    let r = ran(execute(&a, false).unwrap());
    // Ten synthetic journeys, and the saved three requests twice (weight 2).
    let models: Vec<String> = m
        .mock
        .seen()
        .iter()
        .map(|q| {
            let body: serde_json::Value = serde_json::from_slice(&q.body).unwrap();
            body["model"].as_str().unwrap().to_owned()
        })
        .collect();
    let count = |model: &str| models.iter().filter(|x| *x == model).count();
    assert_eq!((models.len(), count("m"), count("saved")), (16, 10, 6));
    assert_eq!(r.dispatch.journeys, 16);
    let steps: Vec<(&str, u64, u64)> = r
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.summary.requests, s.summary.completed))
        .collect();
    assert_eq!(steps, [("answer", 10, 10), ("feedback/a", 6, 6)]);
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(
        written["feedback"],
        serde_json::json!([{
            "id": "a",
            "step": "feedback/a",
            "trigger": "rollout_breach: error_rate 10% > 1%",
            "route": "chat",
            "weight": 2.0,
            "recorded_requests": 3,
            "mixed_requests": 6
        }])
    );
    let names: Vec<&str> = written["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["answer", "feedback/a"]);

    // `--closed` keeps no recorded times: refused before anything is sent.
    let sent = m.mock.seen().len();
    a.closed = Some(2);
    let Outcome::Invalid(errors) = execute(&a, false).unwrap() else {
        panic!("ran a closed loop with --feedback");
    };
    assert_eq!(
        errors,
        [
            "--closed: --feedback sends the saved requests at their recorded times; a synthetic \
             scenario with --feedback runs open loop only"
        ]
    );
    assert_eq!(m.mock.seen().len(), sent);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_run_keeps_its_lineage_and_the_same_inputs_give_the_same_id() {
    let m = mock(1, 1, 2);
    let d = dir("lineage");
    let path = write_scenario(&d, &m, 20, 1, "");
    let lineage = d.join("lineage");
    let a = RunArgs {
        lineage_dir: Some(lineage.clone()),
        ..args(path.clone(), None, Shard::WHOLE)
    };
    let first = ran(execute(&a, false).unwrap());
    let second = ran(execute(&a, false).unwrap());
    assert_ne!(first.run_id, second.run_id);
    let id = first.lineage.id.clone().unwrap();
    assert_eq!(second.lineage.id.as_ref(), Some(&id));

    let (kept, corrupt) = sluice_workload::read_lineage_dir(&lineage).unwrap();
    assert!(corrupt.is_empty(), "{corrupt:?}");
    let kinds: BTreeSet<&str> = kept.iter().map(|k| k.kind.name()).collect();
    assert_eq!(kinds, BTreeSet::from(["load_run", "scenario"]));
    let run = kept.iter().find(|k| k.id == id).unwrap();
    let scenario = kept.iter().find(|k| k.kind.name() == "scenario").unwrap();
    // A bare server names no cluster version: the scenario is the one parent.
    assert_eq!(run.parents, vec![scenario.id.clone()]);
    assert_eq!(first.lineage.parents, run.parents);
    assert_eq!(scenario.label, "scenario.yaml");

    // Another seed is another run.
    let reseeded = ran(execute(
        &RunArgs {
            seed: Some(4),
            ..a.clone()
        },
        false,
    )
    .unwrap());
    assert_ne!(reseeded.lineage.id, Some(id));
    std::fs::remove_dir_all(&d).unwrap();
}
