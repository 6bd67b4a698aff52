//! Faults on gRPC calls, seen by a real grpcio client through sluice: the stream faults
//! pace a server stream message by message (`token_delay`, `first_token_delay`, `stall`),
//! end it early (`truncate` clean: OK with fewer messages; abrupt: an error after them) or
//! spoil one message (`corrupt`); the request faults `delay`, `reset` and `close` reach
//! the client as a late answer and as CANCELLED (the call's stream reset), and later calls
//! are served.

use serde_json::{json, Value};

use super::{grpc_calls, grpc_server, python};
use crate::harness::{self, Admin, TestConfig};

/// `test.Svc/Count` for 6 messages, the server sending them 10 ms apart.
fn six_messages() -> Value {
    json!({"method": "/test.Svc/Count", "n": 1, "payload": "0601", "stream": true})
}

/// When each message came, in seconds since the call started.
fn arrivals(got: &Value) -> Vec<f64> {
    got["at"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect()
}

fn gaps(at: &[f64]) -> Vec<f64> {
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Runs `spec` through `listen` with `action` as the one experiment, which
/// must have fired once per call.
async fn with_fault(
    python: &std::path::Path,
    admin: &Admin,
    listen: u16,
    action: Value,
    spec: Value,
) -> Value {
    let (status, body) = admin
        .post(
            "/v1/faults",
            json!({"ttl": "5m", "action": action}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let calls = spec["n"].clone();
    let got = grpc_calls(python, listen, spec).await;
    let id = body["id"].as_str().unwrap();
    let (_, shown) = admin.get(&format!("/v1/faults/{id}")).await;
    assert_eq!(shown["injected"], calls, "{shown}");
    assert_eq!(admin.delete(&format!("/v1/faults/{id}")).await.0, 200);
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_faults_pace_and_cut_a_grpc_server_stream_per_message() {
    let Some(python) = python() else { return };
    let (_server, upstream) = grpc_server(&python, &[]).await;
    let sluice = TestConfig::http()
        .cluster_with("model", "llm", [&upstream], "protocol: h2c")
        .route("rpc", "model: 100")
        .start();
    let admin = Admin::new(&sluice);
    let listen = harness::listener(&sluice, "public").port();
    let run = |action: Value| {
        let (python, admin) = (&python, &admin);
        async move { with_fault(python, admin, listen, action, six_messages()).await }
    };

    let plain = grpc_calls(&python, listen, six_messages()).await;
    assert_eq!(
        (&plain["codes"]["OK"], &plain["messages"]),
        (&json!(1), &json!(6)),
        "{plain}"
    );

    // Every gap grows by the delay (the server's own are 10 ms).
    let paced = run(json!({"token_delay": {"delay": "150ms"}})).await;
    assert_eq!(
        (&paced["codes"]["OK"], &paced["messages"]),
        (&json!(1), &json!(6)),
        "{paced}"
    );
    let g = gaps(&arrivals(&paced));
    assert!(g.iter().all(|gap| *gap >= 0.13), "gaps {g:?}");

    let late = run(json!({"first_token_delay": {"delay": "600ms"}})).await;
    assert_eq!(late["messages"], 6, "{late}");
    let at = arrivals(&late);
    assert!(at[0] >= 0.55, "first message at {at:?}");
    assert!(
        gaps(&at).iter().all(|gap| *gap < 0.5),
        "only the first waits: {at:?}"
    );

    let held = run(json!({"stall": {"after_chunks": 3, "duration": "600ms"}})).await;
    assert_eq!(
        (&held["codes"]["OK"], &held["messages"]),
        (&json!(1), &json!(6)),
        "{held}"
    );
    let at = arrivals(&held);
    assert!(at[3] - at[2] >= 0.55, "held after the third: {at:?}");

    // A clean truncation ends the call early with OK; an abrupt one fails it.
    let clean = run(json!({"truncate": {"after_chunks": 2, "mode": "clean"}})).await;
    assert_eq!(
        (&clean["codes"]["OK"], &clean["messages"]),
        (&json!(1), &json!(2)),
        "{clean}"
    );
    let cut = run(json!({"truncate": {"after_chunks": 2, "mode": "abrupt"}})).await;
    assert_eq!(cut["messages"], 2, "{cut}");
    assert!(cut["codes"]["OK"].is_null(), "{cut}");

    // The spoiled message (flagged compressed, no encoding agreed) fails the call
    // after the first message.
    let spoiled = run(json!({"corrupt": {"after_chunks": 1}})).await;
    assert_eq!(spoiled["codes"]["INTERNAL"], 1, "{spoiled}");
    assert_eq!(spoiled["messages"], 1, "{spoiled}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_reset_and_close_reach_a_grpc_client() {
    let Some(python) = python() else { return };
    let (_server, upstream) = grpc_server(&python, &[]).await;
    let sluice = TestConfig::http()
        .cluster_with("grpc", "http", [&upstream], "protocol: h2c")
        .route("rpc", "grpc: 100")
        .start();
    let admin = Admin::new(&sluice);
    let listen = harness::listener(&sluice, "public").port();
    let echo = json!({"method": "/test.Svc/Echo", "n": 1, "payload": "00ff"});

    let slow = with_fault(
        &python,
        &admin,
        listen,
        json!({"delay": {"delay": "700ms"}}),
        echo.clone(),
    )
    .await;
    assert_eq!(
        (&slow["codes"]["OK"], &slow["wrong_replies"]),
        (&json!(1), &json!(0)),
        "{slow}"
    );
    assert!(slow["seconds"][0].as_f64().unwrap() >= 0.65, "{slow}");

    // On HTTP/2 a call is one stream of a shared connection: both end its stream
    // (RST_STREAM, CANCEL), and the client reports the call CANCELLED.
    for action in ["reset", "close"] {
        let got = with_fault(&python, &admin, listen, json!({action: {}}), echo.clone()).await;
        assert_eq!(got["codes"], json!({"CANCELLED": 1}), "{action}: {got}");
    }
    // The experiments are gone: calls are served again.
    let after = grpc_calls(
        &python,
        listen,
        json!({"method": "/test.Svc/Echo", "n": 5, "payload": "00ff"}),
    )
    .await;
    assert_eq!(after["codes"]["OK"], 5, "{after}");
}

/// Every call to the primary is copied to a shadow over HTTP/2. The shadow fails every
/// other Echo with UNAVAILABLE and puts "v2:" before the other replies, so each compared
/// pair differs: half by `grpc_status`, half by the unary message's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_are_mirrored_over_http2_and_diffed_by_status_and_bytes() {
    let Some(python) = python() else { return };
    let (_primary, primary) = grpc_server(&python, &[]).await;
    let (_shadow, shadow) = grpc_server(&python, &["0.5", "v2:"]).await;
    let sluice = TestConfig::http()
        .cluster_with("grpc", "http", [&primary], "protocol: h2c")
        .cluster_with("shadow", "http", [&shadow], "protocol: h2c")
        .route_with("rpc", "grpc: 100", "mirror: { cluster: shadow }")
        .start();
    let listen = harness::listener(&sluice, "public").port();

    let n = 40;
    let got = grpc_calls(
        &python,
        listen,
        json!({"method": "/test.Svc/Echo", "n": n, "payload": "00abff"}),
    )
    .await;
    assert_eq!(
        (&got["codes"]["OK"], &got["wrong_replies"]),
        (&json!(n), &json!(0)),
        "the primary answers: {got}"
    );

    let counted = |text: &str, family: &str, label: (&str, &str)| {
        harness::metric_value(text, family, &[("route", "rpc"), label]).unwrap_or(0.0)
    };
    let text = harness::metrics_within(&sluice, std::time::Duration::from_secs(20), |t| {
        counted(t, "sluice_mirror_requests_total", ("result", "ok")) >= f64::from(n)
    })
    .await;
    assert_eq!(
        counted(&text, "sluice_mirror_requests_total", ("result", "ok")),
        f64::from(n),
        "{text}"
    );
    let by_kind = |kind| counted(&text, "sluice_mirror_diff_total", ("kind", kind));
    assert_eq!(by_kind("grpc_status"), f64::from(n / 2), "{text}");
    assert_eq!(by_kind("message"), f64::from(n / 2), "{text}");
    assert_eq!(by_kind("status"), 0.0, "HTTP 200 both ways: {text}");

    let (_, diffs) = Admin::new(&sluice).get("/v1/mirror/diffs").await;
    let list = diffs["diffs"].as_array().unwrap();
    let failed = list
        .iter()
        .find(|d| d["kinds"] == json!(["grpc_status"]))
        .expect("a pair that differs by status");
    assert_eq!(failed["primary"]["grpc_status"], 0, "{failed}");
    assert_eq!(failed["shadow"]["grpc_status"], 14, "{failed}");
    let other = list
        .iter()
        .find(|d| d["kinds"] == json!(["message"]))
        .expect("a pair that differs by bytes");
    assert_ne!(
        other["primary"]["fingerprint"], other["shadow"]["fingerprint"],
        "{other}"
    );
}
