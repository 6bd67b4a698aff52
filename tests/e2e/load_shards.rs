//! `sluice load --shard i/4` as 4 processes at once (as the 4 pods of the
//! Indexed Job in deploy/k8s would run), started together by `--start-at`,
//! then `sluice load merge`: between them they send exactly the requests of
//! one unsharded run, each once, and the merged percentiles are those of all
//! their requests together, within HDR precision.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sluice_cli::{MockLlm, MockLlmOptions, SeenRequest};

use crate::cli::{sluice, sluice_bin};
use crate::support::TempDir;

const SHARDS: usize = 4;
/// Arrivals of the run: 40/s for 2 s.
const ARRIVALS: usize = 80;

fn scenario(dir: &Path, mock: &MockLlm) -> PathBuf {
    // In file order, journey k says word k: every arrival's prompt is its own.
    let words: Vec<String> = (0..ARRIVALS).map(|k| format!("w{k}")).collect();
    let text = format!(
        "scenario: shards\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 40 }}, duration: 2s, seed: 11 }}\n\
         steps:\n\
         \x20 - {{ name: answer, service: llm, model: m, prompt: 'Say {{{{word}}}}', max_tokens: 4, stream: true }}\n\
         data: {{ word: {{ values: [{}], order: sequential }} }}\n",
        mock.addr(),
        words.join(", ")
    );
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn prompts(seen: &[SeenRequest]) -> Vec<String> {
    let mut v: Vec<String> = seen
        .iter()
        .map(|s| {
            let body: Value = serde_json::from_slice(&s.body).unwrap();
            body["messages"][0]["content"].as_str().unwrap().to_owned()
        })
        .collect();
    v.sort();
    v
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The value HDR reports at `q` over `values`, exactly (nearest rank).
fn exact_quantile(values: &mut [u64], q: f64) -> u64 {
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_shard_processes_send_one_runs_requests_and_merge_exactly() {
    let mock = MockLlm::start(MockLlmOptions {
        record: true,
        ..MockLlmOptions::paced_ms(5, 2, 4)
    })
    .await
    .unwrap();
    let tmp = TempDir::new("load-shards");
    let path = scenario(tmp.path(), &mock);

    // The 4 processes at once, told to begin 2 s from now.
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    let start_at = sluice_filters::format_rfc3339(now_us + 2_000_000);
    let children: Vec<_> = (0..SHARDS)
        .map(|i| {
            Command::new(sluice_bin())
                .arg("load")
                .arg(&path)
                .args(["--shard", &format!("{i}/{SHARDS}"), "--start-at", &start_at])
                .arg("--detailed")
                .arg("-o")
                .arg(tmp.path().join(format!("shard-{i}.json")))
                .env("SLUICE_LINEAGE_DIR", tmp.path().join("lineage"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let sharded = mock.wait_seen(ARRIVALS, Duration::from_secs(10)).await;
    assert_eq!(sharded.len(), ARRIVALS);

    let files: Vec<PathBuf> = (0..SHARDS)
        .map(|i| tmp.path().join(format!("shard-{i}.json")))
        .collect();
    let merged_path = tmp.path().join("run.json");
    let mut merge = vec!["load".to_owned(), "merge".to_owned()];
    merge.extend(files.iter().map(|f| f.display().to_string()));
    merge.extend(["-o".to_owned(), merged_path.display().to_string()]);
    let out = sluice(merge).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // One unsharded run of the same scenario, after the shards.
    let whole_path = tmp.path().join("whole.json");
    let out = sluice(vec![
        "load".into(),
        path.display().to_string(),
        "-o".into(),
        whole_path.display().to_string(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = mock.wait_seen(2 * ARRIVALS, Duration::from_secs(10)).await;
    assert_eq!(seen.len(), 2 * ARRIVALS);

    // The same requests, each once: every arrival's prompt is distinct.
    let (shard_part, whole_part) = seen.split_at(ARRIVALS);
    assert_eq!(prompts(shard_part), prompts(whole_part));
    let distinct: BTreeSet<String> = prompts(whole_part).into_iter().collect();
    assert_eq!(distinct.len(), ARRIVALS);

    let merged = read(&merged_path);
    let whole = read(&whole_path);
    assert_eq!(merged["shard"], format!("merged {SHARDS}"));
    // The merged run's lineage sits below its shards' runs, one each.
    let mut shard_ids: Vec<Value> = files
        .iter()
        .map(|f| read(f)["lineage"]["id"].clone())
        .collect();
    shard_ids.sort_by_key(|v| v.as_str().unwrap().to_owned());
    shard_ids.dedup();
    assert_eq!(shard_ids.len(), SHARDS);
    assert_eq!(merged["lineage"]["parents"], Value::Array(shard_ids));
    assert_ne!(merged["lineage"]["id"], whole["lineage"]["id"]);
    assert_eq!(merged["summary"]["requests"], whole["summary"]["requests"]);
    assert_eq!(
        merged["summary"]["completed"].as_u64(),
        Some(ARRIVALS as u64)
    );

    // The merged percentiles are those of the shards' requests together.
    let mut e2el: Vec<u64> = Vec::new();
    for f in &files {
        for r in read(f)["requests"].as_array().unwrap() {
            let end = r["end_us"].as_u64().unwrap();
            e2el.push(end - r["intended_us"].as_u64().unwrap());
        }
    }
    assert_eq!(e2el.len(), ARRIVALS);
    for (name, q) in [("median", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        let exact = exact_quantile(&mut e2el, q) as f64 / 1000.0;
        let got = merged["summary"][format!("{name}_e2el_ms")]
            .as_f64()
            .unwrap();
        // Three significant digits: a bucket is at most 1/1024 of its value wide.
        assert!(
            (got - exact).abs() <= exact / 1024.0 + 0.001,
            "{name}: merged {got} ms, exact {exact} ms"
        );
    }
}
