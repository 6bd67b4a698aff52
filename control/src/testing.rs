//! Setup the control plane's unit tests share: the configs most of them start from, the store
//! built on a config as at boot, a model server's metrics page.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::shared::Shared;
use crate::store::SnapshotStore;

/// Listener `public` and clusters `first` (v1) and `second` (v2), no route: the head of
/// the configs of tests that split, reload, match or roll out between two clusters.
pub(crate) fn two_clusters(first: &str, second: &str) -> String {
    format!(
        "listeners:
  - {{ name: public, listen: 127.0.0.1:18080, protocol: http }}
clusters:
  - {{ name: {first}, kind: llm, version: v1, endpoints: [127.0.0.1:18001] }}
  - {{ name: {second}, kind: llm, version: v2, endpoints: [127.0.0.1:18002] }}
"
    )
}

/// [`two_clusters`] `stable` and `canary` with route `chat` all on `stable`: where every
/// rollout test starts. `rollouts:` may follow.
pub(crate) fn stable_canary() -> String {
    let head = two_clusters("stable", "canary");
    format!("{head}routes:\n  - {{ name: chat, listener: public, split: {{ stable: 100, canary: 0 }} }}\n")
}

/// [`two_clusters`] `a` and `b` with route `chat` split `a: 100, b: 0`, and `extra` keys on
/// the route (`sticky: { header: x-session-id }`).
pub(crate) fn ab_chat(extra: &str) -> String {
    let head = two_clusters("a", "b");
    let extra = match extra {
        "" => String::new(),
        extra => format!(", {extra}"),
    };
    format!(
        "{head}routes:\n  - {{ name: chat, listener: public, split: {{ a: 100, b: 0 }}{extra} }}\n"
    )
}

/// Cancels `cancel` and waits for `task`, a background loop, to end (5 s at most).
pub(crate) async fn stop(cancel: &CancellationToken, task: JoinHandle<()>) {
    cancel.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
    ended.expect("the loop ends when cancelled").unwrap();
}

/// `yaml` parsed and validated; a test's config that does not parse is the test's bug.
pub(crate) fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml).unwrap_or_else(|e| panic!("test config invalid:\n{e}\n{yaml}"))
}

/// The store on `yaml`, with fresh metrics and stats, as `Sluice::start` builds it.
pub(crate) fn store(yaml: &str) -> (Arc<SnapshotStore>, Shared) {
    let shared = Shared::new().unwrap();
    let store = SnapshotStore::new(config(yaml), &shared);
    (store, shared)
}

/// A model server's metrics on loopback: `text` at `/metrics`, 404 elsewhere; stops on drop.
pub(crate) struct MetricsServer {
    pub(crate) addr: SocketAddr,
    task: JoinHandle<()>,
}

impl MetricsServer {
    pub(crate) async fn start(text: String) -> MetricsServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let text = Bytes::from(text);
        // Aborted on drop; its connections end with it.
        #[allow(clippy::disallowed_methods)]
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let text = text.clone();
                conns.spawn(async move {
                    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let found = req.uri().path() == "/metrics";
                        let mut resp = http::Response::new(Full::new(match found {
                            true => text.clone(),
                            false => Bytes::new(),
                        }));
                        if !found {
                            *resp.status_mut() = StatusCode::NOT_FOUND;
                        }
                        async move { Ok::<_, Infallible>(resp) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        MetricsServer { addr, task }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The rollout the rollout unit tests start from: `chat-v2` moving route
/// `chat` from cluster `a` to `b` in steps 1, 5, 20, 50, 100 with 30 s
/// holds, judged on `gates` every 250 ms over 10 s windows of at least 100
/// requests, rolled back after two breaches; local mode.
pub(crate) fn rollout_config(gates: crate::config::Gates) -> crate::config::RolloutConfig {
    crate::config::RolloutConfig {
        name: "chat-v2".into(),
        route: "chat".into(),
        stable: "a".into(),
        canary: "b".into(),
        steps: vec![1, 5, 20, 50, 100],
        hold: Duration::from_secs(30),
        min_requests: 100,
        interval: Duration::from_millis(250),
        window: Duration::from_secs(10),
        consecutive: 2,
        on_breach: crate::config::OnBreach::Rollback,
        on_restart: crate::config::OnRestart::Continue,
        gates,
        source: None,
        targets: Vec::new(),
        discovery: None,
        reconcile_interval: Duration::from_secs(5),
        fanout: crate::config::Fanout {
            concurrency: 64,
            timeout: Duration::from_secs(2),
        },
        target_token_env: "SLUICE_ADMIN_TOKEN".into(),
        canary_price: None,
        plan: None,
        p99_vs_stable_above_rps: None,
    }
}
