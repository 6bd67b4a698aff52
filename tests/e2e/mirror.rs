//! Shadow traffic end to end: sluice in front of a primary, mirroring to
//! recording shadows, a real llama.cpp server and real Chroma stores.

mod baseline;
mod chroma;
mod counts;
mod coverage;
mod ctl;
mod embeddings;
mod faults;
mod perturb;
mod real;
mod stability;

use std::net::SocketAddr;
use std::time::Duration;

use sluice_cli::{MockLlm, MockLlmOptions, SeenRequest};
use sluice_proxy::Sluice;

use crate::harness::{metrics_within, start, TestConfig};
use crate::support::NamedUpstream;

/// The listener and runtime sections of every mirror test but one: the
/// sender at normal CPU priority. These tests count copies exactly, and CI
/// runs them beside llama.cpp tests that keep both cores busy; there the
/// default `idle` sender can wait past a copy's timeout, which is what
/// `idle` is for, not what these tests test.
/// `counts::the_default_idle_sender_still_delivers` runs the default.
pub(crate) fn head() -> TestConfig {
    TestConfig::http().runtime("threads: 2, grace_period: 5s, mirror_priority: normal")
}

/// A config with a `primary` and a `shadow` cluster and route `chat` on
/// `public`, mirroring with `mirror` (a YAML flow map).
fn config(primary: SocketAddr, shadow: SocketAddr, mirror: &str) -> String {
    config_after(head(), primary, shadow, mirror)
}

/// [`config`] after other listener and runtime sections (`head`).
fn config_after(head: TestConfig, primary: SocketAddr, shadow: SocketAddr, mirror: &str) -> String {
    head.cluster("primary", "http", [primary])
        .cluster("shadow", "http", [shadow])
        .route_with("chat", "primary: 100", &format!("mirror: {mirror}"))
        .yaml()
}

/// A shadow that keeps every copy it reads: the mock LLM, answering at once
/// unless `options` say otherwise (slow, resetting).
async fn shadow(options: MockLlmOptions) -> MockLlm {
    MockLlm::start(MockLlmOptions {
        record: true,
        ..options
    })
    .await
    .unwrap()
}

/// The mock's options for a shadow that answers at once.
fn at_once() -> MockLlmOptions {
    MockLlmOptions::paced_ms(0, 0, 1)
}

/// A `primary` echo upstream, a [`shadow`] answering at once, and sluice
/// mirroring route `chat` from one to the other with `mirror`.
async fn mirrored(mirror: &str) -> (NamedUpstream, MockLlm, Sluice) {
    let primary = NamedUpstream::start("primary").await.unwrap();
    let shadow = shadow(at_once()).await;
    let sluice = start(&config(primary.addr(), shadow.addr(), mirror));
    (primary, shadow, sluice)
}

/// What `shadow` got once `n` copies arrived (30 s at most), and a little
/// longer for any copy too many to show up.
async fn copies(shadow: &MockLlm, n: usize) -> Vec<SeenRequest> {
    shadow.wait_seen(n, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    shadow.seen()
}

/// The value of the sample `sluice_mirror_requests_total{route="chat",result=...}`.
/// Copies counted with `result`; `a|b` adds up either result.
fn mirror_count(metrics: &str, result: &str) -> u64 {
    result
        .split('|')
        .map(|result| {
            let line =
                format!("sluice_mirror_requests_total{{result=\"{result}\",route=\"chat\"}} ");
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(line.as_str()))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// `/metrics` once the copies with `result` reach `n` (30 s at most).
async fn metrics_when_counted(sluice: &Sluice, result: &str, n: u64) -> String {
    let within = Duration::from_secs(30);
    metrics_within(sluice, within, |text| mirror_count(text, result) >= n).await
}

/// Sends `n` requests (POST, body `body`) with `parallel` clients; every
/// answer's status, in no particular order.
async fn drive(
    url: &str,
    n: usize,
    parallel: usize,
    headers: impl Fn(usize) -> Vec<(&'static str, String)> + Send + Sync + 'static,
    body: bytes::Bytes,
) -> Vec<u16> {
    let client = reqwest::Client::new();
    let headers = std::sync::Arc::new(headers);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..parallel {
        let (client, url, headers, next, body) = (
            client.clone(),
            url.to_string(),
            headers.clone(),
            next.clone(),
            body.clone(),
        );
        tasks.spawn(async move {
            let mut statuses = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return statuses;
                }
                let mut req = client.post(&url).body(body.clone());
                for (name, value) in headers(i) {
                    req = req.header(name, value);
                }
                let status = match req.send().await {
                    Ok(r) => {
                        let s = r.status().as_u16();
                        let _ = r.bytes().await;
                        s
                    }
                    Err(_) => 0,
                };
                statuses.push(status);
            }
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.unwrap());
    }
    all
}
