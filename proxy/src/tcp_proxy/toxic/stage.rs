//! One toxic of a connection's chain: it reads from the stage before it
//! (or the stream itself) and hands its bytes on to the stage after it (or
//! the copy loop), as one goroutine of a Toxiproxy link does.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use sluice_control::FaultGuard;
use sluice_filters::Toxic;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{sleep, sleep_until, Instant, Sleep};

/// Bytes read from the stage before at once.
const CHUNK: usize = 16 * 1024;
/// How much `latency` holds back before it stops reading ahead (the stage
/// before, and at the end the socket, then push back).
const LATENCY_HOLD: usize = 1 << 20;
/// How long `reset_peer`, past its timeout, leaves the client's bytes
/// unread before it closes: the kernel answers a close with unread data
/// with a RST instead of a FIN (sluice forbids `unsafe`, so SO_LINGER 0 on
/// pingora's socket is out of reach). A client that talks first (Redis,
/// HTTP) has sent something by then.
const RESET_GRACE: Duration = Duration::from_millis(200);

pub(super) struct Stage {
    toxic: Toxic,
    /// Held for the connection's life: counts toward `max_active`.
    pub(super) guard: FaultGuard,
    /// Read from the stage before, not yet handed on.
    pending: BytesMut,
    /// `latency`: chunks read ahead, each with when it may go. A chunk's
    /// time counts from when it reached this stage, so the delays of
    /// successive chunks overlap (Toxiproxy stamps each chunk) while a
    /// second latency stage after this one adds its own.
    held: VecDeque<(Instant, BytesMut)>,
    held_bytes: usize,
    /// `latency`: an error from the stage before, said once what came
    /// before it has gone.
    failed: Option<io::Error>,
    /// When the next piece may go.
    wait: Option<Pin<Box<Sleep>>>,
    /// Bytes handed on so far (`limit_data`).
    passed: u64,
    /// The stage before reached EOF (`slow_close` delays saying so).
    eof: bool,
    /// `timeout` / `reset_peer`: when the connection ends.
    deadline: Option<Pin<Box<Sleep>>>,
    /// The experiment ended: hand on what is held, read nothing more, so
    /// that a busy stream does not keep it alive.
    pub(super) draining: bool,
}

impl Stage {
    pub(super) fn new(toxic: Toxic, guard: FaultGuard) -> Stage {
        let deadline = match &toxic {
            Toxic::Timeout { timeout } if !timeout.is_zero() => Some(Box::pin(sleep(*timeout))),
            Toxic::ResetPeer { timeout } => Some(Box::pin(sleep(*timeout))),
            _ => None,
        };
        Stage {
            toxic,
            guard,
            pending: BytesMut::new(),
            held: VecDeque::new(),
            held_bytes: 0,
            failed: None,
            wait: None,
            passed: 0,
            eof: false,
            deadline,
            draining: false,
        }
    }

    /// Holds nothing and is not closing: it may leave the chain.
    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.held.is_empty() && self.failed.is_none() && !self.eof
    }

    pub(super) fn poll_read<R: AsyncRead + Unpin>(
        &mut self,
        before: &mut R,
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
                            return Pin::new(before).poll_read(cx, buf);
                        }
                        d.as_mut().reset(Instant::now() + RESET_GRACE);
                    }
                    self.eof = true;
                }
                return poll_reset(cx, &mut self.deadline);
            }
            Toxic::Latency {
                latency, jitter, ..
            } => return self.poll_latency(before, cx, buf, latency, jitter),
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
            ready!(self.fill(before, cx))?;
            if self.pending.is_empty() {
                // EOF from the stage before.
                self.eof = true;
                if let Toxic::SlowClose { delay } = self.toxic {
                    self.wait = Some(Box::pin(sleep(delay)));
                    return self.poll_read(before, cx, buf);
                }
                return Poll::Ready(Ok(()));
            }
        }
        self.hand_on(buf)
    }

    /// Reads one chunk from the stage before into `pending`.
    fn fill<R: AsyncRead + Unpin>(
        &mut self,
        before: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; CHUNK];
        let mut rb = ReadBuf::new(&mut scratch);
        ready!(Pin::new(before).poll_read(cx, &mut rb))?;
        self.pending.extend_from_slice(rb.filled());
        Poll::Ready(Ok(()))
    }

    /// `latency`: reads ahead everything the stage before has ready,
    /// stamping each chunk, and hands the oldest on once its time has come.
    fn poll_latency<R: AsyncRead + Unpin>(
        &mut self,
        before: &mut R,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
        latency: Duration,
        jitter: Duration,
    ) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; CHUNK];
        while !self.eof && !self.draining && self.held_bytes < LATENCY_HOLD {
            let mut rb = ReadBuf::new(&mut scratch);
            match Pin::new(&mut *before).poll_read(cx, &mut rb) {
                Poll::Pending => break,
                Poll::Ready(Err(e)) => {
                    self.failed = Some(e);
                    self.eof = true;
                }
                Poll::Ready(Ok(())) if rb.filled().is_empty() => self.eof = true,
                Poll::Ready(Ok(())) => {
                    let spread = jitter.as_secs_f64() * (2.0 * rand::random::<f64>() - 1.0);
                    let hold = (latency.as_secs_f64() + spread).max(0.0);
                    let due = Instant::now() + Duration::from_secs_f64(hold);
                    self.held_bytes += rb.filled().len();
                    self.held.push_back((due, BytesMut::from(rb.filled())));
                }
            }
        }
        let Some((due, chunk)) = self.held.front_mut() else {
            if self.eof {
                return Poll::Ready(self.failed.take().map_or(Ok(()), Err));
            }
            return Poll::Pending;
        };
        if Instant::now() < *due {
            let wait = self.wait.get_or_insert_with(|| Box::pin(sleep_until(*due)));
            if wait.deadline() != *due {
                wait.as_mut().reset(*due);
            }
            ready!(wait.as_mut().poll(cx));
        }
        let n = chunk.len().min(buf.remaining());
        buf.put_slice(&chunk[..n]);
        chunk.advance(n);
        self.held_bytes -= n;
        if chunk.is_empty() {
            self.held.pop_front();
        }
        Poll::Ready(Ok(()))
    }

    /// Hands the next piece of `pending` on, and sets when the one after it
    /// may go.
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
