//! `tcp` listeners end to end: Redis through the L4 pass-through (redis-cli and
//! redis-benchmark), a half-close carried across, and the byte counters on `/metrics`.

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

use sluice_proxy::Sluice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::harness::{self, TestConfig};
use crate::support::{self, RedisServer};

/// One tcp listener `name` on a loopback port in front of cluster `{name}-up` of `kind`
/// with one endpoint, `upstream`.
pub(crate) fn tcp_yaml(name: &str, upstream: SocketAddr, kind: &str) -> String {
    let cluster = format!("{name}-up");
    TestConfig::new()
        .listener(name, "tcp", &format!("cluster: {cluster}"))
        .cluster(&cluster, kind, [upstream])
        .yaml()
}

/// Runs a command to completion off the runtime's worker threads.
pub(crate) async fn run(program: &str, args: Vec<String>) -> Output {
    let program = program.to_owned();
    tokio::task::spawn_blocking(move || {
        Command::new(&program)
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"))
    })
    .await
    .unwrap()
}

pub(crate) fn redis_cli(port: u16, command: &[&str]) -> Vec<String> {
    let mut args = vec![
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
    ];
    args.extend(command.iter().map(|s| (*s).to_owned()));
    args
}

pub(crate) fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The value of the sample `name{labels...}` whose labels include every one of `labels`.
pub(crate) fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Redis behind the tcp listener `cache`; `None`, and the test skips, without `redis-server`.
pub(crate) async fn redis_behind_sluice() -> Option<(RedisServer, Sluice)> {
    if !support::require("redis-server", support::redis_available()) {
        return None;
    }
    let redis = RedisServer::start().await.unwrap();
    let sluice = harness::start(&tcp_yaml("cache", redis.addr(), "cache"));
    Some((redis, sluice))
}

/// `/metrics` once `ok` holds for it (the counters are bumped just after the proxy's side
/// of a connection closes, which may be a moment after the client's), 10 s at most.
pub(crate) async fn metrics_until(sluice: &Sluice, ok: impl Fn(&str) -> bool) -> String {
    harness::metrics_within(sluice, Duration::from_secs(10), ok).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_through_a_tcp_listener() {
    let Some((redis, sluice)) = redis_behind_sluice().await else {
        return;
    };
    let port = harness::listener(&sluice, "cache").port();

    let set = run("redis-cli", redis_cli(port, &["SET", "k", "v"])).await;
    assert!(set.status.success(), "{}", text(&set));
    assert_eq!(String::from_utf8_lossy(&set.stdout).trim(), "OK");
    let get = run("redis-cli", redis_cli(port, &["GET", "k"])).await;
    assert!(get.status.success(), "{}", text(&get));
    assert_eq!(String::from_utf8_lossy(&get.stdout).trim(), "v");
    // The value really is in Redis, not somewhere in between.
    let direct = run("redis-cli", redis_cli(redis.port(), &["GET", "k"])).await;
    assert_eq!(String::from_utf8_lossy(&direct.stdout).trim(), "v");

    let mut args = redis_cli(port, &[]);
    args.extend(
        ["-n", "20000", "-P", "16", "-t", "set,get", "-q"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    let bench = run("redis-benchmark", args).await;
    let out = text(&bench);
    assert!(bench.status.success(), "{out}");
    assert!(out.contains("requests per second"), "{out}");
    assert!(!out.to_lowercase().contains("error"), "{out}");
    for test in ["SET", "GET"] {
        assert!(out.contains(&format!("{test}: ")), "{out}");
    }

    let metrics = metrics_until(&sluice, |m| {
        sample(m, "sluice_tcp_bytes_total", &["direction=\"downstream\""]).unwrap_or(0.0) > 0.0
    })
    .await;
    for direction in ["upstream", "downstream"] {
        let labels = ["listener=\"cache\"", &format!("direction=\"{direction}\"")];
        let bytes = sample(&metrics, "sluice_tcp_bytes_total", &labels);
        // 40000 commands of at least a few bytes each went each way.
        assert!(bytes.unwrap_or(0.0) > 40_000.0, "{direction}: {metrics}");
    }
}

/// Reads each connection to EOF, then writes back everything it read and closes.
pub(crate) async fn echo_after_eof() -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            while conns.try_join_next().is_some() {}
            conns.spawn(async move {
                let mut got = Vec::new();
                if stream.read_to_end(&mut got).await.is_ok() {
                    let _ = stream.write_all(&got).await;
                    let _ = stream.shutdown().await;
                }
            });
        }
    });
    (addr, task)
}

/// Sends `bytes` to `addr`, half-closes, and reads until the other side closes (20 s at
/// most): what an [`echo_after_eof`] behind a tcp listener sends back.
pub(crate) async fn send_then_read_to_eof(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut back = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut back))
        .await
        .expect("the echo's answer and EOF arrive once our EOF reached it")
        .unwrap();
    back
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_is_passed_on_and_bytes_are_counted() {
    let (echo, echo_task) = echo_after_eof().await;
    let sluice = harness::start(&tcp_yaml("echo", echo, "cache"));
    let addr = harness::listener(&sluice, "echo");

    // Larger than any one buffer on the way, so it crosses in many reads.
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let back = send_then_read_to_eof(addr, &payload).await;
    assert_eq!(back.len(), payload.len());
    assert!(back == payload, "echoed bytes differ");

    let want = payload.len() as f64;
    let counted = |m: &str, direction: &str| {
        let labels = [
            "listener=\"echo\"",
            "cluster=\"echo-up\"",
            &format!("direction=\"{direction}\""),
        ];
        sample(m, "sluice_tcp_bytes_total", &labels)
    };
    let metrics = metrics_until(&sluice, |m| {
        counted(m, "upstream") == Some(want) && counted(m, "downstream") == Some(want)
    })
    .await;
    assert_eq!(counted(&metrics, "upstream"), Some(want), "{metrics}");
    assert_eq!(counted(&metrics, "downstream"), Some(want), "{metrics}");
    echo_task.abort();
}
