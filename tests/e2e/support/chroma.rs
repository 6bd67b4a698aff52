//! A real Chroma vector store (pip `chromadb`): `chroma run` on a free
//! loopback port, its heartbeat polled; killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::net::{free_port, wait_for_tcp};
use super::process::Process;
use super::python::python;

/// `$SLUICE_CHROMA`, else the `chroma` next to the venv's python (pip `chromadb`).
pub(crate) fn chroma_bin() -> Option<PathBuf> {
    let from_env = std::env::var_os("SLUICE_CHROMA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let venv = python().and_then(|p| Some(p.parent()?.join("chroma")));
    from_env.into_iter().chain(venv).find(|p| p.is_file())
}

/// `chroma run` on a free loopback port over `dir`; killed on drop.
pub(crate) struct Chroma {
    child: Process,
    pub(crate) port: u16,
}

impl Chroma {
    pub(crate) async fn start(bin: &Path, dir: &Path) -> Chroma {
        let port = free_port();
        let child = Command::new(bin)
            .args([
                "run",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--path",
            ])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chroma");
        let chroma = Chroma {
            child: Process::new(child),
            port,
        };
        wait_for_tcp(([127, 0, 0, 1], port).into(), Duration::from_secs(60))
            .await
            .unwrap();
        let client = reqwest::Client::new();
        for _ in 0..300 {
            let beat = client.get(chroma.url("/api/v2/heartbeat")).send().await;
            if beat.is_ok_and(|r| r.status().is_success()) {
                return chroma;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chroma on port {port} never answered its heartbeat");
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> Value {
        let r = reqwest::Client::new()
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap_or(Value::Null)
    }

    /// SIGTERM, so the store is on disk whole before it is copied.
    pub(crate) fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}
