//! The validated `feedback:`: where scenarios are saved, how much traffic
//! before a breach they hold, and how fast their weight decays.

use std::path::PathBuf;
use std::time::Duration;

use sluice_filters::HalfLives;

/// How much traffic before the breach a scenario holds, by default.
pub(crate) const DEFAULT_BEFORE: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, PartialEq)]
pub struct FeedbackConfig {
    pub dir: PathBuf,
    pub before: Duration,
    pub half_lives: HalfLives,
}
