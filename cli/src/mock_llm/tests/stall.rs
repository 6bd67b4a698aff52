//! `stall`: completions read during the window wait for its end; the window is timed from the
//! first completion read. Bounds are lower bounds (a tokio timer never fires early), but for the
//! answers outside the window, which get a second where they need milliseconds.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde_json::json;

use super::{chat, client, fast, json_of, send};
use crate::mock_llm::{MockLlm, MockLlmOptions, Stall};

const AT: Duration = Duration::from_secs(1);
const LASTS: Duration = Duration::from_secs(1);

#[tokio::test]
async fn completions_read_during_the_stall_wait_for_its_end() {
    let mock = MockLlm::start(MockLlmOptions {
        stall: Some(Stall {
            at: AT,
            lasts: LASTS,
        }),
        ..fast()
    })
    .await
    .unwrap();
    let c = client(false);
    let body = chat(json!({"max_tokens": 1}));
    // The first completion starts the stall's clock and is answered at once.
    let first = Instant::now();
    let resp = send(&c, &mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json_of(resp).await["usage"]["completion_tokens"], 1);
    assert!(
        first.elapsed() < AT,
        "before the stall: {:?}",
        first.elapsed()
    );
    // One read inside the window is held until it ends.
    tokio::time::sleep_until((first + AT + Duration::from_millis(300)).into()).await;
    let resp = send(&c, &mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let held = first.elapsed();
    assert!(held >= AT + LASTS, "answered at {held:?}, inside the stall");
    // After the window, answers are quick again.
    let after = Instant::now();
    let resp = send(&c, &mock, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        after.elapsed() < Duration::from_secs(1),
        "{:?}",
        after.elapsed()
    );
    mock.stop().await;
}

#[tokio::test]
async fn the_models_list_is_never_held() {
    let mock = MockLlm::start(MockLlmOptions {
        stall: Some(Stall {
            at: Duration::ZERO,
            lasts: Duration::from_secs(600),
        }),
        ..fast()
    })
    .await
    .unwrap();
    let uri = format!("http://{}/v1/models", mock.addr());
    let resp = client(false).get(uri.parse().unwrap()).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    mock.stop().await;
}
