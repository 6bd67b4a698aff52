//! Fault injection's costs and pacing.
//!
//! 1. Requests per second through sluice with no experiments, and with
//!    `--experiments` experiments that never match (each checks a header no
//!    request has), alternated round by round so that drift cancels.
//! 2. Pacing: `token_delay` over the mock LLM's fixed gap; the gap asked for
//!    (upstream gap + delay) against the gaps the client observed.
//!
//! cargo run --release -p sluice-benches --bin fault_overhead -- --rounds 6 --seconds 4

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sluice_benches::{client_runtime, free_port, stream_many, Summary};
use sluice_cli::{MockLlmOptions, MockThread};
use sluice_control::{Config, Shared, SnapshotStore};
use sluice_filters::{FaultKind, FaultTarget, RequestParts};
use sluice_proxy::{Sluice, StartOptions};

#[derive(Parser)]
struct Args {
    /// Rounds per variant (alternated).
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Seconds of load per round.
    #[arg(long, default_value_t = 4)]
    seconds: u64,
    /// Concurrent connections of the load.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Experiments that never match.
    #[arg(long, default_value_t = 20)]
    experiments: usize,
    /// Concurrent streams per pacing measurement.
    #[arg(long, default_value_t = 8)]
    streams: usize,
    /// Content chunks per stream in the pacing runs.
    #[arg(long, default_value_t = 40)]
    tokens: u32,
    /// The mock LLM's gap between chunks in the pacing runs.
    #[arg(long, default_value_t = 5)]
    upstream_gap_ms: u64,
}

