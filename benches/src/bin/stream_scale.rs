//! Many concurrent SSE streams from `sluice mock-llm`, direct vs through
//! sluice: TTFT overhead, gap distortion, coalesced chunks, and sluice's RSS
//! per open stream. sluice and the mock run as their own processes so that
//! the RSS read from `/proc` is sluice's alone.
//!
//! cargo build --release -p sluice-cli -p sluice-benches
//! target/release/stream_scale --streams 1000,10000
//!
//! The process file limit here is 20000, so 10k streams cannot each have a
//! client connection *and* an upstream connection on one process. By default
//! clients speak h2c (`--per-conn` streams per connection), as a gRPC-style or
//! SDK client with HTTP/2 would; sluice reaches the mock over HTTP/1.1, one
//! upstream connection per stream. `--proto h1` gives one client connection
//! per stream (up to ~9k streams here).
//!
//! `--nginx /usr/sbin/nginx` adds nginx as a peer (one worker, on sluice's
//! core, `proxy_buffering off`, HTTP/1.1 upstream keep-alive): its TTFT
//! overhead over direct is what one more proxy process on the path costs
//! on this machine, whichever proxy it is.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use sluice_benches::{
    client_runtime, free_port, read_stream, spawn, wait_listening, PooledTimings, Proc,
    StreamTiming, Summary, CHAT_BODY,
};
use tokio::net::TcpStream;
use tokio::sync::Notify;

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Proto {
    H1,
    H2,
}

#[derive(Parser)]
struct Args {
    /// The sluice binary (release build).
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Stream counts to measure, each with a fresh sluice process.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    streams: Vec<usize>,
    #[arg(long, value_enum, default_value = "h2")]
    proto: Proto,
    /// h2c streams per client connection.
    #[arg(long, default_value_t = 100)]
    per_conn: usize,
    #[arg(long, default_value_t = 50)]
    ttft_ms: u64,
    #[arg(long, default_value_t = 500)]
    itl_ms: u64,
    #[arg(long, default_value_t = 20)]
    tokens: u32,
    /// Streams start evenly spread over this time.
    #[arg(long, default_value_t = 2000)]
    ramp_ms: u64,
    /// Rounds of direct, sluice (and nginx) per stream count.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Pin sluice to this core (`taskset -c`); the mock and the client stay
    /// where this process was started.
    #[arg(long)]
    sluice_core: Option<usize>,
    /// More entries for sluice's `runtime` map, e.g. `upstream_pool: 128`.
    #[arg(long)]
    sluice_runtime: Option<String>,
    /// Have sluice write its access log here (JSON lines with `ttft_ms` and
    /// the `upstream_*_ms` phases, for finding where a slow stream's time went).
    #[arg(long)]
    sluice_access_log: Option<PathBuf>,
    /// Also measure nginx (this binary) in front of the same mock, as a peer.
    #[arg(long)]
    nginx: Option<PathBuf>,
}

