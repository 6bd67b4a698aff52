//! State across restarts (`runtime.state_dir`) on the real `sluice run`
//! process, killed with SIGKILL: a rollout comes back at its step (killed
//! right after a step and mid-hold), an aborted or rolled-back one stays so
//! with its canary at 0, weights set through the API come back, an
//! experiment whose TTL passed while sluice was down does not, and a
//! corrupt state file is refused with a clear error and a start from the
//! config.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::MockLlm;

use crate::lifecycle::{process, Running};
use crate::rollout::mock;
use crate::support::{free_port, TempDir, WAIT_POLL};

const LIMIT: Duration = Duration::from_secs(30);
const RESTARTED: &str = "sluice restarted; goes on from the saved state";

/// A sluice with its state in `dir/state`, route `chat` on `stable` and
/// `canary`, and `rollout` (a flow map) when not empty.
struct Setup {
    dir: TempDir,
    yaml: String,
    admin: u16,
    port: u16,
    _mocks: (MockLlm, MockLlm),
}

impl Setup {
    async fn new(name: &str, canary_ttft_ms: u64, rollout: &str) -> Setup {
        let dir = TempDir::new(name);
        let (stable, canary) = (mock("v1", 10).await, mock("v2", canary_ttft_ms).await);
        let (admin, port) = (free_port(), free_port());
        let state = dir.path().join("state");
        let mut config = process(admin)
            .runtime(format!("threads: 2, state_dir: {}", state.display()))
            .listener_at("public", "http", format!("127.0.0.1:{port}"), "")
            .cluster_with("stable", "llm", [stable.addr()], "version: v1")
            .cluster_with("canary", "llm", [canary.addr()], "version: v2")
            .route_with(
                "chat",
                "stable: 100, canary: 0",
                "match: { path_prefix: / }",
            );
        if !rollout.is_empty() {
            config = config.section("rollouts", format!("\n  - {rollout}"));
        }
        Setup {
            yaml: config.yaml(),
            dir,
            admin,
            port,
            _mocks: (stable, canary),
        }
    }

