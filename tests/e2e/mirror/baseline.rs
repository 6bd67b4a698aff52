//! `compare.embeddings.baseline`: a drift baseline saved from one sluice
//! (`sluice ctl mirror baseline ROUTE --out FILE`) and given to a second,
//! which compares its first window with it. The embedder is a controlled
//! mock (not llama.cpp): it scores every shadow answer at a similarity the
//! test sets, so the KL the second sluice reports can be checked against
//! the saved pairs exactly.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use sluice_filters::{similarity_kl, SavedBaseline};
use tokio::net::TcpListener;

use super::real::sample;
use super::{at_once, shadow};
use crate::harness::{listener, metrics_within, start, Admin};
use crate::support::TempDir;

/// `/v1/embeddings` answering the first input (the primary's answer) with
/// (1, 0) and every other with (s, √(1 − s²)): cosine `s` to the primary.
/// A request without a Host header is refused (400), as nginx refuses it.
struct Embedder {
    addr: SocketAddr,
    similarity: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Embedder {
    async fn start(similarity: f64) -> Embedder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let knob = Arc::new(AtomicU64::new(similarity.to_bits()));
        let shared = knob.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let knob = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |r| embed(r, knob.clone()));
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Embedder {
            addr,
            similarity: knob,
            task,
        }
    }

    fn set(&self, similarity: f64) {
        self.similarity
            .store(similarity.to_bits(), Ordering::Relaxed);
    }
}

impl Drop for Embedder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn embed(
    request: Request<hyper::body::Incoming>,
    knob: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    // As nginx and uvicorn do: HTTP/1.1 without a Host is a bad request.
    if !request.headers().contains_key(hyper::header::HOST) {
        let mut refused = Response::new(Full::new(Bytes::from_static(b"no Host")));
        *refused.status_mut() = hyper::StatusCode::BAD_REQUEST;
        return Ok(refused);
    }
    let body = request.into_body().collect().await?.to_bytes();
    let inputs = serde_json::from_slice::<Value>(&body).unwrap_or_default()["input"]
        .as_array()
        .map_or(0, Vec::len);
    let s = f64::from_bits(knob.load(Ordering::Relaxed));
    let data: Vec<Value> = (0..inputs)
        .map(|i| {
            let vector = match i {
                0 => [1.0, 0.0],
                _ => [s, (1.0 - s * s).sqrt()],
            };
            json!({"index": i, "embedding": vector})
        })
        .collect();
    Ok(Response::new(Full::new(Bytes::from(
        json!({"data": data}).to_string(),
    ))))
}

fn config(primary: SocketAddr, shadow: SocketAddr, embedder: SocketAddr, extra: &str) -> String {
    super::head()
        .cluster("primary", "llm", [primary])
        .cluster("shadow", "llm", [shadow])
        .cluster("embedder", "llm", [embedder])
        .route_with(
            "chat",
            "primary: 100",
            &format!(
                "mirror: {{ cluster: shadow, compare: {{ embeddings: \
                 {{ cluster: embedder, window: 4, similarity_min: 0.5{extra} }} }} }}"
            ),
        )
        .yaml()
}

async fn ask(sluice: &sluice_proxy::Sluice, n: usize) {
    let url = format!("http://{}/v1/chat/completions", listener(sluice, "public"));
    for i in 0..n {
        let body = json!({"messages": [{"role": "user", "content": format!("question {i}")}]});
        let r = reqwest::Client::new()
            .post(&url)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
    }
}

async fn scored(sluice: &sluice_proxy::Sluice, n: f64) -> String {
    metrics_within(sluice, Duration::from_secs(30), |m| {
        sample(
            m,
            "sluice_mirror_embedding_similarity_count{route=\"chat\"} ",
        ) >= n
    })
    .await
}

async fn ctl_baseline(
    sluice: &sluice_proxy::Sluice,
    out: &std::path::Path,
) -> std::process::Output {
    let mut cmd = std::process::Command::new(crate::cli::sluice_bin());
    cmd.arg("ctl")
        .args(["--url", &format!("http://{}", sluice.admin_addr)])
        .args(["--token", &sluice.token])
        .args(["mirror", "baseline", "chat", "--out"])
        .arg(out);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_baseline_makes_the_next_sluice_drift_from_its_first_window() {
    let primary = shadow(at_once()).await;
    let canary = shadow(at_once()).await;
    let embedder = Embedder::start(0.975).await;
    let dir = TempDir::new("mirror-baseline");
    let file = dir.path().join("chat-baseline.json");

    // The first sluice: a good shadow, four pairs at 0.975 make its baseline.
    let first = start(&config(primary.addr(), canary.addr(), embedder.addr, ""));
    let (status, _) = Admin::new(&first)
        .get("/v1/routes/chat/mirror/embedding-baseline")
        .await;
    assert_eq!(status, 409, "no pair yet: the baseline is not whole");
    ask(&first, 4).await;
    scored(&first, 4.0).await;
    let out = ctl_baseline(&first, &file).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), format!("wrote {} (4 pairs)", file.display()));
    let saved = SavedBaseline::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(saved.route.as_deref(), Some("chat"));
    assert_eq!(saved.similarities.len(), 4);
    assert!(
        saved.similarities.iter().all(|s| (s - 0.975).abs() < 1e-6),
        "{saved:?}"
    );
    drop(first);

    // The second sluice starts with that file, and the shadow now answers
    // apart (0.625). Without the file its first four pairs would be its
    // baseline, with no reading; with it, the first four are a window
    // compared with the saved pairs.
    embedder.set(0.625);
    let baseline = format!(", baseline: '{}'", file.display());
    let second = start(&config(
        primary.addr(),
        canary.addr(),
        embedder.addr,
        &baseline,
    ));
    ask(&second, 3).await;
    let three = scored(&second, 3.0).await;
    // No KL before the window is full (the gauge is absent or 0).
    assert_eq!(
        sample(&three, "sluice_mirror_embedding_drift_kl{route=\"chat\"} "),
        0.0
    );
    ask(&second, 1).await;
    // The fourth pair fills the window: its count and the KL it makes.
    let four = metrics_within(&second, Duration::from_secs(30), |m| {
        sample(
            m,
            "sluice_mirror_embedding_similarity_count{route=\"chat\"} ",
        ) >= 4.0
            && sample(m, "sluice_mirror_embedding_drift_kl{route=\"chat\"} ") > 0.0
    })
    .await;
    let kl = sample(&four, "sluice_mirror_embedding_drift_kl{route=\"chat\"} ");
    let expected = similarity_kl(&[0.625; 4], &saved.similarities);
    eprintln!("KL of the first window from the saved baseline: {kl:.4}");
    assert!((kl - expected).abs() < 1e-9, "{kl} vs {expected}");
    assert!(kl > 0.38, "{kl}");
    let (_, events) = Admin::new(&second).get("/v1/events").await;
    let drift: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "mirror")
        .collect();
    assert_eq!(drift.len(), 1, "{events}");
    assert_eq!(
        drift[0]["action"],
        "embedding drift on route chat (shadow shadow)"
    );
    let why = drift[0]["errors"].to_string();
    assert!(
        why.contains("of the last 4 pairs from the baseline is above 0.38"),
        "{why}"
    );
    // It serves the saved baseline back, as loaded.
    let (status, body) = Admin::new(&second)
        .get("/v1/routes/chat/mirror/embedding-baseline")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["similarities"], json!(saved.similarities));
}
