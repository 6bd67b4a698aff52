//! `clusters[].outlier_detection`: off unless set, Envoy's defaults for
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
