//! A gRPC server stream through a `kind: llm` cluster is metered per message: a grpcio
//! server answers `test.Svc/Count` with 5 messages 200 ms apart, and the SSE meter's
//! histograms, labelled `gen_ai_operation_name="test.Svc/Count"`, count one TTFT and
//! four gaps for the call, their sums near the server's spacing (generous bands). The
//! recorder's line of the call carries its method, status, TTFT and four gaps.

use std::time::Duration;

use serde_json::json;
use sluice_filters::{parse_lines, TraceLine};

use super::{grpc_calls, grpc_server, python};
use crate::harness::{self, Admin, TestConfig};
use crate::recorder::poll_recording;
use crate::support::TempDir;

const TTFT: &str = "gen_ai_client_operation_time_to_first_chunk_seconds";
const GAP: &str = "gen_ai_client_operation_time_per_output_chunk_seconds";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stream_is_metered_per_message() {
    let Some(python) = python() else { return };
    let (_server, upstream) = grpc_server(&python, &[]).await;
    let dir = TempDir::new("grpc-meter");
    let trace = dir.path().join("trace.jsonl");
    let sluice = TestConfig::http()
        .cluster_with("model", "llm", [&upstream], "version: v1, protocol: h2c")
        .route("rpc", "model: 100")
        .section(
            "recorder",
            format!("{{ path: \"{}\", percent: 100 }}", trace.display()),
        )
        .start();
    let admin = Admin::new(&sluice);
    assert_eq!(poll_recording(&admin).await.1["recording"], true);
    let listen = harness::listener(&sluice, "public").port();
    let labels = [
        ("route", "rpc"),
        ("cluster", "model"),
        ("gen_ai_operation_name", "test.Svc/Count"),
    ];
    let of = |text: &str, family: &str, part: &str| {
        harness::metric_value(text, &format!("{family}_{part}"), &labels)
    };

    let before = harness::metrics(&sluice).await;
    assert_eq!(of(&before, TTFT, "count"), None, "no call yet");

    // 5 messages, the server waiting 200 ms (20 × 10 ms) before each.
    let spec = json!({"method": "/test.Svc/Count", "n": 1, "payload": "0514", "stream": true});
    let calls = grpc_calls(&python, listen, spec).await;
    assert_eq!(calls["codes"]["OK"], 1, "{calls}");
    assert_eq!(calls["messages"], 5, "{calls}");

    let text = harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        of(t, GAP, "count").is_some()
    })
    .await;
    assert_eq!(of(&text, TTFT, "count"), Some(1.0), "{text}");
    assert_eq!(of(&text, GAP, "count"), Some(4.0), "{text}");
    // TTFT: the server's first wait (0.2 s) and the call's set-up.
    let ttft = of(&text, TTFT, "sum").unwrap();
    assert!((0.15..3.0).contains(&ttft), "TTFT {ttft}: {text}");
    // The four gaps add up to the time between the first and last message (0.8 s).
    let gaps = of(&text, GAP, "sum").unwrap();
    assert!((0.6..4.0).contains(&gaps), "gaps {gaps}: {text}");
    // One answer of five messages: five estimated output tokens.
    let tokens = harness::metric_value(
        &text,
        "gen_ai_client_token_usage_sum",
        &[
            ("gen_ai_operation_name", "test.Svc/Count"),
            ("estimated", "true"),
        ],
    );
    assert_eq!(tokens, Some(5.0), "{text}");

    // The recorder's line: queued as the call was logged, written when it stops.
    let (status, stopped) = admin.delete("/v1/recorder").await;
    assert_eq!((status, &stopped["lines"]), (200, &json!(1)), "{stopped}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<TraceLine> = parse_lines(&text).map(Result::unwrap).collect();
    assert_eq!(lines.len(), 1, "{text}");
    let line = &lines[0];
    assert_eq!(
        line.grpc_method.as_deref(),
        Some("test.Svc/Count"),
        "{text}"
    );
    assert_eq!(line.grpc_status, Some(0), "{text}");
    assert_eq!(line.gaps_ms.len(), 4, "{text}");
    assert!(line.ttft_ms.is_some_and(|t| t >= 150.0), "{text}");
}
