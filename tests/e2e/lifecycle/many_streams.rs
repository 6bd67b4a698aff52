//! SIGTERM to the real `sluice run` with 1,000 streams open: every stream ends
//! whole (all its tokens, its usage and `[DONE]`), none is reset, and the
//! process exits 0 within `runtime.grace_period`.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use super::{process, Running};
use crate::support::{free_port, TempDir, WAIT_POLL};

pub(super) const STREAMS: usize = 1_000;
/// Tokens per answer, one every `ITL_MS`: about 6 s a stream, so the first
/// one opened is still going when the last one has started.
const TOKENS: u32 = 30;
const ITL_MS: u64 = 200;
const GRACE: Duration = Duration::from_secs(30);

/// How a whole answer ended, or what was wrong with it.
pub(super) type Outcome = Result<(), String>;

/// Raises this process's soft fd limit to its hard one (sluice, started from
/// here, inherits it): each stream holds a client and a mock socket here and
/// two sockets in sluice.
pub(super) fn raise_fd_limit(needed: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|soft| soft < needed) {
        limit.current = limit.maximum;
        setrlimit(Resource::Nofile, limit).expect("raise RLIMIT_NOFILE to its hard limit");
    }
    let soft = getrlimit(Resource::Nofile).current;
    assert!(
        soft.is_none_or(|soft| soft >= needed),
        "RLIMIT_NOFILE {soft:?} is below the {needed} fds this test needs; raise the hard limit"
    );
}

/// Opens one streaming chat completion through `proxy`; counts it in
/// `started` once its first chunk is in, then reads it to the end and checks
/// it is whole.
pub(super) async fn stream(
    client: reqwest::Client,
    proxy: SocketAddr,
    started: Arc<AtomicUsize>,
    tokens: u32,
) -> Outcome {
    let body = json!({
        "model": "m", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}],
    });
    let url = format!("http://{proxy}/v1/chat/completions");
    let mut response = client
        .post(url)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("send: {}", chain(&e)))?;
    if response.status() != 200 {
        return Err(format!("status {}", response.status()));
    }
    let mut text = String::new();
    let mut counted = false;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(None) => break,
            Err(e) => return Err(format!("cut after {} bytes: {}", text.len(), chain(&e))),
        }
        if !counted {
            counted = true;
            started.fetch_add(1, Ordering::SeqCst);
        }
    }
    check_whole(&text, tokens)
}

/// An error with its causes, for a failure message.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// `text` is a whole OpenAI stream of `tokens` tokens: every content event,
/// the usage that counts them, then `[DONE]`.
pub(super) fn check_whole(text: &str, tokens: u32) -> Outcome {
    let mut content = 0;
    let mut usage = None;
    let mut done = false;
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let event: Value = serde_json::from_str(data).map_err(|e| format!("{e}: {data}"))?;
        if event["choices"][0]["delta"]["content"].is_string() {
            content += 1;
        }
        if let Some(n) = event["usage"]["completion_tokens"].as_u64() {
            usage = Some(n);
        }
    }
    if done && content == tokens && usage == Some(u64::from(tokens)) {
        Ok(())
    } else {
        Err(format!(
            "done {done}, {content} content events, usage {usage:?}; want {tokens}"
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_1000_streams_open_finishes_every_one_then_exits_0() {
    raise_fd_limit(4 * STREAMS as u64 + 512);
    let mock = MockLlm::start(MockLlmOptions::paced_ms(50, ITL_MS, TOKENS))
        .await
        .unwrap();
    let (port, admin) = (free_port(), free_port());
    let yaml = process(admin)
        .runtime(format!("threads: 2, grace_period: {}s", GRACE.as_secs()))
        .listener_at("public", "http", format!("127.0.0.1:{port}"), "")
        .cluster("llm", "llm", [mock.addr()])
        .route_with("chat", "llm: 100", "match: { path_prefix: / }")
        .yaml();
    let dir = TempDir::new("drain-1000");
    let mut sluice = Running::spawn(&dir, &yaml, admin);
    sluice.ready().await;

    let proxy = SocketAddr::from(([127, 0, 0, 1], port));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(STREAMS)
        .build()
        .unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let streams: Vec<_> = (0..STREAMS)
        .map(|_| tokio::spawn(stream(client.clone(), proxy, started.clone(), TOKENS)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while started.load(Ordering::SeqCst) < STREAMS {
        assert!(
            Instant::now() < deadline,
            "{} of {STREAMS} streams started:\n{}",
            started.load(Ordering::SeqCst),
            sluice.output()
        );
        tokio::time::sleep(WAIT_POLL).await;
    }
    let finished_before = streams.iter().filter(|s| s.is_finished()).count();
    assert_eq!(finished_before, 0, "streams ended before SIGTERM");

    let pid = sluice.child.id().to_string();
    let sent = Instant::now();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());

    let mut failed = Vec::new();
    for s in streams {
        if let Err(e) = s.await.unwrap() {
            failed.push(e);
        }
    }
    let status = sluice.exit(GRACE).await;
    let elapsed = sent.elapsed();
    assert!(
        failed.is_empty(),
        "{} of {STREAMS} streams not whole, first: {:?}",
        failed.len(),
        failed.first()
    );
    let status = status.unwrap_or_else(|| panic!("running {GRACE:?} after SIGTERM"));
    assert!(status.success(), "{status}:\n{}", sluice.output());
    assert!(elapsed < GRACE, "exit took {elapsed:?}");
    eprintln!("{STREAMS}/{STREAMS} streams whole, exit 0 {elapsed:?} after SIGTERM");
}
