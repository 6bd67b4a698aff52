//! `sluice load`'s full-link journey against real parts: Redis, Chroma
//! (its collection made by `setup:` and deleted by `teardown:`), and
//! llama.cpp serving SmolLM2 behind sluice. Every step is measured, the
//! cache misses at first and hits once `store` has SET the answer, and what
//! Redis holds is the model's answer text.

use std::sync::Arc;
use std::time::Duration;

use sluice_workload::{run_load, summarize, Goodput, Lineage, Live, RunInfo, RunOptions, Scenario};

use crate::harness::{listener, llm_config};
use crate::llama_cpp::LlamaServer;
use crate::support::{chroma_bin, python, redis_available, require, Chroma, RedisServer, TempDir};

const COLLECTIONS: &str = "/api/v2/tenants/default_tenant/databases/default_database/collections";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rag_journey_measures_cache_search_answer_and_store_against_real_parts() {
    let (Some(py), Some(bin)) = (python(), chroma_bin()) else {
        require("the .venv python with xllamacpp and chromadb", false);
        return;
    };
    if !require("redis-server", redis_available()) {
        return;
    }
    let redis = RedisServer::start().await.unwrap();
    let dir = TempDir::new("load-chroma");
    let chroma = Chroma::start(&bin, dir.path()).await;
    let llama = tokio::task::spawn_blocking(move || LlamaServer::start_with(&py, Some(0.0)))
        .await
        .unwrap();
    let sluice = llm_config(format!("127.0.0.1:{}", llama.port)).start();
    let proxy = listener(&sluice, "public");
    let chroma_url = format!("http://127.0.0.1:{}", chroma.port);
    let text = format!(
        r#"
scenario: rag-e2e
target: {{ base_url: "http://{proxy}" }}
setup:
  - {{ name: create, service: vector, method: POST, target: "{chroma_url}", path: {COLLECTIONS},
      body: {{ name: docs }}, extract: {{ coll: "$.id" }} }}
  - {{ name: fill, service: vector, method: POST, target: "{chroma_url}",
      path: "{COLLECTIONS}/{{{{coll}}}}/add",
      body: {{ ids: [doc-1, doc-2, doc-3], embeddings: [[1, 0], [0, 1], [1, 1]] }} }}
teardown:
  - {{ name: drop, service: vector, method: DELETE, target: "{chroma_url}", path: "{COLLECTIONS}/docs" }}
workload: {{ arrival: {{ kind: constant, rate: 1 }}, duration: 8s, seed: 3 }}
steps:
  - {{ name: cache, service: redis, command: [GET, "q:{{{{query_hash}}}}"], target: "{redis}" }}
  - {{ name: search, service: vector, method: POST, target: "{chroma_url}",
      path: "{COLLECTIONS}/{{{{coll}}}}/query", body: {{ query_embeddings: [[1, 0]], n_results: 2 }},
      depends_on: cache, when: cache.miss, extract: {{ ids: "$.ids[0]" }} }}
  - {{ name: answer, service: llm, depends_on: search, model: smollm2,
      prompt: "Context: {{{{ids}}}} Question: {{{{query}}}}", max_tokens: 12, timeout: 30s }}
  - {{ name: store, service: redis, command: [SET, "q:{{{{query_hash}}}}", "{{{{answer.text}}}}"],
      depends_on: answer, target: "{redis}" }}
data: {{ query: {{ values: [what is a cache, what is a vector store], order: sequential }} }}
"#,
        redis = redis.addr(),
    );
    let scenario = Scenario::from_yaml(&text, std::path::Path::new("."), &|_| None).unwrap();
    let schedule = scenario.plan.schedule().unwrap();
    let options = RunOptions {
        closed: None,
        drain: Duration::from_secs(30),
        run_id: "load-e2e".into(),
        threads: 2,
    };
    let s = scenario.clone();
    let out = tokio::task::spawn_blocking(move || {
        run_load(&s, &schedule, &options, Arc::new(Live::default()))
    })
    .await
    .unwrap()
    .unwrap();
    let report = summarize(
        &scenario,
        &out,
        RunInfo {
            run_id: "load-e2e".into(),
            shard: "0/1".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            lineage: Lineage {
                scenario_sha256: String::new(),
                target: scenario.target.base_url.clone(),
                sluice_version: "test".into(),
                from_model: None,
                id: None,
                parents: Vec::new(),
            },
            goodput: Goodput::default(),
            detailed: false,
        },
    );
    let by = |name: &str| report.steps.iter().find(|s| s.name == name).unwrap();
    for name in ["cache", "search", "answer", "store"] {
        let s = &by(name).summary;
        assert!(s.completed > 0, "{name}: {s:?}");
        assert_eq!((s.failed, s.rate_limited), (0, 0), "{name} failed");
    }
    let services: Vec<&str> = report.steps.iter().map(|s| s.service).collect();
    assert_eq!(services, ["redis", "vector", "llm", "redis"]);
    // Two questions in turn: each misses first, then hits what `store` SET.
    let cache = &by("cache").summary;
    assert!(cache.cache_misses >= 2, "{cache:?}");
    assert!(cache.cache_hits >= 2, "{cache:?}");
    assert_eq!(by("search").summary.completed, cache.cache_misses);
    assert!(by("answer").summary.total_output_tokens > 0);
    assert!(by("answer").summary.metrics.contains_key("mean_ttft_ms"));
    assert!(out.setup.iter().all(|h| h.ok), "{:?}", out.setup);
    assert!(out.teardown.iter().all(|h| h.ok), "{:?}", out.teardown);
    // What Redis holds is an answer's text, not its SSE framing.
    let client = reqwest::Client::new();
    for query in ["what is a cache", "what is a vector store"] {
        let stored = redis_get(&redis, &format!("q:{}", sha16(query))).await;
        assert!(
            !stored.is_empty() && !stored.contains("data:") && !stored.contains("choices"),
            "{stored:?}"
        );
        eprintln!("{query}: stored {stored:?}");
    }
    // The teardown deleted the collection.
    let r = client
        .get(chroma.url(&format!("{COLLECTIONS}/docs")))
        .send()
        .await
        .unwrap();
    assert!(!r.status().is_success(), "{}", r.status());
    drop(sluice);
}

