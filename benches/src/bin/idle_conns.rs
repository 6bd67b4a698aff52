//! The memory an idle client connection costs: `--conns` connections held
//! open to sluice (and to nginx, `--nginx`, as a peer), first with nothing
//! sent, then as keep-alive connections after one answered request each.
//! The figure is the proxy's RSS growth over the count, read from `/proc`,
//! each proxy its own process (one worker thread), a fresh one for each
//! figure: a process that has held connections before reuses their freed
//! memory, and would show less.
//!
//! cargo build --release -p sluice-cli -p sluice-benches
//! target/release/idle_conns --conns 5000 --nginx /usr/sbin/nginx

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use sluice_benches::{free_port, spawn, wait_listening, Proc};

#[derive(Parser)]
struct Args {
    /// The sluice binary (release build).
    #[arg(long, default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Connections held open at once.
    #[arg(long, default_value_t = 5000)]
    conns: usize,
    /// Also measure nginx (this binary) in front of the same mock, as a peer.
    #[arg(long)]
    nginx: Option<PathBuf>,
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mock_addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let mock_args = ["mock-llm".into(), "--listen".into(), mock_addr.to_string()];
    let _mock = spawn(&args.sluice, &mock_args, None)?;
    wait_listening(mock_addr)?;
    println!("| proxy | connections | RSS before (MiB) | nothing sent: KiB per connection | after one request: KiB per connection |");
    println!("|---|---:|---:|---:|---:|");
    let mut names = vec!["sluice"];
    if args.nginx.is_some() {
        names.push("nginx");
    }
    for name in names {
        let start = || match (name, &args.nginx) {
            ("nginx", Some(nginx)) => start_nginx(nginx, mock_addr),
            _ => start_sluice(&args.sluice, mock_addr),
        };
        let mut figures = Vec::new();
        let mut before = 0;
        for request in [false, true] {
            let (proc, addr) = start()?;
            // One request first, so that the figure starts from a warm process.
            drop(open(addr, 1, true)?);
            std::thread::sleep(Duration::from_millis(500));
            before = proc.rss_kib()?;
            figures.push(held(&proc, addr, args.conns, request)?);
        }
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |",
            args.conns,
            before as f64 / 1024.0,
            figures[0],
            figures[1]
        );
    }
    Ok(())
}

/// KiB of RSS per connection while `n` connections are open (after one
/// request each when `request`), measured from the RSS just before.
fn held(proc: &Proc, addr: SocketAddr, n: usize, request: bool) -> anyhow::Result<f64> {
    let before = proc.rss_kib()?;
    let conns = open(addr, n, request)?;
    std::thread::sleep(Duration::from_millis(1000));
    let after = proc.rss_kib()?;
    drop(conns);
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

/// `n` connections to `addr`; with `request`, each has had `GET /v1/models`
/// answered and stays open (HTTP/1.1 keep-alive).
fn open(addr: SocketAddr, n: usize, request: bool) -> anyhow::Result<Vec<TcpStream>> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = TcpStream::connect(addr)?;
        if request {
            s.write_all(b"GET /v1/models HTTP/1.1\r\nhost: bench\r\n\r\n")?;
            read_answer(&mut s)?;
        }
        conns.push(s);
    }
    Ok(conns)
}

/// Reads one answer with a `content-length` body.
fn read_answer(s: &mut TcpStream) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk)?;
        anyhow::ensure!(n > 0, "closed before the answer ended");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        anyhow::ensure!(head.starts_with("http/1.1 200"), "answer: {head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .ok_or_else(|| anyhow::anyhow!("no content-length: {head}"))?
            .trim()
            .parse()?;
        if buf.len() >= end + 4 + length {
            return Ok(());
        }
    }
}

fn start_sluice(bin: &Path, upstream: SocketAddr) -> anyhow::Result<(Proc, SocketAddr)> {
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let yaml = format!(
        "runtime: {{ threads: 1 }}\nadmin: {{ listen: 127.0.0.1:0 }}\nlisteners:\n  - {{ name: public, listen: {listen}, protocol: http }}\n\
         clusters:\n  - {{ name: llm, kind: llm, endpoints: [{upstream}] }}\n\
         routes:\n  - {{ name: chat, listener: public, split: {{ llm: 100 }} }}\n"
    );
    let path = std::env::temp_dir().join(format!("sluice-idle-conns-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml)?;
    let run = ["run".into(), "--config".into(), path.display().to_string()];
    let proc = spawn(bin, &run, None)?;
    wait_listening(listen)?;
    Ok((proc, listen))
}

/// nginx as a plain reverse proxy: one process, keep-alive to clients and
/// to the mock, no access log.
fn start_nginx(nginx: &Path, upstream: SocketAddr) -> anyhow::Result<(Proc, SocketAddr)> {
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let dir = std::env::temp_dir().join(format!("idle-conns-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
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
  keepalive_timeout 600s;
  upstream mock {{ server {upstream}; keepalive 64; }}
  server {{
    listen {listen};
    location / {{
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"#,
        dir = dir.display(),
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf)?;
    let args = [
        "-e".into(),
        dir.join("error.log").display().to_string(),
        "-p".into(),
        dir.display().to_string(),
        "-c".into(),
        path.display().to_string(),
    ];
    let proc = spawn(nginx, &args, None)?;
    wait_listening(listen)?;
    Ok((proc, listen))
}
