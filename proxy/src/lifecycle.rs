//! The data plane's lifecycle: in-flight request count, the draining flag,
//! a monotonic clock in milliseconds, the shutdown signal handed to
//! pingora, and the listening sockets a graceful upgrade hands over. The
//! control plane drains, stops and upgrades it through
//! [`sluice_control::DataPlane`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use pingora::server::{ShutdownSignal, ShutdownSignalWatch};
use sluice_control::{DataPlane, HandOverError, Stop};
use tokio::sync::watch;

use crate::server::Handover;

pub(crate) struct Lifecycle {
    started: Instant,
    inflight: AtomicUsize,
    /// Client connections open on the HTTP listeners.
    connections: AtomicUsize,
    draining: AtomicBool,
    stop_tx: watch::Sender<Option<Stop>>,
    handover: Handover,
}

impl Lifecycle {
    pub(crate) fn new(handover: Handover) -> Arc<Lifecycle> {
        Arc::new(Lifecycle {
            started: Instant::now(),
            inflight: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            draining: AtomicBool::new(false),
            stop_tx: watch::channel(None).0,
            handover,
        })
    }

    /// The sockets a graceful upgrade sends.
    pub(crate) fn handover(&self) -> &Handover {
        &self.handover
    }

    /// Milliseconds since start: the clock endpoint ejections are kept on.
    pub(crate) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Counts a request in flight until the guard drops.
    pub(crate) fn enter(self: &Arc<Self>) -> InflightGuard {
        self.inflight.fetch_add(1, Ordering::Relaxed);
        InflightGuard(self.clone())
    }

    /// Counts a client connection open until the guard drops.
    pub(crate) fn connection(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
    }

    /// Requests in flight; once the sockets are handed over, open client
    /// connections too: nothing new reaches this process then, and an open
    /// one may still bring a request (it closes after that one, or after
    /// `STOP_IDLE` without), so the drain waits for them.
    pub(crate) fn inflight(&self) -> usize {
        let requests = self.inflight.load(Ordering::Relaxed);
        if self.handover.is_done() {
            requests + self.connections.load(Ordering::Relaxed)
        } else {
            requests
        }
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Asks pingora to stop its services (after any draining is done).
    pub(crate) fn stop_services(&self, how: Stop) {
        self.stop_tx.send_replace(Some(how));
    }

    /// The watch pingora's `Server::run` waits on instead of Unix signals.
    pub(crate) fn signal_watch(&self) -> Box<dyn ShutdownSignalWatch + Send + Sync> {
        Box::new(StopWatch(self.stop_tx.subscribe()))
    }
}

impl DataPlane for Lifecycle {
    fn inflight(&self) -> usize {
        Lifecycle::inflight(self)
    }

    fn begin_drain(&self) {
        self.set_draining();
    }

    fn stop(&self, how: Stop) {
        self.stop_services(how);
    }

    fn hand_over(&self) -> Result<usize, HandOverError> {
        self.handover.send()
    }
}

pub(crate) struct InflightGuard(Arc<Lifecycle>);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) struct ConnectionGuard(Arc<Lifecycle>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

struct StopWatch(watch::Receiver<Option<Stop>>);

#[async_trait]
impl ShutdownSignalWatch for StopWatch {
    async fn recv(&self) -> ShutdownSignal {
        let mut rx = self.0.clone();
        let stop = match rx.wait_for(Option::is_some).await {
            Ok(v) => *v,
            // The lifecycle is gone: nothing can ask for a drain any more.
            Err(_) => Some(Stop::Fast),
        };
        match stop {
            Some(Stop::Drain) => ShutdownSignal::GracefulTerminate,
            _ => ShutdownSignal::FastShutdown,
        }
    }
}
