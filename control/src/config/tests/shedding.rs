//! `routes[].shedding`: the defaults, the values read, and every error
//! with its full text.

use std::time::Duration;

use sluice_filters::{Descriptor, Signals};

use super::*;

const STICKY: &str = "sticky: { header: X-Session-Id }";

const STABLE: &str = "endpoints: [127.0.0.1:8000],";

/// The good config with `shedding` on its route, whose cluster `llm-stable`
/// has its queue gauge scraped.
fn with_shedding(shedding: &str) -> String {
    without_scrape(shedding).replacen(STABLE, &format!("{STABLE} metrics_path: /metrics,"), 1)
}

fn without_scrape(shedding: &str) -> String {
    assert!(GOOD.contains(STICKY) && GOOD.contains(STABLE));
    GOOD.replacen(STICKY, &format!("{STICKY}\n    shedding: {shedding}"), 1)
}

#[test]
fn shedding_reads_its_bounds_and_defaults_the_rest() {
    let text =
        with_shedding("{ priority: { levels: [interactive, batch] }, bounds: { ttft_p95: 2s } }");
    let s = Config::from_yaml(&text).unwrap().routes[0]
        .shedding
        .clone()
        .unwrap();
    assert_eq!(s.descriptor, Descriptor::Header("x-priority".into()));
    assert_eq!(s.levels, ["interactive", "batch"]);
    // Without a default a request of no known priority is the lowest.
    assert_eq!(s.default, 1);
    assert_eq!(
        s.bounds,
        Signals {
            ttft_p95: Some(2000.0),
            ..Signals::default()
        }
    );
    assert_eq!(
        (s.window, s.interval, s.hold, s.retry_after),
        (
            Duration::from_secs(10),
            Duration::from_secs(1),
            Duration::from_secs(5),
            Duration::from_secs(2)
        )
    );
    assert_eq!((s.recovery, s.min_requests, s.restore_steps), (0.8, 20, 4));
    let p = s.policy();
    assert_eq!(
        (p.max_level, p.steps, p.hold_ms, p.recovery),
        (1, 4, 5000, 0.8)
    );

    let text = with_shedding(
        "{ priority: { descriptor: model, levels: [gold, silver, bronze], default: silver }, \
         bounds: { token_cost_excess_p99: 0.8ms, ttft_p95: 1500ms, queue: 16, gpu_memory: 95% }, \
         window: 5s, interval: 250ms, hold: 3s, recovery: 50%, retry_after: 1s, min_requests: 5, \
         restore_steps: 1 }",
    );
    let s = Config::from_yaml(&text).unwrap().routes[0]
        .shedding
        .clone()
        .unwrap();
    assert_eq!(s.descriptor, Descriptor::Model);
    assert_eq!(s.default, 1);
    assert_eq!(
        s.bounds,
        Signals {
            token_cost_excess_p99: Some(0.8),
            ttft_p95: Some(1500.0),
            queue: Some(16.0),
            gpu_memory: Some(95.0),
        }
    );
    assert_eq!(
        (s.window, s.interval, s.hold, s.retry_after),
        (
            Duration::from_secs(5),
            Duration::from_millis(250),
            Duration::from_secs(3),
            Duration::from_secs(1)
        )
    );
    assert_eq!(
        (
            s.recovery,
            s.min_requests,
            s.policy().max_level,
            s.policy().steps
        ),
        (0.5, 5, 2, 1)
    );
}

#[test]
fn shedding_without_a_bound_is_refused() {
    assert_eq!(
        errors_in(&with_shedding("{ priority: { levels: [interactive, batch] } }")),
        ["routes[0].shedding: no bound set (token_cost_excess_p99, ttft_p95, queue or gpu_memory)"]
    );
    assert_eq!(
        errors_in(&with_shedding(
            "{ priority: { levels: [interactive, batch] }, bounds: {} }"
        )),
        ["routes[0].shedding: no bound set (token_cost_excess_p99, ttft_p95, queue or gpu_memory)"]
    );
}

#[test]
fn every_bad_shedding_value_is_named_with_its_path() {
    assert_eq!(
        errors_in(&with_shedding(
            "{ priority: { descriptor: route, levels: [batch], default: bulk }, \
             bounds: { token_cost_excess_p99: 0ms, ttft_p95: soon, queue: 0, gpu_memory: 120% }, \
             window: 2m, hold: 0s, recovery: 0%, retry_after: 1 parsec, min_requests: 0, \
             restore_steps: 21 }"
        )),
        [
            "routes[0].shedding.priority.descriptor: unknown descriptor `route` (model or header:NAME)",
            "routes[0].shedding.priority.levels: at least two priorities are needed, highest first \
             (the first is never shed), found 1",
            "routes[0].shedding.priority.default: `bulk` is not one of the levels (batch)",
            "routes[0].shedding.bounds.token_cost_excess_p99: must be greater than 0",
            "routes[0].shedding.bounds.ttft_p95: `soon` is not a duration like 250ms or 1s",
            "routes[0].shedding.bounds.queue: must be at least 1, found 0",
            "routes[0].shedding.bounds.gpu_memory: 120 is not within 0..=100",
            "routes[0].shedding.window: 2m is over the 60s maximum",
            "routes[0].shedding.recovery: must be greater than 0%",
            "routes[0].shedding.restore_steps: must be within 1..=20, found 21",
            "routes[0].shedding.min_requests: must be at least 1, found 0",
            "routes[0].shedding.hold: must be greater than 0",
            "routes[0].shedding.retry_after: `1 parsec` has unknown unit ` parsec` (use us, ms, s, m or h)",
        ]
    );
    assert_eq!(
        errors_in(&with_shedding(
            "{ priority: { levels: [interactive, \"\", interactive] }, bounds: { queue: 4 } }"
        )),
        [
            "routes[0].shedding.priority.levels[1]: must not be empty",
            "routes[0].shedding.priority.levels[2]: duplicate priority `interactive` (first at \
             routes[0].shedding.priority.levels[0])",
        ]
    );
}

#[test]
fn a_queue_bound_needs_a_scraped_cluster() {
    assert_eq!(
        errors_in(&without_scrape(
            "{ priority: { levels: [interactive, batch] }, bounds: { queue: 4 } }"
        )),
        [
            "routes[0].shedding.bounds.queue: no cluster of the route's split has `metrics_path`: \
          its queue gauge is not scraped"
        ]
    );
}

#[test]
fn unknown_shedding_keys_are_refused() {
    assert_eq!(
        errors_in(&with_shedding(
            "{ priority: { levels: [a, b] }, bounds: { ttft_p99: 1s } }"
        )),
        [
            "routes[0].shedding.bounds.ttft_p99: unknown field `ttft_p99`, expected one of \
          `token_cost_excess_p99`, `ttft_p95`, `queue`, `gpu_memory` at line 18 column 57"
        ]
    );
    assert_eq!(
        errors_in(&with_shedding(
            "{ priority: { levels: [a, b] }, bounds: { queue: 1 }, cooldown: 1s }"
        )),
        [
            "routes[0].shedding.cooldown: unknown field `cooldown`, expected one of `priority`, \
          `bounds`, `window`, `interval`, `hold`, `recovery`, `restore_steps`, `retry_after`, \
          `min_requests` \
          at line 18 column 69"
        ]
    );
    assert_eq!(
        errors_in(&with_shedding("{ bounds: { queue: 1 } }")),
        ["routes[0].shedding: missing field `priority` at line 18 column 15"]
    );
}
