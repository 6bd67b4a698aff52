//! `max_concurrency`: completions beyond the limit wait for a slot, so the mock has a knee.
//!
//! The bounds are lower bounds (a tokio timer never fires early), so a slow machine cannot make
//! them fail; the one upper bound, on the unlimited mock, allows three times the service time.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde_json::json;
use tokio::task::JoinSet;

use super::{chat, client, fast, frames_of, json_of, send};
use crate::mock_llm::{MockLlm, MockLlmOptions};

/// What one whole answer takes: its time to first token, with one token and no gaps.
const SERVICE: Duration = Duration::from_millis(250);

fn limited(n: usize) -> MockLlmOptions {
    MockLlmOptions {
        ttft: SERVICE,
        tokens: 1,
        max_concurrency: NonZeroUsize::new(n),
        ..fast()
    }
}

/// Sends `count` whole-answer chats at once; returns when each answer was read, sorted.
async fn burst(mock: &MockLlm, count: usize) -> Vec<Duration> {
    let start = Instant::now();
    let client = client(false);
    let addr = mock.addr();
    let mut set = JoinSet::new();
    for _ in 0..count {
        let client = client.clone();
        set.spawn(async move {
            let resp = MockAddr(addr).chat(&client).await;
            assert_eq!(resp.status(), StatusCode::OK);
            let answer = json_of(resp).await;
            assert_eq!(answer["usage"]["completion_tokens"], 1);
            start.elapsed()
        });
    }
    let mut done = set.join_all().await;
    done.sort();
    done
}

/// The mock's address, so spawned tasks can send without borrowing the mock.
struct MockAddr(std::net::SocketAddr);

impl MockAddr {
    async fn chat(&self, client: &super::TestClient) -> hyper::Response<hyper::body::Incoming> {
        let req = hyper::Request::post(format!("http://{}/v1/chat/completions", self.0))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(chat(json!(
                {}
            )))))
            .unwrap();
        client.request(req).await.unwrap()
    }
}

#[tokio::test]
async fn eight_requests_through_two_slots_take_four_service_times() {
    let mock = MockLlm::start(limited(2)).await.unwrap();
    let done = burst(&mock, 8).await;
    // Two at a time: the answers come in four waves, the k-th wave no earlier than k service
    // times after the burst.
    for (i, at) in done.iter().enumerate() {
        let wave = (i / 2 + 1) as u32;
        assert!(
            *at >= SERVICE * wave,
            "answer {i} at {at:?}, before wave {wave}"
        );
    }
    mock.stop().await;
}

#[tokio::test]
async fn without_a_limit_the_same_burst_is_answered_at_once() {
    let mock = MockLlm::start(limited(0)).await.unwrap();
    let done = burst(&mock, 8).await;
    let last = done[7];
    assert!(last >= SERVICE, "{last:?}");
    assert!(last < SERVICE * 3, "8 unlimited answers took {last:?}");
    mock.stop().await;
}

#[tokio::test]
async fn a_stream_holds_its_slot_until_its_last_event() {
    let opts = MockLlmOptions {
        ttft: Duration::from_millis(100),
        itl: Duration::from_millis(25),
        tokens: 5,
        max_concurrency: NonZeroUsize::new(1),
        ..fast()
    };
    // The first stream's last token is due no earlier than ttft + 4 gaps.
    let one_stream = Duration::from_millis(100 + 4 * 25);
    let mock = MockLlm::start(opts).await.unwrap();
    let client = client(false);
    let body = chat(json!({"stream": true}));
    let start = Instant::now();
    let first = send(&client, &mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(first.status(), StatusCode::OK);
    // The first holds the only slot now. A stream's headers leave as soon as it has a slot, so
    // the second stream's come only once the first has sent its last event.
    let second = async {
        let resp = send(&client, &mock, "/v1/chat/completions", &body, &[]).await;
        let headers_at = start.elapsed();
        (resp.status(), headers_at, frames_of(resp).await)
    };
    let (frames, (status, headers_at, second_frames)) = tokio::join!(frames_of(first), second);
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers_at >= one_stream,
        "second stream started at {headers_at:?}"
    );
    for frames in [&frames, &second_frames] {
        assert!(frames
            .last()
            .is_some_and(|f| f.ends_with(b"data: [DONE]\n\n")));
    }
    mock.stop().await;
}
