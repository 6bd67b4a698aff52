//! L4 toxics against a real `redis-server` through a tcp listener, driven
//! with `redis-cli` and a raw RESP client: latency, reset_peer, bandwidth,
//! and plain service again once each toxic is removed.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{add, show};
use crate::harness::{listener, Admin};
use crate::tcp::{self, redis_behind_sluice};

/// `redis-cli -p PORT args...`, run off the runtime; (success, stdout+stderr).
async fn redis_cli(port: u16, args: &[&str]) -> (bool, String) {
    let out = tcp::run("redis-cli", tcp::redis_cli(port, args)).await;
    (out.status.success(), tcp::text(&out))
}

/// Round trips of `n` PINGs on one connection.
async fn ping_round_trips(addr: SocketAddr, n: usize) -> Vec<Duration> {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let mut trips = Vec::new();
    let mut buf = [0u8; 64];
    for _ in 0..n {
        let started = Instant::now();
        conn.write_all(b"PING\r\n").await.unwrap();
        let mut got = Vec::new();
        while !got.ends_with(b"\r\n") {
            let k = conn.read(&mut buf).await.unwrap();
            assert!(k > 0, "closed");
            got.extend_from_slice(&buf[..k]);
        }
        assert_eq!(got, b"+PONG\r\n");
        trips.push(started.elapsed());
    }
    trips
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_toxics_latency_reset_peer_and_bandwidth() {
    let Some((redis, sluice)) = redis_behind_sluice().await else {
        return;
    };
    let admin = Admin::new(&sluice);
    let proxy = listener(&sluice, "cache");
    let port = proxy.port();

    // latency: every PING's answer waits 50 ms more.
    let id = add(
        &admin,
        json!({"id": "lat", "ttl": "5m", "match": {"listener": "cache"},
               "action": {"latency": {"latency": "50ms", "direction": "downstream"}}}),
    )
    .await;
    for trip in ping_round_trips(proxy, 5).await {
        assert!(trip >= Duration::from_millis(50), "{trip:?}");
    }
    assert_eq!(show(&admin, &id).await["injected"], 1);
    admin.delete(&format!("/v1/faults/{id}")).await;
    assert_eq!(redis_cli(port, &["PING"]).await, (true, "PONG\n".into()));

    // reset_peer: the client's connection is reset.
    let id = add(
        &admin,
        json!({"id": "rst", "ttl": "5m", "match": {"listener": "cache"},
               "action": {"reset_peer": {"timeout": "0s"}}}),
    )
    .await;
    let (ok, text) = redis_cli(port, &["PING"]).await;
    assert!(!ok || !text.contains("PONG"), "{text}");
    assert!(text.contains("reset by peer"), "{text}");
    let mut raw = TcpStream::connect(proxy).await.unwrap();
    raw.write_all(b"PING\r\n").await.unwrap();
    let mut buf = [0u8; 16];
    let err = raw.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    admin.delete(&format!("/v1/faults/{id}")).await;
    assert_eq!(redis_cli(port, &["PING"]).await, (true, "PONG\n".into()));

    // bandwidth: a 200 KB value at 100 KB/s takes about two seconds.
    let value = "x".repeat(200_000);
    set_directly(redis.addr(), "big", &value).await;
    let id = add(
        &admin,
        json!({"id": "bw", "ttl": "5m", "match": {"listener": "cache"},
               "action": {"bandwidth": {"bytes_per_sec": 100000}}}),
    )
    .await;
    let started = Instant::now();
    let (ok, text) = redis_cli(port, &["GET", "big"]).await;
    let took = started.elapsed();
    assert!(ok && text.trim_end() == value, "{} bytes", text.len());
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    admin.delete(&format!("/v1/faults/{id}")).await;
    let (ok, text) = redis_cli(port, &["GET", "big"]).await;
    assert!(ok && text.trim_end() == value);
    assert_eq!(show_count(&admin).await, 0);
}

async fn show_count(admin: &Admin) -> usize {
    let (_, list) = admin.get("/v1/faults").await;
    list["faults"].as_array().unwrap().len()
}

/// SET over RESP straight to redis (a value too long for an argument list).
async fn set_directly(redis: SocketAddr, key: &str, value: &str) {
    let mut conn = TcpStream::connect(redis).await.unwrap();
    let command = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
        key.len(),
        value.len()
    );
    conn.write_all(command.as_bytes()).await.unwrap();
    let mut answer = [0u8; 5];
    conn.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"+OK\r\n");
}
