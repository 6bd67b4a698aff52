//! KV-cache pressure per request: sluice in front of a model server whose
//! `/metrics` serves llama.cpp's KV-cache gauge (a fake: the llama.cpp build
//! the real-server tests run no longer serves that gauge). The ratio the
//! gauge served reaches the access log, the recorder's trace line, and a
//! `sluice load --detailed` run's rows and stage summary (through the
//! `x-sluice-kvcache-ratio` answer header, sent to trusted load peers only).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::Value;
use sluice_filters::{parse_lines, KVCACHE_RATIO_HEADER, LOAD_HEADER};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::cli::sluice;
use crate::harness::{listener, start, Admin, TestConfig};
use crate::recorder::poll_recording;
use crate::support::TempDir;

/// What the fake's gauge says.
const RATIO: f64 = 0.375;

/// A model server: `/metrics` in llama.cpp's text, anything else one chat
/// completion. Stops on drop.
struct KvServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for KvServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (kind, body) = match req.uri().path() {
        "/metrics" => (
            "text/plain; version=0.0.4",
            format!(
                "# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.\n\
                 # TYPE llamacpp:kv_cache_usage_ratio gauge\n\
                 llamacpp:kv_cache_usage_ratio {RATIO}\n\
                 # TYPE llamacpp:requests_processing gauge\n\
                 llamacpp:requests_processing 1\n"
            ),
        ),
        _ => (
            "application/json",
            r#"{"id":"c1","object":"chat.completion","model":"smol","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#
                .to_owned(),
        ),
    };
    Ok(Response::builder()
        .header("content-type", kind)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default())
}

impl KvServer {
    async fn start() -> KvServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(answer);
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        KvServer { addr, task }
    }
}

fn scenario(dir: &TempDir, sluice_addr: SocketAddr) -> std::path::PathBuf {
    let text = format!(
        "scenario: kv\n\
         target: {{ base_url: 'http://{sluice_addr}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 1s, seed: 3 }}\n\
         steps:\n\
         \x20 - {{ name: chat, service: llm, model: smol, prompt: 'Say hi.', max_tokens: 4 }}\n"
    );
    let path = dir.path().join("kv.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_kv_ratio_reaches_the_log_the_trace_and_the_load_rows() {
    let server = KvServer::start().await;
    let dir = TempDir::new("kv-cache");
    let yaml = TestConfig::http()
        .cluster_with(
            "llama",
            "llm",
            [server.addr.to_string()],
            "metrics_path: /metrics, metrics_interval: 1s",
        )
        .route("chat", "llama: 100")
        .section(
            "telemetry",
            format!(
                "{{ access_log: {{ path: \"{}\" }} }}",
                dir.path().join("access.log").display()
            ),
        )
        .section(
            "recorder",
            format!(
                "{{ path: \"{}\", percent: 100 }}",
                dir.path().join("trace.jsonl").display()
            ),
        )
        .yaml();
    let proxy = start(&yaml);
    let admin = Admin::new(&proxy);
    poll_recording(&admin).await;
    let addr = listener(&proxy, "public");
    let url = format!("http://{addr}/v1/chat/completions");
    let client = reqwest::Client::new();
    let chat = |load: bool| {
        let mut req = client
            .post(&url)
            .header("content-type", "application/json")
            .body(r#"{"model":"smol","messages":[{"role":"user","content":"hi"}]}"#);
        if load {
            req = req.header(LOAD_HEADER, "load-00000000000000cd");
        }
        req.send()
    };
    // The first scrape runs at start; poll until its reading is published.
    let deadline = Instant::now() + Duration::from_secs(10);
    let header = loop {
        let r = chat(true).await.unwrap();
        assert_eq!(r.status(), 200);
        let h = r.headers().get(KVCACHE_RATIO_HEADER).cloned();
        if h.is_some() || Instant::now() > deadline {
            break h;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(header.unwrap().to_str().unwrap(), "0.375");
    // A user's answer is not told.
    let user = chat(false).await.unwrap();
    assert!(user.headers().get(KVCACHE_RATIO_HEADER).is_none());

    // `sluice load --detailed`: every row carries it, and each stage its mean and max.
    let run = dir.path().join("run.json");
    let out = sluice(vec![
        "load".into(),
        scenario(&dir, addr).display().to_string(),
        "--detailed".into(),
        "-o".into(),
        run.display().to_string(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    let rows = result["requests"].as_array().unwrap();
    assert_eq!(rows.len(), 10);
    for row in rows {
        assert_eq!(row["kvcache_ratio"], RATIO, "{row}");
    }
    let stage = &result["stages"][0];
    assert_eq!(stage["kvcache_ratio_samples"], 10);
    assert_eq!(stage["mean_kvcache_ratio"], RATIO);
    assert_eq!(stage["max_kvcache_ratio"], RATIO);

    admin.delete("/v1/recorder").await;
    drop(proxy); // flushes and closes the access log
    let log = std::fs::read_to_string(dir.path().join("access.log")).unwrap();
    let ratios: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kvcache_ratio"].clone())
        .collect();
    // Every request after the first reading: the polls', the user's, the run's.
    let known = ratios.iter().filter(|r| **r == RATIO).count();
    assert!(known >= 12, "{known} of {}: {log}", ratios.len());
    assert!(ratios.iter().all(|r| *r == RATIO || r.is_null()), "{log}");
    let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
    let lines: Vec<_> = parse_lines(&trace).map(Result::unwrap).collect();
    assert_eq!(lines.len(), ratios.len());
    let traced = lines
        .iter()
        .filter(|l| l.kvcache_ratio == Some(RATIO))
        .count();
    assert_eq!(traced, known);
}
