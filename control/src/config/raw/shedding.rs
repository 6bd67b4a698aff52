//! `routes[].shedding` as written.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::RawPercent;

/// Adaptive shedding: answer the lowest priorities 503 while the route's
/// clusters are over a bound.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawShedding {
    pub priority: RawPriority,
    /// At least one: the signals watched and the value each must stay under.
    #[serde(default)]
    pub bounds: RawShedBounds,
    /// The signals are read over this much of the recent past (default 10s).
    pub window: Option<String>,
    /// How often the signals are read (default 1s).
    pub interval: Option<String>,
    /// How long every signal must stay under bound × recovery before one
    /// level is restored (default 5s).
    pub hold: Option<String>,
    /// The share of each bound a signal must fall to before the hold starts
    /// (default 80%).
    pub recovery: Option<RawPercent>,
    /// Steps a level is restored in (default 4: a quarter of the shed
    /// priority is let back in at a time).
    pub restore_steps: Option<u64>,
    /// `retry-after` of a shed request (default 2s).
    pub retry_after: Option<String>,
    /// Answers a latency signal needs in its window to be read (default 20).
    pub min_requests: Option<u64>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPriority {
    /// Where a request's priority is read: `header:NAME` (default
    /// `header:x-priority`) or `model`.
    pub descriptor: Option<String>,
    /// Highest first; the first is never shed.
    #[serde(default)]
    pub levels: Vec<String>,
    /// The priority of a request without one of `levels` (default the last).
    pub default: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawShedBounds {
    /// `0.8ms`: the P99 cost per output token over its calm baseline.
    pub token_cost_excess_p99: Option<String>,
    /// `2s`.
    pub ttft_p95: Option<String>,
    /// Requests waiting at the model servers (their scraped queue gauge).
    pub queue: Option<u64>,
    /// `95%` of the fullest GPU's memory.
    pub gpu_memory: Option<RawPercent>,
}

impl RawShedBounds {
    pub fn is_empty(&self) -> bool {
        *self == RawShedBounds::default()
    }
}
