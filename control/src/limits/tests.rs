#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use sluice_filters::{Descriptor, Limits};

use super::*;
use crate::config::{LimitStore, OnUnavailable};

fn route(on_unavailable: OnUnavailable, metrics: &Metrics) -> RouteLimits {
    let config = LimitsConfig {
        descriptor: vec![Descriptor::Route],
        limits: Limits {
            requests_per_minute: Some(30),
            concurrent_streams: Some(5),
            ..Limits::default()
        },
        default_max_tokens: 16,
        store: Some(LimitStore {
            url: "redis://127.0.0.1:6379".into(),
            sync_interval: Duration::from_millis(100),
            on_unavailable,
            key_prefix: "t:".into(),
        }),
    };
    RouteLimits::new("chat", config, metrics)
}

fn one() -> Cost {
    Cost::default()
}

/// Of `n` requests one after another (each ended before the next), how many pass.
fn admitted(limits: &RouteLimits, n: usize) -> usize {
    (0..n)
        .filter(|_| match limits.admit("k", one(), 0) {
            (Decision::Allowed(_), Some(a)) => {
                limits.settle(a, one(), 0);
                true
            }
            _ => false,
        })
        .count()
}

fn gauge(metrics: &Metrics, name: &str) -> f64 {
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&metrics.registry().gather())
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(name) && l.contains("route=\"chat\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn an_open_route_decides_locally_until_its_store_answers_then_from_its_share() {
    let metrics = Metrics::new().unwrap();
    let limits = route(OnUnavailable::Open, &metrics);
    // Before the first sync: the local buckets, the whole 30.
    assert_eq!(admitted(&limits, 40), 30);
    assert_eq!(gauge(&metrics, "sluice_ratelimit_store_up"), 0.0);

    let limits = route(OnUnavailable::Open, &metrics);
    limits.fleet.as_ref().unwrap().synced(3);
    assert_eq!(gauge(&metrics, "sluice_ratelimit_store_up"), 1.0);
    assert_eq!(gauge(&metrics, "sluice_ratelimit_store_peers"), 3.0);
    // One of three sluices: its first share, 10, before the next sync.
    assert_eq!(admitted(&limits, 40), 10);
    match limits.admit("k", one(), 0).0 {
        Decision::Limited {
            kind,
            retry_after_ms,
            headers,
        } => {
            assert_eq!((kind, retry_after_ms), (LimitKind::Requests, 100));
            // The fleet as last seen: 30 less the 10 spent here.
            assert_eq!(headers.requests, Some((30, 20, 20_000)));
        }
        other => panic!("{other:?}"),
    }
    // The local buckets were charged too: a fall back finds 20 left.
    limits.fleet.as_ref().unwrap().failed("down");
    assert_eq!(admitted(&limits, 40), 20);
}

#[test]
fn a_closed_route_refuses_while_its_store_is_unavailable_and_counts_each_fall_once() {
    let metrics = Metrics::new().unwrap();
    let limits = route(OnUnavailable::Closed, &metrics);
    assert_eq!(
        limits.admit("k", one(), 0).0,
        Decision::StoreUnavailable {
            retry_after_ms: 1_000
        }
    );
    let fleet = limits.fleet.as_ref().unwrap();
    fleet.synced(2);
    assert_eq!(admitted(&limits, 1), 1);
    fleet.failed("down");
    fleet.failed("still down");
    assert!(matches!(
        limits.admit("k", one(), 0).0,
        Decision::StoreUnavailable { .. }
    ));
    assert_eq!(
        gauge(&metrics, "sluice_ratelimit_store_fallbacks_total"),
        1.0
    );
    fleet.synced(2);
    fleet.failed("down again");
    assert_eq!(
        gauge(&metrics, "sluice_ratelimit_store_fallbacks_total"),
        2.0
    );
}

#[test]
fn concurrent_streams_stay_per_sluice_under_a_fleet_budget() {
    let metrics = Metrics::new().unwrap();
    let limits = route(OnUnavailable::Open, &metrics);
    limits.fleet.as_ref().unwrap().synced(1);
    let held: Vec<_> = (0..5)
        .map(|_| limits.admit("k", one(), 0).1.unwrap())
        .collect();
    assert!(matches!(
        limits.admit("k", one(), 0).0,
        Decision::Limited {
            kind: LimitKind::ConcurrentStreams,
            ..
        }
    ));
    for a in held {
        limits.settle(a, one(), 0);
    }
    assert!(matches!(
        limits.admit("k", one(), 0).0,
        Decision::Allowed(_)
    ));
}

#[test]
fn a_fleet_budget_and_its_leases_survive_a_swap_while_the_block_stays_the_same() {
    use crate::snapshot::Snapshot;
    use crate::stats::Stats;
    use crate::testing;

    let yaml = |interval: &str| {
        testing::ab_chat(&format!(
            "limits: {{ requests_per_minute: 30, store: {{ redis: {{ url: 127.0.0.1:6379, \
             sync_interval: {interval} }} }} }}"
        ))
    };
    let metrics = Metrics::new().unwrap();
    let stats = Stats::new();
    let build = |text: &str, previous: Option<&Snapshot>| {
        let config = Arc::new(testing::config(text));
        Snapshot::build(config, 1, previous, &metrics, &stats)
    };
    let first = build(&yaml("100ms"), None);
    let limits = first.routes[0].limits.clone().unwrap();
    limits.fleet.as_ref().unwrap().synced(3);
    assert_eq!(admitted(&limits, 20), 10);
    let same = build(&yaml("100ms"), Some(&first));
    let kept = same.routes[0].limits.clone().unwrap();
    assert!(Arc::ptr_eq(&limits, &kept));
    // The same store health and the same spent lease.
    assert_eq!(admitted(&kept, 1), 0);
    // Another interval is another block: a fresh budget, not yet synced.
    let changed = build(&yaml("200ms"), Some(&same));
    let fresh = changed.routes[0].limits.clone().unwrap();
    assert!(!Arc::ptr_eq(&limits, &fresh));
    assert_eq!(fresh.fleet.as_ref().unwrap().mode(), fleet::Mode::Local);
}
