//! Open-loop load at a constant rate (wrk2-style): request i is due at
//! `start + i / rate` whether or not earlier ones have answered, and its
//! latency counts from when it was due, so a stalled proxy is charged for
//! the requests queued behind the stall (no coordinated omission).
//!
//! target/release/open_loop --url http://127.0.0.1:8080/v1/models --rate 10000 --duration 8
//!
//! Prints one line of `key=value` pairs (rate asked and reached, p50 / p90 /
//! p99 / p99.9 in µs, errors) for scripts such as benches/compare.sh.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use sluice_benches::percentile;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Mutex};
use tokio::time::Instant;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    url: http::Uri,
    /// Requests per second.
    #[arg(long)]
    rate: f64,
    /// Seconds of measured load (after a warm-up of one second).
    #[arg(long, default_value_t = 8.0)]
    duration: f64,
    /// Keep-alive connections (requests beyond these queue, and wait).
    #[arg(long, default_value_t = 32)]
    connections: usize,
}

/// Per connection: due times in, latencies out.
async fn worker(
    uri: http::Uri,
    due: Arc<Mutex<mpsc::UnboundedReceiver<(Instant, bool)>>>,
    done: mpsc::UnboundedSender<Result<(Duration, bool), ()>>,
) -> anyhow::Result<()> {
    let authority = uri
        .authority()
        .ok_or_else(|| anyhow::anyhow!("the url needs host:port"))?
        .clone();
    let tcp = TcpStream::connect(authority.as_str()).await?;
    tcp.set_nodelay(true)?;
    let (mut sender, conn) = http1::handshake::<_, Empty<Bytes>>(TokioIo::new(tcp)).await?;
    tokio::spawn(conn);
    loop {
        let next = due.lock().await.recv().await;
        let Some((at, measured)) = next else {
            return Ok(());
        };
        let request = http::Request::get(uri.clone())
            .header("host", authority.as_str())
            .body(Empty::new())?;
        let outcome = async {
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            let ok = response.status().is_success();
            response.into_body().collect().await?;
            anyhow::Ok(ok)
        }
        .await;
        match outcome {
            Ok(true) => {
                let _ = done.send(Ok((at.elapsed(), measured)));
            }
            Ok(false) => {
                let _ = done.send(Err(()));
            }
            Err(e) => {
                let _ = done.send(Err(()));
                return Err(e);
            }
        }
    }
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.rate > 0.0, "--rate must be positive");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (due_tx, due_rx) = mpsc::unbounded_channel();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let due_rx = Arc::new(Mutex::new(due_rx));
        for _ in 0..args.connections {
            tokio::spawn(worker(args.url.clone(), due_rx.clone(), done_tx.clone()));
        }
        drop(done_tx);
        let warmup = Duration::from_secs(1);
        let total = warmup + Duration::from_secs_f64(args.duration);
        let start = Instant::now();
        let interval = Duration::from_secs_f64(1.0 / args.rate);
        let count = (total.as_secs_f64() * args.rate) as u64;
        // The dispatcher is a plain thread: its sleeps are precise to tens of
        // microseconds where tokio's timer ticks in milliseconds. Each request
        // is stamped with its own due time, however late it is released.
        let dispatcher = std::thread::spawn(move || {
            let start_std = start.into_std();
            for i in 0..count {
                let at = start_std + interval.mul_f64(i as f64);
                if let Some(wait) = at.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(wait);
                }
                let at = Instant::from_std(at);
                if due_tx.send((at, at >= start + warmup)).is_err() {
                    return;
                }
            }
        });
        let mut latencies = Vec::with_capacity(count as usize);
        let mut errors = 0u64;
        while let Some(result) = done_rx.recv().await {
            match result {
                Ok((latency, true)) => latencies.push(latency),
                Ok((_, false)) => {}
                Err(()) => errors += 1,
            }
        }
        let _ = dispatcher.join();
        let elapsed = start.elapsed().as_secs_f64() - warmup.as_secs_f64();
        let reached = latencies.len() as f64 / elapsed;
        let [p50, p90, p99, p999] =
            [0.50, 0.90, 0.99, 0.999].map(|q| percentile(&mut latencies, q).as_secs_f64() * 1e6);
        println!(
            "rate_asked={:.0} rate_reached={reached:.0} p50_us={p50:.0} p90_us={p90:.0} p99_us={p99:.0} p999_us={p999:.0} errors={errors}",
            args.rate,
        );
        anyhow::Ok(())
    })
}
