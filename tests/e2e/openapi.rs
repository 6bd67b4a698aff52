//! `GET /v1/openapi.json` against the live API: schemathesis (PyPI) reads the document and
//! sends random valid and invalid requests to every operation of a running sluice, with
//! the token; each answer must be documented (status, content type, body schema) and none
//! a 5xx.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::harness::{llm_config, Admin};
use crate::rollout::mock;
use serde_json::Value;

use crate::support::{python, require, TempDir};

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
    let schema = dir.write("openapi.json", &doc.to_string());
    // Path parameters named `route` get the config's route, so that the split and mirror
    // bodies reach validation instead of a 404.
    let config = dir.write(
        "schemathesis.toml",
        "[parameters]\n\"path.route\" = \"chat\"\n",
    );
    let har = dir.path().join("requests.har");
    let mut cmd = Command::new(&bin);
    cmd.current_dir(dir.path())
        .arg("--config-file")
        .arg(&config)
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
        // The coverage phase trips over a Hypothesis/CPython 3.11 AST bug ("AST constructor
        // recursion depth mismatch") before sending anything; the other phases run.
        .args(["--phases", "examples,fuzzing,stateful"])
        .args(["--max-examples", "100", "--seed", "20", "--workers", "2"])
        .args(["--request-timeout", "10"])
        .args(["--report", "har", "--report-har-path"])
        .arg(&har)
        .env("NO_PROXY", "127.0.0.1,localhost");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("SUMMARY"))
        .collect();
    assert!(
        out.status.success(),
        "schemathesis failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "Test cases:" then "N generated, N passed".
    let cases = summary
        .iter()
        .skip_while(|l| !l.contains("Test cases:"))
        .nth(1)
        .unwrap_or_else(|| panic!("no test case count:\n{text}"))
        .trim();
    let (generated, passed) = cases.split_once(" generated, ").unwrap();
    let generated: u64 = generated.parse().unwrap();
    assert_eq!(passed, format!("{generated} passed"), "{text}");
    assert!(generated >= 500, "{generated} cases");

    // Every request as sent and answered: none a 5xx, every operation reached.
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array().unwrap();
    let mut statuses = BTreeMap::new();
    for e in entries {
        let status = e["response"]["status"].as_u64().unwrap();
        let url = e["request"]["url"].as_str().unwrap();
        assert!(
            status < 500,
            "{status} for {} {url}",
            e["request"]["method"]
        );
        *statuses.entry(status).or_insert(0u64) += 1;
    }
    assert!(
        statuses.contains_key(&200) && statuses.contains_key(&400),
        "{statuses:?}"
    );
    eprintln!(
        "schemathesis: {generated} cases, 0 failures; {} requests by status {statuses:?}",
        entries.len()
    );
}
