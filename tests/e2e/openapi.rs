//! `GET /v1/openapi.json` against the live API: schemathesis (PyPI) reads the document and
//! sends random valid and invalid requests to every operation of a running sluice, with
//! the token; each answer must be documented (status, content type, body schema) and none
//! a 5xx.

use std::path::PathBuf;
use std::process::Command;

use crate::harness::{llm_config, Admin};
use crate::rollout::mock;
use crate::support::{python, require, run_json, TempDir};

/// The `schemathesis` script beside the venv's Python, when it runs.
fn schemathesis() -> Option<PathBuf> {
    let bin = python()?.parent()?.join("schemathesis");
    let runs = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    runs.then_some(bin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_every_answer_documented_and_no_5xx() {
    let Some(bin) = schemathesis() else {
        require("schemathesis in the venv", false);
        return;
    };
    let upstream = mock("v1", 1).await;
    let sluice = llm_config(upstream.addr()).start();
    let admin = Admin::new(&sluice);
    let (status, doc) = admin.get("/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let anonymous = reqwest::get(format!("http://{}/v1/openapi.json", sluice.admin_addr));
    assert_eq!(anonymous.await.unwrap().status(), 401);

    let dir = TempDir::new("openapi");
    let schema = dir.path().join("openapi.json");
    std::fs::write(&schema, doc.to_string()).unwrap();
    let report = dir.path().join("report.json");
    let mut cmd = Command::new(&bin);
    cmd.current_dir(dir.path())
        .arg("run")
        .arg(&schema)
        .args(["--url", &format!("http://{}", sluice.admin_addr)])
        .args(["-H", &format!("Authorization: Bearer {}", sluice.token)])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_schema_conformance,response_headers_conformance",
        ])
        // A valid body starts a recording at a path of the fuzzer's choosing: kept out.
        .args(["--exclude-operation-id", "PutRecorder"])
        .args(["--max-examples", "40", "--seed", "20", "--workers", "2"])
        .args(["--request-timeout", "10", "--max-time", "120"])
        .args(["--report", "json", "--report-json-path"])
        .arg(&report);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "schemathesis failed:\n{text}");
    let _ = run_json;
    eprintln!("{}", text.lines().rev().take(12).collect::<Vec<_>>().join("\n"));
}
