//! How many copies the shadow gets, and what each carries.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use serde_json::json;
use sluice_filters::TraceContext;

use super::{
    at_once, config_after, copies, drive, metrics_when_counted, mirror_count, mirrored, shadow,
};
use crate::harness::{listener, start, Admin, TestConfig};
use crate::support::NamedUpstream;

// Every config here lets 1000 copies be out at once: on a busy machine the
// default 64 can be reached, and a copy dropped (and counted as `in_flight`)
// would make the exact counts below wrong for a reason they do not test.
const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_requests_at_three_copies_reach_the_shadow_300_times_each_marked() {
    let (primary, shadow, sluice) =
        mirrored("{ cluster: shadow, percent: 100, copies: 3, max_in_flight: 1000 }").await;
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let statuses = drive(
        &url,
        100,
        4,
        |i| {
            vec![
                ("traceparent", PARENT.into()),
                ("x-request-id", format!("req-{i}")),
            ]
        },
        Bytes::from_static(b"{\"model\":\"m\",\"messages\":[]}"),
    )
    .await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(primary.requests(), 100);

    let seen = copies(&shadow, 300).await;
    assert_eq!(seen.len(), 300);
    let mut by_request: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let parent = TraceContext::parse(PARENT.as_bytes()).unwrap();
    let mut spans = HashSet::new();
    for s in &seen {
        by_request
            .entry(s.header("x-request-id").unwrap().to_owned())
            .or_default()
            .push(s.header("x-sluice-shadow").unwrap().to_owned());
        // A child of the client's span: same trace, a span of its own.
        let tp = TraceContext::parse(s.header("traceparent").unwrap().as_bytes()).unwrap();
        assert_eq!(tp.trace_id, parent.trace_id);
        assert_ne!(tp.span_id, parent.span_id);
        assert!(tp.sampled);
        spans.insert(tp.span_id);
    }
    assert_eq!(spans.len(), 300, "every copy is a span of its own");
    assert_eq!(by_request.len(), 100);
    for (id, mut marks) in by_request {
        marks.sort();
        assert_eq!(marks, vec!["1", "2", "3"], "{id}");
    }
    let metrics = metrics_when_counted(&sluice, "ok", 300).await;
    assert_eq!(mirror_count(&metrics, "ok"), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_percent_set_through_the_api_mirrors_10_percent_of_2000() {
    let (_primary, shadow, sluice) = mirrored("{ cluster: shadow, percent: 0 }").await;
    let admin = Admin::new(&sluice);
    let (status, body) = admin
        .put(
            "/v1/routes/chat/mirror",
            json!({"cluster": "shadow", "percent": 10, "max_in_flight": 1000}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let statuses = drive(&url, 2000, 8, |_| Vec::new(), Bytes::from_static(b"{}")).await;
    assert!(statuses.iter().all(|s| *s == 200));
    let seen = copies(&shadow, 200).await;
    // 10% ± 2%.
    assert!((160..=240).contains(&seen.len()), "{}", seen.len());
    assert!(seen
        .iter()
        .all(|s| s.header("x-sluice-shadow") == Some("1")));
}

/// Every other mirror test runs the sender at normal priority (see
/// `super::head`); this one keeps the default, `idle`, and shows
/// copies still go out and are answered when the machine has CPU to spare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_idle_sender_still_delivers() {
    let primary = NamedUpstream::start("primary").await.unwrap();
    let shadow = shadow(at_once()).await;
    let sluice = start(&config_after(
        TestConfig::http(),
        primary.addr(),
        shadow.addr(),
        "{ cluster: shadow, percent: 100, timeout: 30s }",
    ));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let statuses = drive(&url, 20, 2, |_| vec![], Bytes::from_static(b"{}")).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(copies(&shadow, 20).await.len(), 20);
    let metrics = metrics_when_counted(&sluice, "ok", 20).await;
    assert_eq!(mirror_count(&metrics, "ok"), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_and_a_half_copies_average_two_and_a_half() {
    let (_primary, shadow, sluice) =
        mirrored("{ cluster: shadow, copies: 2.5, max_in_flight: 1000 }").await;
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let statuses = drive(
        &url,
        400,
        4,
        |i| vec![("x-request-id", format!("req-{i}"))],
        Bytes::from_static(b"{}"),
    )
    .await;
    assert!(statuses.iter().all(|s| *s == 200));
    let seen = copies(&shadow, 1000).await;
    let ratio = seen.len() as f64 / 400.0;
    assert!((2.35..=2.65).contains(&ratio), "{ratio}");
    let mut per_request: BTreeMap<String, usize> = BTreeMap::new();
    for s in &seen {
        *per_request
            .entry(s.header("x-request-id").unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(per_request.len(), 400);
    assert!(per_request.values().all(|n| *n == 2 || *n == 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_by_mirrors_whole_sessions_or_none_of_them() {
    let (_primary, shadow, sluice) =
        mirrored("{ cluster: shadow, percent: 30, sample_by: x-session-id, max_in_flight: 1000 }")
            .await;
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    // 40 sessions of 5 requests each, interleaved.
    let statuses = drive(
        &url,
        200,
        4,
        |i| vec![("x-session-id", format!("session-{}", i % 40))],
        Bytes::from_static(b"{}"),
    )
    .await;
    assert!(statuses.iter().all(|s| *s == 200));
    // Wait until every sent copy is counted, then read what arrived.
    let metrics = metrics_when_counted(&sluice, "ok", 1).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let seen = shadow.seen();
    let mut per_session: BTreeMap<String, usize> = BTreeMap::new();
    for s in &seen {
        *per_session
            .entry(s.header("x-session-id").unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(
        per_session.values().all(|n| *n == 5),
        "a session was split: {per_session:?}"
    );
    // Some sessions mirrored, most not (30% of 40).
    assert!((4..=20).contains(&per_session.len()), "{per_session:?}");
    assert!(mirror_count(&metrics, "ok") >= 1);
}
