//! The processes a bench measures: spawned, pinned, read from `/proc` and
//! killed when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when dropped.
pub struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// The process's resident set, from `/proc`.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id()))?;
        let line = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .ok_or_else(|| anyhow::anyhow!("no VmRSS"))?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| anyhow::anyhow!("bad VmRSS line"))?
            .parse()?)
    }
}

/// `bin args`, pinned to `core` with `taskset` when given, its output dropped.
pub fn spawn(bin: &Path, args: &[String], core: Option<usize>) -> anyhow::Result<Proc> {
    let mut command = match core {
        Some(core) => {
            let mut taskset = Command::new("taskset");
            taskset.arg("-c").arg(core.to_string()).arg(bin);
            taskset
        }
        None => Command::new(bin),
    };
    let child = command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(Proc(child))
}

/// Waits (20 s at most) until something accepts on `addr`.
pub fn wait_listening(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "{addr} never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