fn start_sluice(args: &Args, upstream: SocketAddr) -> anyhow::Result<(Proc, SocketAddr)> {
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let access_log = match &args.sluice_access_log {
        Some(path) => format!(
            "telemetry: {{ access_log: {{ path: {} }} }}\n",
            path.display()
        ),
        None => String::new(),
    };
    let extra = match &args.sluice_runtime {
        Some(more) => format!(", {more}"),
        None => String::new(),
    };
    let yaml = format!(
        "runtime: {{ threads: 1{extra} }}\nadmin: {{ listen: 127.0.0.1:0 }}\nlisteners:\n  - {{ name: public, listen: {listen}, protocol: http }}\n\
         clusters:\n  - {{ name: llm, kind: llm, endpoints: [{upstream}] }}\n\
         routes:\n  - {{ name: chat, listener: public, split: {{ llm: 100 }} }}\n{access_log}"
    );
    let path =
        std::env::temp_dir().join(format!("sluice-stream-scale-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml)?;
    let proc = spawn(
        &args.sluice,
        &["run".into(), "--config".into(), path.display().to_string()],
        args.sluice_core,
    )?;
    wait_listening(listen)?;
    Ok((proc, listen))
}

/// nginx as a streaming proxy: one worker on sluice's core, no response
/// buffering (each SSE event is passed on as it arrives), HTTP/1.1 with
/// keep-alive to the mock, h2c (prior knowledge) or HTTP/1.1 to clients as
/// `--proto` says, no access log.
fn start_nginx(
    args: &Args,
    nginx: &Path,
    upstream: SocketAddr,
) -> anyhow::Result<(Proc, SocketAddr)> {
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let dir = std::env::temp_dir().join(format!("stream-scale-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let http2 = if args.proto == Proto::H2 {
        " http2"
    } else {
        ""
    };
    let conf = format!(
        r#"daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 40000;
error_log {dir}/error.log error;
pid {dir}/nginx.pid;
events {{ worker_connections 30000; }}
http {{
  access_log off;
  client_body_temp_path {dir};
  proxy_temp_path {dir};
  http2_max_concurrent_streams {per_conn};
  keepalive_requests 1000000;
  upstream mock {{ server {upstream}; keepalive 1024; }}
  server {{
    listen {listen}{http2};
    location / {{
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 60s;
    }}
  }}
}}
"#,
        dir = dir.display(),
        per_conn = args.per_conn,
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf)?;
    let proc = spawn(
        nginx,
        &[
            "-e".into(),
            dir.join("error.log").display().to_string(),
            "-p".into(),
            dir.display().to_string(),
            "-c".into(),
            path.display().to_string(),
        ],
        args.sluice_core,
    )?;
    wait_listening(listen)?;
    Ok((proc, listen))
}

/// The streaming chat request. HTTP/1.1 needs a `host` header written out;
/// HTTP/2 carries the URI's authority as `:authority`, and a `host` beside
/// it is a duplicate that nginx answers 400.
fn request(addr: SocketAddr, proto: Proto) -> anyhow::Result<http::Request<Full<Bytes>>> {
    let mut builder = http::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json");
    if proto == Proto::H1 {
        builder = builder.header("host", addr.to_string());
    }
    Ok(builder.body(Full::new(Bytes::from_static(CHAT_BODY.as_bytes())))?)
}

/// What one measurement of `n` streams saw.
#[derive(Default)]
struct Run {
    timings: Vec<StreamTiming>,
    errors: usize,
    /// sluice's RSS once every stream had its first token.
    rss_open_kib: Option<u64>,
}

/// Opens `n` streams spread over the ramp; once all have started answering,
/// reads the RSS of `watch` (sluice); then waits for every stream to end.
async fn measure(args: &Args, addr: SocketAddr, n: usize, watch: Option<&Proc>) -> Run {
    let mut h2_senders = Vec::new();
    if args.proto == Proto::H2 {
        for _ in 0..n.div_ceil(args.per_conn) {
            let Ok(tcp) = TcpStream::connect(addr).await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            if let Ok((sender, conn)) =
                http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await
            {
                tokio::spawn(conn);
                h2_senders.push(sender);
            }
        }
    }
    let first = Arc::new(AtomicUsize::new(0));
    let all_open = Arc::new(Notify::new());
    let start = tokio::time::Instant::now();
    let ramp = Duration::from_millis(args.ramp_ms);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let at = start + ramp.mul_f64(i as f64 / n as f64);
        let h2 = h2_senders.get(i / args.per_conn).cloned();
        let (first, all_open) = (first.clone(), all_open.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let on_first = move |_| {
                if first.fetch_add(1, Ordering::AcqRel) + 1 == n {
                    all_open.notify_one();
                }
            };
            let proto = if h2.is_some() { Proto::H2 } else { Proto::H1 };
            let request = request(addr, proto)?;
            match h2 {
                Some(mut sender) => {
                    sender.ready().await?;
                    let sent = Instant::now();
                    let response = sender.send_request(request).await?;
                    read_stream(sent, response, on_first).await
                }
                None => {
                    let tcp = TcpStream::connect(addr).await?;
                    tcp.set_nodelay(true)?;
                    let (mut sender, conn) = http1::handshake(TokioIo::new(tcp)).await?;
                    tokio::spawn(conn);
                    let sent = Instant::now();
                    let response = sender.send_request(request).await?;
                    read_stream(sent, response, on_first).await
                }
            }
        }));
    }
    let mut run = Run::default();
    let open_wait = ramp + Duration::from_millis(args.ttft_ms) + Duration::from_secs(10);
    if tokio::time::timeout(open_wait, all_open.notified())
        .await
        .is_ok()
    {
        run.rss_open_kib = watch.and_then(|p| p.rss_kib().ok());
    }
    for task in tasks {
        match task.await {
            Ok(Ok(timing)) => run.timings.push(timing),
            Ok(Err(e)) => {
                if run.errors == 0 {
                    eprintln!("stream error: {e:#}");
                }
                run.errors += 1;
            }
            Err(_) => run.errors += 1,
        }
    }
    run
}

