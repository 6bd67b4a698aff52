//! Shared pieces of sluice's load benches: percentiles, the client runtime, a
//! streaming client that timestamps every SSE chunk, the integrity run, the soak and
//! the unary gRPC bench's server and client.

pub mod grpc;
pub mod integrity;
mod procs;
pub mod soak;
mod sse_client;
mod stats;

pub use procs::{spawn, wait_listening, Proc};
pub use sse_client::{
    read_stream, stream_many, stream_once, HttpClient, PooledTimings, StreamTiming, CHAT_BODY,
};
pub use stats::{percentile, Summary};

/// The runtime the load benches drive their clients on: one worker thread, the same in
/// every bench so that their figures compare.
pub fn client_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
}

/// A loopback port free at the moment of asking.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
