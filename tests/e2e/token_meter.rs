//! The token meter end to end: a streaming mock LLM with known timing behind
//! sluice; metrics, stats and the access log agree with what the client saw.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{json_of, listener, llm_config, metric_value, metrics_when, Admin};

/// The tokens of `kind` (`input`, `output`) route `chat` counted, all or only those
/// `estimated` (counted chunks) or not (the server's usage).
pub(crate) fn token_usage(text: &str, kind: &str, estimated: Option<bool>) -> Option<f64> {
    let estimated = estimated.map(|e| e.to_string());
    let mut labels = vec![("route", "chat"), ("gen_ai_token_type", kind)];
    labels.extend(estimated.as_deref().map(|e| ("estimated", e)));
    metric_value(text, "gen_ai_client_token_usage_sum", &labels)
}

/// Streams one chat completion; returns the client-side TTFT (first content
/// chunk) and the number of content chunks.
async fn stream_chat(
    client: &reqwest::Client,
    url: &str,
    include_usage: bool,
) -> (Duration, usize) {
    let body = json!({
        "model": "mock-7b",
        "messages": [{"role": "user", "content": "a secret prompt never to be logged"}],
        "stream": true,
        "stream_options": {"include_usage": include_usage},
    });
    let start = Instant::now();
    let r = client.post(url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let mut stream = r.bytes_stream();
    let (mut ttft, mut contents) = (None, 0);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        let n = String::from_utf8_lossy(&chunk)
            .matches("\"content\":\"")
            .count();
        if n > 0 && ttft.is_none() {
            ttft = Some(start.elapsed());
        }
        contents += n;
    }
    (ttft.unwrap(), contents)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_stats_and_access_log_agree_with_the_client() {
    let mock = MockLlm::start(MockLlmOptions::paced_ms(80, 15, 10))
        .await
        .unwrap();
    let log_path = std::env::temp_dir().join(format!("sluice-access-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log_path);
    let sluice = llm_config(mock.addr())
        .section(
            "telemetry",
            format!("{{ access_log: {{ path: {} }} }}", log_path.display()),
        )
        .start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    let mut client_ttfts = Vec::new();
    for _ in 0..5 {
        let (ttft, contents) = stream_chat(&client, &url, true).await;
        assert_eq!(contents, 10);
        client_ttfts.push(ttft.as_secs_f64());
    }
    let (ttft, contents) = stream_chat(&client, &url, false).await;
    assert_eq!(contents, 10);
    client_ttfts.push(ttft.as_secs_f64());
    let whole = json!({"model": "mock-7b", "messages": [{"role": "user", "content": "hi"}]});
    let r = json_of(client.post(&url).json(&whole)).await;
    assert_eq!(r["usage"]["completion_tokens"], 10);

    let text = metrics_when(&sluice, |t| {
        metric_value(
            t,
            "gen_ai_client_operation_duration_seconds_count",
            &[("route", "chat")],
        ) == Some(7.0)
    })
    .await;
    let labels = [
        ("route", "chat"),
        ("gen_ai_request_model", "mock-7b"),
        ("gen_ai_operation_name", "chat"),
    ];
    let ttft_count = metric_value(
        &text,
        "gen_ai_client_operation_time_to_first_chunk_seconds_count",
        &labels,
    );
    let ttft_sum = metric_value(
        &text,
        "gen_ai_client_operation_time_to_first_chunk_seconds_sum",
        &labels,
    );
    assert_eq!(ttft_count, Some(6.0), "{text}");
    let proxy_mean = ttft_sum.unwrap() / 6.0;
    let client_mean = client_ttfts.iter().sum::<f64>() / client_ttfts.len() as f64;
    // The proxy's clock starts after the client's and its first content chunk
    // leaves before the client reads it: its TTFT is bounded by the client's
    // and by the model's own 80 ms.
    assert!(
        (0.080..=client_mean).contains(&proxy_mean),
        "proxy {proxy_mean} client {client_mean}"
    );
    assert_eq!(
        token_usage(&text, "output", Some(false)),
        Some(60.0),
        "5 streams with usage + 1 plain"
    );
    assert_eq!(token_usage(&text, "output", Some(true)), Some(10.0));
    let chunks = metric_value(
        &text,
        "gen_ai_client_operation_time_per_output_chunk_seconds_count",
        &labels,
    );
    assert_eq!(chunks, Some(6.0 * 9.0), "nine gaps per ten-chunk stream");
    assert_eq!(
        metric_value(&text, "sluice_time_per_output_token_seconds_count", &labels),
        Some(6.0)
    );

    // The stats aggregator folds samples every few milliseconds: poll.
    let admin = Admin::new(&sluice);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let stats = loop {
        let (status, stats) = admin.get("/v1/stats").await;
        assert_eq!(status, 200);
        if stats["stats"][0]["requests"] == 7 || std::time::Instant::now() > deadline {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let row = &stats["stats"][0];
    let p50 = row["ttft_ms"]["p50"].as_f64().unwrap();
    assert!((60.0..200.0).contains(&p50), "{row}");
    assert_eq!(row["output_tokens"], 70);

    drop(sluice); // flushes and closes the access log
    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    assert!(!log.contains("secret prompt"));
    let first = &lines[0];
    assert_eq!(first["model"], "mock-7b");
    assert_eq!(first["output_tokens"], 10);
    assert_eq!(first["output_tokens_estimated"], false);
    assert_eq!(first["clean_end"], true);
    assert_eq!(first["finish_reason"], "stop");
    assert_eq!(first["gaps_ms"].as_array().unwrap().len(), 9);
    assert_eq!(first["prompt_fingerprint"].as_str().unwrap().len(), 64);
    assert_eq!(lines[5]["output_tokens_estimated"], true);
    // Where each request's time went before the answer: in order, and the
    // upstream connection opened once, then taken from the pool.
    for line in &lines {
        let at = |k: &str| line[k].as_f64().unwrap_or_else(|| panic!("{k} in {line}"));
        let (peer, connected, header) = (
            at("upstream_peer_ms"),
            at("upstream_connected_ms"),
            at("upstream_header_ms"),
        );
        assert!(peer <= connected && connected <= header, "{line}");
        assert!(header <= at("e2e_ms"), "{line}");
    }
    assert!(lines[0]["upstream_header_ms"].as_f64() < lines[0]["ttft_ms"].as_f64());
    assert_eq!(lines[0]["upstream_reused"], false);
    assert!(
        lines[1..].iter().any(|l| l["upstream_reused"] == true),
        "sequential requests reuse the pooled connection: {log}"
    );
    let _ = std::fs::remove_file(&log_path);
}
