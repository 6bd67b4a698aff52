//! Shared pieces of sluice's load benches: percentiles and a streaming
//! client that timestamps every SSE chunk.

mod sse_client;
mod stats;

pub use sse_client::{read_stream, stream_once, StreamTiming, CHAT_BODY};
pub use stats::{percentile, Summary};
