//! How fast a rollout rolls back: a canary at 50% under steady streaming
//! traffic turns slow (TTFT 10 ms → 400 ms against a `ttft_p95: 150ms` gate);
//! the time from that moment, and from its first slow answer, until the
//! canary's weight is 0 in the live snapshot.
//!
//! cargo run --release -p sluice-benches --bin rollback_latency -- --reps 5

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sluice_benches::{client_runtime, percentile, stream_once};
use sluice_cli::{MockLlmOptions, MockThread};
use sluice_control::Config;
use sluice_proxy::{Sluice, StartOptions};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Concurrent client streams.
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Healthy traffic before the canary turns slow.
    #[arg(long, default_value_t = 3)]
    warm_secs: u64,
    /// The rollout's gate window (`window:`), e.g. 10s (the default) or 2s.
    #[arg(long, default_value = "10s")]
    window: String,
}

const SLOW: Duration = Duration::from_millis(400);

fn mock(ttft_ms: u64, model: &str) -> anyhow::Result<MockThread> {
    MockThread::start(MockLlmOptions {
        model: model.into(),
        ..MockLlmOptions::paced_ms(ttft_ms, 2, 4)
    })
}

fn canary_weight(sluice: &Sluice) -> u32 {
    let snapshot = sluice.store().load();
    snapshot.config.routes[0]
        .split
        .iter()
        .find(|(c, _)| c == "canary")
        .map_or(0, |(_, w)| *w)
}

fn one_rep(args: &Args, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Duration> {
    let stable = mock(10, "v1")?;
    let canary = mock(10, "v2")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let yaml = format!(
        "runtime: {{ threads: 1 }}
admin: {{ listen: 127.0.0.1:0 }}
listeners: [ {{ name: public, listen: 127.0.0.1:{port}, protocol: http }} ]
clusters:
  - {{ name: stable, kind: llm, version: v1, endpoints: [{}] }}
  - {{ name: canary, kind: llm, version: v2, endpoints: [{}] }}
routes:
  - {{ name: chat, listener: public, split: {{ stable: 100, canary: 0 }} }}
rollouts:
  - {{ name: r, route: chat, stable: stable, canary: canary, steps: [50, 100], hold: 10m,
      min_requests: 20, window: {}, gates: {{ ttft_p95: 150ms }} }}
",
        stable.addr, canary.addr, args.window
    );
    let config = Config::from_yaml(&yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    let sluice = Sluice::start(config, StartOptions::default())?;
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let stop = Arc::new(AtomicBool::new(false));
    let client = Client::builder(TokioExecutor::new()).build_http();
    let workers: Vec<_> = (0..args.workers)
        .map(|_| {
            let (client, url, stop) = (client.clone(), url.clone(), stop.clone());
            runtime.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let _ = stream_once(&client, &url).await;
                }
            })
        })
        .collect();
    let started = Instant::now();
    while canary_weight(&sluice) != 50 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_secs(args.warm_secs));
    canary.knobs.set_ttft(SLOW);
    let onset = Instant::now();
    while canary_weight(&sluice) != 0 && onset.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let took = onset.elapsed();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = runtime.block_on(w);
    }
    anyhow::ensure!(canary_weight(&sluice) == 0, "no rollback within 30 s");
    Ok(took)
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = client_runtime()?;
    let mut from_change = Vec::new();
    for rep in 0..args.reps {
        let took = one_rep(&args, &runtime)?;
        println!(
            "rep {rep}: canary slowed → weight 0 in {} ms",
            took.as_millis()
        );
        from_change.push(took);
    }
    let mut from_first_slow: Vec<Duration> =
        from_change.iter().map(|d| d.saturating_sub(SLOW)).collect();
    println!("| measure | p50 (ms) | max (ms) |");
    println!("|---|---:|---:|");
    for (name, values) in [
        ("canary slowed → weight 0", &mut from_change),
        (
            "first slow answer (slowed + 400 ms) → weight 0",
            &mut from_first_slow,
        ),
    ] {
        let p50 = percentile(values, 0.5).as_millis();
        let max = percentile(values, 1.0).as_millis();
        println!("| {name} | {p50} | {max} |");
    }
    Ok(())
}
