//! Listeners bound before pingora starts. pingora binds in its own thread,
//! panics there on failure and never says which port it got, so a config
//! with `127.0.0.1:0` could not be served and reported, and a check-then-bind
//! raced with anything else taking the port. Here each listener is bound up
//! front (a failure is an error naming it) and its socket is handed to the
//! pingora service through the table of listening sockets that a service's
//! start takes (the one pingora fills on a graceful upgrade), under the
//! address the service was given: pingora then listens on that socket
//! instead of binding one.
//!
//! On a graceful upgrade a listener's socket is the one the old process
//! handed over (see `handover`) when it listened at the same address, and
//! the service stops accepting once this process hands its sockets on.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use pingora::server::{Fds, ListenFds, RuntimeOpts, ShutdownWatch};
use pingora::services::Service;
use sluice_control::Config;
use tokio::sync::watch;

use super::handover::Inherited;

/// One configured listener, bound.
pub(crate) struct BoundListener {
    pub(crate) name: String,
    /// The bound address: a port 0 is resolved here.
    pub(crate) addr: SocketAddr,
    socket: OwnedFd,
}

impl BoundListener {
    /// A second descriptor of the same socket, to hand over.
    pub(crate) fn dup(&self) -> std::io::Result<OwnedFd> {
        self.socket.try_clone()
    }
}

/// Binds every listener of `config`, in config order, or takes the socket
/// `inherited` has at its address.
pub(crate) fn bind_all(
    config: &Config,
    inherited: &mut Inherited,
) -> anyhow::Result<Vec<BoundListener>> {
    config
        .listeners
        .iter()
        .map(|l| {
            let taken = inherited.take(&l.listen.to_string());
            let bind = || -> std::io::Result<(SocketAddr, OwnedFd)> {
                let socket = match taken {
                    Some(socket) => TcpListener::from(socket),
                    None => TcpListener::bind(l.listen)?,
                };
                // tokio takes the socket as it is: a blocking one would park
                // a worker thread in accept(2) and stall the requests queued
                // behind it.
                socket.set_nonblocking(true)?;
                Ok((socket.local_addr()?, OwnedFd::from(socket)))
            };
            let (addr, socket) = bind()
                .with_context(|| format!("listener `{}` cannot bind {}", l.name, l.listen))?;
            Ok(BoundListener {
                name: l.name.clone(),
                addr,
                socket,
            })
        })
        .collect()
}

/// Says which services have taken their socket, so that `Sluice::start`
/// returns only once every listener is pingora's.
pub(crate) struct Started {
    tx: mpsc::Sender<String>,
    rx: mpsc::Receiver<String>,
}

impl Started {
    pub(crate) fn new() -> Started {
        let (tx, rx) = mpsc::channel();
        Started { tx, rx }
    }

    /// Waits until the services of `listeners` (names) have started, up to
    /// `timeout` in all; the names of those that did not.
    pub(crate) fn wait(
        &self,
        listeners: &[(String, SocketAddr)],
        timeout: Duration,
    ) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut missing: Vec<String> = listeners.iter().map(|(name, _)| name.clone()).collect();
        while !missing.is_empty() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(name) => missing.retain(|m| *m != name),
                Err(_) => break,
            }
        }
        missing
    }
}

/// A pingora listening service that starts on a socket bound beforehand.
pub(crate) struct PreBound<S> {
    inner: S,
    name: String,
    /// The address string the inner service listens on: the key its
    /// socket is handed over under.
    key: String,
    /// Until the service starts; closed with it if it never does.
    socket: Option<OwnedFd>,
    started: mpsc::Sender<String>,
    /// True once the socket is another process's: stop accepting.
    handed_over: watch::Receiver<bool>,
}

impl<S> PreBound<S> {
    /// `build` makes the service for the address string it is given, so
    /// that the service and the handed-over socket cannot disagree on it.
    pub(crate) fn new(
        listener: BoundListener,
        started: &Started,
        handed_over: watch::Receiver<bool>,
        build: impl FnOnce(&str) -> anyhow::Result<S>,
    ) -> anyhow::Result<PreBound<S>> {
        let key = listener.addr.to_string();
        Ok(PreBound {
            inner: build(&key)?,
            name: listener.name,
            key,
            socket: Some(listener.socket),
            started: started.tx.clone(),
            handed_over,
        })
    }
}

#[async_trait]
impl<S: Service> Service for PreBound<S> {
    async fn start_service(
        &mut self,
        _upgraded: Option<ListenFds>,
        shutdown: ShutdownWatch,
        listeners_per_fd: usize,
    ) {
        let mut fds = Fds::new();
        if let Some(socket) = self.socket.take() {
            // pingora owns the socket from here and closes it when the
            // service ends.
            fds.add(self.key.clone(), socket.into_raw_fd());
        }
        // Nobody waits any more once `Sluice::start` has returned.
        let _ = self.started.send(self.name.clone());
        let fds: ListenFds = Arc::new(parking_lot::Mutex::new(fds));
        // The service sees a shutdown when pingora's comes or when the
        // socket is handed over: either way it stops accepting, closes idle
        // keep-alive connections and lets requests in flight finish.
        let (stop_tx, stop_rx) = watch::channel(false);
        let inner = self
            .inner
            .start_service(Some(fds), stop_rx, listeners_per_fd);
        let either = stop_on_either(shutdown, self.handed_over.clone(), stop_tx);
        tokio::pin!(inner);
        tokio::select! {
            () = &mut inner => {}
            () = either => inner.await,
        }
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn threads(&self) -> Option<usize> {
        self.inner.threads()
    }

    fn runtime_opts_override(&self, global: &RuntimeOpts) -> Option<RuntimeOpts> {
        self.inner.runtime_opts_override(global)
    }

    fn listen_addresses(&self) -> Option<Vec<String>> {
        self.inner.listen_addresses()
    }
}

/// Sends `true` on `stop` once `shutdown` or `handed_over` turns true, or
/// once either can no longer change (its sender gone).
async fn stop_on_either(
    mut shutdown: ShutdownWatch,
    mut handed_over: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
) {
    tokio::select! {
        _ = shutdown.wait_for(|s| *s) => {}
        _ = handed_over.wait_for(|h| *h) => {}
    }
    stop.send_replace(true);
}
