//! Serving one hyper connection until shutdown, then closing it gracefully:
//! the control API and the mock LLM server stop their connections this way;
//! and the accept loop of the control plane's own listeners (the control API,
//! Toxiproxy's API).

use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::server::graceful::GracefulConnection;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Drives `conn` to its end. If `cancel` fires first the connection is
/// closed gracefully (an idle keep-alive connection at once, a busy one
/// after its current answer), waiting at most `grace` when one is given; a
/// connection cut off at the grace ends without an error.
pub async fn serve_until_cancelled<C: GracefulConnection>(
    conn: C,
    cancel: &CancellationToken,
    grace: Option<Duration>,
) -> Result<(), C::Error> {
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => result,
        () = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            match grace {
                Some(grace) => tokio::time::timeout(grace, conn).await.unwrap_or(Ok(())),
                None => conn.await,
            }
        }
    }
}

/// The next connection on `listener`, or `None` once `cancel` fires. An
/// accept that fails (out of descriptors and the like) is logged as
/// `what`'s and retried after 100 ms rather than in a spin.
pub(crate) async fn accept_until_cancelled(
    listener: &TcpListener,
    cancel: &CancellationToken,
    what: &str,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => return None,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok(conn) => return Some(conn),
            Err(e) => {
                warn!(error = %e, "{what} accept failed");
                tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
}
