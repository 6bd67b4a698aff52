//! How sluice stops, seen from the control plane: the data plane's side of
//! it as a trait (so that control never names pingora or the proxy), the one
//! drain that `Sluice::stop(Drain)`, SIGTERM and a graceful upgrade (SIGQUIT)
//! all go through, and the task that takes stop requests from the handle and
//! from the signals.

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
    /// Sends every listening socket (the admin API's too) to the new
    /// process waiting for them (`sluice run --upgrade`) and stops
    /// accepting on them; requests in flight go on. Blocks while it waits
    /// for the new process (seconds). The number of sockets sent.
    fn hand_over(&self) -> Result<usize, HandOverError>;
}

/// Why the listening sockets were not handed over; sluice keeps serving.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HandOverError(pub String);

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
    /// Take SIGTERM (drain), SIGINT (fast) and SIGQUIT (upgrade) too.
    pub signals: bool,
    /// Stops the admin API accepting once its socket is handed over.
    pub admin_accept: CancellationToken,
}

/// What a signal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Stop(Stop),
    /// SIGQUIT: hand the sockets to a new process, then drain.
    Upgrade,
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
        let how = loop {
            let asked = tokio::select! {
                () = cancel.cancelled() => return,
                asked = signals.next() => asked,
                how = first_request(&mut requests) => Asked::Stop(how),
            };
            match asked {
                Asked::Stop(how) => break how,
                // A hand-over that failed leaves sluice serving as before.
                Asked::Upgrade if self.hand_over().await => break Stop::Drain,
                Asked::Upgrade => {}
            }
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

impl Stopper {
    /// Hands the sockets over (off this thread: it blocks while the new
    /// process is awaited); on success the admin API stops accepting too,
    /// its socket now being the new process's. True when handed over.
    pub(crate) async fn hand_over(&self) -> bool {
        let data_plane = self.data_plane.clone();
        match tokio::task::spawn_blocking(move || data_plane.hand_over()).await {
            Ok(Ok(sockets)) => {
                info!(sockets, "listening sockets handed over; draining");
                self.admin_accept.cancel();
                true
            }
            Ok(Err(e)) => {
                warn!(error = %e, "graceful upgrade failed; still serving");
                false
            }
            Err(e) => {
                warn!(error = %e, "graceful upgrade task failed; still serving");
                false
            }
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

/// SIGTERM, SIGINT and SIGQUIT, when sluice handles them; never firing
/// otherwise.
#[derive(Default)]
struct StopSignals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
    quit: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn install(enabled: bool) -> StopSignals {
        use tokio::signal::unix::{signal, SignalKind};
        if !enabled {
            return StopSignals::default();
        }
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::quit()),
        ) {
            (Ok(term), Ok(int), Ok(quit)) => StopSignals {
                term: Some(term),
                int: Some(int),
                quit: Some(quit),
            },
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                warn!(error = %e, "signal handlers could not be installed");
                StopSignals::default()
            }
        }
    }

    /// SIGTERM drains; SIGINT stops at once; SIGQUIT hands over, then drains.
    async fn next(&mut self) -> Asked {
        tokio::select! {
            () = recv(&mut self.term) => {
                info!("SIGTERM");
                Asked::Stop(Stop::Drain)
            }
            () = recv(&mut self.int) => {
                info!("SIGINT");
                Asked::Stop(Stop::Fast)
            }
            () = recv(&mut self.quit) => {
                info!("SIGQUIT");
                Asked::Upgrade
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
