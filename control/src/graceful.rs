//! Serving one hyper connection until shutdown, then closing it gracefully:
//! the control API and the mock LLM server stop their connections this way.

use std::time::Duration;

use hyper_util::server::graceful::GracefulConnection;
use tokio_util::sync::CancellationToken;

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
