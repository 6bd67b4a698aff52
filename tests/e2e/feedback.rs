//! The feedback loop end to end: a rollout whose canary starts failing at
//! step 2 under real traffic through sluice (recorder on) is rolled back
//! and leaves a feedback scenario (manifest and trace of the route's
//! requests); `sluice feedback list` shows it with its weight; `sluice load
//! --feedback` replays it against the canary once fixed, and the run and
//! its report show that path, as its own step, now passing. `sluice
//! lineage` walks from that report back through the run, the saved
//! scenario, the rollout event that broke and the rollout, to the canary's
//! checkpoint and dataset.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_filters::{parse_lines, FeedbackManifest, TriggerKind};

use crate::cli;
use crate::harness::{self, Admin, TestConfig};
use crate::lineage::walk;
use crate::support::TempDir;

async fn mock(model: &str) -> MockLlm {
    MockLlm::start(MockLlmOptions {
        model: model.into(),
        ..MockLlmOptions::paced_ms(2, 1, 3)
    })
    .await
    .unwrap()
}

/// The scenario directories under `dir`, once there are any (15 s at most).
async fn scenarios(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found: Vec<_> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.')
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !found.is_empty() || Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_loop_a_breach_becomes_a_scenario_that_replays_against_the_fixed_canary() {
    let dir = TempDir::new("feedback-loop");
    let fb = dir.path().join("feedback");
    let stable = mock("v1").await;
    let canary = mock("v2").await;
    let sluice = TestConfig::http()
        .cluster_with("stable", "llm", [stable.addr()], "version: v1")
        .cluster_with(
            "canary",
            "llm",
            [canary.addr()],
            "version: v2, lineage: { dataset: s3://chats@v3, checkpoint: hf://org/llama@3f2a }",
        )
        .route("chat", "stable: 100, canary: 0")
        .section(
            "rollouts",
            "\n  - { name: chat-v2, route: chat, stable: stable, canary: canary, steps: [10, 50, 100], \
             hold: 1s, min_requests: 5, interval: 100ms, window: 1s, gates: { error_rate: 5% } }",
        )
        .section(
            "recorder",
            format!("{{ path: \"{}\" }}", dir.path().join("rec.jsonl").display()),
        )
        .section("feedback", format!("{{ dir: \"{}\", before: 1m }}", fb.display()))
        .start();
    let admin = Admin::new(&sluice);
    let url = format!(
        "http://{}/v1/chat/completions",
        harness::listener(&sluice, "public")
    );

    // Users' traffic from four workers until the rollout decides.
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..4 {
        let (url, stop) = (url.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 3000 {
                let body = json!({"model": "m", "max_tokens": 3,
                                  "messages": [{"role": "user", "content": format!("w{w} ask {n}")}]});
                if let Ok(r) = client.post(&url).json(&body).send().await {
                    let _ = r.bytes().await;
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }
    // The canary breaks at step 2.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut status;
    let mut broke = false;
    loop {
        status = admin.get("/v1/rollouts/chat-v2").await.1;
        if !broke && status["step"] == 2 {
            canary.knobs().set_error_rate(1.0);
            broke = true;
        }
        if status["state"] == "rolled_back" || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    assert!(broke, "the rollout never reached step 2: {status}");
    assert_eq!(status["state"], "rolled_back", "{status}");

    // (1) The breach left a scenario: the manifest names it, the trace
    // holds the route's requests, the canary's failing among them.
    let found = scenarios(&fb).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let m =
        FeedbackManifest::parse(&std::fs::read_to_string(found[0].join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m.trigger.kind, TriggerKind::RolloutBreach);
    assert_eq!(
        (m.trigger.gate.as_str(), m.trigger.bound),
        ("error_rate", 5.0)
    );
    assert!(m.trigger.value.unwrap() > 5.0, "{:?}", m.trigger);
    assert_eq!(m.route, "chat");
    assert_eq!(
        (m.cluster.as_deref(), m.version.as_deref()),
        (Some("canary"), Some("v2"))
    );
    assert!(m.lineage.event.is_some() && m.lineage.rollout.is_some());
    assert_eq!(m.artifact.parents, vec![m.lineage.event.clone().unwrap()]);
    let trace = std::fs::read_to_string(found[0].join("trace.jsonl")).unwrap();
    let lines: Vec<_> = parse_lines(&trace).map(|l| l.unwrap()).collect();
    assert_eq!(lines.len() as u64, m.requests);
    assert!(m.requests > 20, "{}", m.requests);
    assert!(lines.iter().all(|l| l.route.as_deref() == Some("chat")));
    let canary_failed = lines
        .iter()
        .filter(|l| l.cluster.as_deref() == Some("canary") && l.status == Some(500))
        .count() as u64;
    assert!(canary_failed > 0 && m.errors == canary_failed, "{m:?}");
    assert!(m.error_rate > 0.05 && m.initial_weight > 1.5, "{m:?}");
    assert!(
        lines.iter().all(|l| l.body.is_some()),
        "bodies recorded (redacted)"
    );

    // `sluice feedback list` shows it, with its weight now.
    let out = cli::sluice(vec![
        "feedback".into(),
        "list".into(),
        fb.display().to_string(),
        "--json".into(),
    ])
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = found[0].file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(rows[0]["id"], json!(id));
    assert_eq!(rows[0]["gate"], "error_rate");
    assert_eq!(rows[0]["route"], "chat");
    let now = rows[0]["weight_now"].as_f64().unwrap();
    assert!((now - m.initial_weight).abs() < 0.01, "{rows}");

    // (2) The canary is fixed (v2 again, healthy, redeployed); the next
    // load test replays what broke against it, beside the scenario's own
    // (one-request) trace. sluice stays up: its control API holds the
    // rollout's lineage.
    let lineage = dir.path().join("lineage");
    let lineage_dir = lineage.display().to_string();
    let fixed = MockLlm::start(MockLlmOptions {
        model: "v2".into(),
        record: true,
        ..MockLlmOptions::paced_ms(2, 1, 3)
    })
    .await
    .unwrap();
    std::fs::write(
        dir.path().join("base.jsonl"),
        r#"{"v":1,"request_id":"b0","method":"POST","path":"/v1/chat/completions","arrival_us":0,"body":{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hello"}]}}
"#,
    )
    .unwrap();
    let scenario = dir.path().join("next.yaml");
    std::fs::write(
        &scenario,
        format!(
            "scenario: next\ntarget: {{ base_url: 'http://{}' }}\n\
             workload: {{ replay: base.jsonl, seed: 4 }}\nthresholds: {{ error_rate: 1% }}\n",
            fixed.addr()
        ),
    )
    .unwrap();
    let run = dir.path().join("run.json");
    let out = cli::sluice(vec![
        "load".into(),
        scenario.display().to_string(),
        "--feedback".into(),
        fb.display().to_string(),
        "--speed".into(),
        "4".into(),
        "-o".into(),
        run.display().to_string(),
        "--lineage-dir".into(),
        lineage_dir.clone(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("load: feedback {id} (rollout_breach: error_rate ")),
        "{stderr}"
    );

    // (3) The run shows the path that broke as its own step, now passing.
    let report: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    let mixed = report["feedback"][0]["mixed_requests"].as_u64().unwrap();
    assert_eq!(report["feedback"][0]["id"], json!(id));
    assert_eq!(
        report["feedback"][0]["recorded_requests"],
        json!(m.requests)
    );
    // About `weight` copies of the window.
    let weight = report["feedback"][0]["weight"].as_f64().unwrap();
    let expected = weight * m.requests as f64;
    assert!(
        (mixed as f64 - expected).abs() <= m.requests as f64,
        "{mixed} vs {expected}"
    );
    let step = format!("feedback/{id}");
    let steps = report["steps"].as_array().unwrap();
    let fed = steps.iter().find(|s| s["name"] == json!(step)).unwrap();
    assert_eq!(fed["requests"], json!(mixed), "{fed}");
    assert_eq!(fed["completed"], json!(mixed), "{fed}");
    assert_eq!(fed["failed"], json!(0), "{fed}");
    assert_eq!(steps[0]["name"], "replay");
    assert_eq!(steps[0]["completed"], json!(1));
    assert_eq!(report["passed"], json!(true), "{}", report["thresholds"]);
    // The fixed canary got the recorded requests (their recorded prompts).
    let seen = fixed.seen();
    assert_eq!(seen.len() as u64, mixed + 1);
    let asked = |s: &sluice_cli::SeenRequest| String::from_utf8_lossy(&s.body).contains(" ask ");
    assert_eq!(seen.iter().filter(|s| asked(s)).count() as u64, mixed);

    // The report of the run lists the step too.
    let page = dir.path().join("report.json");
    let out = cli::sluice(vec![
        "report".into(),
        run.display().to_string(),
        "--json".into(),
        "-o".into(),
        page.display().to_string(),
        "--lineage-dir".into(),
        lineage_dir.clone(),
    ])
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page: Value = serde_json::from_slice(&std::fs::read(&page).unwrap()).unwrap();
    let row = page["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == json!(step))
        .unwrap_or_else(|| panic!("no step {step} in {}", page["steps"]));
    assert_eq!(
        (row["requests"].as_u64(), row["failed"].as_u64()),
        (Some(mixed), Some(0))
    );

    // The whole path, walked from the report: dataset → checkpoint →
    // cluster v2 → rollout → the event that broke → the saved scenario →
    // the run that replayed it → its report.
    let chain = walk(page["id"].as_str().unwrap(), &lineage_dir, &sluice).await;
    let path = chain.path(&[
        "dataset",
        "checkpoint",
        "cluster",
        "rollout",
        "rollout_event",
        "feedback",
        "load_run",
        "report",
    ]);
    assert_eq!(path[4], m.lineage.event.clone().unwrap().to_string());
    assert_eq!(path[5], m.id.to_string());
    assert_eq!(path[6], report["lineage"]["id"].as_str().unwrap());
    drop(sluice);
}
