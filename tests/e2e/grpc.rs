//! gRPC through sluice with a real grpcio server and client (tests/e2e/py/grpc_*.py): the
//! standard health check, raw unary bytes, an error status in trailers, a server stream
//! message by message, and the proxy's own errors as gRPC statuses (a deadline, a
//! cluster's timeout, a dead upstream, an HTTP/1.1-only cluster); an injected
//! `abort { grpc_status }` at 50%.

mod faults;
mod meter;
mod rollout;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{self, TestConfig};
use crate::support::{self, Process};

/// The python with grpcio, or `None` (the test is skipped, or fails in CI).
pub(crate) fn python() -> Option<std::path::PathBuf> {
    let python = support::python();
    if python.is_none() {
        support::require("python with grpcio (.venv)", false);
    }
    python
}

fn py(script: &str) -> std::path::PathBuf {
    support::workspace_root().join("tests/e2e/py").join(script)
}

/// The grpcio server of `grpc_server.py` on a free port, with `args` after the port;
/// its address once it listens.
pub(crate) async fn grpc_server(python: &std::path::Path, args: &[&str]) -> (Process, String) {
    let port = support::free_port();
    let server = Process::new(
        Command::new(python)
            .arg(py("grpc_server.py"))
            .arg(port.to_string())
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("start the grpcio server"),
    );
    let upstream = format!("127.0.0.1:{port}");
    support::wait_for_tcp(upstream.parse().unwrap(), Duration::from_secs(30))
        .await
        .expect("the grpcio server listens");
    (server, upstream)
}

