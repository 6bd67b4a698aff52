//! Capacity search: the pure part (the monotone interpolation the search
//! reads its next rate from, the early stop, the three signals: P99
//! sensitivity per token, the throughput knee, the cost of 1k tokens, and
//! the joint score that recommends a rate), and the driver that runs each
//! stage as a load run.

mod drive;
mod knee;
mod pchip;
mod saturation;
mod score;
mod search;
mod signals;
mod stage;
mod watch;

pub use drive::{
    search, CapacityError, CapacityOptions, CapacityReport, KneeResult, Observer, SlaBound,
    CAPACITY_VERSION,
};
pub use knee::{knee, Knee, DEFAULT_KNEE_BOUND};
pub use pchip::Pchip;
pub use saturation::{over_saturated, stalled, trend, Trend};
pub use score::{
    margin, recommend, score, Bounds, Recommendation, Scored, SlaCheck, StageSignals, Weights,
    DEFAULT_SLOPE_BOUND_MS,
};
pub use search::{next as next_stage, Next, Probe, SearchRules};
pub use signals::StageProgress;
// The slope is `sluice_filters`' (the proxy's shedding reads the same
// definition); re-exported where the capacity API always had it.
pub use sluice_filters::{
    p99_token_slope, slope_interval, theil_sen, TokenBin, TokenSlope, SLOPE_MIN_REQUESTS,
};
pub use stage::{measure, worst, Purpose, StageResult};
