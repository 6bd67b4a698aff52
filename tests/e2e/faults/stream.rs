//! Streaming faults on real SSE answers from the mock LLM, seen by real
//! clients (reqwest reading events as they arrive, and the OpenAI SDK):
//! even token pacing, first-token delay, stall, truncation, drops and
//! corruption, bandwidth, and the header-triggered token delay; and the
//! same faults on a cluster reached over TLS, through the pooled client.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_filters::{Framer, Framing};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use super::{add, show};
use crate::harness::{http_listener_yaml, listener, start, Admin};
use crate::support::{install_crypto_provider, TlsFixture};

/// One SSE answer as the client saw it: each event with when it arrived.
pub(super) struct Seen {
    pub events: Vec<(Duration, String)>,
    pub ttft: Option<Duration>,
    /// The body ended cleanly (not cut mid-stream).
    pub complete: bool,
}

impl Seen {
    pub(super) fn content_times(&self) -> Vec<Duration> {
        self.events
            .iter()
            .filter(|(_, e)| e.contains("\"content\":\"") && !e.contains("\"content\":\"\""))
            .map(|(t, _)| *t)
            .collect()
    }

    pub(super) fn gaps_ms(&self) -> Vec<f64> {
        let t = self.content_times();
        t.windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64() * 1000.0)
            .collect()
    }

    pub(super) fn has(&self, text: &str) -> bool {
        self.events.iter().any(|(_, e)| e.contains(text))
    }

    /// Data events whose JSON does not parse.
    pub(super) fn malformed(&self) -> usize {
        self.events
            .iter()
            .filter_map(|(_, e)| e.trim().strip_prefix("data: "))
            .filter(|d| *d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
            .count()
    }
}

pub(super) async fn stream_chat(url: &str, headers: &[(&str, &str)]) -> Seen {
    let client = reqwest::Client::new();
    let mut req = client.post(url).json(&json!({
        "model": "mock-llm", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "count"}],
    }));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let sent = Instant::now();
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut framer = Framer::new(Framing::Sse);
    let mut seen = Seen {
        events: Vec::new(),
        ttft: None,
        complete: true,
    };
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            seen.complete = false;
            break;
        };
        let at = sent.elapsed();
        framer.feed(&chunk, |e| {
            seen.events
                .push((at, String::from_utf8_lossy(e.raw).into_owned()));
        });
    }
    seen.ttft = seen.content_times().first().copied();
    seen
}

pub(super) fn percentile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

pub(super) async fn mock(ttft_ms: u64, itl_ms: u64, tokens: u32) -> MockLlm {
    MockLlm::start(MockLlmOptions {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        tokens,
        ..MockLlmOptions::default()
    })
    .await
    .unwrap()
}

