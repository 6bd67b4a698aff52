//! `listeners[].limits` on the accepted connection, before pingora parses
//! it. pingora 0.9 answers an oversized head with an empty 400 before any
//! sluice phase, takes heads up to ~1 MiB and has no timeout on a
//! connection's first head; so for HTTP/1 this layer reads each request
//! head itself (under `header_timeout`, checked by `filters::HeadScan`),
//! answers 414/431 with a lingering close, and hands the head to pingora as
//! the session's pipelined prefix (pingora's public way to give a session
//! bytes already read). Between requests it waits `idle_timeout`. HTTP/2
//! (h2c preface or ALPN) goes to pingora's own loop untouched.
//!
//! Once the service stops accepting (a stop, or a graceful upgrade's
//! hand-over), a connection waiting for its next request is not cut at
//! once: a busy client may be sending it that very moment, and cutting
//! then fails it. It waits [`STOP_IDLE`] more; a request that comes is
//! answered with `Connection: close`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use pingora::apps::{HttpServerApp, ServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{Stream, ALPN};
use pingora::server::ShutdownWatch;
use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};
use sluice_control::{ListenerLimits, Runtimes};
use sluice_filters::{register_family, HeadScan, HeadVerdict};

use crate::lifecycle::Lifecycle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// How long a refused connection is still read (and what it sends thrown
/// away) after the answer, so that the client reads the status rather than
/// a reset.
const LINGER: Duration = Duration::from_secs(2);
/// How long a connection may still bring its next request once the
/// service stops accepting.
pub(crate) const STOP_IDLE: Duration = Duration::from_secs(1);

/// The families of every listener's limits, registered once.
#[derive(Clone)]
pub(crate) struct LimitFamilies {
    limited: IntCounterVec,
    connections: IntGaugeVec,
}

impl LimitFamilies {
    pub(crate) fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            limited: register_family(
                registry,
                "sluice_listener_limited_total",
                "Client connections a listeners[].limits entry acted on, by limit: max_connections (closed at accept), max_uri_bytes (414), max_header_bytes (431), header_timeout and idle_timeout (closed).",
                &["listener", "limit"],
            )?,
            connections: register_family(
                registry,
                "sluice_listener_connections",
                "Client connections open on an http or https listener.",
                &["listener"],
            )?,
        })
    }
}

/// One listener's handles.
struct Counters {
    max_connections: IntCounter,
    max_uri_bytes: IntCounter,
    max_header_bytes: IntCounter,
    header_timeout: IntCounter,
    idle_timeout: IntCounter,
    open: IntGauge,
}

/// A pingora HTTP app behind the limits of its listener.
pub(crate) struct Limited<A> {
    inner: Arc<A>,
    limits: ListenerLimits,
    /// Plain listener with h2c on: look for the HTTP/2 preface.
    h2c: bool,
    open: AtomicUsize,
    counters: Counters,
    /// The listener's runtime, watched for its tasks from its first
    /// connection on (pingora makes it when the service starts).
    runtimes: Arc<Runtimes>,
    runtime_name: String,
    watched: Once,
    /// Counts the connection open, for a drain after a hand-over.
    lifecycle: Arc<Lifecycle>,
}

impl<A> Limited<A> {
    pub(crate) fn new(
        inner: A,
        listener: &str,
        limits: ListenerLimits,
        h2c: bool,
        families: &LimitFamilies,
        runtimes: Arc<Runtimes>,
        lifecycle: Arc<Lifecycle>,
    ) -> Self {
        let limit = |name: &str| families.limited.with_label_values(&[listener, name]);
        Self {
            inner: Arc::new(inner),
            limits,
            h2c,
            lifecycle,
            open: AtomicUsize::new(0),
            counters: Counters {
                max_connections: limit("max_connections"),
                max_uri_bytes: limit("max_uri_bytes"),
                max_header_bytes: limit("max_header_bytes"),
                header_timeout: limit("header_timeout"),
                idle_timeout: limit("idle_timeout"),
                open: families.connections.with_label_values(&[listener]),
            },
            runtimes,
            runtime_name: format!("listener:{listener}"),
            watched: Once::new(),
        }
    }
}

/// Holds one of the listener's connection slots.
struct Slot<'a>(&'a AtomicUsize, &'a IntGauge);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        self.1.dec();
    }
}

/// Why no head was read.
enum NoHead {
    /// The client closed, or the service is stopping.
    Gone,
    Timeout,
    Refused(HeadVerdict),
}

