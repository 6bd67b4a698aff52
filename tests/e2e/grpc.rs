//! gRPC through sluice with a real grpcio server and client (tests/e2e/py/grpc_*.py): the
//! standard health check, raw unary bytes, an error status in trailers, a server stream
//! message by message, and the proxy's own errors as gRPC statuses (a deadline, a
//! cluster's timeout, a dead upstream, an HTTP/1.1-only cluster).

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{self, TestConfig};
use crate::support::{self, Process};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_calls_through_sluice() {
    let Some(python) = support::python() else {
        support::require("python with grpcio (.venv)", false);
        return;
    };
    let py = support::workspace_root().join("tests/e2e/py");
    let port = support::free_port();
    let _server = Process::new(
        Command::new(&python)
            .arg(py.join("grpc_server.py"))
            .arg(port.to_string())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the grpcio server"),
    );
    let upstream = format!("127.0.0.1:{port}");
    support::wait_for_tcp(upstream.parse().unwrap(), Duration::from_secs(30))
        .await
        .expect("the grpcio server listens");
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
    client
        .arg(py.join("grpc_client.py"))
        .arg(listen.to_string());
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
