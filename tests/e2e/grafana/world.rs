//! What the dashboard test runs against: the upstreams (three mock LLMs and a slow one
//! behind a breaker of one request, an echo pair of which one answers 500, a gRPC server,
//! a real `redis-server`), a real OTLP collector, and one sluice started from a config
//! file it watches, running two rollouts: a local one whose canary breaks its gate, and a
//! fleet-mode one whose only target is this sluice's own control API.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sluice_cli::MockLlm;
use sluice_control::Config;
use sluice_proxy::{Sluice, StartOptions};

use super::grpc_upstream::GrpcUpstream;
use crate::harness::{Admin, TestConfig};
use crate::otlp::collector::Collector;
use crate::rollout::mock;
use crate::support::{free_port, NamedUpstream, RedisServer, TempDir};

/// The control API's token, which the fleet rollout also sends to its target.
const TOKEN_ENV: &str = "SLUICE_GRAFANA_E2E_TOKEN";
const TOKEN: &str = "grafana-e2e-token";
const CONFIG_FILE: &str = "sluice.yaml";

pub(super) struct World {
    pub(super) sluice: Sluice,
    pub(super) admin: Admin,
    dir: TempDir,
    yaml: String,
    _mocks: [MockLlm; 4],
    _echoes: [NamedUpstream; 2],
    _grpc: GrpcUpstream,
    _redis: RedisServer,
    _collector: Collector,
}

impl World {
    pub(super) async fn start(rotel: &PathBuf) -> World {
        let stable = mock("v1", 5).await;
        // Slower than the gate: the rollout rolls back on live traffic.
        let canary = mock("v2", 60).await;
        let shadow = mock("v3", 5).await;
        // Slow enough that three requests at once overlap at its breaker.
        let guarded = mock("v1", 100).await;
        let good = NamedUpstream::start("good").await.unwrap();
        let bad = NamedUpstream::start_answering("bad", 500).await.unwrap();
        let grpc = GrpcUpstream::start().await.unwrap();
        let redis = RedisServer::start().await.unwrap();
        let collector = Collector::start(rotel).await.unwrap();

        std::env::set_var(TOKEN_ENV, TOKEN);
        let admin_port = free_port();
        let yaml = TestConfig::http()
            .admin(format!(
                "listen: 127.0.0.1:{admin_port}, token_env: {TOKEN_ENV}"
            ))
            .listener("cache", "tcp", "cluster: redis")
            // The mock serves no /metrics: the model-server row reads `up` 0 and scrape errors.
            .cluster_with(
                "stable",
                "llm",
                [stable.addr()],
                "version: v1, metrics_path: /metrics",
            )
            .cluster_with("canary", "llm", [canary.addr()], "version: v2")
            .cluster_with("shadow", "llm", [shadow.addr()], "version: v3")
            .cluster("redis", "cache", [redis.addr()])
            .cluster_with(
                "guarded",
                "llm",
                [guarded.addr()],
                "version: v1, circuit_breakers: { max_requests: 1 }",
            )
            .cluster_with(
                "flaky",
                "http",
                [good.addr(), bad.addr()],
                "outlier_detection: { consecutive_5xx: 2, base_ejection: 1s }",
            )
            .cluster_with("rpc", "http", [grpc.addr()], "protocol: h2c")
            // The routes that match on something come before `chat`, which takes the rest.
            .route_with(
                "guarded",
                "guarded: 100",
                "match: { headers: { x-pool: guarded } }",
            )
            .route_with(
                "limited",
                "stable: 100",
                &format!(
                    "match: {{ headers: {{ x-pool: limited }} }}, limits: {{ requests_per_minute: 1, \
                     store: {{ redis: {{ url: \"{}\", sync_interval: 50ms }} }} }}",
                    redis.addr()
                ),
            )
            .route_with(
                "fleet",
                "stable: 100, canary: 0",
                "match: { headers: { x-pool: fleet } }",
            )
            .route_with("flaky", "flaky: 100", "match: { path_prefix: /flaky }")
            .route_with("rpc", "rpc: 100", "match: { path_prefix: /grpc. }")
            .route_with(
                "chat",
                "stable: 100, canary: 0",
                "mirror: { cluster: shadow, percent: 100 }",
            )
            .section("rollouts", rollouts(admin_port))
            .section(
                "telemetry",
                format!(
                    "{{ otlp_endpoint: \"{}\", sample_ratio: 0.1, service_name: sluice-grafana }}",
                    collector.endpoint()
                ),
            )
            .yaml();
        let dir = TempDir::new("grafana");
        let path = dir.write(CONFIG_FILE, &yaml);
        let sluice = start_watching(&yaml, &path);
        World {
            admin: Admin::new(&sluice),
            sluice,
            dir,
            yaml,
            _mocks: [stable, canary, shadow, guarded],
            _echoes: [good, bad],
            _grpc: grpc,
            _redis: redis,
            _collector: collector,
        }
    }

    /// Writes the config file again, a comment added: the same config, new content,
    /// which the watcher reloads within a second.
    pub(super) fn touch_config(&self) {
        let yaml = format!("{}# touched by the dashboard test\n", self.yaml);
        self.dir.write(CONFIG_FILE, &yaml);
    }

    /// Once the fleet rollout has put the canary of route `fleet` at 50, moves it back
    /// to 0 by hand, which its reconcile loop finds and sets back (drift); whether it did.
    pub(super) async fn drift_fleet(&self) -> bool {
        let (_, routes) = self.admin.get("/v1/routes").await;
        let split = routes
            .as_array()
            .and_then(|routes| routes.iter().find(|r| r["name"] == "fleet"))
            .map_or(Value::Null, |r| r["split"].clone());
        if split["canary"] != 50 {
            return false;
        }
        let (status, body) = self
            .admin
            .set_split("fleet", json!({"stable": 100, "canary": 0}))
            .await;
        assert_eq!(status, 200, "{body}");
        true
    }
}

/// `chat-v2`, local: its canary is slower than the gate and is rolled back on live
/// traffic. `fleet-v2`, fleet mode: holds route `fleet` at 50 on its one target, this
/// sluice, and checks it every second.
fn rollouts(admin_port: u16) -> String {
    format!(
        "\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, steps: [50, 100], \
         hold: 1s, min_requests: 5, interval: 100ms, window: 2s, gates: {{ ttft_p95: 30ms }} }}\
         \n  - {{ name: fleet-v2, route: fleet, stable: stable, canary: canary, steps: [50, 100], \
         hold: 5m, min_requests: 5, gates: {{ error_rate: 5% }}, \
         targets: [\"http://127.0.0.1:{admin_port}\"], target_token_env: {TOKEN_ENV}, \
         reconcile_interval: 1s }}"
    )
}

/// Sluice as `main` starts it from a file: the file watched for changes.
fn start_watching(yaml: &str, path: &Path) -> Sluice {
    let config =
        Config::from_yaml(yaml).unwrap_or_else(|e| panic!("test config invalid:\n{e}\n{yaml}"));
    let options = StartOptions {
        config_path: Some(path.to_path_buf()),
        ..StartOptions::default()
    };
    Sluice::start(config, options).expect("sluice starts")
}
