//! SSE overhead of sluice, with the token meter on (`kind: llm`) and off
//! (`kind: http`), against the same mock LLM reached directly. Rounds
//! alternate direct · meter off · meter on so that drift cancels.
//!
//! cargo run --release -p sluice-benches --bin sse_overhead -- --streams 32 --rounds 3

use std::net::SocketAddr;

use clap::Parser;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sluice_benches::{
    client_runtime, free_port, stream_many, PooledTimings, StreamTiming, Summary,
};
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
    stream_many(&client, url, streams).await?;
    stream_many(&client, url, streams).await
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mock = MockThread::start(MockLlmOptions::paced_ms(
        args.ttft_ms,
        args.itl_ms,
        args.tokens,
    ))?;
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
    let runtime = client_runtime()?;
    let mut pools: Vec<PooledTimings> = targets.iter().map(|_| PooledTimings::default()).collect();
    for _ in 0..args.rounds {
        for (i, (_, url)) in targets.iter().enumerate() {
            for timing in runtime.block_on(measure(url, args.streams))? {
                pools[i].add(timing);
            }
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