    async fn start(&self) -> Running {
        let mut sluice = Running::spawn(&self.dir, &self.yaml, self.admin);
        sluice.ready().await;
        sluice
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
}

/// The state file as it is on disk now (`null` when there is none).
fn on_disk(dir: &Path) -> Value {
    std::fs::read(dir.join("state.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// The saved controller of rollout `name` once `ready` holds for it.
async fn saved_when(dir: &Path, name: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + LIMIT;
    loop {
        let state = on_disk(dir);
        let controllers = state["controllers"].as_array().cloned().unwrap_or_default();
        if let Some(c) = controllers.into_iter().find(|c| c["name"] == name) {
            if ready(&c) {
                return c;
            }
        }
        assert!(Instant::now() < deadline, "not saved: {state}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Chat completions through the proxy from 4 workers until dropped; errors
/// (sluice down between a kill and a restart) are skipped.
struct Traffic(Arc<AtomicBool>, Vec<tokio::task::JoinHandle<()>>);

impl Traffic {
    fn start(port: u16) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let stop = stop.clone();
            workers.push(tokio::spawn(async move {
                let client = reqwest::Client::new();
                let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
                let body = json!({"messages": [{"role": "user", "content": "hi"}], "stream": true});
                while !stop.load(Ordering::Relaxed) {
                    let sent = client.post(&url).json(&body).send().await;
                    match sent {
                        Ok(r) => drop(r.bytes().await),
                        Err(_) => tokio::time::sleep(WAIT_POLL).await,
                    }
                }
            }));
        }
        Traffic(stop, workers)
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        // A worker may be waiting on a stream: it ends here, not later.
        for w in &self.1 {
            w.abort();
        }
    }
}

async fn rollout(sluice: &Running) -> Value {
    sluice.get("/v1/rollouts/chat-v2").await
}

async fn split(sluice: &Running) -> Value {
    sluice.get("/v1/routes").await[0]["split"].clone()
}

/// Status until `ready` holds, or fails after [`LIMIT`].
async fn rollout_when(sluice: &Running, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + LIMIT;
    loop {
        let status = rollout(sluice).await;
        if ready(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "{status}");
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// (reason, step, weight) of each transition in a rollout's history.
fn history(status: &Value) -> Vec<(String, u64, u64)> {
    let events = status["events"].as_array().cloned().unwrap_or_default();
    events
        .iter()
        .map(|e| {
            let reason = e["reason"].as_str().unwrap_or_default().to_string();
            (
                reason,
                e["step"].as_u64().unwrap(),
                e["weight"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_a_rollout_killed_right_after_a_step_and_mid_hold_goes_on_from_its_step() {
    let setup = Setup::new(
        "state-steps",
        10,
        "{ name: chat-v2, route: chat, stable: stable, canary: canary, steps: [10, 40, 100], \
         hold: 2s, min_requests: 5, interval: 100ms, window: 2s, gates: { ttft_p95: 150ms } }",
    )
    .await;
    let _traffic = Traffic::start(setup.port);
    let mut sluice = setup.start().await;

    // Killed right after step 2 reached the disk.
    let saved = saved_when(&setup.state_dir(), "chat-v2", |c| c["step"] == 2).await;
    sluice.kill9();
    assert_eq!(
        (&saved["state"], &saved["weight"]),
        (&json!("progressing"), &json!(40))
    );
    let mut sluice = setup.start().await;
    let status = rollout(&sluice).await;
    let seen = history(&status);
    assert_eq!(seen[0], ("started".into(), 1, 10), "{status}");
    let restart = seen.iter().position(|e| e.0 == RESTARTED);
    let restart = restart.unwrap_or_else(|| panic!("no restart in {status}"));
    assert_eq!(seen[restart], (RESTARTED.into(), 2, 40), "{status}");
    assert_eq!(status["step"], 2, "{status}");
    assert_eq!(split(&sluice).await, json!({"stable": 60, "canary": 40}));

    // Killed mid-hold: the hold at step 2 began again at the restart (2s).
    tokio::time::sleep(Duration::from_millis(800)).await;
    let status = rollout(&sluice).await;
    assert_eq!(
        (&status["step"], &status["weight"]),
        (&json!(2), &json!(40)),
        "{status}"
    );
    sluice.kill9();
    let sluice = setup.start().await;
    let status = rollout(&sluice).await;
    assert_eq!(status["state"], "progressing", "{status}");
    let seen = history(&status);
    let restarts: Vec<_> = seen.iter().filter(|e| e.0 == RESTARTED).collect();
    assert_eq!(restarts, [&(RESTARTED.into(), 2, 40); 2], "{status}");

    // It goes on to 100 from step 2, never back to 10.
    let status = rollout_when(&sluice, |s| s["state"] == "promoted").await;
    let weights: Vec<u64> = history(&status).iter().map(|e| e.2).collect();
    assert_eq!(weights, [10, 40, 40, 40, 100], "{status}");
    assert_eq!(split(&sluice).await, json!({"stable": 0, "canary": 100}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_an_aborted_rollout_stays_aborted_across_kill9() {
    let setup = Setup::new(
        "state-abort",
        10,
        "{ name: chat-v2, route: chat, stable: stable, canary: canary, steps: [10, 40, 100], \
         hold: 1h, min_requests: 5, interval: 100ms, window: 2s, gates: { ttft_p95: 150ms } }",
    )
    .await;
    let _traffic = Traffic::start(setup.port);
    let mut sluice = setup.start().await;
    rollout_when(&sluice, |s| s["weight"] == 10).await;
    let (code, body) = sluice.send("POST", "/v1/rollouts/chat-v2/abort", "").await;
    assert_eq!(
        (code, &body["state"], &body["weight"]),
        (200, &json!("aborted"), &json!(0))
    );
    // The answer came once the state was on disk: killed at once.
    sluice.kill9();

    let sluice = setup.start().await;
    // The config file still lists it: without the state it would start
    // again at 10%.
    for _ in 0..10 {
        let status = rollout(&sluice).await;
        assert_eq!(
            (&status["state"], &status["weight"]),
            (&json!("aborted"), &json!(0)),
            "{status}"
        );
        assert_eq!(split(&sluice).await, json!({"stable": 100, "canary": 0}));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let config = sluice.get("/v1/config").await;
    assert_eq!(config.get("rollouts"), None, "{config}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_a_rollout_killed_right_after_a_rollback_stays_rolled_back() {
    let setup = Setup::new(
        "state-rollback",
        400,
        "{ name: chat-v2, route: chat, stable: stable, canary: canary, steps: [50, 100], \
         hold: 1s, min_requests: 5, interval: 100ms, window: 2s, gates: { ttft_p95: 150ms } }",
    )
    .await;
    let _traffic = Traffic::start(setup.port);
    let mut sluice = setup.start().await;
    let saved = saved_when(&setup.state_dir(), "chat-v2", |c| {
        c["state"] == "rolled_back"
    })
    .await;
    sluice.kill9();
    assert_eq!(saved["weight"], 0, "{saved}");

    let sluice = setup.start().await;
    for _ in 0..10 {
        let status = rollout(&sluice).await;
        assert_eq!(
            (&status["state"], &status["weight"]),
            (&json!("rolled_back"), &json!(0)),
            "{status}"
        );
        assert_eq!(split(&sluice).await, json!({"stable": 100, "canary": 0}));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = rollout(&sluice).await;
    let last = history(&status).pop().unwrap();
    assert!(last.0.contains("ttft_p95"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_weights_come_back_and_an_expired_experiment_does_not() {
    let setup = Setup::new("state-weights", 10, "").await;
    let mut sluice = setup.start().await;
    let (code, body) = sluice
        .send(
            "PUT",
            "/v1/routes/chat/split",
            r#"{"stable": 70, "canary": 30}"#,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let fault = |id: &str, ttl: &str| {
        json!({"id": id, "match": {"route": "chat"}, "ttl": ttl,
               "action": {"abort": {"status": 503}}})
        .to_string()
    };
    let posted = Instant::now();
    let (code, body) = sluice
        .send("POST", "/v1/faults", &fault("short", "1s"))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = sluice
        .send("POST", "/v1/faults", &fault("long", "10m"))
        .await;
    assert_eq!(code, 201, "{body}");
    sluice.kill9();
    // Down until the short one's TTL has passed.
    tokio::time::sleep(Duration::from_millis(1500).saturating_sub(posted.elapsed())).await;

    let mut sluice = setup.start().await;
    assert_eq!(split(&sluice).await, json!({"stable": 70, "canary": 30}));
    let faults = sluice.get("/v1/faults").await;
    let faults = faults["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert_eq!(
        (&faults[0]["id"], &faults[0]["state"]),
        (&json!("long"), &json!("active"))
    );
    let left = faults[0]["time_left_ms"].as_u64().unwrap();
    assert!((500_000..600_000).contains(&left), "{left}");
    let events = sluice.get("/v1/events").await.to_string();
    assert!(events.contains("state restored"), "{events}");
    assert!(
        events.contains("fault short: expired while down, dropped"),
        "{events}"
    );

    // `PUT /v1/config` replaces everything, the state with it.
    let (code, body) = sluice.send("PUT", "/v1/config", &setup.yaml).await;
    assert_eq!(code, 200, "{body}");
    sluice.kill9();
    let sluice = setup.start().await;
    assert_eq!(split(&sluice).await, json!({"stable": 100, "canary": 0}));
    assert_eq!(sluice.get("/v1/faults").await["faults"], json!([]));
    let state = on_disk(&setup.state_dir());
    assert_eq!(state["splits"], json!({}), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_a_corrupt_state_file_is_refused_and_sluice_starts_from_the_config() {
    let setup = Setup::new("state-corrupt", 10, "").await;
    let dir = setup.state_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state.json");
    std::fs::write(
        &path,
        "{\"v\": 1, \"splits\": {\"chat\": {\"stable\": 5,}}}",
    )
    .unwrap();

    let mut sluice = setup.start().await;
    assert_eq!(split(&sluice).await, json!({"stable": 100, "canary": 0}));
    let error = format!(
        "{}: not JSON: trailing comma at line 1 column 42",
        path.display()
    );
    let log = sluice.output();
    assert!(
        log.contains("state file refused; starting from the config alone"),
        "{log}"
    );
    assert!(log.contains(&error), "{log}");
    let events = sluice.get("/v1/events").await.to_string();
    assert!(
        events.contains("state file refused, started from the config alone"),
        "{events}"
    );
    assert!(events.contains(&error.replace('\\', "\\\\")), "{events}");
    // Kept aside for a look; a good one written in its place.
    let aside = std::fs::read_to_string(dir.join("state.json.refused")).unwrap();
    assert!(aside.contains("\"stable\": 5,}"), "{aside}");
    let state = on_disk(&dir);
    assert_eq!(
        (&state["v"], &state["splits"]),
        (&json!(1), &json!({})),
        "{state}"
    );
    sluice.kill9();
}

#[tokio::test]
async fn state_a_state_dir_that_cannot_be_made_stops_the_start_naming_it() {
    let dir = TempDir::new("state-blocked");
    let state = dir.write("file", "x").join("state");
    let yaml = crate::harness::llm_config("127.0.0.1:9")
        .runtime(format!("threads: 1, state_dir: {}", state.display()))
        .yaml();
    let config = sluice_control::Config::from_yaml(&yaml).unwrap();
    let options = sluice_proxy::StartOptions::default();
    let error = sluice_proxy::Sluice::start(config, options)
        .err()
        .expect("refused");
    assert_eq!(
        format!("{error:#}"),
        format!(
            "runtime.state_dir: cannot create or write {}: Not a directory (os error 20)",
            state.display()
        )
    );
}
