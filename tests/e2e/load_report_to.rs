//! `sluice load --report-to` against a real sluice control API: the run's
//! live summary shows at `/v1/load-runs` while it runs, its counts grow,
//! and the last push matches the result file's totals. A wrong token or a
//! dead URL costs a warning on stderr, never the run (exit 0).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::cli::sluice_bin;
use crate::harness::{llm_config, start, Admin};
use crate::support::TempDir;

fn scenario(dir: &Path, mock: &MockLlm, secs: u32) -> PathBuf {
    let text = format!(
        "scenario: pushed\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: {secs}s, seed: 5 }}\n\
         steps:\n\
         \x20 - {{ name: answer, service: llm, model: m, prompt: hi, max_tokens: 4, stream: true }}\n\
         thresholds: {{ ttft_p95: 5s }}\n",
        mock.addr()
    );
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `sluice load SCENARIO --report-to URL -o OUT` with the token in the
/// environment, as `sluice ctl` reads it.
fn load(path: &Path, url: &str, token: &str, out: &Path) -> std::process::Child {
    Command::new(sluice_bin())
        .arg("load")
        .arg(path)
        .args(["--report-to", url, "-o"])
        .arg(out)
        .env("SLUICE_ADMIN_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

async fn wait(child: std::process::Child) -> Output {
    tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap()
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_summary_shows_at_the_control_api_and_ends_as_the_result() {
    let mock = MockLlm::start(MockLlmOptions::paced_ms(5, 2, 4))
        .await
        .unwrap();
    let sluice = start(&llm_config(mock.addr()).yaml());
    let admin = Admin::new(&sluice);
    let tmp = TempDir::new("load-report-to");
    let path = scenario(tmp.path(), &mock, 5);
    let out = tmp.path().join("run.json");
    let url = format!("http://{}", sluice.admin_addr);
    let mut child = load(&path, &url, &sluice.token, &out);

    // While it runs: the `done` of each running push seen, in order.
    let mut running: Vec<u64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        let (status, list) = admin.get("/v1/load-runs").await;
        assert_eq!(status, 200, "{list}");
        if let Some(run) = list["runs"].as_array().and_then(|r| r.first()) {
            let done = run["done"].as_u64().unwrap();
            if run["state"] == "running" && running.last() != Some(&done) {
                running.push(done);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let output = wait(child).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        running.len() >= 2 && running.windows(2).all(|w| w[0] < w[1]),
        "the running pushes' counts grow: {running:?}\n{stderr}"
    );
    // stderr is not a terminal here: the plain line every 2 s.
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("load: ") && l.contains("  offered ") && l.contains("  eta ")),
        "{stderr}"
    );
    assert!(!stderr.contains("--report-to"), "{stderr}");

    let result = read(&out);
    let id = result["run_id"].as_str().unwrap();
    let (status, run) = admin.get(&format!("/v1/load-runs/{id}")).await;
    assert_eq!(status, 200, "{run}");
    let summary = &result["summary"];
    let requests = summary["requests"].as_u64().unwrap();
    assert_eq!(requests, 50, "{summary}");
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(run["scenario"], "pushed");
    assert_eq!(
        (run["sent"].as_u64(), run["done"].as_u64()),
        (Some(requests), Some(requests))
    );
    let failed = summary["failed"].as_u64().unwrap() + summary["rate_limited"].as_u64().unwrap();
    assert_eq!(run["failed"].as_u64(), Some(failed));
    assert_eq!(run["in_flight"], 0);
    assert_eq!(run["stage"], Value::Null, "past the schedule's end");
    assert_eq!(run["duration_s"], 5.0);
    assert_eq!(run["passed"], result["passed"]);
    assert_eq!(run["thresholds"][0]["name"], "ttft_p95");
    assert_eq!(
        run["thresholds"][0]["value"],
        result["thresholds"][0]["value"]
    );
    assert_eq!(run["started_at"], result["started_at"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_or_a_dead_api_costs_a_warning_not_the_run() {
    let mock = MockLlm::start(MockLlmOptions::paced_ms(5, 2, 4))
        .await
        .unwrap();
    let sluice = start(&llm_config(mock.addr()).yaml());
    let admin = Admin::new(&sluice);
    let tmp = TempDir::new("load-report-to-fail");
    let path = scenario(tmp.path(), &mock, 1);
    // A port bound and let go: nothing listens there.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let cases = [
        (
            format!("http://{}", sluice.admin_addr),
            "not-the-token",
            "401 Unauthorized",
        ),
        (dead_url, "any", "Connection refused"),
    ];
    for (url, token, why) in cases {
        let out = tmp.path().join("run.json");
        let output = wait(load(&path, &url, token, &out)).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert_eq!(read(&out)["summary"]["requests"], 10, "{stderr}");
        let warned: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with(&format!("load: --report-to {url}: a push failed (")))
            .collect();
        assert_eq!(warned.len(), 1, "said once: {stderr}");
        assert!(warned[0].contains(why), "{stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("load: --report-to: ") && l.ends_with(" pushes failed")),
            "{stderr}"
        );
    }
    let (_, list) = admin.get("/v1/load-runs").await;
    assert_eq!(
        list["runs"],
        serde_json::json!([]),
        "nothing stored without the token"
    );
}
