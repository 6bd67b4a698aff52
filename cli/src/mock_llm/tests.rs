//! Tests of the mock LLM over real loopback sockets with a plain hyper client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::{MockLlm, MockLlmOptions};

mod queue;
mod record;
mod stall;

type TestClient = Client<HttpConnector, Full<Bytes>>;

fn fast() -> MockLlmOptions {
    MockLlmOptions {
        ttft: Duration::ZERO,
        itl: Duration::ZERO,
        ..MockLlmOptions::default()
    }
}

fn client(h2: bool) -> TestClient {
    Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build_http()
}

async fn send(
    client: &TestClient,
    mock: &MockLlm,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> Response<Incoming> {
    let mut req = Request::post(format!("http://{}{path}", mock.addr()))
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    client.request(req).await.unwrap()
}

async fn json_of(resp: Response<Incoming>) -> Value {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// Reads the body frame by frame, as a streaming client would, and returns the frames.
async fn frames_of(resp: Response<Incoming>) -> Vec<Bytes> {
    let mut body = resp.into_body();
    let mut frames = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            frames.push(data);
        }
    }
    frames
}

/// The `data:` payloads of an SSE body, in order.
fn events(frames: &[Bytes]) -> Vec<String> {
    let text: String = frames
        .iter()
        .map(|f| std::str::from_utf8(f).unwrap())
        .collect();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap().to_owned())
        .collect()
}

fn parse(events: &[String]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

fn chat(extra: Value) -> String {
    let mut body = json!({"messages": [{"role": "user", "content": "hello there world"}]});
    if let (Some(b), Some(x)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(x.clone());
    }
    body.to_string()
}

#[tokio::test]
async fn lists_the_configured_model() {
    let mock = MockLlm::start(fast()).await.unwrap();
    let uri = format!("http://{}/v1/models", mock.addr());
    let resp = client(false).get(uri.parse().unwrap()).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let list = json_of(resp).await;
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"][0]["id"], "mock-llm");
    mock.stop().await;
}

#[tokio::test]
async fn whole_chat_answer_reports_usage() {
    let mock = MockLlm::start(MockLlmOptions {
        tokens: 7,
        ..fast()
    })
    .await
    .unwrap();
    let resp = send(
        &client(false),
        &mock,
        "/v1/chat/completions",
        &chat(json!({"model": "gpt-x"})),
        &[],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let answer = json_of(resp).await;
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["model"], "gpt-x");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(content.split_whitespace().count(), 7);
    assert_eq!(answer["usage"]["prompt_tokens"], 3);
    assert_eq!(answer["usage"]["completion_tokens"], 7);
    assert_eq!(answer["usage"]["total_tokens"], 10);
    mock.stop().await;
}

/// Checks the shape of a streamed chat answer with usage; shared by the HTTP/1.1 and h2c tests.
async fn streams_chat_with_usage(h2: bool) {
    let n = 5;
    let opts = MockLlmOptions {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        tokens: n,
        ..MockLlmOptions::default()
    };
    let mock = MockLlm::start(opts).await.unwrap();
    let body = chat(json!({"stream": true, "stream_options": {"include_usage": true}}));
    let started = Instant::now();
    let resp = send(&client(h2), &mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let frames = frames_of(resp).await;
    let elapsed = started.elapsed();

    assert!(frames.len() >= n as usize, "{} frames", frames.len());
    // Lower bound only: sleeps never end early, but a busy machine may be slower.
    assert!(
        elapsed >= Duration::from_millis(50 + 4 * 10 - 5),
        "{elapsed:?}"
    );
    let events = events(&frames);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks = parse(&events);
    assert_eq!(chunks.len(), 1 + n as usize + 1);
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant"})
    );
    let content = &chunks[1..=n as usize];
    for (i, c) in content.iter().enumerate() {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert!(c["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap()
            .starts_with(' '));
        let finish = if i + 1 == n as usize {
            json!("stop")
        } else {
            Value::Null
        };
        assert_eq!(c["choices"][0]["finish_reason"], finish);
    }
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], n);
    assert_eq!(usage["usage"]["prompt_tokens"], 3);
    mock.stop().await;
}

#[tokio::test]
async fn streams_chat_with_usage_over_http1() {
    streams_chat_with_usage(false).await;
}

#[tokio::test]
async fn streams_chat_with_usage_over_h2c() {
    streams_chat_with_usage(true).await;
}

