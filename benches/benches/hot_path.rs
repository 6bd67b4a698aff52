//! Per-request costs of the hot pieces the proxy runs on every request —
//! route match, weighted pick, sticky pick, recording into histograms, the
//! fault experiments when none applies, the mirror decision —
//! each beside the naive way of doing the same thing.

// A bench is a test: a broken fixture should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use prometheus::{HistogramOpts, HistogramVec};
use sluice_control::{Config, Snapshot, Stats};
use sluice_filters::{
    hash_bytes, mix64, FaultKind, FaultTarget, Metrics, RequestParts, StickyTable, WeightedTable,
};

/// One listener, eight routes: seven specific ones (prefix, host, header)
/// ahead of a catch-all, the usual shape of a gateway config.
const CONFIG: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:18080, protocol: http }
clusters:
  - { name: a, kind: llm, version: v1, endpoints: [127.0.0.1:18001] }
  - { name: b, kind: llm, version: v2, endpoints: [127.0.0.1:18002] }
routes:
  - { name: admin, listener: public, match: { path_prefix: /admin }, split: { a: 100 } }
  - { name: health, listener: public, match: { path_prefix: /healthz }, split: { a: 100 } }
  - { name: embed, listener: public, match: { path_prefix: /v1/embeddings }, split: { b: 100 } }
  - { name: tenant, listener: public,
      match: { path_prefix: /v1/chat, headers: { x-tenant: acme } }, split: { b: 100 } }
  - { name: internal, listener: public,
      match: { path_prefix: /v1, host: internal.example.com }, split: { b: 100 } }
  - { name: beta, listener: public, match: { headers: { x-beta: "1" } }, split: { a: 50, b: 50 } }
  - { name: models, listener: public, match: { path_prefix: /v1/models }, split: { a: 100 } }
  - { name: chat, listener: public, split: { a: 90, b: 10 }, sticky: { header: x-session-id } }
"#;

/// A request as the proxy sees it: borrowed path, host and headers.
fn chat_request() -> RequestParts<'static> {
    RequestParts {
        path: "/v1/chat/completions",
        host: Some("api.example.com"),
        headers: &[
            ("content-type", "application/json"),
            ("authorization", "Bearer sk-0123456789"),
            ("x-session-id", "session-42"),
        ],
    }
}

fn snapshot() -> Snapshot {
    let config = Config::from_yaml(CONFIG).unwrap();
    let metrics = Metrics::new().unwrap();
    Snapshot::build(Arc::new(config), 1, None, &metrics, &Stats::new())
}

/// The baseline: routes as (prefix, host, headers map); each request copies
/// its path, host and headers into owned, lower-cased strings first.
struct NaiveRoute {
    prefix: String,
    host: Option<String>,
    headers: HashMap<String, String>,
}

fn naive_routes() -> Vec<NaiveRoute> {
    let r = |prefix: &str, host: Option<&str>, headers: &[(&str, &str)]| NaiveRoute {
        prefix: prefix.to_string(),
        host: host.map(str::to_string),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    vec![
        r("/admin", None, &[]),
        r("/healthz", None, &[]),
        r("/v1/embeddings", None, &[]),
        r("/v1/chat", None, &[("x-tenant", "acme")]),
        r("/v1", Some("internal.example.com"), &[]),
        r("", None, &[("x-beta", "1")]),
        r("/v1/models", None, &[]),
        r("", None, &[]),
    ]
}

fn naive_match(routes: &[NaiveRoute], req: &RequestParts) -> Option<usize> {
    let path = req.path.to_string();
    let host = req.host.map(|h| h.to_ascii_lowercase());
    let headers: HashMap<String, String> = req
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    routes.iter().position(|r| {
        path.starts_with(&r.prefix)
            && r.host.as_ref().is_none_or(|h| host.as_ref() == Some(h))
            && r.headers.iter().all(|(k, v)| headers.get(k) == Some(v))
    })
}

fn route_match(c: &mut Criterion) {
    let snap = snapshot();
    let naive = naive_routes();
    let req = chat_request();
    // Both sides walk all eight routes to the catch-all.
    assert_eq!(snap.match_route(0, &req), Some(7));
    assert_eq!(naive_match(&naive, &req), Some(7));
    let mut g = c.benchmark_group("route_match_8_routes");
    g.bench_function("sluice Snapshot::match_route", |b| {
        b.iter(|| snap.match_route(0, black_box(&req)))
    });
    g.bench_function("naive owned strings + HashMap", |b| {
        b.iter(|| naive_match(black_box(&naive), black_box(&req)))
    });
    g.finish();
}

/// The baseline: weights summed and scanned on every call, modulo draw.
fn naive_weighted(weights: &[u32], r: u64) -> Option<usize> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut point = r % total;
    for (i, w) in weights.iter().enumerate() {
        let w = u64::from(*w);
        if point < w {
            return Some(i);
        }
        point -= w;
    }
    None
}

