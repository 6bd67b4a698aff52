//! The control API's listener: accepts connections, shakes hands when
//! `admin.tls` says so, and serves HTTP/1.1 on each with the peer's address
//! in every request, until cancelled.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info};

use super::{AdminApi, PeerAddr};
use crate::graceful::{accept_until_cancelled, serve_until_cancelled};

/// How long a client may take to send a request's headers (and to finish
/// a TLS handshake).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take to finish its request once shutdown began.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves the API on `listener` until `cancel`, over TLS when `tls` is
/// given; then stops accepting, lets each open connection finish its
/// request (idle ones close at once) and returns when all have ended.
pub(crate) async fn serve_admin(
    listener: TcpListener,
    api: Arc<AdminApi>,
    tls: Option<TlsAcceptor>,
    cancel: CancellationToken,
) {
    let tracker = TaskTracker::new();
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, tls = tls.is_some(), "control API listening");
    }
    while let Some((stream, peer)) = accept_until_cancelled(&listener, &cancel, "control API").await
    {
        let api = api.clone();
        let cancel = cancel.clone();
        let tls = tls.clone();
        tracker.spawn(async move {
            let Some(acceptor) = tls else {
                return serve_connection(stream, api, peer.ip(), &cancel).await;
            };
            // The handshake gets the headers' time limit, so that a client
            // that never finishes it holds nothing for long.
            let handshake = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream));
            let shaken = tokio::select! {
                () = cancel.cancelled() => return,
                shaken = handshake => shaken,
            };
            match shaken {
                Ok(Ok(stream)) => serve_connection(stream, api, peer.ip(), &cancel).await,
                Ok(Err(e)) => {
                    api.auth.handshake_failed();
                    debug!(%peer, error = %e, "control API TLS handshake refused");
                }
                Err(_) => {
                    api.auth.handshake_failed();
                    debug!(%peer, "control API TLS handshake timed out");
                }
            }
        });
    }
    tracker.close();
    tracker.wait().await;
    info!("control API stopped");
}

async fn serve_connection<S>(
    stream: S,
    api: Arc<AdminApi>,
    peer: IpAddr,
    cancel: &CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |mut req: Request<hyper::body::Incoming>| {
        let api = api.clone();
        req.extensions_mut().insert(PeerAddr(peer));
        async move { Ok::<_, Infallible>(api.handle(req).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let result = serve_until_cancelled(conn, cancel, Some(SHUTDOWN_GRACE)).await;
    if let Err(e) = result {
        debug!(%peer, error = %e, "control API connection ended with an error");
    }
}
