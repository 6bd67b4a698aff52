//! `sluice load` with `service: grpc` steps against the real grpcio server of
//! tests/e2e/py/grpc_server.py: unary and server-stream calls straight to it and
//! through a sluice listener routed to an h2c cluster, every call ok and counted
//! with its messages and bytes; a share of UNAVAILABLE answers counted as errors by
//! their code (in the summary and, through the `sluice load` binary, in run.json with
//! `--detailed` rows); a dead target a transport error; a message given as JSON with the
//! descriptor set that grpcio-tools' protoc writes.

use std::sync::Arc;
use std::time::Duration;

use sluice_workload::{
    run_load, summarize, Failure, Goodput, Lineage, Live, RunInfo, RunOptions, RunOutput,
    RunReport, Scenario,
};

use crate::cli::sluice;
use crate::grpc::{grpc_server, python};
use crate::harness::{self, TestConfig};
use crate::support::{self, TempDir};

/// Runs `text` (a scenario) and summarizes it.
async fn run(text: &str) -> (RunOutput, RunReport) {
    let scenario = Scenario::from_yaml(text, std::path::Path::new("."), &|_| None).unwrap();
    let schedule = scenario.plan.schedule().unwrap();
    let options = RunOptions {
        closed: None,
        drain: Duration::from_secs(20),
        run_id: "load-grpc".into(),
        threads: 2,
    };
    let s = scenario.clone();
    let out = tokio::task::spawn_blocking(move || {
        run_load(&s, &schedule, &options, Arc::new(Live::default()))
    })
    .await
    .unwrap()
    .unwrap();
    let report = summarize(
        &scenario,
        &out,
        RunInfo {
            run_id: "load-grpc".into(),
            shard: "0/1".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            lineage: Lineage {
                scenario_sha256: String::new(),
                target: scenario.target.base_url.clone(),
                sluice_version: "test".into(),
                from_model: None,
                id: None,
                parents: Vec::new(),
            },
            goodput: Goodput::default(),
            detailed: false,
        },
    );
    (out, report)
}

