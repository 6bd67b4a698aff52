//! Capacity search, the pure part: the monotone interpolation the search
//! reads its next rate from, and the three signals (P99 sensitivity per
//! token, the throughput knee, the cost of 1k tokens) with the joint score
//! that recommends a rate.

mod knee;
mod pchip;
mod saturation;
mod score;
mod search;
mod slope;

pub use knee::{knee, Knee, DEFAULT_KNEE_BOUND};
pub use pchip::Pchip;
pub use saturation::{over_saturated, trend, Trend};
pub use score::{
    margin, recommend, score, Bounds, Recommendation, Scored, SlaCheck, StageSignals, Weights,
    DEFAULT_SLOPE_BOUND_MS,
};
pub use search::{next as next_stage, Next, Probe, SearchRules};
pub use slope::{p99_token_slope, theil_sen, TokenBin, TokenSlope};
