//! A rollout gated on `grpc_success_rate_min: 99.5%` with real grpcio servers as stable
//! and canary and a grpcio client calling through sluice: a canary that answers 1% of its
//! calls UNAVAILABLE is rolled back, a healthy one promoted.
//!
//! The canary fails every 100th call it serves (spread evenly, not at random), so any
//! `min_requests: 300` calls in a row hold at least 2 failures: its success rate in a
//! judged window is at most 99.33%, below 99.5%, whatever the timing. Random failures at 1%
//! would need thousands of calls per window to be told from 0.5% reliably.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{grpc_calls, grpc_server, python};
use crate::harness::{self, Admin, TestConfig};

/// The rollout's status once it is final (or after 40 s), with the canary's Echo failing
/// `failing` (0..1) of its calls while a client calls for 15 s (hundreds of calls a
/// second, half of them to the canary at the first step).
async fn gated_rollout(failing: &str) -> Option<Value> {
    let python = python()?;
    let (_stable, stable) = grpc_server(&python, &[]).await;
    let (_canary, canary) = grpc_server(&python, &[failing]).await;
    let sluice = TestConfig::http()
        .cluster_with("stable", "http", [&stable], "version: v1, protocol: h2c")
        .cluster_with("canary", "http", [&canary], "version: v2, protocol: h2c")
        .route("rpc", "stable: 100, canary: 0")
        .section(
            "rollouts",
            "\n  - { name: rpc-v2, route: rpc, stable: stable, canary: canary, steps: [50, 100], \
             hold: 5s, min_requests: 300, interval: 100ms, window: 5s, \
             gates: { grpc_success_rate_min: 99.5% } }",
        )
        .start();
    let admin = Admin::new(&sluice);
    let listen = harness::listener(&sluice, "public").port();
    let client = tokio::spawn({
        let python = python.clone();
        async move {
            let spec = json!({"method": "/test.Svc/Echo", "seconds": 15, "payload": "01"});
            grpc_calls(&python, listen, spec).await
        }
    });
    let started = Instant::now();
    let mut status = Value::Null;
    while started.elapsed() < Duration::from_secs(40) {
        status = admin.get("/v1/rollouts/rpc-v2").await.1;
        if status["state"] == "rolled_back" || status["state"] == "promoted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let calls = client.await.unwrap();
    assert_eq!(calls["wrong_replies"], 0, "{calls}");
    Some(status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_fails_grpc_calls_is_rolled_back() {
    let Some(status) = gated_rollout("0.01").await else {
        return;
    };
    assert_eq!(status["state"], "rolled_back", "{status}");
    assert_eq!(status["weight"], 0, "{status}");
    let events = status["events"].as_array().unwrap();
    let breach = &events.last().unwrap()["evidence"][0];
    assert_eq!(breach["gate"], "grpc_success_rate_min", "{status}");
    // 99% of the canary's calls succeed, judged over at least `min_requests` of them.
    let value = breach["value"].as_f64().unwrap();
    assert!((97.0..99.5).contains(&value), "{status}");
    assert!(breach["samples"].as_u64().unwrap() >= 300, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_grpc_canary_is_promoted() {
    let Some(status) = gated_rollout("0").await else {
        return;
    };
    assert_eq!(status["state"], "promoted", "{status}");
    assert_eq!(status["weight"], 100, "{status}");
    assert_eq!(
        status["gates"]["grpc_success_rate_min"]["value"], 100.0,
        "{status}"
    );
}
