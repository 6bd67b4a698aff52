//! A real Prometheus server (apt `prometheus`) for the tests: a temp config
//! scraping the given targets every second, on a free loopback port;
//! killed and its data removed on drop.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::net::{free_port, wait_for_tcp};
use super::process::Process;

/// Whether `bin --version` runs.
pub(crate) fn have(bin: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

pub(crate) struct Prometheus {
    _child: Process,
    dir: std::path::PathBuf,
    port: u16,
}

impl Prometheus {
    /// Scrapes `/metrics` of every target once a second.
    pub(crate) async fn start(targets: &[SocketAddr]) -> Prometheus {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sluice-prom-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        std::fs::write(
            &config,
            format!(
                "global: {{ scrape_interval: 1s }}\nscrape_configs:\n  - job_name: sluice\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        )
        .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        wait_for_tcp(([127, 0, 0, 1], port).into(), Duration::from_secs(30))
            .await
            .unwrap();
        Prometheus {
            _child: Process::new(child),
            dir,
            port,
        }
    }

    /// The base URL of its HTTP API.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The first value an instant query answers, if any.
    pub(crate) async fn query(&self, promql: &str) -> Option<f64> {
        let v: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.url()))
            .query(&[("query", promql)])
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
