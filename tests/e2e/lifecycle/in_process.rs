//! `Sluice::start` and `Sluice::stop` in-process: listeners on port 0 are bound
//! before pingora starts and reported as bound, and `stop(Drain)` goes through the
//! same drain as SIGTERM, `/readyz` 503 included.

use std::time::{Duration, Instant};

use serde_json::json;
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_proxy::Stop;

use crate::harness::{self, listener};
use crate::support::WAIT_POLL;

async fn mock(itl: Duration, tokens: u32) -> MockLlm {
    MockLlm::start(MockLlmOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        ttft: Duration::from_millis(10),
        itl,
        tokens,
        ..Default::default()
    })
    .await
    .unwrap()
}

fn chat() -> serde_json::Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_port_0_listeners_report_distinct_bound_ports_and_serve() {
    let upstream = mock(Duration::from_millis(1), 2).await;
    let sluice = harness::start(&format!(
        "admin: {{ listen: 127.0.0.1:0 }}\n\
         runtime: {{ threads: 2 }}\n\
         listeners:\n  - {{ name: one, listen: 127.0.0.1:0, protocol: http }}\n\
         \x20 - {{ name: two, listen: 127.0.0.1:0, protocol: http }}\n\
         clusters:\n  - {{ name: m, kind: llm, endpoints: [\"{}\"] }}\n\
         routes:\n  - {{ name: r1, listener: one, match: {{ path_prefix: / }}, split: {{ m: 100 }} }}\n\
         \x20 - {{ name: r2, listener: two, match: {{ path_prefix: / }}, split: {{ m: 100 }} }}\n",
        upstream.addr()
    ));
    let (one, two) = (listener(&sluice, "one"), listener(&sluice, "two"));
    assert_ne!(one.port(), 0);
    assert_ne!(two.port(), 0);
    assert_ne!(one.port(), two.port());
    assert_ne!(sluice.admin_addr.port(), 0);

    let client = reqwest::Client::new();
    for addr in [one, two] {
        let r = client
            .post(format!("http://{addr}/v1/chat/completions"))
            .json(&chat())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "listener on {addr}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["object"], "chat.completion", "{body}");
    }
    let admin = harness::Admin::new(&sluice);
    let (status, _) = admin.get("/readyz").await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_while_stop_drain_waits_for_the_stream_in_flight() {
    // 20 tokens 100 ms apart: the stream outlives the check by far.
    let upstream = mock(Duration::from_millis(100), 20).await;
    let sluice = harness::start(&format!(
        "admin: {{ listen: 127.0.0.1:0 }}\n\
         runtime: {{ threads: 2, grace_period: 10s }}\n\
         listeners:\n  - {{ name: public, listen: 127.0.0.1:0, protocol: http }}\n\
         clusters:\n  - {{ name: m, kind: llm, endpoints: [\"{}\"] }}\n\
         routes:\n  - {{ name: chat, listener: public, match: {{ path_prefix: / }}, split: {{ m: 100 }} }}\n",
        upstream.addr()
    ));
    let proxy = listener(&sluice, "public");
    let readyz = format!("http://{}/readyz", sluice.admin_addr);
    let client = reqwest::Client::new();
    assert_eq!(client.get(&readyz).send().await.unwrap().status(), 200);

    let (mut response, mut streamed) = super::start_stream(proxy).await;

    let stopping = tokio::task::spawn_blocking(move || sluice.stop(Stop::Drain));
    let deadline = Instant::now() + Duration::from_secs(5);
    let draining = loop {
        let r = client.get(&readyz).send().await.unwrap();
        if r.status() == 503 {
            break r.json::<serde_json::Value>().await.unwrap();
        }
        assert!(Instant::now() < deadline, "readyz never went 503");
        tokio::time::sleep(WAIT_POLL).await;
    };
    assert_eq!(draining["status"], "draining");
    assert!(
        !stopping.is_finished(),
        "stop returned with a stream in flight"
    );

    while let Some(chunk) = response.chunk().await.unwrap() {
        streamed.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(streamed.trim_end().ends_with("data: [DONE]"), "{streamed}");
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("stop returned after the drain")
        .unwrap();
    let refused = tokio::net::TcpStream::connect(proxy).await;
    assert!(refused.is_err(), "listener still accepting after stop");
}
