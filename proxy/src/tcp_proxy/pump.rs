//! The L4 copy loop: bytes both ways between any two `AsyncRead +
//! AsyncWrite` streams, EOF on one side passed on as a write shutdown on the
//! other, byte counts kept even when the connection ends in an error, and a
//! [`Tap`] shown every slice as it passes, without copying it.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Per-direction buffer: what `tokio::io::copy_bidirectional` uses.
const BUFFER: usize = 8 * 1024;

/// Sees the bytes going through, by reference, in order.
pub(super) trait Tap {
    /// Client bytes, once the upstream stream has accepted them.
    fn sent_to_upstream(&mut self, bytes: &[u8]);
    /// Upstream bytes, as soon as they are read (before the client gets them).
    fn read_from_upstream(&mut self, bytes: &[u8]);
}

/// The tap of a plain pass-through.
pub(super) struct NoTap;

impl Tap for NoTap {
    fn sent_to_upstream(&mut self, _: &[u8]) {}
    fn read_from_upstream(&mut self, _: &[u8]) {}
}

/// What a finished copy moved.
#[derive(Debug)]
pub(super) struct Pumped {
    pub to_upstream: u64,
    pub to_downstream: u64,
    /// The first error that ended the connection, if one did.
    pub error: Option<io::Error>,
}

/// Copies until both directions have reached EOF and been shut down, or
/// until either fails.
pub(super) async fn pump<D, U, T>(downstream: &mut D, upstream: &mut U, tap: &mut T) -> Pumped
where
    D: AsyncRead + AsyncWrite + Unpin + ?Sized,
    U: AsyncRead + AsyncWrite + Unpin + ?Sized,
    T: Tap + ?Sized,
{
    let mut up = Half::new();
    let mut down = Half::new();
    let error = poll_fn(|cx| {
        // Both directions are polled each time; the first error ends both.
        let mut both_done = || -> io::Result<bool> {
            let polled = up.poll(cx, &mut *downstream, &mut *upstream, &mut |side, b| {
                if let Side::Written = side {
                    tap.sent_to_upstream(b);
                }
            });
            let to_up = finished(polled)?;
            let polled = down.poll(cx, &mut *upstream, &mut *downstream, &mut |side, b| {
                if let Side::Read = side {
                    tap.read_from_upstream(b);
                }
            });
            let to_down = finished(polled)?;
            Ok(to_up && to_down)
        };
        match both_done() {
            Ok(true) => Poll::Ready(None),
            Ok(false) => Poll::Pending,
            Err(e) => Poll::Ready(Some(e)),
        }
    })
    .await;
    Pumped {
        to_upstream: up.moved,
        to_downstream: down.moved,
        error,
    }
}

/// Whether one direction has reached EOF and been shut down.
fn finished(poll: Poll<io::Result<()>>) -> io::Result<bool> {
    match poll {
        Poll::Ready(result) => result.map(|()| true),
        Poll::Pending => Ok(false),
    }
}

#[derive(Clone, Copy)]
enum Side {
    Read,
    Written,
}

/// One direction's state: a buffer, what of it is still to write, and
/// how far towards EOF and shutdown it has come.
struct Half {
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
    moved: u64,
    eof: bool,
    unflushed: bool,
    done: bool,
}

impl Half {
    fn new() -> Self {
        Self {
            buf: vec![0; BUFFER].into_boxed_slice(),
            pos: 0,
            filled: 0,
            moved: 0,
            eof: false,
            unflushed: false,
            done: false,
        }
    }

    fn poll<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
        seen: &mut impl FnMut(Side, &[u8]),
    ) -> Poll<io::Result<()>>
    where
        R: AsyncRead + Unpin + ?Sized,
        W: AsyncWrite + Unpin + ?Sized,
    {
        if self.done {
            return Poll::Ready(Ok(()));
        }
        loop {
            if self.pos == self.filled && !self.eof {
                let mut read = ReadBuf::new(&mut self.buf);
                match Pin::new(&mut *reader).poll_read(cx, &mut read) {
                    Poll::Pending => {
                        // Nothing more to read for now: what was written must
                        // not sit in a buffered writer while we wait.
                        if self.unflushed {
                            ready!(Pin::new(&mut *writer).poll_flush(cx))?;
                            self.unflushed = false;
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) => {
                        let n = read.filled().len();
                        if n == 0 {
                            self.eof = true;
                        } else {
                            seen(Side::Read, &self.buf[..n]);
                            self.pos = 0;
                            self.filled = n;
                        }
                    }
                }
            }
            while self.pos < self.filled {
                let chunk = &self.buf[self.pos..self.filled];
                let n = ready!(Pin::new(&mut *writer).poll_write(cx, chunk))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                seen(Side::Written, &chunk[..n]);
                self.pos += n;
                self.moved += n as u64;
                self.unflushed = true;
            }
            if self.eof {
                // The half-close: our reader is done, so the peer's reader is.
                ready!(Pin::new(&mut *writer).poll_flush(cx))?;
                ready!(Pin::new(&mut *writer).poll_shutdown(cx))?;
                self.done = true;
                return Poll::Ready(Ok(()));
            }
        }
    }
}

#[cfg(test)]
mod tests;