/// The outcomes of step `i`.
fn of(out: &RunOutput, i: usize) -> Vec<&sluice_workload::Outcome> {
    out.outcomes.iter().filter(|o| o.step == i).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_steps_call_a_grpcio_server_directly_and_through_sluice() {
    let Some(python) = python() else { return };
    let (_server, upstream) = grpc_server(&python, &[]).await;
    let sluice = TestConfig::http()
        .cluster_with("grpc", "http", [&upstream], "protocol: h2c")
        .route_with("rpc", "grpc: 100", "match: { path_prefix: / }")
        .start();
    let proxy = harness::listener(&sluice, "public");
    // 8 journeys of 4 calls: a unary echo and a stream of 3 messages (50 ms
    // apart), each straight to grpcio and through sluice.
    let text = format!(
        r#"
scenario: grpc-e2e
target: {{ base_url: "http://{proxy}" }}
workload: {{ arrival: {{ kind: constant, rate: 8 }}, duration: 1s, seed: 1 }}
steps:
  - {{ name: echo, service: grpc, target: "http://{upstream}", method: test.Svc/Echo,
      message: {{ base64: "aGVsbG8=" }}, timeout: 10s, metadata: {{ x-tenant: a }} }}
  - {{ name: count, service: grpc, target: "http://{upstream}", method: test.Svc/Count,
      message: {{ hex: "03" }}, timeout: 10s }}
  - {{ name: via_echo, service: grpc, method: test.Svc/Echo,
      message: {{ hex: "0068656c6c6fff" }}, timeout: 10s }}
  - {{ name: via_count, service: grpc, method: test.Svc/Count, message: {{ hex: "03" }},
      timeout: 10s }}
"#
    );
    let (out, report) = run(&text).await;
    for (i, messages, bytes) in [(0, 1, 5), (1, 3, 15), (2, 1, 7), (3, 3, 15)] {
        let name = &report.steps[i].name;
        let s = &report.steps[i].summary;
        assert_eq!(report.steps[i].service, "grpc");
        assert_eq!(
            (s.requests, s.completed, s.failed),
            (8, 8, 0),
            "{name}: {s:?}"
        );
        assert!(s.grpc_errors.is_empty(), "{name}: {s:?}");
        // The first message is the step's first content: TTFT is measured.
        assert!(s.metrics.contains_key("mean_ttft_ms"), "{name}");
        for o in of(&out, i) {
            let reply = o.grpc.as_ref().unwrap();
            assert_eq!(o.status, Some(200), "{name}: {o:?}");
            assert_eq!(o.failure, None, "{name}: {o:?}");
            assert_eq!(
                (reply.status, reply.messages, reply.bytes),
                (Some(0), messages, bytes),
                "{name}: {o:?}"
            );
            let first = o.first_content_us.unwrap();
            assert!(o.first_byte_us.unwrap() <= first && first <= o.end_us);
            // A gap between each two messages of a stream, as they came.
            assert_eq!(o.gaps_us.len() as u64, messages - 1, "{name}: {o:?}");
            assert!(!o.trace_id.is_empty());
        }
    }
    // The stream's messages came 50 ms apart, not together (generous bound).
    let count = of(&out, 1);
    assert!(count
        .iter()
        .all(|o| o.gaps_us.iter().sum::<u64>() >= 50_000));

    // Counted by sluice as gRPC, by method and status.
    let text = harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        harness::metric_value(
            t,
            "sluice_grpc_requests_total",
            &[("grpc_method", "test.Svc/Count"), ("grpc_status", "0")],
        ) == Some(8.0)
    })
    .await;
    let echo = harness::metric_value(
        &text,
        "sluice_grpc_requests_total",
        &[("grpc_method", "test.Svc/Echo"), ("grpc_status", "0")],
    );
    assert_eq!(echo, Some(8.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_grpc_calls_count_by_status_and_a_dead_target_is_a_transport_error() {
    let Some(python) = python() else { return };
    // Half the Echo calls answered UNAVAILABLE (14).
    let (_server, upstream) = grpc_server(&python, &["0.5"]).await;
    let dead = format!("127.0.0.1:{}", support::free_port());
    let text = format!(
        r#"
scenario: grpc-errors
target: {{ base_url: "http://{upstream}" }}
workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 1s, seed: 1 }}
steps:
  - {{ name: echo, service: grpc, method: test.Svc/Echo, message: {{ hex: "01" }}, timeout: 10s }}
  - {{ name: missing, service: grpc, method: test.Svc/Missing, timeout: 10s }}
  - {{ name: dead, service: grpc, target: "http://{dead}", method: test.Svc/Echo, timeout: 5s }}
"#
    );
    let (out, report) = run(&text).await;
    let echo = &report.steps[0].summary;
    assert_eq!(
        (echo.requests, echo.completed, echo.failed),
        (10, 5, 5),
        "{echo:?}"
    );
    assert_eq!(echo.grpc_errors, [("14".to_owned(), 5)].into(), "{echo:?}");
    for o in of(&out, 0).iter().filter(|o| o.failure.is_some()) {
        assert_eq!(o.failure, Some(Failure::Status), "{o:?}");
        assert_eq!(o.status, Some(200));
        assert_eq!(o.grpc.as_ref().unwrap().status, Some(14));
    }
    let missing = &report.steps[1].summary;
    assert_eq!((missing.completed, missing.failed), (0, 10), "{missing:?}");
    assert_eq!(missing.grpc_errors, [("5".to_owned(), 10)].into());
    let dead = &report.steps[2].summary;
    assert_eq!((dead.completed, dead.failed), (0, 10), "{dead:?}");
    assert!(dead.grpc_errors.is_empty());
    for o in of(&out, 2) {
        assert_eq!((o.status, o.failure), (None, Some(Failure::Transport)));
        assert_eq!(o.grpc, None);
    }
    // The run counts them all as failed: 5 + 10 + 10.
    assert_eq!(report.summary.failed, 25);
    assert_eq!(report.summary.grpc_errors.len(), 2);

    // The same through the `sluice load` binary: run.json carries the counts by
    // status, and `--detailed` each call's reply.
    let tmp = TempDir::new("load-grpc");
    let path = tmp.path().join("grpc.yaml");
    std::fs::write(&path, &text).unwrap();
    let run_json = tmp.path().join("run.json");
    let out = sluice(vec![
        "load".into(),
        path.display().to_string(),
        "--detailed".into(),
        "-o".into(),
        run_json.display().to_string(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    let steps = &run["steps"];
    assert_eq!(steps[0]["service"], "grpc");
    assert_eq!(steps[0]["completed"], 5, "{}", steps[0]);
    assert_eq!(steps[0]["grpc_errors"], serde_json::json!({"14": 5}));
    assert_eq!(steps[1]["grpc_errors"], serde_json::json!({"5": 10}));
    assert_eq!(run["summary"]["failed"], 25);
    let rows = run["requests"].as_array().unwrap();
    let ok: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["step"] == 0 && r.get("failure").is_none_or(|f| f.is_null()))
        .collect();
    assert_eq!(ok.len(), 5);
    assert!(ok
        .iter()
        .all(|r| r["grpc"] == serde_json::json!({"status": 0, "messages": 1, "bytes": 1})));
}

/// The proto of the JSON test: an enum and a snake_case field (`maxLen` in JSON), so that
/// the canonical mapping is read from protoc's own descriptors.
const PROTO: &str = r#"syntax = "proto3";
package test;
enum Kind { SLOW = 0; FAST = 1; }
message Req { string text = 1; int32 dims = 2; repeated string tags = 3; Kind kind = 4;
  int32 max_len = 5; }
service Svc { rpc Echo(Req) returns (Req); }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_message_is_encoded_through_a_protoc_descriptor_set_and_echoed() {
    let Some(python) = python() else { return };
    let tmp = TempDir::new("load-grpc-json");
    std::fs::write(tmp.path().join("test.proto"), PROTO).unwrap();
    let python_protoc = python.clone();
    let dir = tmp.path().to_path_buf();
    let protoc = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python_protoc)
            .args(["-m", "grpc_tools.protoc", "-I", "."])
            .args([
                "--descriptor_set_out=test.pb",
                "--include_imports",
                "test.proto",
            ])
            .current_dir(dir)
            .output()
    })
    .await
    .unwrap()
    .expect("run grpc_tools.protoc");
    assert!(
        protoc.status.success(),
        "{}",
        String::from_utf8_lossy(&protoc.stderr)
    );
    let (_server, upstream) = grpc_server(&python, &[]).await;
    // text 7 bytes, dims 2, tags 3 + 3, kind 2, max_len 2: 19 bytes, echoed whole.
    let text = format!(
        r#"
scenario: grpc-json
target: {{ base_url: "http://{upstream}" }}
workload: {{ arrival: {{ kind: constant, rate: 4 }}, duration: 1s, seed: 1 }}
steps:
  - {{ name: echo, service: grpc, method: test.Svc/Echo, timeout: 10s,
      message: {{ json: {{ text: hello, dims: 8, tags: [a, b], kind: FAST, maxLen: 4 }},
                 descriptor_set: test.pb }} }}
"#
    );
    // The descriptor set is found beside the scenario, from another working directory.
    let path = tmp.path().join("json.yaml");
    std::fs::write(&path, &text).unwrap();
    let run_json = tmp.path().join("run.json");
    let out = sluice(vec![
        "load".into(),
        path.display().to_string(),
        "--detailed".into(),
        "-o".into(),
        run_json.display().to_string(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    let step = &run["steps"][0];
    assert_eq!(step["service"], "grpc");
    assert_eq!(
        (&step["completed"], &step["failed"]),
        (&4.into(), &0.into()),
        "{step}"
    );
    let rows = run["requests"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{run}");
    for r in rows {
        assert_eq!(
            r["grpc"],
            serde_json::json!({"status": 0, "messages": 1, "bytes": 19}),
            "{r}"
        );
    }
}
