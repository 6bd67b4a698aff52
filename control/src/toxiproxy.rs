//! Toxiproxy's REST API on `admin.toxiproxy`, so that test suites written
//! against a Toxiproxy client drive sluice unchanged. A proxy is a tcp
//! listener the data plane opens at run time ([`TcpListeners`]); a toxic is
//! a tcp fault experiment on that listener, with `admin.toxiproxy_default_ttl`
//! as its TTL. The API has no authentication (Toxiproxy's has none to
//! speak), which is why the config accepts only a loopback address for it.

mod proxies;
mod routes;
mod toxics;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info};

use crate::graceful::{accept_until_cancelled, serve_until_cancelled};
pub(crate) use proxies::Toxiproxy;

/// What the Toxiproxy API needs of the data plane: tcp listeners it opens
/// and closes at run time, each proxying to one `host:port`.
pub trait TcpListeners: Send + Sync {
    /// Binds `listen` (`host:port`, port 0 for any) and proxies every
    /// connection on it to `upstream`, as listener `listener` (the name its
    /// metrics and fault experiments use). Returns the bound address.
    fn open(&self, listener: &str, listen: &str, upstream: &str) -> Result<SocketAddr, String>;
    /// Stops accepting on `listener` and closes its open connections.
    fn close(&self, listener: &str);
}

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take to finish its request once shutdown began.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Serves Toxiproxy's API on `listener` until `cancel`; closes every proxy
/// it opened when it ends.
pub(crate) async fn serve_toxiproxy(
    listener: TcpListener,
    api: Arc<Toxiproxy>,
    cancel: CancellationToken,
) {
    let tracker = TaskTracker::new();
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "Toxiproxy API listening");
    }
    while let Some((stream, peer)) =
        accept_until_cancelled(&listener, &cancel, "Toxiproxy API").await
    {
        let api = api.clone();
        let cancel = cancel.clone();
        tracker.spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let api = api.clone();
                async move { Ok::<_, Infallible>(routes::handle(&api, req).await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(e) = serve_until_cancelled(conn, &cancel, Some(SHUTDOWN_GRACE)).await {
                debug!(%peer, error = %e, "Toxiproxy API connection ended with an error");
            }
        });
    }
    tracker.close();
    tracker.wait().await;
    api.close_all();
    info!("Toxiproxy API stopped");
}

#[cfg(test)]
mod tests;