fn weighted_pick(c: &mut Criterion) {
    let mut g = c.benchmark_group("weighted_pick");
    for weights in [vec![90u32, 10], vec![40, 30, 20, 10, 0]] {
        let n = weights.len();
        let table = WeightedTable::new(&weights);
        let mut r = 0u64;
        g.bench_with_input(
            BenchmarkId::new("sluice WeightedTable::pick", n),
            &n,
            |b, _| {
                b.iter(|| {
                    r = r.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    table.pick(black_box(r))
                })
            },
        );
        let mut r = 0u64;
        g.bench_with_input(BenchmarkId::new("naive sum + scan", n), &n, |b, _| {
            b.iter(|| {
                r = r.wrapping_add(0x9e37_79b9_7f4a_7c15);
                naive_weighted(black_box(&weights), black_box(r))
            })
        });
    }
    g.finish();
}

fn sticky_pick(c: &mut Criterion) {
    let mut g = c.benchmark_group("sticky_pick");
    for n in [2usize, 3, 5] {
        let clusters: Vec<(u64, u32)> = (0..n)
            .map(|i| {
                (
                    hash_bytes(format!("cluster-{i}").as_bytes()),
                    100 / n as u32,
                )
            })
            .collect();
        let table = StickyTable::new(&clusters);
        let mut key = 0u64;
        g.bench_with_input(
            BenchmarkId::new("sluice StickyTable::pick", n),
            &n,
            |b, _| {
                b.iter(|| {
                    key = mix64(key.wrapping_add(1));
                    table.pick(black_box(key))
                })
            },
        );
    }
    // The whole per-request sticky path: hash the session header, then pick.
    let table = StickyTable::new(&[(hash_bytes(b"a"), 90), (hash_bytes(b"b"), 10)]);
    g.bench_function("hash_bytes(session id) + pick, 2 clusters", |b| {
        b.iter(|| table.pick(hash_bytes(black_box(b"session-0123456789abcdef"))))
    });
    // The naive way: the session id as an owned String, std's SipHash, and
    // a weighted modulo (which moves most sessions whenever a weight moves).
    let naive_weights = [90u64, 10];
    g.bench_function(
        "naive String + DefaultHasher + weighted modulo, 2 clusters",
        |b| {
            b.iter(|| {
                use std::hash::{Hash, Hasher};
                let session =
                    String::from_utf8_lossy(black_box(b"session-0123456789abcdef")).into_owned();
                let mut h = std::collections::hash_map::DefaultHasher::new();
                session.hash(&mut h);
                let total: u64 = naive_weights.iter().sum();
                let mut r = h.finish() % total;
                naive_weights.iter().position(|w| {
                    let hit = r < *w;
                    r = r.saturating_sub(*w);
                    hit
                })
            })
        },
    );
    g.finish();
}

fn record_histograms(c: &mut Criterion) {
    let metrics = Metrics::new().unwrap();
    let handles = metrics.route_cluster("chat", "a", "v1");
    let vec = HistogramVec::new(
        HistogramOpts::new("naive_request_duration_seconds", "naive")
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 16).unwrap()),
        &["route", "cluster", "version", "status_class"],
    )
    .unwrap();
    let mut g = c.benchmark_group("record_request");
    g.bench_function("sluice RouteClusterMetrics::record (pre-resolved)", |b| {
        b.iter(|| {
            handles.record(
                black_box(200),
                black_box(0.0123),
                sluice_filters::Source::User,
            )
        })
    });
    g.bench_function("naive HistogramVec::with_label_values().observe()", |b| {
        b.iter(|| {
            vec.with_label_values(&["chat", "a", "v1", "2xx"])
                .observe(black_box(0.0123))
        })
    });
    g.finish();
}

/// Twenty experiments on the chat route, each waiting for an `x-chaos`
/// header value no request sends: every one is checked up to its header, the
/// worst case for a request that none of them applies to.
fn faulted_snapshot(experiments: usize) -> Snapshot {
    let mut yaml = format!("{CONFIG}faults:\n");
    for i in 0..experiments {
        yaml.push_str(&format!(
            "  - {{ id: e{i}, ttl: 1h, match: {{ route: chat, headers: {{ x-chaos: \"{i}\" }} }}, \
             action: {{ abort: {{ status: 503 }} }} }}\n"
        ));
    }
    let config = Config::from_yaml(&yaml).unwrap();
    let metrics = Metrics::new().unwrap();
    Snapshot::build(Arc::new(config), 1, None, &metrics, &Stats::new())
}