fn sluice(upstream: SocketAddr, kind: &str, faults: &str) -> anyhow::Result<Sluice> {
    let yaml = format!(
        "runtime: {{ threads: 1 }}\nadmin: {{ listen: 127.0.0.1:0 }}\nlisteners:\n  - {{ name: public, listen: 127.0.0.1:{}, protocol: http }}\nclusters:\n  - {{ name: up, kind: {kind}, endpoints: [{upstream}] }}\nroutes:\n  - {{ name: r, listener: public, split: {{ up: 100 }} }}\n{faults}",
        free_port()?
    );
    let config = Config::from_yaml(&yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    Sluice::start(config, StartOptions::default())
}

/// `n` experiments on the route that match a header no request sends.
fn never_matching(n: usize) -> String {
    let mut out = String::from("faults:\n");
    for i in 0..n {
        out.push_str(&format!(
            "  - {{ id: never-{i}, ttl: 1h, match: {{ route: r, headers: {{ x-never: \"{i}\" }} }}, action: {{ delay: {{ delay: 1s }} }} }}\n"
        ));
    }
    out
}

/// Closed-loop GETs on `connections` connections for `seconds`: requests per second.
async fn load(url: &str, connections: usize, seconds: u64) -> anyhow::Result<f64> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let done = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (client, url, done) = (client.clone(), url.to_string(), done.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let req = http::Request::get(&url).body(Full::new(Bytes::new()))?;
                let resp = client.request(req).await?;
                anyhow::ensure!(resp.status() == 200, "status {}", resp.status());
                resp.into_body().collect().await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// A request with one header, for the decision-cost loop.
const REQUEST: RequestParts<'static> = RequestParts::new("/v1/models", &[("x-tenant", "a")]);

/// CPU time of the data plane's decision over `n` never-matching
/// experiments, per request: what the throughput comparison cannot
/// resolve on a shared machine.
fn decision_ns(n: usize) -> f64 {
    let Ok(config) = Config::from_yaml(&format!(
        "listeners:\n  - {{ name: public, listen: 127.0.0.1:1, protocol: http }}\nclusters:\n  - {{ name: up, kind: http, endpoints: [127.0.0.1:2] }}\nroutes:\n  - {{ name: r, listener: public, split: {{ up: 1 }} }}\n{}",
        never_matching(n)
    )) else {
        return f64::NAN;
    };
    let Ok(shared) = Shared::new() else {
        return f64::NAN;
    };
    let store = SnapshotStore::new(config, &shared);
    let snapshot = store.load();
    let target = FaultTarget {
        listener: "public",
        route: Some("r"),
        cluster: Some("up"),
        model: None,
        request: Some(&REQUEST),
    };
    let rounds = 200_000u32;
    let started = Instant::now();
    let mut fired = 0u32;
    for _ in 0..rounds {
        let hit = snapshot
            .faults
            .iter()
            .filter(|f| f.experiment.action.kind() == FaultKind::Request)
            .find_map(|f| {
                f.try_fire(std::hint::black_box(&target), rand::random::<u64>)
                    .ok()
            });
        fired += u32::from(hit.is_some());
    }
    std::hint::black_box(fired);
    started.elapsed().as_nanos() as f64 / f64::from(rounds)
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = client_runtime()?;

    // 1. Cost of experiments that never match.
    let mock = MockThread::start(MockLlmOptions::default())?;
    let none = sluice(mock.addr, "http", "")?;
    let some = sluice(mock.addr, "http", &never_matching(args.experiments))?;
    let urls = [
        format!("http://{}/v1/models", none.listeners[0].1),
        format!("http://{}/v1/models", some.listeners[0].1),
    ];
    for url in &urls {
        runtime.block_on(load(url, args.connections, 1))?;
    }
    let mut rps = [Vec::new(), Vec::new()];
    for _ in 0..args.rounds {
        for (i, url) in urls.iter().enumerate() {
            rps[i].push(runtime.block_on(load(url, args.connections, args.seconds))?);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // Adjacent rounds share the machine's load of the moment: their ratio
    // is steadier than the ratio of means on a shared machine.
    let mut pairs: Vec<f64> = rps[1].iter().zip(&rps[0]).map(|(b, a)| b / a).collect();
    pairs.sort_by(f64::total_cmp);
    println!("| variant | req/s per round | mean req/s |");
    println!("|---|---|---|");
    for (name, v) in [
        ("no experiments", &rps[0]),
        ("experiments that never match", &rps[1]),
    ] {
        let rounds: Vec<String> = v.iter().map(|r| format!("{r:.0}")).collect();
        println!("| {name} | {} | {:.0} |", rounds.join(", "), mean(v));
    }
    println!(
        "\nratio of means (never-matching / none): {:.3}; median of per-round ratios: {:.3}; with {} experiments",
        mean(&rps[1]) / mean(&rps[0]),
        pairs[pairs.len() / 2],
        args.experiments
    );
    println!(
        "decision cost: {:.0} ns per request for {} experiments that never match\n",
        decision_ns(args.experiments),
        args.experiments
    );
    drop((none, some, mock));

    // 2. Pacing: asked vs observed gap.
    let gap = args.upstream_gap_ms;
    let mock = MockThread::start(MockLlmOptions::paced_ms(20, gap, args.tokens))?;
    println!(
        "| asked gap (ms) | token_delay (ms) | observed p50 (ms) | observed p99 (ms) | gaps | coalesced chunks |"
    );
    println!("|---|---|---|---|---|---|");
    for asked in [10u64, 50, 200] {
        let delay = asked.saturating_sub(gap);
        let faults = format!(
            "faults:\n  - {{ id: pace, ttl: 1h, action: {{ token_delay: {{ delay: {delay}ms }} }} }}\n"
        );
        let proxy = sluice(mock.addr, "llm", &faults)?;
        let url = format!("http://{}/v1/chat/completions", proxy.listeners[0].1);
        let client = Client::builder(TokioExecutor::new()).build_http();
        let timings = runtime.block_on(stream_many(&client, &url, args.streams))?;
        let mut gaps: Vec<Duration> = timings.iter().flat_map(|t| t.gaps.clone()).collect();
        let coalesced: usize = timings.iter().map(|t| t.coalesced).sum();
        let count = gaps.len();
        let s = Summary::of(&mut gaps);
        println!(
            "| {asked} | {delay} | {:.1} | {:.1} | {count} | {coalesced} |",
            s.p50_us / 1000.0,
            s.p99_us / 1000.0
        );
    }
    Ok(())
}
