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
