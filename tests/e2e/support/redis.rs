//! A throwaway `redis-server` child process on a free loopback port.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::net::{free_port, WAIT_POLL};
use super::process::Process;

/// Whether `redis-server` is on PATH.
pub(crate) fn redis_available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `redis-server` without persistence on 127.0.0.1; killed when dropped.
pub(crate) struct RedisServer {
    child: Process,
    addr: SocketAddr,
}

impl RedisServer {
    /// Starts it and waits until it accepts connections. A port taken between
    /// [`free_port`] and redis binding it makes redis exit; that is retried on a new port.
    pub(crate) async fn start() -> anyhow::Result<Self> {
        Self::start_with(&[]).await
    }

    /// One that refuses every command until `AUTH password`.
    pub(crate) async fn start_with_password(password: &str) -> anyhow::Result<Self> {
        Self::start_with(&["--requirepass", password]).await
    }

    /// One on `port` (a server that was stopped, started again where its clients look).
    pub(crate) async fn start_on(port: u16) -> anyhow::Result<Self> {
        Self::start_at(SocketAddr::from(([127, 0, 0, 1], port)), &[]).await
    }

    async fn start_with(extra: &[&str]) -> anyhow::Result<Self> {
        let mut last = None;
        for _ in 0..3 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            match Self::start_at(addr, extra).await {
                Ok(server) => return Ok(server),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    async fn start_at(addr: SocketAddr, extra: &[&str]) -> anyhow::Result<Self> {
        let child = Command::new("redis-server")
            .args(["--port", &addr.port().to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn redis-server (is it installed? scripts/install-deps.sh)")?;
        let mut child = Process::new(child);
        wait_ready(&mut child, addr).await?;
        Ok(Self { child, addr })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `redis://127.0.0.1:PORT`
    pub(crate) fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

async fn wait_ready(child: &mut Child, addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("redis-server on {addr} exited at start: {status}");
        }
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("redis-server did not accept on {addr} within 10s");
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}
