//! L4 toxics (Toxiproxy's, by the same names) as an `AsyncRead + AsyncWrite`
//! wrapper, so that they compose with any copy loop. Every toxic acts on the
//! bytes *read* from the stream it wraps: the client's stream for direction
//! `upstream` (bytes going to the server), the server's for `downstream`.
//! Writes pass through. Each side holds a chain of toxics, as a Toxiproxy
//! link does: every tcp experiment that fires for the connection (each its
//! own `percent` roll, Toxiproxy's `toxicity`), in the config's order, each
//! stage reading what the one before it handed on. An experiment added while
//! the connection is open joins the end of the chain at the next read of its
//! side ([`Late`]); one that expires or is removed leaves it at the next read
//! once it holds no bytes. A side with no toxic reads its stream directly.

mod late;
mod stage;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use sluice_control::{FaultGuard, FaultRuntime, Snapshot};
use sluice_filters::{Direction, FaultAction, FaultKind, FaultTarget, RequestView, Toxic};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(super) use late::Late;
use stage::Stage;

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

/// Every tcp experiment that fires for a new connection on `listener`, in
/// the config's order (no allocation when none does).
pub(super) fn pick(snapshot: &Snapshot, listener: &str, cluster: &str) -> Vec<FaultGuard> {
    let target = target(listener, cluster);
    tcp_faults(snapshot)
        .filter_map(|f| f.try_fire(&target, rand::random::<u64>).ok())
        .collect()
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

/// Wraps both streams of a connection; each toxic goes to the side it
/// reads from (by its direction), in the order given. With `late`, each side
/// takes up the toxics added while the connection is open. Returns (client,
/// server).
pub(super) fn wrap<C, S>(
    client: C,
    server: S,
    faults: Vec<FaultGuard>,
    late: Option<Arc<Late>>,
) -> (Toxicated<C>, Toxicated<S>) {
    let mut chains = [Vec::new(), Vec::new()];
    for guard in faults {
        if let FaultAction::Tcp(toxic) = guard.runtime().experiment.action.clone() {
            chains[side_of(&toxic)].push(Stage::new(toxic, guard));
        }
    }
    let [on_client, on_server] = chains;
    (
        Toxicated {
            inner: client,
            chain: on_client,
            late: late.clone().map(|l| (l, 0)),
        },
        Toxicated {
            inner: server,
            chain: on_server,
            late: late.map(|l| (l, 1)),
        },
    )
}

pub(super) struct Toxicated<S> {
    inner: S,
    /// The toxics on this side, first applied first; empty for a plain copy.
    chain: Vec<Stage>,
    /// Where toxics added later come from, and this stream's side.
    late: Option<(Arc<Late>, usize)>,
}

/// The stream read through the stages of a chain: the last stage reads from
/// the ones before it, the first from the stream.
struct Through<'a, S> {
    inner: &'a mut S,
    stages: &'a mut [Stage],
}

impl<S: AsyncRead + Unpin> AsyncRead for Through<'_, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.stages.split_last_mut() {
            None => Pin::new(&mut *this.inner).poll_read(cx, buf),
            Some((last, before)) => {
                let mut before = Through {
                    inner: &mut *this.inner,
                    stages: before,
                };
                last.poll_read(&mut before, cx, buf)
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Toxicated<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some((late, side)) = &this.late {
            if let Some(fired) = late.take(*side) {
                let stages = fired
                    .into_iter()
                    .map(|(toxic, guard)| Stage::new(toxic, guard));
                this.chain.extend(stages);
            }
        }
        if this.chain.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        // An experiment removed or expired stops acting on its connections,
        // once what it already held back has gone.
        this.chain.retain_mut(|stage| {
            if stage.guard.runtime().still_on() {
                return true;
            }
            stage.draining = true;
            !stage.is_idle()
        });
        let mut through = Through {
            inner: &mut this.inner,
            stages: &mut this.chain,
        };
        Pin::new(&mut through).poll_read(cx, buf)
    }
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
