//! `clusters[].circuit_breakers` on real sockets: with `max_requests: 2`
//! and two slow answers in flight, a third request is answered 503
//! `overflow` with `retry-after` at once (counted), and passes again once
//! one ends; a cluster at the default (1024) serves ten at once untouched.
//! `max_connections` is in `connections`.

mod connections;

use std::time::Duration;

use serde_json::json;
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{listener, metric_value, metrics_when, start, TestConfig};

/// A streamed chat request to the route of `pool` (`x-pool` picks it);
/// the answer's head, its body still coming.
async fn chat(client: reqwest::Client, url: String, pool: &'static str) -> reqwest::Response {
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    client
        .post(url)
        .header("x-pool", pool)
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_requests_a_request_gets_503_at_once_and_default_breakers_are_untouched() {
    // About a second per answer: 10 tokens, 100 ms apart.
    let slow = MockLlm::start(MockLlmOptions {
        record: true,
        ..MockLlmOptions::paced_ms(0, 100, 10)
    })
    .await
    .unwrap();
    let config = TestConfig::new()
        .listener("public", "http", "")
        .cluster_with(
            "guarded",
            "llm",
            [slow.addr()],
            "circuit_breakers: { max_requests: 2 }",
        )
        .cluster_with("open", "llm", [slow.addr()], "")
        .route_with(
            "guarded",
            "guarded: 100",
            "match: { headers: { x-pool: guarded } }",
        )
        .route_with("open", "open: 100", "match: { headers: { x-pool: open } }")
        .yaml();
    let sluice = start(&config);
    let base = format!("http://{}", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    let url = format!("{base}/v1/chat/completions");
    // Two streams whose heads came back: both in flight for about a second more.
    let (first, second) = tokio::join!(
        chat(client.clone(), url.clone(), "guarded"),
        chat(client.clone(), url.clone(), "guarded")
    );

    let refused = chat(client.clone(), url.clone(), "guarded").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.headers()["x-sluice-error"], "overflow");
    let text = refused.text().await.unwrap();
    assert!(text.contains("\"error\":\"overflow\""), "{text}");

    // Both streams run to their end; then the breaker lets one in again
    // (polled: the slot is given back as the request's logging ends).
    for r in [first, second] {
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().contains("[DONE]"));
    }
    // The mock notes each request as it arrives: the refused one never did.
    assert_eq!(slow.seen().len(), 2);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let r = chat(client.clone(), url.clone(), "guarded").await;
        if r.status() == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the breaker never closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Ten at once through the default breakers: all served.
    let open = format!("{base}/v1/chat/completions");
    let all: Vec<_> = (0..10)
        .map(|_| tokio::spawn(chat(client.clone(), open.clone(), "open")))
        .collect();
    for r in all {
        let r = r.await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().contains("[DONE]"));
    }

    let text = metrics_when(&sluice, |t| {
        t.contains("sluice_circuit_breaker_overflow_total")
    })
    .await;
    assert!(
        text.contains(
            "sluice_circuit_breaker_overflow_total{breaker=\"max_requests\",cluster=\"guarded\"} 1"
        ),
        "{text}"
    );
    let open = metric_value(
        &text,
        "sluice_circuit_breaker_overflow_total",
        &[("cluster", "open")],
    );
    assert_eq!(open, None, "{text}");
}
