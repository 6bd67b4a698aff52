use std::time::Duration;

use super::*;

fn with_feedback(feedback: &str) -> String {
    format!("{GOOD}feedback: {feedback}\n")
}

#[test]
fn every_key_and_the_defaults() {
    let c = Config::from_yaml(&with_feedback(
        "{ dir: /var/sluice/feedback, before: 2m, \
         half_life: { upstream_timeout: 96h, cache_miss: 12h, other: 30m } }",
    ))
    .unwrap();
    let f = c.feedback.unwrap();
    assert_eq!(f.dir, std::path::PathBuf::from("/var/sluice/feedback"));
    assert_eq!(f.before, Duration::from_secs(120));
    let h = f.half_lives;
    assert_eq!(
        (h.upstream_timeout, h.cache_miss, h.other),
        (
            Duration::from_secs(96 * 3600),
            Duration::from_secs(12 * 3600),
            Duration::from_secs(1800)
        )
    );

    let d = Config::from_yaml(&with_feedback("{ dir: fb }"))
        .unwrap()
        .feedback
        .unwrap();
    assert_eq!(d.before, Duration::from_secs(300));
    assert_eq!(d.half_lives, sluice_filters::HalfLives::default());
    assert!(Config::from_yaml(GOOD).unwrap().feedback.is_none());
}

#[test]
fn every_bad_value_is_named() {
    let errors = errors_in(&with_feedback(
        "{ dir: ' ', before: 0s, half_life: { upstream_timeout: soon, cache_miss: 0h, other: 5d } }",
    ));
    assert_eq!(
        errors,
        [
            "feedback.dir: must be a directory path",
            "feedback.before: must be greater than 0",
            "feedback.half_life.upstream_timeout: `soon` is not a duration like 250ms or 1s",
            "feedback.half_life.cache_miss: must be greater than 0",
            "feedback.half_life.other: `5d` has unknown unit `d` (use us, ms, s, m or h)",
        ]
    );
}

#[test]
fn an_unknown_key_is_refused_with_its_path() {
    let errors = errors_in(&with_feedback("{ dir: fb, half_life: { timeout: 1h } }"));
    assert_eq!(
        errors,
        [
            "feedback.half_life.timeout: unknown field `timeout`, expected one of \
          `upstream_timeout`, `cache_miss`, `other` at line 18 column 35"
        ]
    );
}