#[tokio::test]
async fn max_tokens_caps_the_answer() {
    let mock = MockLlm::start(fast()).await.unwrap();
    let c = client(false);
    let body = chat(json!({"stream": true, "max_tokens": 3}));
    let frames = frames_of(send(&c, &mock, "/v1/chat/completions", &body, &[]).await).await;
    let chunks = parse(&events(&frames));
    // Role chunk plus three content chunks; no usage chunk was asked for.
    assert_eq!(chunks.len(), 4);
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "length");

    let body = chat(json!({"max_completion_tokens": 2}));
    let answer = json_of(send(&c, &mock, "/v1/chat/completions", &body, &[]).await).await;
    assert_eq!(answer["usage"]["completion_tokens"], 2);
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    mock.stop().await;
}

#[tokio::test]
async fn streams_text_completions() {
    let mock = MockLlm::start(fast()).await.unwrap();
    let body =
        json!({"prompt": "once upon", "stream": true, "stream_options": {"include_usage": true}});
    let headers = [("x-mock-tokens", "4")];
    let resp = send(
        &client(false),
        &mock,
        "/v1/completions",
        &body.to_string(),
        &headers,
    )
    .await;
    let chunks = parse(&events(&frames_of(resp).await));
    assert_eq!(chunks.len(), 5);
    for c in &chunks[..4] {
        assert_eq!(c["object"], "text_completion");
        assert!(c["choices"][0]["text"].as_str().unwrap().starts_with(' '));
    }
    assert_eq!(chunks[4]["usage"]["prompt_tokens"], 2);
    assert_eq!(chunks[4]["usage"]["completion_tokens"], 4);
    mock.stop().await;
}

#[tokio::test]
async fn injected_errors_bad_json_and_unknown_paths() {
    let failing = MockLlm::start(MockLlmOptions {
        error_rate: 1.0,
        ..fast()
    })
    .await
    .unwrap();
    let c = client(false);
    let resp = send(&c, &failing, "/v1/chat/completions", &chat(json!({})), &[]).await;
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(json_of(resp).await["error"]["type"], "server_error");

    let resp = send(&c, &failing, "/v1/chat/completions", "{not json", &[]).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        json_of(resp).await["error"]["type"],
        "invalid_request_error"
    );

    let resp = send(
        &c,
        &failing,
        "/v1/chat/completions",
        "{}",
        &[("x-mock-itl-ms", "soon")],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);

    let resp = send(&c, &failing, "/v1/embeddings", "{}", &[]).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(json_of(resp).await["error"]["message"].is_string());
    failing.stop().await;
}

#[tokio::test]
async fn same_seed_gives_same_text() {
    let mut texts = Vec::new();
    for _ in 0..2 {
        let mock = MockLlm::start(MockLlmOptions { seed: 42, ..fast() })
            .await
            .unwrap();
        let answer = json_of(send(&client(false), &mock, "/v1/completions", "{}", &[]).await).await;
        texts.push(answer["choices"][0]["text"].as_str().unwrap().to_owned());
        mock.stop().await;
    }
    assert_eq!(texts[0], texts[1]);
    assert_eq!(texts[0].split_whitespace().count(), 16);
}

#[tokio::test]
async fn survives_a_client_leaving_mid_stream_and_stops() {
    let mock = MockLlm::start(MockLlmOptions {
        itl: Duration::from_millis(5),
        ..fast()
    })
    .await
    .unwrap();
    let addr = mock.addr();
    let headers = [("x-mock-tokens", "100000")];
    let resp = send(
        &client(false),
        &mock,
        "/v1/chat/completions",
        &chat(json!({"stream": true})),
        &headers,
    )
    .await;
    let mut body = resp.into_body();
    for _ in 0..3 {
        body.frame().await.unwrap().unwrap();
    }
    drop(body);

    let answer = json_of(send(&client(false), &mock, "/v1/completions", "{}", &[]).await).await;
    assert_eq!(answer["usage"]["completion_tokens"], 16);
    tokio::time::timeout(Duration::from_secs(10), mock.stop())
        .await
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn rejects_an_error_rate_out_of_range() {
    let err = MockLlm::start(MockLlmOptions {
        error_rate: 1.5,
        ..fast()
    })
    .await
    .err()
    .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn knobs_change_ttft_and_errors_while_serving() {
    let mock = MockLlm::start(fast()).await.unwrap();
    let c = client(false);
    let body = chat(json!({"stream": true, "max_tokens": 2}));
    mock.knobs().set_ttft(Duration::from_millis(150));
    let start = Instant::now();
    let frames = frames_of(send(&c, &mock, "/v1/chat/completions", &body, &[]).await).await;
    assert!(start.elapsed() >= Duration::from_millis(150));
    assert!(!frames.is_empty());
    mock.knobs().set_error_rate(1.0);
    let resp = send(&c, &mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    mock.knobs().set_error_rate(0.0);
    let resp = send(&c, &mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
}
