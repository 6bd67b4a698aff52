//! Shared pieces of sluice's load benches: percentiles and a streaming
//! client that timestamps every SSE chunk.

mod sse_client;
mod stats;

pub use sse_client::{read_stream, stream_once, StreamTiming, CHAT_BODY};
pub use stats::{percentile, Summary};

/// A loopback port free at the moment of asking.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
