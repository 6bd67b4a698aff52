//! The test knobs: a recording mock keeps every request whole, a resetting one answers nothing.

use std::time::Duration;

use hyper::{Method, StatusCode};
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::{chat, client, fast, send};
use crate::mock_llm::{MockLlm, MockLlmOptions};

/// A quick mock that keeps what it reads.
fn recording() -> MockLlmOptions {
    MockLlmOptions {
        record: true,
        ..fast()
    }
}

#[tokio::test]
async fn a_recording_mock_keeps_every_request_on_any_path() {
    let mock = MockLlm::start(recording()).await.unwrap();
    let client = client(false);
    let body = chat(json!({"model": "shadow-model"}));
    let headers = [("x-sluice-shadow", "2"), ("x-env", "shadow")];
    let resp = send(&client, &mock, "/v1/chat/completions", &body, &headers).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = send(&client, &mock, "/v1/embeddings?k=3", "not json", &[]).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    let seen = mock.wait_seen(2, Duration::from_secs(5)).await;
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].header("x-sluice-shadow"), Some("2"));
    assert_eq!(seen[0].header("x-env"), Some("shadow"));
    assert_eq!(seen[0].header("x-missing"), None);
    assert_eq!(seen[0].model().as_deref(), Some("shadow-model"));
    assert_eq!(seen[0].body, body.as_bytes());
    assert_eq!(seen[1].path, "/v1/embeddings");
    assert_eq!(seen[1].query.as_deref(), Some("k=3"));
    assert_eq!(&seen[1].body[..], b"not json");
    assert_eq!(seen[1].model(), None);
}

#[tokio::test]
async fn waiting_for_more_than_arrive_returns_what_came_after_the_bound() {
    let mock = MockLlm::start(recording()).await.unwrap();
    send(&client(false), &mock, "/v1/completions", "{}", &[]).await;
    let started = tokio::time::Instant::now();
    let seen = mock.wait_seen(3, Duration::from_millis(100)).await;
    assert_eq!(seen.len(), 1);
    assert!(started.elapsed() >= Duration::from_millis(100));
}

#[tokio::test]
async fn a_mock_that_does_not_record_keeps_nothing() {
    let mock = MockLlm::start(fast()).await.unwrap();
    let resp = send(&client(false), &mock, "/v1/completions", "{}", &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(mock.seen().is_empty());
}

#[tokio::test]
async fn a_resetting_mock_resets_every_connection_unread() {
    let mock = MockLlm::start(MockLlmOptions {
        reset: true,
        ..recording()
    })
    .await
    .unwrap();
    for _ in 0..3 {
        let mut conn = tokio::net::TcpStream::connect(mock.addr()).await.unwrap();
        let mut buf = [0u8; 16];
        let err = conn.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    }
    assert!(mock.seen().is_empty(), "a reset peer reads nothing");
}
