//! `feedback:` as written: where a breach's traffic is saved as a scenario.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawFeedback {
    /// The directory the scenarios go to, one subdirectory each; created at
    /// start when missing, and checked there to be writable.
    pub dir: String,
    /// How much traffic before the breach is saved (default 5m).
    pub before: Option<String>,
    /// How fast each kind of scenario's weight decays.
    pub half_life: Option<RawHalfLife>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawHalfLife {
    /// Default 72h.
    pub upstream_timeout: Option<String>,
    /// Default 24h.
    pub cache_miss: Option<String>,
    /// Default 48h.
    pub other: Option<String>,
}
