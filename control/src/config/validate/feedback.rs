//! Validation of `feedback:`. Whether the directory is writable is not a
//! question for validation (which reads no file system): the control plane
//! checks it when it starts (see `feedback::prepare`).

use std::path::PathBuf;

use sluice_filters::HalfLives;

use super::super::raw::RawFeedback;
use super::super::typed::{FeedbackConfig, DEFAULT_BEFORE};
use super::Errors;

pub(super) fn feedback(raw: Option<&RawFeedback>, errs: &mut Errors) -> Option<FeedbackConfig> {
    let raw = raw?;
    if raw.dir.trim().is_empty() {
        errs.push("feedback.dir", "must be a directory path");
    }
    let before = errs.duration(
        "feedback.before".into(),
        raw.before.as_deref(),
        DEFAULT_BEFORE,
    );
    let defaults = HalfLives::default();
    let half = raw.half_life.clone().unwrap_or_default();
    let mut life = |key: &str, text: Option<&str>, default| {
        errs.duration(format!("feedback.half_life.{key}"), text, default)
    };
    let half_lives = HalfLives {
        upstream_timeout: life(
            "upstream_timeout",
            half.upstream_timeout.as_deref(),
            defaults.upstream_timeout,
        ),
        cache_miss: life(
            "cache_miss",
            half.cache_miss.as_deref(),
            defaults.cache_miss,
        ),
        other: life("other", half.other.as_deref(), defaults.other),
    };
    Some(FeedbackConfig {
        dir: PathBuf::from(&raw.dir),
        before,
        half_lives,
    })
}
