use std::sync::Arc;

use bytes::Bytes;
use sluice_control::{Config, MirrorDiffs, Shared, SnapshotStore};
use sluice_filters::TraceContext;

use super::copy::{child_traceparent, result_of, shadow_body, Shadow};
use super::limits::{CopyKind, Limits};
use super::*;

fn store(mirror: &str) -> (Arc<SnapshotStore>, Shared) {
    store_with_shadow_at(mirror, 18002)
}

fn store_with_shadow_at(mirror: &str, shadow_port: u16) -> (Arc<SnapshotStore>, Shared) {
    let yaml = format!(
        "listeners:\n  - {{ name: public, listen: 127.0.0.1:18080, protocol: http }}\n\
clusters:\n  - {{ name: a, kind: llm, endpoints: [127.0.0.1:18001] }}\n  \
- {{ name: s, kind: llm, endpoints: [127.0.0.1:{shadow_port}] }}\n\
routes:\n  - {{ name: chat, listener: public, split: {{ a: 100 }}, mirror: {mirror} }}\n"
    );
    let shared = Shared::new().unwrap();
    let store = SnapshotStore::new(Config::from_yaml(&yaml).unwrap(), &shared);
    (store, shared)
}

fn job(store: &SnapshotStore, copies: u32, body: &'static [u8]) -> Job {
    let snapshot = store.load();
    Job {
        policy: snapshot.routes[0].mirror.clone().unwrap(),
        shadow_copies: copies,
        primary_cluster: None,
        request_id: "r1".into(),
        method: http::Method::POST,
        path: "/v1/chat/completions".into(),
        headers: http::HeaderMap::new(),
        authority: None,
        body: vec![
            Bytes::from_static(&body[..3]),
            Bytes::from_static(&body[3..]),
        ],
        primary: Answer::default(),
        coverage_step: None,
    }
}

fn count(shared: &Shared, result: &str) -> u64 {
    let line = format!("sluice_mirror_requests_total{{result=\"{result}\",route=\"chat\"}} ");
    shared
        .metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()).map(str::to_string))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_full_queue_drops_the_job_and_counts_its_copies() {
    let (store, shared) = store("{ cluster: s, copies: 3 }");
    let (tx, _rx) = mpsc::channel(1);
    let queue = MirrorQueue { tx };
    queue.submit(job(&store, 3, b"{}..."));
    assert_eq!(count(&shared, "queue_full"), 0);
    queue.submit(job(&store, 3, b"{}..."));
    assert_eq!(count(&shared, "queue_full"), 3);
}

#[tokio::test(start_paused = true)]
async fn copies_over_the_rate_or_in_flight_limit_are_dropped_by_reason() {
    let (store, shared) = store("{ cluster: s, copies: 3, rate_limit: 2, max_in_flight: 1 }");
    let mut limits = Limits::default();
    let j = job(&store, 3, b"{}...");
    // Copy 1 goes; copy 2 has a token but no slot; copy 3 has no token.
    let admitted = limits.admit(&j);
    assert_eq!(admitted.len(), 1);
    assert_eq!(admitted[0].kind, CopyKind::Shadow(1));
    assert_eq!(count(&shared, "in_flight"), 1);
    assert_eq!(count(&shared, "rate"), 1);
    // The route has no slot left: the request path stops collecting copies
    // until the copy out is done.
    assert_eq!(j.policy.gate.closed(), Some(MirrorResult::InFlight));
    drop(admitted);
    assert_eq!(j.policy.gate.closed(), None);
    // A second later the bucket has two tokens again and the slot is free.
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    assert_eq!(limits.admit(&job(&store, 1, b"{}...")).len(), 1);
}

#[test]
fn a_copy_is_a_child_span_of_the_client_or_a_new_trace() {
    let parent =
        TraceContext::parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    let child = TraceContext::parse(child_traceparent(Some(&parent)).as_bytes()).unwrap();
    assert_eq!(child.trace_id, parent.trace_id);
    assert_ne!(child.span_id, parent.span_id);
    assert!(child.sampled);
    let root = TraceContext::parse(child_traceparent(None).as_bytes()).unwrap();
    assert_ne!(root.trace_id, parent.trace_id);
    assert!(!root.sampled);
}

