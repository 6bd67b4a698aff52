//! Fleet mode against a real Prometheus: three sluice instances share a
//! stable and a canary mock LLM (the canary's TTFT 400 ms against a 150 ms
//! `ttft_p95` gate) and are scraped by one Prometheus; a fourth sluice,
//! with no listener and no route of its own, runs the rollout, reads every
//! gate with PromQL and applies each weight through the three control
//! APIs. The canary goes to 50 % on all three, then back to 0 on all three.
//! `dns`: fifty instances found through DNS, a late one, drift, a rollback.

mod dns;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_proxy::Sluice;

use crate::harness::{listener, start, Admin, TestConfig};
use crate::support::{have, require, Prometheus};

const TOKEN_ENV: &str = "SLUICE_FLEET_E2E_TOKEN";
/// Everything, Prometheus's start included, within this.
const LIMIT: Duration = Duration::from_secs(60);

async fn mock(ttft_ms: u64) -> MockLlm {
    MockLlm::start(MockLlmOptions::paced_ms(ttft_ms, 5, 4))
        .await
        .unwrap()
}

/// Every instance's and the controller's admin and runtime: one token for the fleet.
fn fleet_member() -> TestConfig {
    TestConfig::new()
        .admin(format!("listen: 127.0.0.1:0, token_env: {TOKEN_ENV}"))
        .runtime("threads: 1, grace_period: 1s")
}

fn instance_yaml(stable: &MockLlm, canary: &MockLlm) -> String {
    fleet_member()
        .listener("public", "http", "")
        .cluster_with("stable", "llm", [stable.addr()], "version: v1")
        .cluster_with("canary", "llm", [canary.addr()], "version: v2")
        .route("chat", "stable: 100, canary: 0")
        .yaml()
}

/// A sluice that only runs the rollout: Prometheus in, targets out.
fn controller_yaml(prometheus: &str, targets: &[String]) -> String {
    let rollout = format!(
        "\n  - name: chat-v2\n    route: chat\n    stable: stable\n    canary: canary\n\
         \x20   steps: [50, 100]\n    hold: 5m\n    min_requests: 5\n    window: 4s\n\
         \x20   gates: {{ ttft_p95: 150ms, error_rate: 5% }}\n\
         \x20   source: {{ prometheus: {{ url: \"{prometheus}\", scrape_interval: 1s }} }}\n\
         \x20   targets: [{}]\n    target_token_env: {TOKEN_ENV}",
        targets.join(", ")
    );
    fleet_member().section("rollouts", rollout).yaml()
}

/// Streams chat completions through `sluice` from two clients until
/// `stop` or the deadline; counts the answers.
fn traffic(
    sluice: &Sluice,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let url = format!("http://{}/v1/chat/completions", listener(sluice, "public"));
    let deadline = Instant::now() + LIMIT;
    (0..2)
        .map(|_| {
            let (url, stop, sent) = (url.clone(), stop.clone(), sent.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let body = json!({"model": "m", "stream": true,
                    "messages": [{"role": "user", "content": "hi"}]});
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    if let Ok(r) = client.post(&url).json(&body).send().await {
                        let _ = r.bytes().await;
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect()
}

/// (stable, canary) weights of route chat on one instance.
async fn split(admin: &Admin) -> (u64, u64) {
    let (status, routes) = admin.get("/v1/routes").await;
    assert_eq!(status, 200, "{routes}");
    let s = &routes[0]["split"];
    (s["stable"].as_u64().unwrap(), s["canary"].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_controller_rolls_a_bad_canary_back_on_three_instances() {
    if !require("prometheus", have("prometheus")) {
        return;
    }
    let begin = Instant::now();
    std::env::set_var(TOKEN_ENV, "fleet-e2e-token");
    let (stable, canary) = (mock(20).await, mock(400).await);
    let instances: Vec<Sluice> = (0..3)
        .map(|_| start(&instance_yaml(&stable, &canary)))
        .collect();
    let admins: Vec<Admin> = instances.iter().map(Admin::new).collect();
    let metrics: Vec<_> = instances.iter().map(|s| s.admin_addr).collect();
    let prom = Prometheus::start(&metrics).await;

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let loops: Vec<_> = instances
        .iter()
        .flat_map(|s| traffic(s, stop.clone(), sent.clone()))
        .collect();

    let targets: Vec<String> = metrics.iter().map(|a| format!("http://{a}")).collect();
    let controller = start(&controller_yaml(&prom.url(), &targets));
    let control = Admin::new(&controller);

    // Wait for the verdict, reading the controller's status.
    let mut status = Value::Null;
    while begin.elapsed() < LIMIT {
        status = control.get("/v1/rollouts/chat-v2").await.1;
        if status["state"] == "rolled_back"
            && status["targets"]
                .as_array()
                .is_some_and(|t| t.iter().all(|t| t["weight"] == 0 && t["pending"] == false))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.await.unwrap();
    }
    assert_eq!(status["state"], "rolled_back", "{status:#}");
    eprintln!(
        "fleet: rolled back on 3 instances after {:.1}s ({} requests)",
        begin.elapsed().as_secs_f64(),
        sent.load(Ordering::Relaxed)
    );

    // The evidence is PromQL's: the canary's TTFT p95 over every instance.
    let events = status["events"].as_array().unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (&last["from"], &last["to"]),
        (&json!("progressing"), &json!("rolled_back"))
    );
    let evidence = &last["evidence"][0];
    assert_eq!(evidence["gate"], "ttft_p95", "{last:#}");
    let ttft = evidence["value"].as_f64().unwrap();
    assert!((250.0..=500.0).contains(&ttft), "canary TTFT p95 {ttft} ms");
    assert!(evidence["samples"].as_u64().unwrap() >= 5, "{evidence}");
    assert_eq!(status["gates"]["error_rate"]["ok"], true, "{status:#}");

    // Every instance: the canary was at 50 and is at 0, set through its API.
    for admin in &admins {
        assert_eq!(split(admin).await, (100, 0));
        let (_, log) = admin.get("/v1/events").await;
        let splits: Vec<&Value> = log["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["action"] == "set split of route chat" && e["result"] == "applied")
            .collect();
        assert_eq!(splits.len(), 2, "{log:#}");
    }
    drop(prom);
}
