//! `sluice plan --run` against a real sluice: the plan's checks run with
//! `sluice load` against the canary, and only when they pass is the
//! rollout posted, with `plan: auto`, so the control plane's own plan (the
//! same rules, its config's clusters) shows in its status.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sluice_cli::{MockLlm, MockLlmOptions};

use crate::cli::sluice_bin;
use crate::harness::{start, Admin, TestConfig};
use crate::support::TempDir;

/// Stable at v1.4.2 and canary at v1.5.0 (a minor change: its plan checks
/// the new version's throughput) on route `chat`, all on stable.
fn config(stable: &MockLlm, canary: &MockLlm) -> String {
    TestConfig::http()
        .cluster_with("llm-stable", "llm", [stable.addr()], "version: v1.4.2")
        .cluster_with("llm-canary", "llm", [canary.addr()], "version: v1.5.0")
        .route("chat", "llm-stable: 100, llm-canary: 0")
        .yaml()
}

/// Two seconds at 10 a second straight at the canary, none of which may fail.
fn scenario(dir: &Path, canary: &MockLlm) -> PathBuf {
    let text = format!(
        "scenario: canary-throughput\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 2s, seed: 1 }}\n\
         steps:\n\
         \x20 - {{ name: answer, service: llm, model: m, prompt: hi, max_tokens: 4, stream: true }}\n\
         thresholds: {{ error_rate: 0% }}\n",
        canary.addr()
    );
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn plan_run(config: &Path, scenario: &Path, admin: &str, token: &str) -> Output {
    let mut command = Command::new(sluice_bin());
    command
        .args([
            "plan",
            "--from",
            "llm-stable",
            "--to",
            "llm-canary",
            "--route",
            "chat",
        ])
        .arg("--config")
        .arg(config)
        .arg("--run")
        .arg("--scenario")
        .arg(scenario)
        .args(["--admin", admin])
        .env("SLUICE_ADMIN_TOKEN", token);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

async fn posted_after(canary: MockLlmOptions) -> (Output, Option<serde_json::Value>) {
    let stable = MockLlm::start(MockLlmOptions::paced_ms(1, 1, 4))
        .await
        .unwrap();
    let canary = MockLlm::start(canary).await.unwrap();
    let yaml = config(&stable, &canary);
    let sluice = start(&yaml);
    let admin = Admin::new(&sluice);
    let tmp = TempDir::new("plan-run");
    let config_file = tmp.path().join("sluice.yaml");
    std::fs::write(&config_file, &yaml).unwrap();
    let scenario = scenario(tmp.path(), &canary);
    let url = format!("http://{}", sluice.admin_addr);
    let output = plan_run(&config_file, &scenario, &url, &sluice.token).await;
    let (status, rollout) = admin.get("/v1/rollouts/chat-v1.5.0").await;
    (output, (status == 200).then_some(rollout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_run_checks_the_canary_then_posts_the_planned_rollout() {
    let (output, rollout) = posted_after(MockLlmOptions::paced_ms(1, 1, 4)).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("plan for v1.4.2 → v1.5.0 on route chat: a minor change"),
        "{stdout}"
    );
    assert!(stderr.contains("check throughput: passed"), "{stderr}");
    assert!(stderr.contains("posted rollout chat-v1.5.0"), "{stderr}");
    let rollout = rollout.expect("the rollout is posted");
    assert_eq!(rollout["plan"]["change"], "minor", "{rollout}");
    assert_eq!(rollout["steps"], serde_json::json!([5, 20, 50, 100]));
    let first = &rollout["events"][0]["reason"];
    assert!(
        first
            .as_str()
            .unwrap()
            .starts_with("started; plan minor (v1.4.2 → v1.5.0): steps [5, 20, 50, 100] and hold 5m by rule minor"),
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_check_posts_nothing() {
    let failing = MockLlmOptions {
        error_rate: 1.0,
        ..MockLlmOptions::paced_ms(1, 1, 4)
    };
    let (output, rollout) = posted_after(failing).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("check throughput failed: the rollout is not posted"),
        "{stderr}"
    );
    assert!(rollout.is_none(), "{rollout:?}");
}
