//! Shared pieces of sluice's load benches: percentiles and a streaming
//! client that timestamps every SSE chunk.

mod sse_client;
mod stats;

pub use sse_client::{stream_once, StreamTiming};
pub use stats::{percentile, Summary};
