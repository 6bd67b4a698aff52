//! Unary gRPC, both ends, for benches/grpc.sh: `serve` answers `/bench.Echo/Echo` with
//! the request's bytes (tonic, h2c), `load` calls it in a closed loop (tonic) and prints
//! one JSON line: calls, calls_per_s, errors, p50_ms, p99_ms, max_ms.
//!
//! target/release/grpc_bench serve --listen 127.0.0.1:50051
//! target/release/grpc_bench load --target http://127.0.0.1:50051 --seconds 10 \
//!     --concurrency 32 --size 100

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sluice_benches::grpc::{self, LoadPlan};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The echo server; prints `listening ADDR` once it accepts.
    Serve {
        #[arg(long)]
        listen: SocketAddr,
        /// Runtime worker threads.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// Closed-loop unary calls to `/bench.Echo/Echo`.
    Load {
        /// `http://host:port` (h2c).
        #[arg(long)]
        target: String,
        /// Measured seconds, after the warm-up.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Seconds of calls before the measured ones, not counted.
        #[arg(long, default_value_t = 1.0)]
        warmup: f64,
        /// Callers, each with one call in flight.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// HTTP/2 connections the callers share.
        #[arg(long, default_value_t = 1)]
        connections: usize,
        /// Bytes of each request message (and of each answer).
        #[arg(long, default_value_t = 100)]
        size: usize,
    },
}

fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Serve { listen, threads } => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads.max(1))
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let listener = tokio::net::TcpListener::bind(listen).await?;
                let mut out = std::io::stdout().lock();
                writeln!(out, "listening {}", listener.local_addr()?)?;
                out.flush()?;
                drop(out);
                grpc::serve(listener, std::future::pending()).await
            })
        }
        Command::Load {
            target,
            seconds,
            warmup,
            concurrency,
            connections,
            size,
        } => {
            let plan = LoadPlan {
                target,
                warmup: Duration::try_from_secs_f64(warmup)?,
                duration: Duration::try_from_secs_f64(seconds)?,
                concurrency,
                connections,
                size,
            };
            let report = sluice_benches::client_runtime()?.block_on(grpc::load(&plan))?;
            writeln!(std::io::stdout().lock(), "{}", report.to_json(&plan))?;
            Ok(())
        }
    }
}
