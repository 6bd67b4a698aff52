//! Loopback ports and readiness: find a free port, wait until something accepts on it.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use anyhow::bail;

/// How often [`wait_for_tcp`] retries.
pub(crate) const WAIT_POLL: Duration = Duration::from_millis(20);

/// A port on 127.0.0.1 that was free a moment ago (bound to `:0`, read, released).
/// For servers that must be told a port up front; one that can bind `:0` itself should.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener
        .local_addr()
        .expect("local_addr of a bound listener")
        .port()
}

/// Polls a TCP connect to `addr` every [`WAIT_POLL`] until it succeeds or `timeout`
/// (wall-clock, so it holds under a paused tokio clock too) runs out.
pub(crate) async fn wait_for_tcp(addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let err = match tokio::net::TcpStream::connect(addr).await {
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        if Instant::now() >= deadline {
            bail!("nothing accepted on {addr} within {timeout:?}: {err}");
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}