#[async_trait]
impl<A> ServerApp for Limited<A>
where
    A: HttpServerApp + Send + Sync + 'static,
{
    async fn process_new(
        self: &Arc<Self>,
        mut stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        self.watched.call_once(|| {
            self.runtimes
                .watch(&self.runtime_name, tokio::runtime::Handle::current());
        });
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.limits.max_connections {
            self.open.fetch_sub(1, Ordering::AcqRel);
            self.counters.max_connections.inc();
            return None;
        }
        self.counters.open.inc();
        let _slot = Slot(&self.open, &self.counters.open);
        let _open = self.lifecycle.connection();
        let accepted = Instant::now();
        if self.is_h2(&mut stream, accepted).await? {
            return ServerApp::process_new(&self.inner, stream, shutdown).await;
        }
        let mut settings = None;
        let mut first = true;
        loop {
            let head = match self.read_head(&mut stream, first, accepted, shutdown).await {
                Ok(head) => head,
                Err(NoHead::Gone) => return None,
                Err(NoHead::Timeout) => {
                    if first {
                        self.counters.header_timeout.inc();
                    }
                    return None;
                }
                Err(NoHead::Refused(verdict)) => {
                    match verdict {
                        HeadVerdict::UriTooLong => self.counters.max_uri_bytes.inc(),
                        _ => self.counters.max_header_bytes.inc(),
                    }
                    refuse(stream, verdict).await;
                    return None;
                }
            };
            let mut session = ServerSession::new_http1(stream);
            session.set_keepalive(if *shutdown.borrow() {
                None
            } else {
                Some(self.limits.idle_timeout.as_secs().max(1))
            });
            if let Some(settings) = settings.take() {
                pingora::apps::HttpPersistentSettings::apply_to_session(settings, &mut session);
            }
            session.set_pipelined_prefix(head);
            let reused = self.inner.process_new_http(session, shutdown).await?;
            let (next, next_settings) = reused.consume();
            stream = next;
            settings = next_settings;
            first = false;
        }
    }

    async fn cleanup(&self) {
        self.inner.http_cleanup().await;
    }
}

impl<A> Limited<A> {
    /// Whether the connection speaks HTTP/2: ALPN on TLS, the preface
    /// (peeked, not read) on a plain listener with h2c. `None`: it closed or
    /// sent nothing within `header_timeout`.
    async fn is_h2(&self, stream: &mut Stream, accepted: Instant) -> Option<bool> {
        if stream.get_ssl_digest().is_some() {
            return Some(matches!(stream.selected_alpn_proto(), Some(ALPN::H2)));
        }
        if !self.h2c {
            return Some(false);
        }
        let mut buf = [0u8; H2_PREFACE.len()];
        let deadline = accepted + self.limits.header_timeout;
        match timeout_at(deadline, stream.try_peek(&mut buf)).await {
            Ok(Ok(true)) => Some(buf == H2_PREFACE),
            Ok(Ok(false)) => Some(false),
            Ok(Err(_)) => None,
            Err(_) => {
                self.counters.header_timeout.inc();
                None
            }
        }
    }

    /// Reads one request head (and whatever came with it). The first head
    /// of a connection must be whole `header_timeout` after accept; a later
    /// one may be `idle_timeout` in coming, then has `header_timeout` from
    /// its first byte.
    async fn read_head(
        &self,
        stream: &mut Stream,
        first: bool,
        accepted: Instant,
        shutdown: &ShutdownWatch,
    ) -> Result<BytesMut, NoHead> {
        let mut buf = BytesMut::with_capacity(4096);
        let mut scan = HeadScan::new(self.limits.head);
        let mut deadline = if first {
            accepted + self.limits.header_timeout
        } else {
            Instant::now() + self.limits.idle_timeout
        };
        let mut shutdown = shutdown.clone();
        let mut stopping = *shutdown.borrow_and_update();
        if stopping {
            deadline = deadline.min(Instant::now() + STOP_IDLE);
        }
        loop {
            if buf.capacity() - buf.len() < 1024 {
                buf.reserve(4096);
            }
            let read = tokio::select! {
                biased;
                read = timeout_at(deadline, stream.read_buf(&mut buf)) => read,
                changed = shutdown.changed(), if !stopping && buf.is_empty() => {
                    // A stop, or the watch gone: nothing is accepted any more.
                    if changed.is_err() || *shutdown.borrow_and_update() {
                        stopping = true;
                        deadline = deadline.min(Instant::now() + STOP_IDLE);
                    }
                    continue;
                }
            };
            match read {
                Err(_) if stopping && buf.is_empty() => return Err(NoHead::Gone),
                Err(_) if !first && buf.is_empty() => {
                    self.counters.idle_timeout.inc();
                    return Err(NoHead::Gone);
                }
                Err(_) => return Err(NoHead::Timeout),
                Ok(Ok(0)) | Ok(Err(_)) => return Err(NoHead::Gone),
                Ok(Ok(n)) => {
                    if !first && buf.len() == n {
                        // The next request began: its head has header_timeout.
                        deadline = Instant::now() + self.limits.header_timeout;
                    }
                }
            }
            match scan.feed(&buf) {
                HeadVerdict::Partial => {}
                HeadVerdict::Complete(_) => return Ok(buf),
                refused => return Err(NoHead::Refused(refused)),
            }
        }
    }
}

/// Answers a refused head and closes the connection, reading (and
/// dropping) what the client still sends for up to [`LINGER`].
async fn refuse(mut stream: Stream, verdict: HeadVerdict) {
    let (status, reason, error) = match verdict {
        HeadVerdict::UriTooLong => (414, "URI Too Long", "uri_too_long"),
        _ => (431, "Request Header Fields Too Large", "header_too_large"),
    };
    let body = format!(
        "{{\"error\":\"{error}\",\"message\":\"the request head is over this listener's limits\"}}"
    );
    let answer = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() || stream.flush().await.is_err() {
        return;
    }
    let _ = AsyncWriteExt::shutdown(&mut stream).await;
    let deadline = Instant::now() + LINGER;
    let mut sink = vec![0u8; 16 * 1024];
    while let Ok(Ok(n)) = timeout_at(deadline, stream.read(&mut sink)).await {
        if n == 0 {
            break;
        }
    }
}
