//! `clusters[].outlier_detection` and `circuit_breakers`: Envoy's defaults for
//! what is not, and every error with its path.

use super::*;

const STABLE: &str = "timeouts: { connect: 1s, first_byte: 120s, idle: 4s } }";

fn with_outlier(block: &str) -> String {
    GOOD.replacen(
        STABLE,
        &format!("timeouts: {{ connect: 1s, first_byte: 120s, idle: 4s }}, outlier_detection: {block} }}"),
        1,
    )
}

#[test]
fn outlier_detection_is_off_unless_set_and_defaults_to_envoys() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(c.clusters[0].outlier_detection, None);
    let c = Config::from_yaml(&with_outlier("{}")).unwrap();
    assert_eq!(
        c.clusters[0].outlier_detection,
        Some(sluice_filters::DEFAULT_OUTLIER_POLICY)
    );
    let c = Config::from_yaml(&with_outlier(
        "{ consecutive_5xx: 3, interval: 5s, base_ejection: 1s, max_ejection_time: 1m, max_ejection: 50% }",
    ))
    .unwrap();
    assert_eq!(
        c.clusters[0].outlier_detection,
        Some(sluice_filters::OutlierPolicy {
            consecutive_5xx: 3,
            interval_ms: 5_000,
            base_ejection_ms: 1_000,
            max_ejection_time_ms: 60_000,
            max_ejection_percent: 50.0,
        })
    );
}

#[test]
fn every_bad_outlier_setting_is_named_with_its_path() {
    assert_eq!(
        errors_in(&with_outlier(
            "{ consecutive_5xx: 0, interval: soon, base_ejection: 0s, max_ejection: 150% }"
        )),
        [
            "clusters[0].outlier_detection.consecutive_5xx: must be at least 1",
            "clusters[0].outlier_detection.interval: `soon` is not a duration like 250ms or 1s",
            "clusters[0].outlier_detection.base_ejection: must be greater than 0",
            "clusters[0].outlier_detection.max_ejection: 150 is not within 0..=100",
        ]
    );
    assert_eq!(
        errors_in(&with_outlier("{ consecutive_errors: 5 }")).len(),
        1,
        "unknown keys are refused"
    );
    let cache = "{ name: redis, kind: cache, endpoints: [127.0.0.1:6379] }";
    assert_eq!(
        errors_of(
            cache,
            "{ name: redis, kind: cache, endpoints: [127.0.0.1:6379], outlier_detection: {} }"
        ),
        ["clusters[2].outlier_detection: not allowed on a cache cluster (its answers have no HTTP status)"]
    );
}

#[test]
fn circuit_breakers_default_to_1024_and_refuse_0_and_cache_clusters() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(
        c.clusters[0].circuit_breakers,
        sluice_filters::BreakerLimits {
            max_requests: 1024,
            max_pending: 1024,
            max_connections: 1024,
        }
    );
    let stable = "timeouts: { connect: 1s, first_byte: 120s, idle: 4s } }";
    let with = |block: &str| {
        GOOD.replacen(
            stable,
            &format!("timeouts: {{ connect: 1s, first_byte: 120s, idle: 4s }}, circuit_breakers: {block} }}"),
            1,
        )
    };
    let c = Config::from_yaml(&with("{ max_requests: 8 }")).unwrap();
    assert_eq!(
        c.clusters[0].circuit_breakers,
        sluice_filters::BreakerLimits {
            max_requests: 8,
            max_pending: 1024,
            max_connections: 1024,
        }
    );
    let c = Config::from_yaml(&with("{ max_connections: 10 }")).unwrap();
    assert_eq!(
        c.clusters[0].circuit_breakers,
        sluice_filters::BreakerLimits {
            max_requests: 1024,
            max_pending: 1024,
            max_connections: 10,
        }
    );
    assert_eq!(
        errors_in(&with(
            "{ max_requests: 0, max_pending: 0, max_connections: 0 }"
        )),
        [
            "clusters[0].circuit_breakers.max_requests: must be at least 1",
            "clusters[0].circuit_breakers.max_pending: must be at least 1",
            "clusters[0].circuit_breakers.max_connections: must be at least 1",
        ]
    );
    assert_eq!(
        errors_in(&with("{ max_connection: 10 }")),
        ["clusters[0].circuit_breakers.max_connection: unknown field `max_connection`, expected one of `max_requests`, `max_pending`, `max_connections` at line 9 column 82"]
    );
    let cache = "{ name: redis, kind: cache, endpoints: [127.0.0.1:6379] }";
    assert_eq!(
        errors_of(
            cache,
            "{ name: redis, kind: cache, endpoints: [127.0.0.1:6379], circuit_breakers: { max_connections: 4 } }"
        ),
        ["clusters[2].circuit_breakers: not allowed on a cache cluster (tcp listeners do not apply them)"]
    );
}

#[test]
fn the_retry_budget_defaults_to_envoys_and_reads_a_share_and_a_floor() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(
        c.clusters[0].retry_budget,
        sluice_filters::DEFAULT_RETRY_BUDGET
    );
    let stable = "timeouts: { connect: 1s, first_byte: 120s, idle: 4s } }";
    let with = |block: &str| {
        GOOD.replacen(
            stable,
            &format!(
                "timeouts: {{ connect: 1s, first_byte: 120s, idle: 4s }}, retry_budget: {block} }}"
            ),
            1,
        )
    };
    let c = Config::from_yaml(&with("{ percent: 50%, min_concurrent: 0 }")).unwrap();
    assert_eq!(
        c.clusters[0].retry_budget,
        sluice_filters::RetryBudget {
            percent: 50.0,
            min_concurrent: 0
        }
    );
    assert_eq!(
        errors_in(&with("{ percent: 120% }")),
        ["clusters[0].retry_budget.percent: 120 is not within 0..=100"]
    );
    let cache = "{ name: redis, kind: cache, endpoints: [127.0.0.1:6379] }";
    assert_eq!(
        errors_of(
            cache,
            "{ name: redis, kind: cache, endpoints: [127.0.0.1:6379], retry_budget: {} }"
        ),
        ["clusters[2].retry_budget: not allowed on a cache cluster (tcp listeners do not retry)"]
    );
}
