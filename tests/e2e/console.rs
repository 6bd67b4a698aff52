//! The web console at `GET /ui`, in a real browser: Debian's Chromium driven by
//! playwright-core (tests/e2e/console/drive.cjs) against a running sluice whose canary
//! slows down mid-rollout. The page logs in, shows the rollout mid-step, then its
//! rollback and the reason without a reload, refuses a read token's stop with the 403,
//! and stops a fault with an admin token. The screenshots land in target/artifacts/
//! (console-login.png, console-rollout.png, console-rollback.png, console-faults.png).
//! And the committed bundle is what scripts/build-ui.sh builds from the sources.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{listener, Admin, TestConfig};
use crate::rollout::{ask, mock};
use crate::support::{have, require, workspace_root, Process, TempDir};

/// A read token and an admin one, in the multi-line `token_file` form.
const TOKENS: &str = "viewer read read-only-secret\nops admin admin-secret\n";

fn build_ui(args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(workspace_root().join("scripts/build-ui.sh"))
        .args(args)
        .output()
        .unwrap()
}

fn node_and_npm() -> bool {
    require("node and npm", have("node") && have("npm"))
}

#[test]
fn the_committed_console_is_what_build_ui_builds_from_its_sources() {
    if !node_and_npm() {
        return;
    }
    let tmp = TempDir::new("console-build");
    let out = tmp.path().join("dist");
    let o = build_ui(&["--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let committed = workspace_root().join("control/ui/dist");
    for name in ["index.html", "console.js", "console.css", "favicon.svg"] {
        let built = std::fs::read(out.join(name)).unwrap();
        assert!(!built.is_empty(), "{name}");
        assert!(
            built == std::fs::read(committed.join(name)).unwrap(),
            "control/ui/dist/{name} is not what scripts/build-ui.sh builds: run it and commit dist/"
        );
    }
}

/// Streamed chats to the route until `stop`, so that both versions have figures.
async fn traffic(url: String, stop: Arc<AtomicBool>) {
    let client = reqwest::Client::new();
    while !stop.load(Ordering::Relaxed) {
        let asks = (0..4).map(|_| ask(&client, &url, &[]));
        futures_util::future::join_all(asks).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The driver's stdout, line by line, on a channel.
fn lines_of(child: &mut Process) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn is_png(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"\x89PNG\r\n\x1a\n") && b.len() > 10_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_rollback_live_and_stops_a_fault_in_chromium() {
    if !require("chromium", have("chromium")) || !node_and_npm() {
        return;
    }
    // playwright-core, installed (once) with the console's devDependencies.
    let o = build_ui(&["--install-only"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let stable = mock("v1", 10).await;
    let canary = mock("v2", 10).await;
    let tmp = TempDir::new("console");
    let tokens = tmp.write("tokens", TOKENS);
    // A long hold: the rollout stays mid-step until the test slows the canary down.
    let sluice = TestConfig::http()
        .admin(format!("listen: 127.0.0.1:0, token_file: {}", tokens.display()))
        .cluster_with("stable", "llm", [stable.addr()], "version: v1")
        .cluster_with("canary", "llm", [canary.addr()], "version: v2")
        .route("chat", "stable: 100, canary: 0")
        .section(
            "rollouts",
            "\n  - { name: chat-v2, route: chat, stable: stable, canary: canary, steps: [20, 50, 100], \
             hold: 120s, min_requests: 5, interval: 100ms, window: 2s, gates: { ttft_p95: 150ms } }",
        )
        .start();
    let admin = Admin::new(&sluice);
    // Two experiments that no request matches: the page stops one of them.
    for fault in [
        json!({"id": "chaos-503", "ttl": "10m", "match": {"route": "chat", "headers": {"x-chaos": "on"}},
               "action": {"abort": {"status": 503, "body": "injected"}}}),
        json!({"id": "slow-probe", "ttl": "15m", "percent": 50, "match": {"headers": {"x-probe": "slow"}},
               "action": {"delay": {"delay": "300ms"}}}),
    ] {
        let (status, body) = admin.post("/v1/faults", fault.to_string()).await;
        assert_eq!(status, 201, "{body}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let load = tokio::spawn(traffic(url, stop.clone()));

    let shots: PathBuf = workspace_root().join("target").join("artifacts");
    std::fs::create_dir_all(&shots).unwrap();
    let names = [
        "console-login.png",
        "console-rollout.png",
        "console-rollback.png",
        "console-faults.png",
    ];
    for name in names.iter().chain(&["console-failure.png"]) {
        let _ = std::fs::remove_file(shots.join(name));
    }
    let stderr = tmp.path().join("driver.stderr");
    let mut driver = Process::new(
        Command::new("node")
            .arg(workspace_root().join("tests/e2e/console/drive.cjs"))
            .env(
                "NODE_PATH",
                workspace_root().join("control/ui/node_modules"),
            )
            .env("CONSOLE_URL", format!("http://{}", sluice.admin_addr))
            .env("ADMIN_TOKEN", "admin-secret")
            .env("READ_TOKEN", "read-only-secret")
            .env("SHOTS", &shots)
            .env("CHROMIUM", "/usr/bin/chromium")
            .env("NO_PROXY", "127.0.0.1")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut lines = lines_of(&mut driver);
    let mut result = None;
    let mut slowed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while let Ok(Some(line)) = tokio::time::timeout_at(deadline, lines.recv()).await {
        if line == "SLOW_CANARY" {
            canary.knobs().set_ttft(Duration::from_millis(400));
            slowed = true;
        } else if let Some(json) = line.strip_prefix("RESULT ") {
            result = Some(serde_json::from_str::<Value>(json).unwrap());
        }
    }
    let status = tokio::task::spawn_blocking(move || driver.wait().unwrap())
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(
        status.success(),
        "the browser script failed ({status}):\n{log}"
    );
    assert!(slowed, "the script never saw the rollout mid-step:\n{log}");
    let result = result.unwrap_or_else(|| panic!("no RESULT line:\n{log}"));
    let held: Vec<&str> = result["held"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    eprintln!(
        "console: {} assertions held in chromium:\n  {}",
        held.len(),
        held.join("\n  ")
    );
    for expected in [
        "a wrong token stays on the login form with the 401's message",
        "a read token's stop shows the 403",
        "the rollout shows its step mid-way",
        "the rollback reason names the gate",
        "the rollback appeared without a reload or navigation",
        "GET /v1/faults no longer has it",
        "the stopped fault stays off the page",
        "no script error or console error",
        "every request went to sluice itself",
    ] {
        assert!(
            held.iter().any(|h| h.starts_with(expected)),
            "{expected}: {held:?}"
        );
    }
    assert_eq!(result["navigations"], 0);

    // What the page showed is what the API says.
    let (_, rollout) = admin.get("/v1/rollouts/chat-v2").await;
    assert_eq!(rollout["state"], "rolled_back", "{rollout}");
    let (_, faults) = admin.get("/v1/faults").await;
    let ids: Vec<&str> = faults["faults"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert_eq!(ids, ["slow-probe"], "{faults}");
    for name in names {
        assert!(is_png(&shots.join(name)), "{name} is not a screenshot");
    }
}