fn sha16(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `GET key` over a plain RESP exchange.
async fn redis_get(redis: &RedisServer, key: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(redis.addr()).await.unwrap();
    let cmd = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len());
    s.write_all(cmd.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut got = Vec::new();
    // Reads until the bulk string is whole: `$N\r\n` + N bytes + `\r\n`.
    for _ in 0..100 {
        let n = s.read(&mut buf).await.unwrap();
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, rest)) = text.strip_prefix('$').and_then(|t| t.split_once("\r\n")) {
            let len: i64 = head.parse().unwrap();
            if len < 0 {
                return String::new();
            }
            if rest.len() >= len as usize + 2 {
                return rest[..len as usize].to_owned();
            }
        }
        if n == 0 {
            break;
        }
    }
    panic!("no reply to GET {key}: {:?}", String::from_utf8_lossy(&got));
}

/// A redis step's target as a `redis://` URL whose password comes from
/// the environment: the run authenticates with it to a real redis-server
/// that requires it, and the password is nowhere in the result; unset,
/// the scenario is refused with the step's path; wrong, every command
/// fails and is counted, and the run still ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_url_with_a_password_from_the_environment_authenticates() {
    if !require("redis-server", redis_available()) {
        return;
    }
    const PASSWORD: &str = "s3cret-pw-7731";
    let redis = RedisServer::start_with_password(PASSWORD).await.unwrap();
    let tmp = TempDir::new("load-redis-auth");
    let scenario = tmp.path().join("scenario.yaml");
    let target = format!("redis://:${{SLUICE_E2E_REDIS_PW}}@{}/0", redis.addr());
    std::fs::write(
        &scenario,
        format!(
            "scenario: redis-auth\n\
             target: {{ base_url: 'http://127.0.0.1:1' }}\n\
             workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 1s, seed: 1 }}\n\
             steps:\n\
             \x20 - {{ name: put, service: redis, command: [SET, k, v], target: '{target}' }}\n\
             \x20 - {{ name: get, service: redis, command: [GET, k], depends_on: put, target: '{target}' }}\n"
        ),
    )
    .unwrap();
    let out = tmp.path().join("run.json");
    let load = |password: Option<&str>| {
        let mut cmd = std::process::Command::new(crate::cli::sluice_bin());
        cmd.arg("load")
            .arg(&scenario)
            .arg("-o")
            .arg(&out)
            .env_remove("SLUICE_E2E_REDIS_PW");
        if let Some(p) = password {
            cmd.env("SLUICE_E2E_REDIS_PW", p);
        }
        cmd.output().unwrap()
    };
    let o = load(Some(PASSWORD));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains(PASSWORD), "the password is in the result");
    let run: serde_json::Value = serde_json::from_str(&text).unwrap();
    let step = |name: &str| {
        run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let (put, get) = (step("put"), step("get"));
    assert_eq!(put["failed"], 0, "{put}");
    assert!(put["completed"].as_u64().unwrap() >= 5, "{put}");
    // Every GET read what the authenticated SET wrote.
    assert_eq!(get["cache_hits"], get["completed"], "{get}");
    assert!(get["completed"].as_u64().unwrap() >= 5, "{get}");

    let o = load(None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("steps[0].target: environment variable `SLUICE_E2E_REDIS_PW` is not set"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let _ = std::fs::remove_file(&out);
    let o = load(Some("wrong"));
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(!text.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let run: serde_json::Value = serde_json::from_str(&text).unwrap();
    let put = &run["steps"][0];
    assert_eq!(put["completed"], 0, "{put}");
    assert!(put["failed"].as_u64().unwrap() >= 5, "{put}");
}
