//! Pass-through that changes nothing: methods, bodies of any size, SSE
//! chunking, request ids, and the proxy's own JSON errors.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::RngCore;
use serde_json::Value;

use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_proxy::Sluice;

use crate::harness::{get_with_header, listener, metrics_when, start, Admin, TestConfig};
use crate::support::{free_port, sha256_hex, NamedUpstream};

/// Cluster `up` (`kind: http`, plus `extra` keys) on `endpoints`, and route `all` for `/v1/`.
fn one_route<T: std::fmt::Display>(endpoints: impl IntoIterator<Item = T>, extra: &str) -> String {
    let keys = match extra {
        "" => "version: v1".to_owned(),
        extra => format!("version: v1, {extra}"),
    };
    TestConfig::http()
        .cluster_with("up", "http", endpoints, &keys)
        .route_with("all", "up: 100", "match: { path_prefix: /v1/ }")
        .yaml()
}

/// The echo upstream `a` behind [`one_route`].
async fn echo_route() -> (NamedUpstream, Sluice) {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice = start(&one_route([up.addr()], ""));
    (up, sluice)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_post_arrive_unchanged() {
    let (_up, sluice) = echo_route().await;
    let base = format!("http://{}", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    let r = client
        .get(format!("{base}/v1/models?x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["upstream"], "a");
    assert_eq!(v["method"], "GET");
    assert_eq!(v["path"], "/v1/models");
    assert_eq!(v["query"], "x=1");

    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let r = client
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["method"], "POST");
    assert_eq!(v["body_sha256"], sha256_hex(body.as_bytes()));
    assert_eq!(v["headers"]["content-type"], "application/json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_arrive_byte_exact() {
    let (_up, sluice) = echo_route().await;
    let base = format!("http://{}", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    for size in [1 << 20, 8 << 20] {
        let mut body = vec![0u8; size];
        rand::rng().fill_bytes(&mut body);
        let want = sha256_hex(&body);
        let r = client
            .post(format!("{base}/v1/upload"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{size} bytes");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["body_len"], size as u64);
        assert_eq!(v["body_sha256"], want, "{size} bytes");
    }
}

/// Arrival time of every body chunk of a streamed chat that carries content.
/// Each must carry one content event: two in one chunk were coalesced.
async fn content_chunk_times(url: &str) -> Vec<Duration> {
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let start = Instant::now();
    let r = reqwest::Client::new()
        .post(url)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut stream = r.bytes_stream();
    let mut times = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        let contents = String::from_utf8_lossy(&chunk)
            .matches("\"content\":")
            .count();
        assert!(contents <= 1, "{contents} content events in one chunk");
        if contents == 1 {
            times.push(start.elapsed());
        }
    }
    times
}

fn median_gap(times: &[Duration]) -> Duration {
    let mut gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort();
    gaps[gaps.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_chunks_pass_one_by_one_with_their_spacing() {
    let gap = Duration::from_millis(40);
    let gap_ms = gap.as_millis() as u64;
    let up = MockLlm::start(MockLlmOptions::paced_ms(gap_ms, gap_ms, 15))
        .await
        .unwrap();
    let sluice = TestConfig::http()
        .cluster("up", "llm", [up.addr()])
        .route("all", "up: 100")
        .start();
    let path = "/v1/chat/completions";
    let direct = content_chunk_times(&format!("http://{}{path}", up.addr())).await;
    let proxied =
        content_chunk_times(&format!("http://{}{path}", listener(&sluice, "public"))).await;
    assert_eq!(direct.len(), 15);
    // Same count: nothing coalesced, nothing split.
    assert_eq!(proxied.len(), direct.len());
    // Same spacing, within generous bounds (this is a behaviour check; the
    // overhead figures are in docs/BENCHMARKS.md).
    let (d, p) = (median_gap(&direct), median_gap(&proxied));
    assert!(p >= gap / 2 && p <= gap * 3, "direct {d:?}, proxied {p:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_id_is_kept_or_generated() {
    let (_up, sluice) = echo_route().await;
    let url = format!("http://{}/v1/x", listener(&sluice, "public"));
    let r = get_with_header(&url, "x-request-id", "abc-123").await;
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["headers"]["x-request-id"], "abc-123");

    let r = reqwest::get(&url).await.unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert!(!id.is_empty());
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["headers"]["x-request-id"], id.as_str());
}

async fn error_of(request: reqwest::RequestBuilder) -> (u16, Value, Option<String>) {
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let connection = r
        .headers()
        .get("connection")
        .map(|v| v.to_str().unwrap().to_string());
    (status, r.json().await.unwrap(), connection)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_is_404_json_and_keeps_the_connection() {
    let (up, sluice) = echo_route().await;
    let url = format!("http://{}/other", listener(&sluice, "public"));
    let (status, body, connection) = error_of(reqwest::Client::new().get(url)).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], "no_route");
    assert_ne!(connection.as_deref(), Some("close"));
    assert_eq!(up.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_upstream_is_502_and_counted() {
    let dead = format!("127.0.0.1:{}", free_port());
    let sluice = start(&one_route([dead], ""));
    let url = format!("http://{}/v1/x", listener(&sluice, "public"));
    let (status, body, _) = error_of(reqwest::Client::new().get(url)).await;
    assert_eq!(status, 502);
    assert_eq!(body["error"], "connect_error");
    let connect_error =
        r#"sluice_proxy_errors_total{cluster="up",reason="connect_error",route="all"} 1"#;
    let metrics = metrics_when(&sluice, |t| t.contains(connect_error)).await;
    assert!(
        metrics.contains(
            r#"sluice_proxy_errors_total{cluster="up",reason="connect_error",route="all"} 1"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains(
        r#"sluice_requests_total{cluster="up",route="all",source="user",status_class="5xx",version="v1"} 1"#
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_upstream_is_504() {
    // A whole answer comes after its TTFT: 3 s, ten times the proxy's wait.
    let up = MockLlm::start(MockLlmOptions::paced_ms(3000, 0, 1))
        .await
        .unwrap();
    let timeouts = "timeouts: { first_byte: 300ms }";
    let sluice = start(&one_route([up.addr()], timeouts));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let (status, body, _) = error_of(reqwest::Client::new().post(url).body("{}")).await;
    assert_eq!(status, 504);
    assert_eq!(body["error"], "upstream_timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_endpoint_is_skipped_for_the_next() {
    let up = NamedUpstream::start("live").await.unwrap();
    let refused = format!("127.0.0.1:{}", free_port());
    let sluice = start(&one_route([refused, up.addr().to_string()], ""));
    let url = format!("http://{}/v1/x", listener(&sluice, "public"));
    for _ in 0..20 {
        let r = reqwest::get(&url).await.unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(up.requests(), 20);
    let admin = Admin::new(&sluice);
    let (status, _) = admin.get("/v1/stats").await;
    assert_eq!(status, 200);
}

/// An upstream that answers the first request of each connection and drops
/// the connection on the second, without answering and without having said
/// `Connection: close` — what the proxy sees when a model server closes an
/// idle keep-alive connection just as the proxy reuses it.
async fn closing_upstream() -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                // The head and the small body arrive in one read here.
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let body = b"{\"ok\":true}";
                let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body).await;
                // The next request on this connection is read and dropped.
                let _ = s.read(&mut buf).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_survive_upstreams_that_close_pooled_connections() {
    let up = closing_upstream().await;
    let sluice = start(&one_route([up], ""));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    for i in 0..200 {
        let r = client
            .post(&url)
            .body("{\"model\":\"m\"}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "request {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_retry_budget_a_dead_pooled_connection_is_not_retried_and_counted() {
    let up = closing_upstream().await;
    let no_budget = "retry_budget: { percent: 0%, min_concurrent: 0 }";
    let sluice = start(&one_route([up], no_budget));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    // A connection per request: after the 502 sluice closes the client's
    // connection (the failed exchange leaves it unusable).
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut failed = 0;
    for _ in 0..40 {
        let r = client
            .post(&url)
            .body("{\"model\":\"m\"}")
            .send()
            .await
            .unwrap();
        if r.status() != 200 {
            assert_eq!(r.status(), 502);
            failed += 1;
        }
    }
    // A request that meets a pooled connection the upstream dropped fails
    // (pingora finds some of them closed before use: not every second one).
    assert!(failed >= 1, "{failed} of 40 failed");
    let text = metrics_when(&sluice, |t| t.contains("breaker=\"retry_budget\"")).await;
    let line = format!(
        "sluice_circuit_breaker_overflow_total{{breaker=\"retry_budget\",cluster=\"up\"}} {failed}"
    );
    assert!(text.contains(&line), "{text}");
}

/// `sluice_runtime_tasks` reports the control plane's, the mirror's and the
/// listener's runtimes (the soak bench reads it for task leaks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_the_live_tasks_of_each_runtime() {
    let (_up, sluice) = echo_route().await;
    let url = format!("http://{}/v1/x", listener(&sluice, "public"));
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);
    let text = crate::harness::metrics(&sluice).await;
    let tasks = |runtime| {
        crate::harness::metric_value(&text, "sluice_runtime_tasks", &[("runtime", runtime)])
    };
    // The control plane runs its loops as tasks; the others may idle at 0.
    assert!(tasks("control").is_some_and(|n| n >= 3.0), "{text}");
    assert!(tasks("mirror").is_some(), "{text}");
    assert!(tasks("listener:public").is_some(), "{text}");
}