#[test]
fn the_model_is_rewritten_in_json_bodies_only() {
    let (rewriting, _) = store("{ cluster: s, rewrite: { model: small-v2 } }");
    let body = shadow_body(&job(&rewriting, 1, br#"{"model":"big","n":1}"#));
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(value["model"], "small-v2");
    assert_eq!(value["n"], 1);
    assert_eq!(
        &shadow_body(&job(&rewriting, 1, b"not json"))[..],
        b"not json"
    );
    let (plain, _) = store("{ cluster: s }");
    assert_eq!(&shadow_body(&job(&plain, 1, b"abcdef"))[..], b"abcdef");
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A refused connect and one not up in time are told apart: the first is a
/// dead shadow, the second a slow one or a sender starved of CPU.
#[test]
fn a_connect_timeout_is_not_counted_as_a_refusal() {
    use sluice_filters::Failure;
    assert_eq!(result_of(Failure::ConnectError), MirrorResult::ConnectError);
    assert_eq!(
        result_of(Failure::ConnectTimeout),
        MirrorResult::ConnectTimeout
    );
    assert_eq!(MirrorResult::ConnectTimeout.label(), "connect_timeout");
    assert!(MirrorResult::ALL.contains(&MirrorResult::ConnectTimeout));
}

#[tokio::test]
async fn a_dead_shadow_closes_the_gate_until_it_may_be_back() {
    let (store, shared) = store_with_shadow_at("{ cluster: s, copies: 2 }", dead_port());
    let job = Arc::new(job(&store, 2, b"{}..."));
    assert_eq!(job.policy.gate.closed(), None);
    let admitted = Limits::default().admit(&job);
    let shadow = Shadow::new(&store.load().config, shared.metrics.clone()).unwrap();
    let results = shadow.send_all(job.clone(), admitted).await;
    assert_eq!(results.len(), 2);
    assert!(results
        .iter()
        .all(|(_, r)| matches!(r, Err(MirrorResult::ConnectError))));
    assert_eq!(
        job.policy.gate.closed(),
        Some(MirrorResult::ShadowDown),
        "every endpoint is down"
    );
    // The endpoint is skipped for a second; then the gate opens for a probe.
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    assert_eq!(job.policy.gate.closed(), None);
}

#[test]
fn five_broken_exchanges_in_a_row_take_an_endpoint_down_and_timeouts_none() {
    let (store, shared) = store("{ cluster: s }");
    let shadow = Shadow::new(&store.load().config, shared.metrics.clone()).unwrap();
    let health = shadow.health();
    let snapshot = store.load();
    let cluster = &snapshot
        .clusters
        .iter()
        .find(|c| c.config.name == "s")
        .unwrap()
        .config;
    let endpoints = health.of(cluster);
    let down = || endpoints.set.is_ejected(0, health.now_ms());
    for _ in 0..20 {
        health.record(&endpoints, 0, Some(MirrorResult::Timeout));
    }
    assert!(!down(), "a slow shadow is not a broken one");
    for _ in 0..20 {
        health.record(&endpoints, 0, Some(MirrorResult::Overflow));
    }
    assert!(
        !down(),
        "the cluster's max_connections is no endpoint's fault"
    );
    for _ in 0..4 {
        health.record(&endpoints, 0, Some(MirrorResult::Error));
    }
    health.record(&endpoints, 0, None);
    for _ in 0..4 {
        health.record(&endpoints, 0, Some(MirrorResult::Error));
    }
    assert!(!down(), "an answer in between starts the count over");
    health.record(&endpoints, 0, Some(MirrorResult::Error));
    assert!(down());
    assert!(health.all_down_for(cluster).is_some());
    health.record(&endpoints, 0, None);
    assert!(!down(), "an answer brings it back at once");
    assert!(
        Arc::ptr_eq(&endpoints, &health.of(cluster)),
        "kept per cluster"
    );
}

/// The scheduling policy of each of this process's threads named `name`
/// (field 41 of `/proc/self/task/<tid>/stat`: 0 is `SCHED_OTHER`, 5 is
/// `SCHED_IDLE`).
#[cfg(target_os = "linux")]
fn thread_policies(name: &str) -> Vec<u32> {
    let mut policies = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis start at field 3.
        let Some(close) = stat.rfind(')') else {
            continue; // the thread ended while we read it
        };
        let policy = stat[close + 1..].split_whitespace().nth(41 - 3).unwrap();
        policies.push(policy.parse().unwrap());
    }
    policies
}

/// Starts a sender at `priority` and waits (5 s at most) until the drain
/// thread and every runtime worker run under `policy`; how many do.
#[cfg(target_os = "linux")]
fn sender_threads_under(priority: SidePriority, policy: u32) -> usize {
    let (store, shared) = store("{ cluster: s }");
    let (mut sender, _queue) = MirrorSender::start(
        &store.load().config,
        Arc::new(MirrorDiffs::default()),
        Arc::new(sluice_control::EventLog::default()),
        priority,
        &shared.runtimes,
        shared.metrics.clone(),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    // A thread has its name before it has set its priority: wait for both.
    let count = || {
        thread_policies("sluice-mirror")
            .iter()
            .filter(|p| **p == policy)
            .count()
    };
    while count() <= SENDER_THREADS && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let n = count();
    sender.stop();
    n
}

#[cfg(target_os = "linux")]
#[test]
fn by_default_the_sender_runs_only_on_cpu_time_nobody_else_wants() {
    let default = Config::from_yaml("listeners: []\n").map(|c| c.runtime.mirror_priority);
    assert_eq!(default.ok(), Some(SidePriority::Idle));
    // One test for both settings: other tests' senders share the thread name.
    let idle = sender_threads_under(SidePriority::Idle, 5);
    assert!(idle > SENDER_THREADS, "{idle} threads under SCHED_IDLE");
    let normal = sender_threads_under(SidePriority::Normal, 0);
    assert!(
        normal > SENDER_THREADS,
        "{normal} threads under SCHED_OTHER"
    );
}