/// `grpc_calls.py`'s answer: `spec.n` unary calls of `spec.method` through `listen`.
pub(crate) async fn grpc_calls(python: &std::path::Path, listen: u16, spec: Value) -> Value {
    let mut client = Command::new(python);
    client
        .arg(py("grpc_calls.py"))
        .arg(listen.to_string())
        .arg(spec.to_string());
    support::run_json(client).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_calls_through_sluice() {
    let Some(python) = python() else { return };
    let (_server, upstream) = grpc_server(&python, &[]).await;
    let dead = format!("127.0.0.1:{}", support::free_port());
    let sluice = TestConfig::http()
        .cluster_with("grpc", "http", [&upstream], "version: v1, protocol: h2c")
        .cluster_with(
            "grpc-capped",
            "http",
            [&upstream],
            "protocol: h2c, timeouts: { first_byte: 1s }",
        )
        .cluster_with("gone", "http", [&dead], "protocol: h2c")
        .cluster("plain", "http", [&upstream])
        .route_with("cap", "grpc-capped: 100", "match: { path_prefix: /cap. }")
        .route_with("dead", "gone: 100", "match: { path_prefix: /dead. }")
        .route_with("h1", "plain: 100", "match: { path_prefix: /h1. }")
        .route_with("rpc", "grpc: 100", "match: { path_prefix: / }")
        .start();
    let listen = harness::listener(&sluice, "public").port();

    let mut client = Command::new(&python);
    client.arg(py("grpc_client.py")).arg(listen.to_string());
    let got = support::run_json(client).await;

    assert_eq!(got["health"], "SERVING", "{got}");
    assert_eq!(got["echo"], "0068656c6c6fff", "{got}");
    assert_eq!(got["missing"]["code"], "NOT_FOUND", "{got}");
    assert_eq!(got["missing"]["details"], "no such thing", "{got}");

    let stream = &got["stream"];
    assert_eq!(stream["code"], "OK", "{got}");
    let messages: Vec<&str> = stream["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        ["msg-0", "msg-1", "msg-2", "msg-3", "msg-4"],
        "{got}"
    );
    // The server sleeps 50 ms before each message: they arrive one by one, not
    // buffered to the end (a generous bound: the last comes well after the first).
    let at: Vec<f64> = stream["at"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert!(at[4] - at[0] >= 0.15, "messages came together: {at:?}");

    assert_eq!(got["deadline"]["code"], "DEADLINE_EXCEEDED", "{got}");
    // The client allowed 10 s; the cluster's first_byte (1 s) capped it, and the proxy
    // wrote the gRPC status itself.
    assert_eq!(got["capped"]["code"], "DEADLINE_EXCEEDED", "{got}");
    assert_eq!(
        got["capped"]["details"], "timed out waiting for the upstream",
        "{got}"
    );
    assert_eq!(got["dead"]["code"], "UNAVAILABLE", "{got}");
    assert_eq!(got["http1"]["code"], "UNAVAILABLE", "{got}");
    let details = got["http1"]["details"].as_str().unwrap();
    assert!(
        details.contains("cluster `plain`") && details.contains("set `protocol: h2c`"),
        "{details}"
    );

    // Counted by method and grpc-status, read from trailers.
    let counted = |text: &str, method: &str, status: &str| {
        harness::metric_value(
            text,
            "sluice_grpc_requests_total",
            &[("grpc_method", method), ("grpc_status", status)],
        )
    };
    let text = harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        counted(t, "test.Svc/Count", "0") == Some(1.0)
            && counted(t, "h1.Svc/Echo", "14") == Some(1.0)
    })
    .await;
    assert_eq!(
        counted(&text, "grpc.health.v1.Health/Check", "0"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(counted(&text, "test.Svc/Missing", "5"), Some(1.0), "{text}");
    assert_eq!(counted(&text, "test.Svc/Count", "0"), Some(1.0), "{text}");
    assert_eq!(counted(&text, "cap.Svc/Slow", "4"), Some(1.0), "{text}");
    assert_eq!(counted(&text, "dead.Svc/Echo", "14"), Some(1.0), "{text}");
    assert_eq!(counted(&text, "h1.Svc/Echo", "14"), Some(1.0), "{text}");
}

/// An `abort { grpc_status: 14 }` experiment at 50% on a gRPC route: about half of 200
/// calls fail with UNAVAILABLE and the injected message, the rest reach the server and
/// carry its reply; both are counted by grpc-status, the faults by experiment. A plain
/// HTTP request of the same experiment gets the code's HTTP status (503); the header
/// form answers the gRPC code it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_grpc_abort_fails_about_half_the_calls() {
    let Some(python) = python() else { return };
    let (_server, upstream) = grpc_server(&python, &[]).await;
    let sluice = TestConfig::http()
        .cluster_with("grpc", "http", [&upstream], "version: v1, protocol: h2c")
        .route_with(
            "hdr",
            "grpc: 100",
            "match: { path_prefix: /hdr. }, allow_header_faults: true",
        )
        .route_with("rpc", "grpc: 100", "match: { path_prefix: / }")
        .section(
            "faults",
            "\n  - { id: down, match: { route: rpc }, percent: 50, ttl: 10m, \
             action: { abort: { grpc_status: 14, message: \"injected: down 100%\" } } }",
        )
        .start();
    let listen = harness::listener(&sluice, "public").port();

    let n = 200;
    let got = grpc_calls(
        &python,
        listen,
        json!({"method": "/test.Svc/Echo", "n": n, "payload": "00abff"}),
    )
    .await;
    let count = |code: &str| got["codes"][code].as_u64().unwrap_or(0);
    let (ok, down) = (count("OK"), count("UNAVAILABLE"));
    assert_eq!(ok + down, n, "{got}");
    // Binomial(200, 0.5): 60..=140 is more than 5 standard deviations either side.
    assert!((60..=140).contains(&down), "{got}");
    assert_eq!(got["details"], json!(["injected: down 100%"]), "{got}");
    assert_eq!(got["wrong_replies"], 0, "{got}");

    // The header form, on the route that allows it: the code it names.
    let asked = grpc_calls(
        &python,
        listen,
        json!({"method": "/hdr.Svc/Echo", "n": 3,
               "metadata": [["x-sluice-fault-abort-grpc", "8"]]}),
    )
    .await;
    assert_eq!(asked["codes"], json!({"RESOURCE_EXHAUSTED": 3}), "{asked}");
    assert_eq!(
        asked["details"],
        json!(["fault injected by header"]),
        "{asked}"
    );

    // A request that is not a gRPC call gets the HTTP status gRPC's 14 stands for.
    // Those not faulted reach the grpcio server, which may reset them: each goes on a
    // connection of its own, and a failed one is one that was not faulted.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut http_faulted = 0;
    for _ in 0..40 {
        let sent = client
            .post(format!("http://127.0.0.1:{listen}/test.Svc/Echo"))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await;
        let Ok(r) = sent else { continue };
        if r.headers().get("x-sluice-fault").is_some() {
            assert_eq!(r.status(), 503);
            assert_eq!(r.text().await.unwrap(), "fault injected");
            http_faulted += 1;
        }
    }
    assert!(http_faulted > 0, "none of 40 plain requests was faulted");

    let grpc_count = |text: &str, status: &str| {
        harness::metric_value(
            text,
            "sluice_grpc_requests_total",
            &[("grpc_method", "test.Svc/Echo"), ("grpc_status", status)],
        )
    };
    let injected = |text: &str| {
        harness::metric_value(
            text,
            "sluice_faults_injected_total",
            &[("experiment", "down"), ("kind", "abort")],
        )
    };
    let want = (down + http_faulted) as f64;
    let text = harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        injected(t) == Some(want) && grpc_count(t, "14") == Some(down as f64)
    })
    .await;
    assert_eq!(grpc_count(&text, "14"), Some(down as f64), "{text}");
    assert_eq!(grpc_count(&text, "0"), Some(ok as f64), "{text}");
    assert_eq!(injected(&text), Some(want), "{text}");
    assert_eq!(
        harness::metric_value(
            &text,
            "sluice_grpc_requests_total",
            &[("grpc_method", "hdr.Svc/Echo"), ("grpc_status", "8")],
        ),
        Some(3.0),
        "{text}"
    );
}
