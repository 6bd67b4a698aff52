//! L4 toxics (Toxiproxy's, by the same names) as an `AsyncRead + AsyncWrite`
//! wrapper, so that they compose with any copy loop. Every toxic acts on the
//! bytes *read* from the stream it wraps: the client's stream for direction
//! `upstream` (bytes going to the server), the server's for `downstream`.
//! Writes pass through. A toxic is chosen once per connection; once its
//! experiment expires or is removed, the connection goes back to plain
//! copying at its next read.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use sluice_control::{FaultGuard, FaultRuntime, Snapshot};
use sluice_filters::{Direction, FaultAction, FaultKind, FaultTarget, RequestView, Toxic};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, Instant, Sleep};

/// Bytes read from the inner stream at once.
const CHUNK: usize = 16 * 1024;
/// How long `reset_peer`, past its timeout, leaves the client's bytes
/// unread before it closes: the kernel answers a close with unread data
/// with a RST instead of a FIN (sluice forbids `unsafe`, so SO_LINGER 0 on
/// pingora's socket is out of reach). A client that talks first (Redis,
/// HTTP) has sent something by then.
const RESET_GRACE: Duration = Duration::from_millis(200);

/// A TCP connection has no request to match headers against.
struct NoRequest;

impl RequestView for NoRequest {
    fn path(&self) -> &str {
        ""
    }
    fn host(&self) -> Option<&str> {
        None
    }
    fn header(&self, _: &str) -> Option<&[u8]> {
        None
    }
}

/// The first tcp experiment that fires for a new connection on `listener`.
pub(super) fn pick(snapshot: &Snapshot, listener: &str, cluster: &str) -> Option<FaultGuard> {
    let target = FaultTarget::<NoRequest> {
        listener,
        route: None,
        cluster: Some(cluster),
        model: None,
        request: None,
    };
    snapshot
        .faults
        .iter()
        .filter(|f| f.experiment.action.kind() == FaultKind::Tcp)
        .find_map(|f| f.try_fire(&target, rand::random::<u64>).ok())
}

/// Wraps both streams of a connection; only the one the toxic reads from
/// (by its direction) gets it. Returns (client, server).
pub(super) fn wrap<C, S>(
    client: C,
    server: S,
    fault: Option<FaultGuard>,
) -> (Toxicated<C>, Toxicated<S>) {
    let Some(guard) = fault else {
        return (Toxicated::plain(client), Toxicated::plain(server));
    };
    let FaultAction::Tcp(toxic) = guard.runtime().experiment.action.clone() else {
        return (Toxicated::plain(client), Toxicated::plain(server));
    };
    let on_client = match &toxic {
        Toxic::Latency { direction, .. }
        | Toxic::Bandwidth { direction, .. }
        | Toxic::Slicer { direction, .. }
        | Toxic::LimitData { direction, .. } => *direction == Direction::Upstream,
        // These end the client's connection: they watch its side.
        Toxic::SlowClose { .. } | Toxic::Timeout { .. } | Toxic::ResetPeer { .. } => true,
    };
    if on_client {
        (
            Toxicated::new(client, toxic, guard),
            Toxicated::plain(server),
        )
    } else {
        (
            Toxicated::plain(client),
            Toxicated::new(server, toxic, guard),
        )
    }
}

pub(super) struct Toxicated<S> {
    inner: S,
    toxic: Option<Active>,
}

struct Active {
    toxic: Toxic,
    /// Held for the connection's life: counts toward `max_active`.
    guard: FaultGuard,
    /// Read from the inner stream, not yet handed on.
    pending: BytesMut,
    /// When the next piece of `pending` may go.
    wait: Option<Pin<Box<Sleep>>>,
    /// Bytes handed on so far (`limit_data`).
    passed: u64,
    /// The inner stream reached EOF (`slow_close` delays saying so).
    eof: bool,
    /// `timeout` / `reset_peer`: when the connection ends.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<S> Toxicated<S> {
    fn plain(inner: S) -> Self {
        Self { inner, toxic: None }
    }

    fn new(inner: S, toxic: Toxic, guard: FaultGuard) -> Self {
        let deadline = match &toxic {
            Toxic::Timeout { timeout } if !timeout.is_zero() => Some(Box::pin(sleep(*timeout))),
            Toxic::ResetPeer { timeout } => Some(Box::pin(sleep(*timeout))),
            _ => None,
        };
        Self {
            inner,
            toxic: Some(Active {
                toxic,
                guard,
                pending: BytesMut::new(),
                wait: None,
                passed: 0,
                eof: false,
                deadline,
            }),
        }
    }

