//! SSE overhead of sluice, with the token meter on (`kind: llm`) and off
//! (`kind: http`), against the same mock LLM reached directly. Rounds
//! alternate direct · meter off · meter on so that drift cancels.
//!
//! cargo run --release -p sluice-benches --bin sse_overhead -- --streams 32 --rounds 3

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sluice_benches::{free_port, stream_once, StreamTiming, Summary};
use sluice_cli::{MockLlmOptions, MockThread};
use sluice_control::Config;
use sluice_proxy::{Sluice, StartOptions};

#[derive(Parser)]
struct Args {
    /// Concurrent streams per measurement.
    #[arg(long, default_value_t = 32)]
    streams: usize,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 40)]
    tokens: u32,
    #[arg(long, default_value_t = 50)]
    ttft_ms: u64,
    #[arg(long, default_value_t = 10)]
    itl_ms: u64,
}

fn sluice_for(upstream: SocketAddr, kind: &str) -> anyhow::Result<Sluice> {
    let yaml = format!(
        "runtime: {{ threads: 1 }}\nadmin: {{ listen: 127.0.0.1:0 }}\nlisteners:\n  - {{ name: public, listen: 127.0.0.1:{}, protocol: http }}\nclusters:\n  - {{ name: up, kind: {kind}, endpoints: [{upstream}] }}\nroutes:\n  - {{ name: r, listener: public, split: {{ up: 100 }} }}\n",
        free_port()?
    );
    let config = Config::from_yaml(&yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    Sluice::start(config, StartOptions::default())
}

async fn measure(url: &str, streams: usize) -> anyhow::Result<Vec<StreamTiming>> {
    let client = Client::builder(TokioExecutor::new()).build_http();
    // Warm the pools (client → proxy → upstream) with as many connections as
    // will be used, so that connection setup is not measured.
    let mut warm = Vec::new();
    for _ in 0..streams {
        let (client, url) = (client.clone(), url.to_string());
        warm.push(tokio::spawn(
            async move { stream_once(&client, &url).await },
        ));
    }
    for w in warm {
        w.await??;
    }
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let (client, url) = (client.clone(), url.to_string());
        tasks.push(tokio::spawn(
            async move { stream_once(&client, &url).await },
        ));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await??);
    }
    Ok(out)
}

#[derive(Default)]
struct Pool {
    ttft: Vec<Duration>,
    gaps: Vec<Duration>,
    coalesced: usize,
    events: usize,
}

impl Pool {
    fn add(&mut self, timings: Vec<StreamTiming>) {
        for t in timings {
            self.ttft.push(t.ttft);
            self.gaps.extend(t.gaps);
            self.coalesced += t.coalesced;
            self.events += t.content_events;
        }
    }
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mock = MockThread::start(MockLlmOptions {
        listen: "127.0.0.1:0".parse()?,
        ttft: Duration::from_millis(args.ttft_ms),
        itl: Duration::from_millis(args.itl_ms),
        tokens: args.tokens,
        ..MockLlmOptions::default()
    })?;
    let off = sluice_for(mock.addr, "http")?;
    let on = sluice_for(mock.addr, "llm")?;
    let path = "/v1/chat/completions";
    let targets = [
        ("direct", format!("http://{}{path}", mock.addr)),
        (
            "sluice, meter off",
            format!("http://{}{path}", off.listeners[0].1),
        ),
        (
            "sluice, meter on",
            format!("http://{}{path}", on.listeners[0].1),
        ),
    ];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let mut pools: Vec<Pool> = targets.iter().map(|_| Pool::default()).collect();
    for _ in 0..args.rounds {
        for (i, (_, url)) in targets.iter().enumerate() {
            pools[i].add(runtime.block_on(measure(url, args.streams))?);
        }
    }
    let mut direct_ttft = pools[0].ttft.clone();
    let base = Summary::of(&mut direct_ttft);
    println!(
        "| target | TTFT p50 (µs) | TTFT p99 (µs) | TTFT p50 overhead (µs) | gap p50 (µs) | gap p99 (µs) | coalesced chunks |"
    );
    println!("|---|---|---|---|---|---|---|");
    for ((name, _), pool) in targets.iter().zip(pools.iter_mut()) {
        let ttft = Summary::of(&mut pool.ttft);
        let gaps = Summary::of(&mut pool.gaps);
        println!(
            "| {name} | {:.0} | {:.0} | {:+.0} | {:.0} | {:.0} | {} of {} |",
            ttft.p50_us,
            ttft.p99_us,
            ttft.p50_us - base.p50_us,
            gaps.p50_us,
            gaps.p99_us,
            pool.coalesced,
            pool.events
        );
    }
    drop(on);
    drop(off);
    Ok(())
}
