#![allow(clippy::unwrap_used)]

use super::*;
use sluice_filters::RequestParts;

use crate::testing::{self, two_clusters};

/// Clusters `a` and `b` with a route of its own ahead of `chat`, sticky and version-forcible, under a
/// rollout.
fn config() -> String {
    let head = two_clusters("a", "b");
    format!(
        "{head}routes:
  - {{ name: admin, listener: public, match: {{ path_prefix: /admin }}, split: {{ a: 100 }} }}
  - {{ name: chat, listener: public, split: {{ a: 100, b: 0 }}, sticky: {{ header: x-session-id }},
      allow_version_header: true }}
rollouts:
  - {{ name: r, route: chat, stable: a, canary: b, gates: {{ ttft_p95: 1s }} }}
"
    )
}

fn snapshot() -> Snapshot {
    Snapshot::build(
        Arc::new(testing::config(&config())),
        1,
        None,
        &Metrics::new().unwrap(),
        &Stats::new(),
    )
}

fn cluster_of(s: &Snapshot, route: usize, target: Option<usize>) -> &str {
    let t = &s.routes[route].targets[target.unwrap()];
    &s.clusters[t.cluster].config.name
}

#[test]
fn routes_match_in_order_and_versions_can_be_forced() {
    let s = snapshot();
    assert_eq!(
        s.match_route(0, &RequestParts::new("/admin/x", &[])),
        Some(0)
    );
    let chat = s
        .match_route(0, &RequestParts::new("/v1/chat", &[]))
        .unwrap();
    assert_eq!(chat, 1);
    let route = &s.routes[chat];
    // Weight 0 for b: every pick is a, sticky or not...
    for r in [0, u64::MAX / 2, u64::MAX] {
        assert_eq!(
            cluster_of(&s, chat, route.pick_target(&RequestParts::new("/", &[]), r)),
            "a"
        );
    }
    let session = RequestParts::new("/", &[("x-session-id", "s1")]);
    assert_eq!(cluster_of(&s, chat, route.pick_target(&session, 7)), "a");
    // ...unless a tester names the canary (or its version).
    for v in ["canary", "v2"] {
        let headers = [("x-sluice-version", v), ("x-session-id", "s1")];
        let forced = RequestParts::new("/", &headers);
        assert_eq!(cluster_of(&s, chat, route.pick_target(&forced, 7)), "b");
    }
    assert_eq!(
        cluster_of(
            &s,
            chat,
            route.pick_target(
                &RequestParts::new("/", &[("x-sluice-version", "stable")]),
                7
            )
        ),
        "a"
    );
    // Unknown names fall back to the normal pick; routes without the flag ignore it.
    assert_eq!(
        cluster_of(
            &s,
            chat,
            route.pick_target(&RequestParts::new("/", &[("x-sluice-version", "v9")]), 7)
        ),
        "a"
    );
    assert!(s.routes[0].versions.is_empty());
}

#[test]
fn a_model_glob_routes_and_a_target_carries_its_rewrite() {
    let head = two_clusters("a", "b");
    let yaml = format!(
        "{head}routes:
  - {{ name: gpt, listener: public, match: {{ model: \"gpt-*\" }}, split: {{ a: 100 }},
      rewrite: {{ a: {{ model: gpt-ckpt }} }} }}
  - {{ name: rest, listener: public, split: {{ b: 100 }} }}
"
    );
    let s = Snapshot::build(
        Arc::new(testing::config(&yaml)),
        1,
        None,
        &Metrics::new().unwrap(),
        &Stats::new(),
    );
    assert_eq!(s.routes_by_model, [true]);
    let req = RequestParts::new("/v1/chat/completions", &[]);
    assert_eq!(s.match_route_with_model(0, &req, Some("gpt-4o")), Some(0));
    assert_eq!(s.match_route_with_model(0, &req, Some("llama-3")), Some(1));
    assert_eq!(s.match_route(0, &req), Some(1));
    assert_eq!(
        s.routes[0].targets[0].rewrite_model.as_deref(),
        Some("gpt-ckpt")
    );
}

#[test]
fn budgets_survive_a_swap_while_the_limits_stay_the_same() {
    let head = two_clusters("a", "b");
    let yaml = |rpm: u32| {
        format!(
            "{head}routes:
  - {{ name: chat, listener: public, split: {{ a: 100 }},
      limits: {{ descriptor: [header:x-tenant], requests_per_minute: {rpm} }} }}
"
        )
    };
    let metrics = Metrics::new().unwrap();
    let stats = Stats::new();
    let build = |text: &str, previous: Option<&Snapshot>| {
        Snapshot::build(
            Arc::new(testing::config(text)),
            1,
            previous,
            &metrics,
            &stats,
        )
    };
    let first = build(&yaml(1), None);
    let limits = first.routes[0].limits.clone().unwrap();
    let one = sluice_filters::Cost::default();
    let (decision, admission) = limits.admit("acme", one, 0);
    assert!(matches!(decision, sluice_filters::Decision::Allowed(_)));
    let same = build(&yaml(1), Some(&first));
    let kept = same.routes[0].limits.clone().unwrap();
    assert!(Arc::ptr_eq(&limits, &kept));
    // The one request a minute is spent: the kept budget refuses the next.
    assert!(matches!(
        kept.admit("acme", one, 1).0,
        sluice_filters::Decision::Limited { .. }
    ));
    limits.settle(admission.unwrap(), one, 2);
    let changed = build(&yaml(2), Some(&same));
    assert!(!Arc::ptr_eq(
        &limits,
        changed.routes[0].limits.as_ref().unwrap()
    ));
    let text = metrics.encode();
    assert!(
        text.contains(
            "sluice_ratelimit_decisions_total{descriptor=\"header:x-tenant\",result=\"limited\",route=\"chat\"} 1"
        ),
        "{text}"
    );
}