    fn runtime(&self) -> Option<&Arc<FaultRuntime>> {
        self.toxic.as_ref().map(|a| a.guard.runtime())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Toxicated<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        // An experiment removed or expired stops acting on its connections,
        // once what it already held back has gone.
        let stopped = this.runtime().is_some_and(|r| !r.still_on());
        let Some(active) = this.toxic.as_mut() else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        if stopped && active.pending.is_empty() && !active.eof {
            this.toxic = None;
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        active.poll_read(&mut this.inner, cx, buf)
    }
}

impl Active {
    fn poll_read<S: AsyncRead + Unpin>(
        &mut self,
        inner: &mut S,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.toxic {
            Toxic::Timeout { .. } => return self.poll_timeout(cx),
            Toxic::ResetPeer { .. } => {
                if !self.eof {
                    // `eof` marks the timeout as passed for this toxic.
                    if let Some(d) = self.deadline.as_mut() {
                        // tokio rounds a sleep up to its next millisecond
                        // tick; a timeout of 0 must not let a read through.
                        if Instant::now() < d.deadline() && d.as_mut().poll(cx).is_pending() {
                            return Pin::new(inner).poll_read(cx, buf);
                        }
                        d.as_mut().reset(Instant::now() + RESET_GRACE);
                    }
                    self.eof = true;
                }
                return poll_reset(cx, &mut self.deadline);
            }
            _ => {}
        }
        if let Some(wait) = self.wait.as_mut() {
            ready!(wait.as_mut().poll(cx));
            self.wait = None;
        }
        if self.pending.is_empty() {
            if self.eof {
                return Poll::Ready(Ok(()));
            }
            ready!(self.fill(inner, cx))?;
            if self.pending.is_empty() {
                // EOF from the inner stream.
                self.eof = true;
                if let Toxic::SlowClose { delay } = self.toxic {
                    self.wait = Some(Box::pin(sleep(delay)));
                    return self.poll_read(inner, cx, buf);
                }
                return Poll::Ready(Ok(()));
            }
            // A new chunk arrived: latency holds all of it back.
            if let Toxic::Latency {
                latency, jitter, ..
            } = self.toxic
            {
                let spread = jitter.as_secs_f64() * (2.0 * rand::random::<f64>() - 1.0);
                let hold = (latency.as_secs_f64() + spread).max(0.0);
                self.wait = Some(Box::pin(sleep(Duration::from_secs_f64(hold))));
                return self.poll_read(inner, cx, buf);
            }
        }
        self.hand_on(buf)
    }

    /// Reads one chunk from the inner stream into `pending`.
    fn fill<S: AsyncRead + Unpin>(
        &mut self,
        inner: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; CHUNK];
        let mut rb = ReadBuf::new(&mut scratch);
        ready!(Pin::new(inner).poll_read(cx, &mut rb))?;
        self.pending.extend_from_slice(rb.filled());
        Poll::Ready(Ok(()))
    }

    /// Hands the next piece of `pending` to the reader, and sets when the
    /// one after it may go.
    fn hand_on(&mut self, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut n = self.pending.len().min(buf.remaining());
        let mut pause = Duration::ZERO;
        match self.toxic {
            Toxic::Bandwidth { bytes_per_sec, .. } => {
                // A tenth of a second's worth at a time keeps the rate smooth.
                n = n.min((bytes_per_sec / 10).max(1) as usize);
                pause = Duration::from_secs_f64(n as f64 / bytes_per_sec as f64);
            }
            Toxic::Slicer {
                average_size,
                size_variation,
                delay,
                ..
            } => {
                let spread = if size_variation == 0 {
                    0
                } else {
                    rand::random::<u64>() as usize % (2 * size_variation + 1)
                };
                let size = (average_size + spread)
                    .saturating_sub(size_variation)
                    .max(1);
                n = n.min(size);
                pause = delay;
            }
            Toxic::LimitData { bytes, .. } => {
                let left = bytes.saturating_sub(self.passed);
                if left == 0 {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "limit_data: connection closed by fault",
                    )));
                }
                n = n.min(left as usize);
            }
            _ => {}
        }
        buf.put_slice(&self.pending[..n]);
        self.pending.advance(n);
        self.passed += n as u64;
        if !pause.is_zero() {
            self.wait = Some(Box::pin(sleep(pause)));
        }
        Poll::Ready(Ok(()))
    }

    /// `timeout`: nothing goes through; the connection ends at the deadline
    /// (never with a timeout of 0).
    fn poll_timeout(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.deadline.as_mut() {
            Some(d) => {
                ready!(d.as_mut().poll(cx));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "timeout: connection closed by fault",
                )))
            }
            None => Poll::Pending,
        }
    }
}

/// `reset_peer` past its timeout: reads nothing more and ends the
/// connection after [`RESET_GRACE`], with what the client sent meanwhile
/// left unread.
fn poll_reset(
    cx: &mut Context<'_>,
    deadline: &mut Option<Pin<Box<Sleep>>>,
) -> Poll<io::Result<()>> {
    if let Some(d) = deadline.as_mut() {
        ready!(d.as_mut().poll(cx));
    }
    Poll::Ready(Err(io::Error::new(
        io::ErrorKind::ConnectionReset,
        "reset_peer: connection reset by fault",
    )))
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Toxicated<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
