//! L4 toxics (Toxiproxy's, by the same names) as an `AsyncRead + AsyncWrite`
//! wrapper, so that they compose with any copy loop. Every toxic acts on the
//! bytes *read* from the stream it wraps: the client's stream for direction
//! `upstream` (bytes going to the server), the server's for `downstream`.
//! Writes pass through. A toxic is chosen when a connection opens; an
//! experiment added while it is open is tried for it once (its `percent`
//! rolled once, Toxiproxy's `toxicity`) and, when it fires, taken up at the
//! next read of the side it acts on, as Toxiproxy applies a toxic to the
//! connections already open. One toxic acts at a time per connection. Once
//! its experiment expires or is removed, the connection goes back to plain
//! copying at its next read.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use sluice_control::{FaultGuard, FaultRuntime, Snapshot, SnapshotStore};
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

/// The tcp experiments of a snapshot.
fn tcp_faults(snapshot: &Snapshot) -> impl Iterator<Item = &Arc<FaultRuntime>> {
    snapshot
        .faults
        .iter()
        .filter(|f| f.experiment.action.kind() == FaultKind::Tcp)
}

fn target<'a>(listener: &'a str, cluster: &'a str) -> FaultTarget<'a, NoRequest> {
    FaultTarget::<NoRequest> {
        listener,
        route: None,
        cluster: Some(cluster),
        model: None,
        request: None,
    }
}

/// The first tcp experiment that fires for a new connection on `listener`.
pub(super) fn pick(snapshot: &Snapshot, listener: &str, cluster: &str) -> Option<FaultGuard> {
    let target = target(listener, cluster);
    tcp_faults(snapshot).find_map(|f| f.try_fire(&target, rand::random::<u64>).ok())
}

/// Which stream of a connection a toxic reads from: 0 the client's, 1 the
/// server's.
fn side_of(toxic: &Toxic) -> usize {
    let on_client = match toxic {
        Toxic::Latency { direction, .. }
        | Toxic::Bandwidth { direction, .. }
        | Toxic::Slicer { direction, .. }
        | Toxic::LimitData { direction, .. } => *direction == Direction::Upstream,
        // These end the client's connection: they watch its side.
        Toxic::SlowClose { .. } | Toxic::Timeout { .. } | Toxic::ResetPeer { .. } => true,
    };
    usize::from(!on_client)
}

/// The experiments added while one connection is open. Each side asks at
/// its reads while it has no toxic; a new snapshot is looked through once.
pub(super) struct Late {
    store: Arc<SnapshotStore>,
    listener: String,
    cluster: String,
    /// The address of `state.seen` (held there, so never reused while
    /// equal) and whether a side has a toxic waiting: a read with nothing
    /// new takes no lock.
    seen_at: AtomicUsize,
    waiting: [AtomicBool; 2],
    state: Mutex<LateState>,
}

struct LateState {
    /// The snapshot last looked through.
    seen: Arc<Snapshot>,
    /// The experiments tried for this connection and still in the config
    /// (held, so that a new one cannot reuse an old one's address).
    tried: Vec<Arc<FaultRuntime>>,
    /// A toxic that fired, waiting for its side's next read.
    handed: [Option<(Toxic, FaultGuard)>; 2],
}

impl Late {
    /// For a connection that opened on `at`: its experiments count as tried.
    pub(super) fn new(
        store: Arc<SnapshotStore>,
        listener: &str,
        cluster: &str,
        at: Arc<Snapshot>,
    ) -> Arc<Late> {
        let tried = tcp_faults(&at).cloned().collect();
        Arc::new(Late {
            store,
            listener: listener.to_owned(),
            cluster: cluster.to_owned(),
            seen_at: AtomicUsize::new(Arc::as_ptr(&at) as usize),
            waiting: [AtomicBool::new(false), AtomicBool::new(false)],
            state: Mutex::new(LateState {
                seen: at,
                tried,
                handed: [None, None],
            }),
        })
    }

    /// A toxic for `side` that fired since the connection opened.
    fn take(&self, side: usize) -> Option<(Toxic, FaultGuard)> {
        let now = self.store.load();
        let waiting = self.waiting.get(side)?;
        if Arc::as_ptr(&now) as usize == self.seen_at.load(Ordering::Acquire)
            && !waiting.load(Ordering::Acquire)
        {
            return None;
        }
        // Poisoned only by a panic in here: no late toxics then.
        let mut state = self.state.lock().ok()?;
        if !Arc::ptr_eq(&state.seen, &now) {
            let LateState { tried, handed, .. } = &mut *state;
            tried.retain(|t| tcp_faults(&now).any(|f| Arc::ptr_eq(f, t)));
            let target = target(&self.listener, &self.cluster);
            for f in tcp_faults(&now) {
                if tried.iter().any(|t| Arc::ptr_eq(t, f)) {
                    continue;
                }
                tried.push(f.clone());
                let Ok(guard) = f.try_fire(&target, rand::random::<u64>) else {
                    continue;
                };
                let FaultAction::Tcp(toxic) = guard.runtime().experiment.action.clone() else {
                    continue;
                };
                let to = side_of(&toxic);
                if handed[to].is_none() {
                    handed[to] = Some((toxic, guard));
                    self.waiting[to].store(true, Ordering::Release);
                }
            }
            self.seen_at
                .store(Arc::as_ptr(&now) as usize, Ordering::Release);
            state.seen = now;
        }
        waiting.store(false, Ordering::Release);
        state.handed.get_mut(side)?.take()
    }
}

/// Wraps both streams of a connection; only the one the toxic reads from
/// (by its direction) gets it. With `late`, each side takes up a toxic
/// added while the connection is open. Returns (client, server).
pub(super) fn wrap<C, S>(
    client: C,
    server: S,
    fault: Option<FaultGuard>,
    late: Option<Arc<Late>>,
) -> (Toxicated<C>, Toxicated<S>) {
    let mut toxics = [None, None];
    if let Some(guard) = fault {
        if let FaultAction::Tcp(toxic) = guard.runtime().experiment.action.clone() {
            let side = side_of(&toxic);
            toxics[side] = Some(Active::new(toxic, guard));
        }
    }
    let [on_client, on_server] = toxics;
    (
        Toxicated {
            inner: client,
            toxic: on_client,
            late: late.clone().map(|l| (l, 0)),
        },
        Toxicated {
            inner: server,
            toxic: on_server,
            late: late.map(|l| (l, 1)),
        },
    )
}

pub(super) struct Toxicated<S> {
    inner: S,
    toxic: Option<Active>,
    /// Where a toxic added later comes from, and this stream's side.
    late: Option<(Arc<Late>, usize)>,
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

impl Active {
    fn new(toxic: Toxic, guard: FaultGuard) -> Active {
        let deadline = match &toxic {
            Toxic::Timeout { timeout } if !timeout.is_zero() => Some(Box::pin(sleep(*timeout))),
            Toxic::ResetPeer { timeout } => Some(Box::pin(sleep(*timeout))),
            _ => None,
        };
        Active {
            toxic,
            guard,
            pending: BytesMut::new(),
            wait: None,
            passed: 0,
            eof: false,
            deadline,
        }
    }
}

impl<S> Toxicated<S> {
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
        if this.toxic.is_none() {
            if let Some((late, side)) = &this.late {
                this.toxic = late
                    .take(*side)
                    .map(|(toxic, guard)| Active::new(toxic, guard));
            }
        }
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
