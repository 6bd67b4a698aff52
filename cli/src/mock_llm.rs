//! The OpenAI-compatible streaming mock LLM server: its options, its handle, and its accept loop.
//!
//! It stands in for a model server in the sandbox, the tests and the benches: HTTP/1.1 and h2c on
//! one port, `/v1/models`, `/v1/chat/completions` and `/v1/completions`, SSE streams paced by a
//! configurable time to first token and inter-token gap, and a seeded share of injected errors.
//! For tests it can also keep every request it reads, or reset every connection it accepts.

mod api;
mod body;
mod openai;
mod record;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use sluice_control::serve_until_cancelled;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use self::api::MockKnobs;
use self::api::Shared;
use self::record::Recorder;
pub use self::record::SeenRequest;

/// How long `stop` lets in-flight answers finish before cutting their connections.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// Pause after a failed accept (e.g. out of file descriptors) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How the mock behaves; `Default` is a quick, error-free model on an ephemeral port.
#[derive(Clone, Debug)]
pub struct MockLlmOptions {
    /// Where to listen; port 0 picks a free one (see [`MockLlm::addr`]).
    pub listen: SocketAddr,
    /// Delay before the first content chunk.
    pub ttft: Duration,
    /// Gap between content chunks.
    pub itl: Duration,
    /// Uniform +- jitter added to each gap (and to ttft), never below zero.
    pub jitter: Duration,
    /// Output tokens per answer, one per content chunk.
    pub tokens: u32,
    /// Share of requests (0.0..=1.0) answered 500 with an OpenAI error body.
    pub error_rate: f64,
    /// Seed for jitter, errors and text: the same seed and request order give the same run.
    pub seed: u64,
    /// Model id reported by `/v1/models` and in answers that do not name one.
    pub model: String,
    /// Keep every request read, any path, for [`MockLlm::seen`] (a shadow's or an upstream's
    /// view in tests). Off by default: the list only grows.
    pub record: bool,
    /// Reset every connection as soon as it is accepted (`SO_LINGER` 0), answering nothing:
    /// a peer that breaks mid-handshake.
    pub reset: bool,
    /// Completions answered at once; those beyond wait in arrival order (FIFO) for a slot, as
    /// on a real server, so a load test meets a knee. A slot is held from the request's read
    /// until its last byte (a stream's TTFT clock starts when it gets one). `None`: no limit.
    pub max_concurrency: Option<NonZeroUsize>,
    /// A stall: every completion read during the window waits for its end before its answer
    /// starts, as a server that freezes (a GC pause, a failover) holds what it receives.
    pub stall: Option<Stall>,
}

/// A window in which the mock answers nothing, timed from the first completion request it
/// reads (not from its start), so that a load run started any time after the mock meets the
/// stall `at` into its own schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// From the first completion request to the stall's start.
    pub at: Duration,
    /// How long it lasts.
    pub lasts: Duration,
}

impl Default for MockLlmOptions {
    fn default() -> Self {
        MockLlmOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(10),
            jitter: Duration::ZERO,
            tokens: 16,
            error_rate: 0.0,
            seed: 0,
            model: "mock-llm".to_owned(),
            record: false,
            reset: false,
            max_concurrency: None,
            stall: None,
        }
    }
}

impl MockLlmOptions {
    /// The default mock answering `tokens` tokens: the first after `ttft_ms`, then one every
    /// `itl_ms` (whole milliseconds, the way tests and benches write them).
    pub fn paced_ms(ttft_ms: u64, itl_ms: u64, tokens: u32) -> Self {
        MockLlmOptions {
            ttft: Duration::from_millis(ttft_ms),
            itl: Duration::from_millis(itl_ms),
            tokens,
            ..MockLlmOptions::default()
        }
    }
}

/// A running mock server. Dropping it cancels the accept loop; [`MockLlm::stop`] also waits for it.
pub struct MockLlm {
    addr: SocketAddr,
    knobs: Arc<MockKnobs>,
    recorder: Arc<Recorder>,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl MockLlm {
    /// Binds `opts.listen` and starts serving; once this returns, connections are accepted.
    pub async fn start(opts: MockLlmOptions) -> std::io::Result<MockLlm> {
        if !(0.0..=1.0).contains(&opts.error_rate) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "error_rate must be within 0.0..=1.0, got {}",
                    opts.error_rate
                ),
            ));
        }
        let listener = TcpListener::bind(opts.listen).await?;
        let addr = listener.local_addr()?;
        info!(%addr, model = %opts.model, "mock llm listening");
        let cancel = CancellationToken::new();
        let shared = Arc::new(Shared::new(opts));
        let knobs = shared.knobs.clone();
        let recorder = shared.recorder.clone();
        // Kept in `task` and joined when the mock stops.
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(accept_loop(listener, shared, cancel.clone()));
        Ok(MockLlm {
            addr,
            knobs,
            recorder,
            cancel,
            task: Some(task),
        })
    }

    /// The address actually bound (the real port when `listen` asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// TTFT and error rate, changeable while serving.
    pub fn knobs(&self) -> Arc<MockKnobs> {
        self.knobs.clone()
    }

    /// The requests read so far, in arrival order; empty unless `record` is on.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.recorder.seen()
    }

    /// [`MockLlm::seen`] once `n` requests have been read, or after `within` with fewer.
    pub async fn wait_seen(&self, n: usize, within: Duration) -> Vec<SeenRequest> {
        self.recorder.wait_for(n, within).await
    }

    /// Stops accepting, lets in-flight answers finish for a short grace, and waits for the loop.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                warn!(error = %e, "mock llm accept loop ended abnormally");
            }
        }
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Accepts until cancelled; owns every connection task so none outlives the server.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, cancel: CancellationToken) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) if shared.opts.reset => reset(stream),
                Ok((stream, _peer)) => {
                    conns.spawn(serve_connection(stream, Arc::clone(&shared), cancel.clone()));
                }
                Err(e) => {
                    warn!(error = %e, "mock llm accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow with every client.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(STOP_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        debug!(
            open = conns.len(),
            "mock llm cutting connections after grace"
        );
    }
    conns.shutdown().await;
    info!("mock llm stopped");
}

/// Drops a connection with a reset instead of a FIN.
fn reset(stream: TcpStream) {
    if let Err(e) = stream.set_zero_linger() {
        debug!(error = %e, "mock llm could not set SO_LINGER");
    }
}

/// Serves one connection (HTTP/1.1 or h2c by prior knowledge); on cancel, closes it gracefully:
/// idle keep-alive connections at once, busy ones after their current answer.
async fn serve_connection(stream: TcpStream, shared: Arc<Shared>, cancel: CancellationToken) {
    // Token chunks are small and timed: Nagle would hold them back and blur the pacing.
    if let Err(e) = stream.set_nodelay(true) {
        debug!(error = %e, "mock llm could not set TCP_NODELAY");
    }
    let service = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        async move { api::handle(req, &shared).await }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let result = serve_until_cancelled(conn, &cancel, None).await;
    // Clients that hang up mid-stream land here; that is normal for a test server, hence debug.
    if let Err(e) = result {
        debug!(error = %e, "mock llm connection ended with an error");
    }
}
