//! RESP awareness end to end: redis-benchmark through a `kind: cache` tcp
//! listener, and the `sluice_resp_*` metrics checked against redis-benchmark's
//! own request counts and against Redis's own `INFO` counters; a RESP3 session
//! with hits, misses and errors; a non-RESP client still copied byte for byte.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness;
use crate::tcp::{
    echo_after_eof, metrics_until, redis_behind_sluice, redis_cli, run, sample,
    send_then_read_to_eof, tcp_yaml, text,
};

/// `field:value` lines of `INFO section`, asked of Redis directly.
async fn info(port: u16, section: &str) -> String {
    let out = run("redis-cli", redis_cli(port, &["INFO", section])).await;
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

/// A counter from `INFO stats` (`keyspace_hits`) or, for `cmdstat_get`, its `calls`.
fn info_count(info: &str, field: &str) -> u64 {
    let Some(value) = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
    else {
        return 0;
    };
    let value = match value.strip_prefix("calls=") {
        Some(rest) => rest.split(',').next().unwrap_or(""),
        None => value,
    };
    value.parse().unwrap_or_else(|_| panic!("{field}: {value}"))
}

#[derive(Debug, PartialEq, Eq)]
struct RedisCounts {
    hits: u64,
    misses: u64,
    gets: u64,
    sets: u64,
}

async fn redis_counts(port: u16) -> RedisCounts {
    let stats = info(port, "stats").await;
    let commands = info(port, "commandstats").await;
    RedisCounts {
        hits: info_count(&stats, "keyspace_hits"),
        misses: info_count(&stats, "keyspace_misses"),
        gets: info_count(&commands, "cmdstat_get"),
        sets: info_count(&commands, "cmdstat_set"),
    }
}

/// Runs `redis-benchmark -q -n N -t TESTS [-P 16]` through `port`.
async fn bench(port: u16, requests: u64, tests: &str, pipeline: bool) {
    let mut args = redis_cli(port, &[]);
    args.extend(["-q", "-n", &requests.to_string(), "-t", tests].map(str::to_owned));
    if pipeline {
        args.extend(["-P", "16"].map(str::to_owned));
    }
    let out = run("redis-benchmark", args).await;
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    for test in tests.split(',') {
        let line = format!("{}: ", test.to_uppercase());
        assert!(report.contains(&line), "{line} missing: {report}");
    }
}

fn resp(metrics: &str, name: &str, labels: &[&str]) -> u64 {
    let mut all = vec!["listener=\"cache\""];
    all.extend_from_slice(labels);
    sample(metrics, name, &all).unwrap_or(0.0) as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp_metrics_match_redis_benchmark_and_redis_own_counts() {
    let Some((redis, sluice)) = redis_behind_sluice().await else {
        return;
    };
    let port = harness::listener(&sluice, "cache").port();
    let before = redis_counts(redis.port()).await;

    // redis-benchmark's key is one fixed name: GET before any SET misses,
    // GET after SET hits. Each test sends exactly -n requests (16 divides 2000).
    const N: u64 = 2000;
    bench(port, N, "get", false).await;
    bench(port, N, "get", true).await;
    bench(port, N, "set,get", false).await;
    bench(port, N, "set,get", true).await;

    let after = redis_counts(redis.port()).await;
    let redis_saw = RedisCounts {
        hits: after.hits - before.hits,
        misses: after.misses - before.misses,
        gets: after.gets - before.gets,
        sets: after.sets - before.sets,
    };
    // Redis agrees with what redis-benchmark says it sent...
    let sent = RedisCounts {
        hits: 2 * N,
        misses: 2 * N,
        gets: 4 * N,
        sets: 2 * N,
    };
    assert_eq!(redis_saw, sent);

    // ...and sluice's metrics agree with both.
    let observed = |m: &str| RedisCounts {
        hits: resp(m, "sluice_resp_get_total", &["result=\"hit\""]),
        misses: resp(m, "sluice_resp_get_total", &["result=\"miss\""]),
        gets: resp(
            m,
            "sluice_resp_commands_total",
            &["command=\"get\"", "result=\"ok\""],
        ),
        sets: resp(
            m,
            "sluice_resp_commands_total",
            &["command=\"set\"", "result=\"ok\""],
        ),
    };
    let metrics = metrics_until(&sluice, |m| observed(m) == sent).await;
    assert_eq!(observed(&metrics), sent, "{metrics}");
    for command in ["get", "set"] {
        let label = format!("command=\"{command}\"");
        let errors = resp(
            &metrics,
            "sluice_resp_commands_total",
            &[&label, "result=\"error\""],
        );
        assert_eq!(errors, 0, "{metrics}");
        let timed = resp(
            &metrics,
            "sluice_resp_command_duration_seconds_count",
            &[&label],
        );
        let want = if command == "get" {
            sent.gets
        } else {
            sent.sets
        };
        assert_eq!(timed, want, "{metrics}");
    }
    // Every connection was followed from start to end.
    let fallbacks: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_resp_fallback_connections_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(fallbacks, 0.0, "{metrics}");
}

/// Writes `bytes` in pieces of `piece` bytes, each flushed on its own.
async fn write_in_pieces(stream: &mut TcpStream, bytes: &[u8], piece: usize) {
    for chunk in bytes.chunks(piece) {
        stream.write_all(chunk).await.unwrap();
        stream.flush().await.unwrap();
        tokio::task::yield_now().await;
    }
}

/// Reads until the bytes read end with `tail`.
async fn read_until(stream: &mut TcpStream, tail: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        while !got.ends_with(tail) {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("Redis answers through sluice");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resp3_pipeline_split_anywhere_is_paired_with_redis_replies() {
    let Some((_redis, sluice)) = redis_behind_sluice().await else {
        return;
    };
    let addr = harness::listener(&sluice, "cache");

    let mut stream = TcpStream::connect(addr).await.unwrap();
    // RESP3 replies (a map for HELLO, `_` for a missing key), inline and
    // array requests, a WRONGTYPE error, all pipelined and cut into 3-byte writes.
    let pipeline = b"HELLO 3\r\nGET missing\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n\
                     GET k\r\nLPUSH k x\r\n*1\r\n$4\r\nPING\r\n";
    write_in_pieces(&mut stream, pipeline, 3).await;
    let replies = read_until(&mut stream, b"+PONG\r\n").await;
    let replies = String::from_utf8_lossy(&replies);
    assert!(replies.starts_with('%'), "{replies}");
    assert!(
        replies.contains("_\r\n+OK\r\n$1\r\nv\r\n-WRONGTYPE"),
        "{replies}"
    );
    drop(stream);

    let want = [
        ("hello", "ok", 1),
        ("get", "ok", 2),
        ("set", "ok", 1),
        ("lpush", "error", 1),
        ("ping", "ok", 1),
    ];
    let count = |m: &str, command: &str, result: &str| {
        let labels = [
            &format!("command=\"{command}\"")[..],
            &format!("result=\"{result}\""),
        ];
        resp(m, "sluice_resp_commands_total", &labels)
    };
    let all_seen = |m: &str| want.iter().all(|(c, r, n)| count(m, c, r) == *n);
    let metrics = metrics_until(&sluice, all_seen).await;
    assert!(all_seen(&metrics), "{metrics}");
    assert_eq!(
        resp(&metrics, "sluice_resp_get_total", &["result=\"hit\""]),
        1
    );
    assert_eq!(
        resp(&metrics, "sluice_resp_get_total", &["result=\"miss\""]),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_resp_client_on_a_cache_cluster_is_copied_and_counted() {
    let (echo, echo_task) = echo_after_eof().await;
    let sluice = harness::start(&tcp_yaml("cache", echo, "cache"));
    let addr = harness::listener(&sluice, "cache");

    // `*` promises an array, and what follows is no count: not RESP.
    let mut garbage = b"*\xff\x00not resp at all\r\n".to_vec();
    garbage.extend((0..200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    let back = send_then_read_to_eof(addr, &garbage).await;
    assert!(back == garbage, "the bytes came back changed");

    let fallback = |m: &str| {
        resp(
            m,
            "sluice_resp_fallback_connections_total",
            &["reason=\"bad_request\""],
        )
    };
    let want = garbage.len() as f64;
    let bytes = |m: &str, direction: &str| {
        let labels = ["listener=\"cache\"", &format!("direction=\"{direction}\"")];
        sample(m, "sluice_tcp_bytes_total", &labels)
    };
    let metrics = metrics_until(&sluice, |m| {
        fallback(m) == 1 && bytes(m, "downstream") == Some(want)
    })
    .await;
    assert_eq!(fallback(&metrics), 1, "{metrics}");
    for direction in ["upstream", "downstream"] {
        assert_eq!(
            bytes(&metrics, direction),
            Some(want),
            "{direction}: {metrics}"
        );
    }
    assert!(
        !metrics.contains("sluice_resp_commands_total{"),
        "{metrics}"
    );
    echo_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_of_other_kinds_are_copied_unobserved() {
    let (echo, echo_task) = echo_after_eof().await;
    let sluice = harness::start(&tcp_yaml("cache", echo, "http"));
    let addr = harness::listener(&sluice, "cache");

    // Were it observed, the echoed request would be a reply that is not RESP.
    let back = send_then_read_to_eof(addr, b"PING\r\n").await;
    assert_eq!(back, b"PING\r\n");

    let downstream = |m: &str| {
        sample(
            m,
            "sluice_tcp_bytes_total",
            &["listener=\"cache\"", "direction=\"downstream\""],
        )
    };
    let metrics = metrics_until(&sluice, |m| downstream(m) == Some(6.0)).await;
    assert_eq!(downstream(&metrics), Some(6.0), "{metrics}");
    assert!(!metrics.contains("sluice_resp_"), "{metrics}");
    echo_task.abort();
}