pub(super) fn llm_yaml(mock: &MockLlm) -> String {
    format!(
        "{}clusters:\n  - {{ name: llm, kind: llm, endpoints: [{}] }}\nroutes:\n  - {{ name: chat, listener: public, split: {{ llm: 1 }}, allow_header_faults: true }}\n",
        http_listener_yaml(0),
        mock.addr()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_delay_paces_every_gap_evenly_and_removal_restores_it() {
    let mock = mock(20, 10, 30).await;
    let sluice = start(&llm_yaml(&mock));
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let id = add(
        &admin,
        json!({"id": "slow-tokens", "ttl": "5m", "match": {"route": "chat"},
               "action": {"token_delay": {"delay": "50ms"}}}),
    )
    .await;
    let seen = stream_chat(&url, &[]).await;
    assert!(seen.complete && seen.has("[DONE]"));
    let gaps = seen.gaps_ms();
    assert_eq!(gaps.len(), 29);
    let (p10, p50) = (percentile(&gaps, 0.1), percentile(&gaps, 0.5));
    assert!((51.0..=69.0).contains(&p50), "median {p50} of {gaps:?}");
    assert!(p10 >= 45.0, "p10 {p10} of {gaps:?}");
    assert_eq!(show(&admin, &id).await["injected"], 1);

    admin.delete(&format!("/v1/faults/{id}")).await;
    let gaps = stream_chat(&url, &[]).await.gaps_ms();
    let p50 = percentile(&gaps, 0.5);
    assert!(p50 < 40.0, "median {p50} after removal: {gaps:?}");
}

/// Adds a 300 ms `first_token_delay`, checks that it moves the median TTFT
/// of three whole streams (`tokens` content events each) from the `base`
/// TTFTs (seconds), and removes it.
async fn first_token_delay_moves_ttft(admin: &Admin, url: &str, base: &[f64], tokens: usize) {
    let id = add(
        admin,
        json!({"id": "late", "ttl": "5m", "action": {"first_token_delay": {"delay": "300ms"}}}),
    )
    .await;
    let mut late = Vec::new();
    for _ in 0..3 {
        let seen = stream_chat(url, &[]).await;
        assert_eq!(seen.content_times().len(), tokens);
        late.push(seen.ttft.unwrap().as_secs_f64());
    }
    let moved = (percentile(&late, 0.5) - percentile(base, 0.5)) * 1000.0;
    // Generous: the base TTFTs may include a connection's set-up (a TLS handshake) that the
    // faulted streams, on pooled connections, do not pay; a shared CI machine adds noise.
    assert!((210.0..=390.0).contains(&moved), "ttft moved {moved} ms");
    admin.delete(&format!("/v1/faults/{id}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_token_delay_moves_ttft_and_stall_holds_then_resumes() {
    let mock = mock(50, 10, 8).await;
    let sluice = start(&llm_yaml(&mock));
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let mut base = Vec::new();
    for _ in 0..3 {
        base.push(stream_chat(&url, &[]).await.ttft.unwrap().as_secs_f64());
    }
    first_token_delay_moves_ttft(&admin, &url, &base, 8).await;

    add(
        &admin,
        json!({"id": "hold", "ttl": "5m", "action": {"stall": {"after_chunks": 3, "duration": "600ms"}}}),
    )
    .await;
    let seen = stream_chat(&url, &[]).await;
    let t = seen.content_times();
    assert_eq!(t.len(), 8, "resumes and finishes");
    assert!(t[3] - t[2] >= Duration::from_millis(600), "{t:?}");
    assert!(seen.complete && seen.has("[DONE]"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncation_drops_corruption_and_bandwidth_are_seen_by_the_client() {
    let mock = mock(10, 2, 10).await;
    let sluice = start(&llm_yaml(&mock));
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let run = |action: Value| {
        let (admin, url) = (&admin, &url);
        async move {
            let id = add(admin, json!({"ttl": "5m", "action": action})).await;
            let seen = stream_chat(url, &[]).await;
            admin.delete(&format!("/v1/faults/{id}")).await;
            seen
        }
    };
    let plain = run(json!({"drop_usage": {}})).await;
    assert!(!plain.has("\"usage\":{"), "usage dropped");
    assert!(plain.has("[DONE]") && plain.content_times().len() == 10);

    let seen = run(json!({"drop_done": {}})).await;
    assert!(seen.complete && !seen.has("[DONE]") && seen.has("\"usage\":{"));

    let seen = run(json!({"corrupt": {"after_chunks": 4}})).await;
    assert_eq!(seen.malformed(), 1);
    // The malformed event looks like the start of a content event.
    assert_eq!(seen.content_times().len(), 10 + 1);

    let seen = run(json!({"truncate": {"after_chunks": 3, "mode": "clean"}})).await;
    assert!(seen.complete, "a clean end");
    assert_eq!(seen.content_times().len(), 3);
    assert!(!seen.has("[DONE]"));

    let seen = run(json!({"truncate": {"after_chunks": 3, "mode": "abrupt"}})).await;
    assert!(!seen.complete, "cut mid-stream");
    assert_eq!(seen.content_times().len(), 3);

    let bytes: usize = plain.events.iter().map(|(_, e)| e.len()).sum();
    let seen = run(json!({"bandwidth": {"bytes_per_sec": 2000}})).await;
    let took = seen.events.last().unwrap().0 - seen.events.first().unwrap().0;
    // Every event but the last waits for its own bytes at 2000 B/s.
    let floor = (bytes as f64 * 0.8) / 2000.0;
    assert!(took.as_secs_f64() >= floor, "{took:?} for {bytes} bytes");
    assert!(seen.has("[DONE]"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_delay_header_paces_only_where_allowed() {
    let mock = mock(10, 5, 10).await;
    let sluice = start(&llm_yaml(&mock));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let seen = stream_chat(&url, &[("x-sluice-fault-token-delay", "40ms")]).await;
    let p50 = percentile(&seen.gaps_ms(), 0.5);
    assert!(p50 >= 40.0, "median gap {p50}");
    let off = llm_yaml(&mock).replace("allow_header_faults: true", "allow_header_faults: false");
    let sluice = start(&off);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let seen = stream_chat(&url, &[("x-sluice-fault-token-delay", "40ms")]).await;
    assert_eq!(seen.content_times().len(), 10);
    let text = crate::harness::metrics_when(&sluice, |_| true).await;
    assert!(!text.contains("experiment=\"header\""), "{text}");
}

/// Terminates TLS (the fixture's certificate) in front of a plain upstream
/// and counts the connections made to it. Stops on drop.
struct TlsFront {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl TlsFront {
    async fn start(tls: &TlsFixture, upstream: SocketAddr) -> TlsFront {
        let acceptor = TlsAcceptor::from(Arc::new(tls.server_config().unwrap()));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            // Dropped with the task: every connection ends with the front.
            let mut conns = JoinSet::new();
            while let Ok((conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                conns.spawn(async move {
                    let (Ok(mut tls), Ok(mut plain)) = (
                        acceptor.accept(conn).await,
                        TcpStream::connect(upstream).await,
                    ) else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront {
            addr,
            accepted,
            task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn tls_llm_yaml(front: SocketAddr, tls: &str) -> String {
    format!(
        "{}clusters:\n  - {{ name: llm, kind: llm, endpoints: [{front}], tls: {tls} }}\nroutes:\n  - {{ name: chat, listener: public, split: {{ llm: 1 }} }}\n",
        http_listener_yaml(0),
    )
}

fn trusting(ca: &Path) -> String {
    format!("{{ ca: \"{}\", sni: localhost }}", ca.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_faults_pace_and_cut_an_answer_from_a_tls_upstream() {
    install_crypto_provider();
    let tls = TlsFixture::new().unwrap();
    let mock = mock(50, 10, 12).await;
    let front = TlsFront::start(&tls, mock.addr()).await;
    let sluice = start(&tls_llm_yaml(front.addr, &trusting(&tls.cert_path())));
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let mut base = Vec::new();
    for _ in 0..3 {
        let seen = stream_chat(&url, &[]).await;
        assert!(seen.complete && seen.has("[DONE]"));
        base.push(seen.ttft.unwrap().as_secs_f64());
    }

    let id = add(
        &admin,
        json!({"id": "tls-tokens", "ttl": "5m", "action": {"token_delay": {"delay": "50ms"}}}),
    )
    .await;
    let seen = stream_chat(&url, &[]).await;
    assert!(seen.complete && seen.has("[DONE]"));
    let gaps = seen.gaps_ms();
    assert_eq!(gaps.len(), 11);
    let p50 = percentile(&gaps, 0.5);
    assert!((51.0..=69.0).contains(&p50), "median {p50} of {gaps:?}");
    // Faulted streams read to their end leave their connection pooled.
    let before = front.accepted();
    for _ in 0..2 {
        assert!(stream_chat(&url, &[]).await.complete);
    }
    assert_eq!(front.accepted(), before, "the pooled connection was reused");
    assert_eq!(show(&admin, &id).await["injected"], 3);
    admin.delete(&format!("/v1/faults/{id}")).await;

    first_token_delay_moves_ttft(&admin, &url, &base, 12).await;

    let id = add(
        &admin,
        json!({"ttl": "5m", "action": {"truncate": {"after_chunks": 3, "mode": "abrupt"}}}),
    )
    .await;
    let seen = stream_chat(&url, &[]).await;
    assert!(!seen.complete, "cut mid-stream");
    assert_eq!(seen.content_times().len(), 3);
    admin.delete(&format!("/v1/faults/{id}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulted_stream_to_an_untrusted_tls_upstream_is_a_connect_error() {
    install_crypto_provider();
    let tls = TlsFixture::new().unwrap();
    let mock = mock(10, 5, 4).await;
    let front = TlsFront::start(&tls, mock.addr()).await;
    // Verification on, and the fixture's certificate not trusted.
    let sluice = start(&tls_llm_yaml(front.addr, "{ sni: localhost }"));
    let admin = Admin::new(&sluice);
    add(
        &admin,
        json!({"ttl": "5m", "action": {"token_delay": {"delay": "10ms"}}}),
    )
    .await;
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let resp = reqwest::Client::new()
        .post(&url)
        .json(&json!({"model": "mock-llm", "stream": true, "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    assert_eq!(resp.headers()["x-sluice-error"], "connect_error");
}