/// The baseline: experiments kept as owned JSON-like maps, the request's
/// headers copied into a lowercase map for each request.
fn naive_fault_match(experiments: &[HashMap<String, String>], req: &RequestParts) -> Option<usize> {
    let headers: HashMap<String, String> = req
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    experiments.iter().position(|e| {
        e.get("route").is_none_or(|r| r == "chat")
            && e.iter()
                .filter(|(k, _)| k.starts_with("header:"))
                .all(|(k, v)| headers.get(&k["header:".len()..]) == Some(v))
    })
}

fn experiment_match_none_applies(c: &mut Criterion) {
    const EXPERIMENTS: usize = 20;
    let snap = faulted_snapshot(EXPERIMENTS);
    assert_eq!(snap.faults.len(), EXPERIMENTS);
    let naive: Vec<HashMap<String, String>> = (0..EXPERIMENTS)
        .map(|i| {
            HashMap::from([
                ("route".to_string(), "chat".to_string()),
                ("header:x-chaos".to_string(), i.to_string()),
            ])
        })
        .collect();
    let req = chat_request();
    let target = FaultTarget {
        listener: "public",
        route: Some("chat"),
        cluster: Some("a"),
        model: None,
        request: Some(&req),
    };
    let fire = |target: &FaultTarget<'_, RequestParts>| {
        snap.faults
            .iter()
            .filter(|f| f.experiment.action.kind() == FaultKind::Request)
            .find_map(|f| f.try_fire(target, rand::random::<u64>).ok())
            .is_some()
    };
    assert!(!fire(&target));
    assert_eq!(naive_fault_match(&naive, &req), None);
    let mut g = c.benchmark_group("fault_experiments_20_none_applies");
    g.bench_function("sluice FaultRuntime::try_fire", |b| {
        b.iter(|| fire(black_box(&target)))
    });
    g.bench_function("naive owned maps + HashMap", |b| {
        b.iter(|| naive_fault_match(black_box(&naive), black_box(&req)))
    });
    g.finish();
}

/// What a request on a route mirrored x3 costs the data path: into a dead
/// shadow (the gate is closed: sample, one atomic load, one counter add)
/// against a live one (sample, then keep the body and build the job: the
/// request's headers cloned, the body's chunks refcounted).
fn mirror_per_request(c: &mut Criterion) {
    let yaml = format!(
        "{CONFIG}  - {{ name: mirrored, listener: public, match: {{ path_prefix: /m }}, \
         split: {{ a: 100 }}, mirror: {{ cluster: b, copies: 3 }} }}\n"
    );
    let config = Config::from_yaml(&yaml).unwrap();
    let snap = Snapshot::build(
        Arc::new(config),
        1,
        None,
        &Metrics::new().unwrap(),
        &Stats::new(),
    );
    let policy = snap.routes.iter().find_map(|r| r.mirror.clone()).unwrap();
    let mut headers = http::HeaderMap::new();
    for (name, value) in [
        ("host", "api.example.com"),
        ("content-type", "application/json"),
        (
            "authorization",
            "Bearer sk-0123456789abcdef0123456789abcdef",
        ),
        ("user-agent", "OpenAI/Python 1.54.0"),
        ("accept", "application/json"),
        ("x-request-id", "0b3c1c2e-7f6a-4d7e-9a55-1f0e6c1d2b3a"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
        ("content-length", "84"),
    ] {
        headers.insert(name, http::HeaderValue::from_static(value));
    }
    let body = bytes::Bytes::from_static(
        br#"{"model":"m","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}"#,
    );
    let mut g = c.benchmark_group("mirror_x3_per_request");
    let down = sluice_filters::MirrorResult::ShadowDown;
    policy.gate.close(down);
    g.bench_function("dead shadow: sample + gate closed + count", |b| {
        b.iter(|| {
            let copies = policy.sampler.copies(None);
            if let Some(reason) = policy.gate.closed().filter(|_| copies > 0) {
                policy.metrics.count(reason, copies);
            }
            black_box(copies)
        })
    });
    policy.gate.open(down);
    g.bench_function("live shadow: sample + keep body + clone headers", |b| {
        b.iter(|| {
            let copies = policy.sampler.copies(None);
            let kept = (copies > 0 && policy.gate.closed().is_none()).then(|| {
                (
                    black_box(&headers).clone(),
                    vec![body.clone()],
                    String::from("/v1/chat/completions"),
                )
            });
            black_box(kept)
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    route_match,
    weighted_pick,
    sticky_pick,
    record_histograms,
    experiment_match_none_applies,
    mirror_per_request
);
criterion_main!(benches);
