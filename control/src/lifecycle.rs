//! How sluice stops, seen from the control plane: the data plane's side of
//! it as a trait (so that control never names pingora or the proxy), the one
//! drain that `Sluice::stop(Drain)` and SIGTERM both go through, and the task
//! that takes stop requests from the handle and from the signals.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::api::Readiness;

/// How sluice is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Finish in-flight requests (up to the grace period), then stop.
    Drain,
    /// Stop now.
    Fast,
}

/// What the control plane needs of the data plane to stop it.
pub trait DataPlane: Send + Sync {
    /// Requests and connections in flight now.
    fn inflight(&self) -> usize;
    /// From now on, keep-alive connections are closed after their current
    /// request; requests in flight go on.
    fn begin_drain(&self);
    /// Stops the listeners and their services.
    fn stop(&self, how: Stop);
}

/// How often a drain looks at the in-flight count.
const DRAIN_POLL: Duration = Duration::from_millis(20);

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drained {
    /// Nothing was left in flight.
    Idle,
    /// The grace period ended with this many still in flight.
    GraceOver(usize),
    /// A fast stop was asked for with this many still in flight.
    Cut(usize),
}

/// The one drain. Readiness goes 503 first, so that balancers stop sending
/// before anything closes; then the data plane closes keep-alive
/// connections as their requests end, and the drain waits until nothing is
/// in flight, `grace` has passed, or `cut` resolves (a fast stop asked for
/// meanwhile).
pub(crate) async fn drain(
    data_plane: &dyn DataPlane,
    readiness: &Readiness,
    grace: Duration,
    cut: impl Future<Output = ()>,
) -> Drained {
    readiness.set_draining(true);
    data_plane.begin_drain();
    info!(
        inflight = data_plane.inflight(),
        grace_ms = grace.as_millis() as u64,
        "draining"
    );
    let idle = async {
        let deadline = tokio::time::Instant::now() + grace;
        while data_plane.inflight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(DRAIN_POLL).await;
        }
    };
    let was_cut = tokio::select! {
        () = idle => false,
        () = cut => true,
    };
    let left = data_plane.inflight();
    info!(cut = left, "drain finished");
    match (was_cut, left) {
        (true, left) => Drained::Cut(left),
        (false, 0) => Drained::Idle,
        (false, left) => Drained::GraceOver(left),
    }
}

/// What the stop task acts on.
pub(crate) struct Stopper {
    pub data_plane: Arc<dyn DataPlane>,
    pub readiness: Arc<Readiness>,
    pub grace: Duration,
    /// Take SIGTERM (drain) and SIGINT (fast) too.
    pub signals: bool,
}

impl Stopper {
    /// Waits for the first stop request (from `requests`, or a signal) and
    /// carries it out: a drain first for [`Stop::Drain`], during which a
    /// fast request or a SIGINT cuts the wait short (and makes the stop a
    /// fast one); then the data plane is told to stop. Ends early, stopping
    /// nothing, on `cancel`.
    pub(crate) async fn run(
        self,
        mut requests: watch::Receiver<Option<Stop>>,
        cancel: CancellationToken,
    ) {
        let mut signals = StopSignals::install(self.signals);
        let how = tokio::select! {
            () = cancel.cancelled() => return,
            how = signals.next() => how,
            how = first_request(&mut requests) => how,
        };
        if how == Stop::Drain {
            let cut = async {
                tokio::select! {
                    () = signals.interrupt() => {}
                    () = fast_request(&mut requests) => {}
                }
            };
            let how = match drain(&*self.data_plane, &self.readiness, self.grace, cut).await {
                Drained::Idle | Drained::GraceOver(_) => Stop::Drain,
                Drained::Cut(_) => Stop::Fast,
            };
            self.data_plane.stop(how);
        } else {
            info!("stopping");
            self.readiness.set_ready(false);
            self.data_plane.stop(how);
        }
    }
}

async fn first_request(requests: &mut watch::Receiver<Option<Stop>>) -> Stop {
    // Copied out at once: the guard must not live across an await.
    let asked = requests.wait_for(Option::is_some).await.map(|how| *how);
    match asked {
        Ok(Some(how)) => how,
        // The handle is gone: nobody can ask any more; signals still can.
        Ok(None) | Err(_) => std::future::pending().await,
    }
}

async fn fast_request(requests: &mut watch::Receiver<Option<Stop>>) {
    let asked = requests
        .wait_for(|how| *how == Some(Stop::Fast))
        .await
        .is_ok();
    if !asked {
        std::future::pending::<()>().await;
    }
}

/// SIGTERM and SIGINT, when sluice handles them; never firing otherwise.
struct StopSignals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn install(enabled: bool) -> StopSignals {
        use tokio::signal::unix::{signal, SignalKind};
        if !enabled {
            return StopSignals {
                term: None,
                int: None,
            };
        }
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => StopSignals {
                term: Some(term),
                int: Some(int),
            },
            (Err(e), _) | (_, Err(e)) => {
                warn!(error = %e, "signal handlers could not be installed");
                StopSignals {
                    term: None,
                    int: None,
                }
            }
        }
    }

    /// SIGTERM drains; SIGINT stops at once.
    async fn next(&mut self) -> Stop {
        tokio::select! {
            () = recv(&mut self.term) => {
                info!("SIGTERM");
                Stop::Drain
            }
            () = recv(&mut self.int) => {
                info!("SIGINT");
                Stop::Fast
            }
        }
    }

    async fn interrupt(&mut self) {
        recv(&mut self.int).await;
    }
}

/// Resolves on the next signal; never without a handler or once the
/// stream has ended.
async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(s) => {
            if s.recv().await.is_none() {
                *signal = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