#[derive(Default)]
struct Pool {
    timings: PooledTimings,
    ok: usize,
    errors: usize,
    rss_open_kib: Vec<u64>,
}

impl Pool {
    fn add(&mut self, run: Run) {
        self.errors += run.errors;
        self.rss_open_kib.extend(run.rss_open_kib);
        self.ok += run.timings.len();
        for t in run.timings {
            self.timings.add(t);
        }
    }
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mock_addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let _mock = spawn(
        &args.sluice,
        &[
            "mock-llm".into(),
            "--listen".into(),
            mock_addr.to_string(),
            "--ttft".into(),
            format!("{}ms", args.ttft_ms),
            "--itl".into(),
            format!("{}ms", args.itl_ms),
            "--tokens".into(),
            args.tokens.to_string(),
        ],
        None,
    )?;
    wait_listening(mock_addr)?;
    let runtime = client_runtime()?;
    println!(
        "| streams | target | ok | errors | TTFT p50 (ms) | TTFT p99 (ms) | TTFT overhead p50 / p99 (ms) | gap p50 (ms) | gap p99 (ms) | coalesced | sluice RSS idle → open (MiB) | RSS per open stream (KiB) |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &args.streams {
        let (sluice, sluice_addr) = start_sluice(&args, mock_addr)?;
        let nginx = match &args.nginx {
            Some(bin) => Some(start_nginx(&args, bin, mock_addr)?),
            None => None,
        };
        // One stream through first, so the idle figure includes a warmed runtime.
        runtime.block_on(measure(&args, sluice_addr, 1, None));
        if let Some((_, addr)) = &nginx {
            runtime.block_on(measure(&args, *addr, 1, None));
        }
        std::thread::sleep(Duration::from_millis(200));
        let idle_kib = sluice.rss_kib()?;
        let (mut direct, mut through, mut peer) =
            (Pool::default(), Pool::default(), Pool::default());
        for _ in 0..args.rounds {
            direct.add(runtime.block_on(measure(&args, mock_addr, n, None)));
            through.add(runtime.block_on(measure(&args, sluice_addr, n, Some(&sluice))));
            if let Some((_, addr)) = &nginx {
                peer.add(runtime.block_on(measure(&args, *addr, n, None)));
            }
        }
        let base_ttft = Summary::of(&mut direct.timings.ttft);
        let mut rows = vec![("direct", &mut direct), ("sluice", &mut through)];
        if nginx.is_some() {
            rows.push(("nginx", &mut peer));
        }
        for (name, pool) in rows {
            let ttft = Summary::of(&mut pool.timings.ttft);
            let gaps = Summary::of(&mut pool.timings.gaps);
            let overhead = if name == "direct" {
                "-".to_string()
            } else {
                format!(
                    "{:+.2} / {:+.2}",
                    (ttft.p50_us - base_ttft.p50_us) / 1e3,
                    (ttft.p99_us - base_ttft.p99_us) / 1e3
                )
            };
            let memory = if name == "sluice" {
                let open = pool.rss_open_kib.iter().copied().max().unwrap_or(0);
                (
                    format!(
                        "{:.1} → {:.1}",
                        idle_kib as f64 / 1024.0,
                        open as f64 / 1024.0
                    ),
                    format!("{:.1}", open.saturating_sub(idle_kib) as f64 / n as f64),
                )
            } else {
                ("-".into(), "-".into())
            };
            println!(
                "| {n} | {name} | {} | {} | {:.2} | {:.2} | {overhead} | {:.2} | {:.2} | {} of {} | {} | {} |",
                pool.ok,
                pool.errors,
                ttft.p50_us / 1e3,
                ttft.p99_us / 1e3,
                gaps.p50_us / 1e3,
                gaps.p99_us / 1e3,
                pool.timings.coalesced,
                pool.timings.events,
                memory.0,
                memory.1,
            );
        }
        drop(sluice);
        drop(nginx);
    }
    Ok(())
}
