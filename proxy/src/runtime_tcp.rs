//! The tcp listeners that Toxiproxy's API opens and closes at run time
//! ([`sluice_control::TcpListeners`]). pingora's services are fixed at
//! start, so each is a tokio accept loop on a runtime of its own (thread
//! `sluice-toxiproxy`, started with the first proxy), handing every
//! connection to the same [`TcpProxy::relay`] as a configured tcp listener:
//! the same copy loop, toxics and counters. Closing a listener also closes
//! its open connections, as a proxy that Toxiproxy disables does.

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, OnceLock};

use sluice_control::{Shared, SnapshotStore, TcpListeners};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::lifecycle::Lifecycle;
use crate::tcp_proxy::{TcpProxy, Upstream};

/// Worker threads of the run-time listeners' runtime: test traffic, not
/// the data plane's main load.
const WORKERS: usize = 2;

/// What a listener's proxy is built from, known once the control plane
/// has started.
struct Parts {
    store: Arc<SnapshotStore>,
    shared: Shared,
    lifecycle: Arc<Lifecycle>,
}

#[derive(Default)]
pub(crate) struct RuntimeListeners {
    parts: OnceLock<Parts>,
    runtime: Mutex<Option<Runtime>>,
    /// Each open listener's stop.
    open: Mutex<HashMap<String, CancellationToken>>,
}

impl RuntimeListeners {
    /// Hands over what the proxies need; until then `open` refuses.
    pub(crate) fn set_parts(
        &self,
        store: Arc<SnapshotStore>,
        shared: Shared,
        lifecycle: Arc<Lifecycle>,
    ) {
        let _ = self.parts.set(Parts {
            store,
            shared,
            lifecycle,
        });
    }

    fn handle(&self, parts: &Parts) -> Result<tokio::runtime::Handle, String> {
        let mut runtime = self.runtime.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = runtime.as_ref() {
            return Ok(rt.handle().clone());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("sluice-toxiproxy")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start its runtime: {e}"))?;
        let handle = rt.handle().clone();
        parts.shared.runtimes.watch("toxiproxy", handle.clone());
        *runtime = Some(rt);
        Ok(handle)
    }

    /// Closes every listener and their connections, and ends the runtime.
    pub(crate) fn shutdown(&self) {
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(|p| p.into_inner()));
        for token in open.values() {
            token.cancel();
        }
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(rt) = runtime {
            // Not a blocking shutdown: this may run inside a caller's runtime.
            rt.shutdown_background();
        }
    }
}

impl TcpListeners for RuntimeListeners {
    fn open(&self, listener: &str, listen: &str, upstream: &str) -> Result<SocketAddr, String> {
        let parts = self
            .parts
            .get()
            .ok_or_else(|| "the data plane is still starting".to_string())?;
        let addr = listen
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| format!("{listen} resolves to no address"))?;
        let socket = std::net::TcpListener::bind(addr).map_err(|e| e.to_string())?;
        socket.set_nonblocking(true).map_err(|e| e.to_string())?;
        let bound = socket.local_addr().map_err(|e| e.to_string())?;
        let handle = self.handle(parts)?;
        let proxy = Arc::new(TcpProxy::new(
            listener.to_string(),
            Upstream::Address(upstream.to_string()),
            parts.store.clone(),
            parts.shared.clone(),
            parts.lifecycle.clone(),
        ));
        let stop = CancellationToken::new();
        if let Some(old) = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(listener.to_string(), stop.clone())
        {
            old.cancel();
        }
        let name = listener.to_string();
        handle.spawn(async move {
            match TcpListener::from_std(socket) {
                Ok(socket) => accept_loop(socket, proxy, &name, stop).await,
                Err(e) => {
                    warn!(listener = %name, error = %e, "run-time listener could not be registered")
                }
            }
        });
        info!(listener, %bound, upstream, "tcp listener opened at run time");
        Ok(bound)
    }

    fn close(&self, listener: &str) {
        let token = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(listener);
        if let Some(token) = token {
            token.cancel();
            info!(listener, "tcp listener closed at run time");
        }
    }
}

/// Accepts until `stop`, then ends the open connections and returns once
/// they have (the socket closes as it drops, so the port refuses at once).
async fn accept_loop(
    socket: TcpListener,
    proxy: Arc<TcpProxy>,
    name: &str,
    stop: CancellationToken,
) {
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = socket.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let proxy = proxy.clone();
                let stop = stop.clone();
                connections.spawn(async move {
                    tokio::select! {
                        () = proxy.relay(stream) => {}
                        () = stop.cancelled() => debug!(%peer, "connection closed with its listener"),
                    }
                });
            }
            Err(e) => {
                warn!(listener = %name, error = %e, "run-time listener accept failed");
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                }
            }
        }
    }
    drop(socket);
    connections.close();
    connections.wait().await;
}
