// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use sluice_control::FaultRuntime;
use sluice_filters::{Experiment, FaultMatch, Metrics};
use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

use super::*;

mod chain;

fn guard(toxic: Toxic) -> FaultGuard {
    guard_for(toxic, Duration::from_secs(3600))
}

/// A fired experiment of `toxic` that expires after `ttl`.
fn guard_for(toxic: Toxic, ttl: Duration) -> FaultGuard {
    let experiment = Experiment {
        id: "t".into(),
        matcher: FaultMatch::default(),
        percent: 100.0,
        ttl,
        max_active: None,
        halt_if: None,
        action: FaultAction::Tcp(toxic),
    };
    let runtime = Arc::new(FaultRuntime::new(
        experiment,
        &Metrics::new().unwrap(),
        Vec::new(),
    ));
    let target = FaultTarget::<NoRequest> {
        listener: "cache",
        route: None,
        cluster: Some("redis"),
        model: None,
        request: None,
    };
    runtime.try_fire(&target, || 0).unwrap()
}

/// A client stream wrapped with `toxic` (direction upstream), and the far
/// end the test writes into.
fn client_side(toxic: Toxic) -> (Toxicated<DuplexStream>, DuplexStream) {
    let (near, far) = duplex(1 << 20);
    let (server_near, _server_far) = duplex(64);
    let (client, _server) = wrap(near, server_near, vec![guard(toxic)], None);
    (client, far)
}

#[tokio::test(start_paused = true)]
async fn latency_holds_each_chunk_back() {
    let (mut client, mut far) = client_side(Toxic::Latency {
        latency: Duration::from_millis(50),
        jitter: Duration::ZERO,
        direction: Direction::Upstream,
    });
    far.write_all(b"PING\r\n").await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let n = client.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"PING\r\n");
    assert_eq!(started.elapsed(), Duration::from_millis(50));
}

#[tokio::test(start_paused = true)]
async fn bandwidth_paces_the_bytes() {
    let (mut client, mut far) = client_side(Toxic::Bandwidth {
        bytes_per_sec: 1000,
        direction: Direction::Upstream,
    });
    far.write_all(&[7u8; 2000]).await.unwrap();
    drop(far);
    let started = Instant::now();
    let mut all = Vec::new();
    client.read_to_end(&mut all).await.unwrap();
    assert_eq!(all.len(), 2000);
    let took = started.elapsed();
    // 2000 bytes at 1000 B/s: two seconds, the last pause included.
    assert!(
        took >= Duration::from_millis(1900) && took <= Duration::from_millis(2100),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn slicer_cuts_reads_into_small_delayed_pieces() {
    let (mut client, mut far) = client_side(Toxic::Slicer {
        average_size: 4,
        size_variation: 2,
        delay: Duration::from_millis(1),
        direction: Direction::Upstream,
    });
    far.write_all(&[1u8; 100]).await.unwrap();
    drop(far);
    let mut pieces = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        let n = client.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        pieces.push(n);
    }
    assert_eq!(pieces.iter().sum::<usize>(), 100);
    // Every piece is 4 ± 2 bytes, but the last may be only what was left.
    let (last, rest) = pieces.split_last().unwrap();
    assert!(rest.iter().all(|n| (2..=6).contains(n)), "{pieces:?}");
    assert!((1..=6).contains(last), "{pieces:?}");
}

#[tokio::test(start_paused = true)]
async fn limit_data_ends_the_connection_after_its_bytes() {
    let (mut client, mut far) = client_side(Toxic::LimitData {
        bytes: 10,
        direction: Direction::Upstream,
    });
    far.write_all(&[1u8; 100]).await.unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(client.read(&mut buf).await.unwrap(), 10);
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
}

#[tokio::test(start_paused = true)]
async fn timeout_passes_nothing_then_closes() {
    let (mut client, mut far) = client_side(Toxic::Timeout {
        timeout: Duration::from_millis(300),
    });
    far.write_all(b"GET k\r\n").await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn slow_close_delays_the_end_of_stream() {
    let (mut client, mut far) = client_side(Toxic::SlowClose {
        delay: Duration::from_millis(200),
    });
    far.write_all(b"bye").await.unwrap();
    drop(far);
    let started = Instant::now();
    let mut all = Vec::new();
    client.read_to_end(&mut all).await.unwrap();
    assert_eq!(all, b"bye");
    assert_eq!(started.elapsed(), Duration::from_millis(200));
}

#[tokio::test]
async fn reset_peer_passes_bytes_until_its_timeout_then_resets_the_client() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut far = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (near, _) = listener.accept().await.unwrap();
    let (server_near, _server_far) = duplex(64);
    let toxic = Toxic::ResetPeer {
        timeout: Duration::from_millis(50),
    };
    let (mut client, _server) = wrap(near, server_near, vec![guard(toxic)], None);
    far.write_all(b"PING\r\n").await.unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(client.read(&mut buf).await.unwrap(), 6);
    // Past the timeout, the next bytes the client sends are left unread and
    // the connection ends, so the kernel answers with a RST.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let read = tokio::spawn(async move {
        let result = client.read(&mut buf).await.map(|_| ());
        drop(client);
        result
    });
    far.write_all(b"PING\r\n").await.unwrap();
    let err = read.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    let mut rest = Vec::new();
    let seen = far.read_to_end(&mut rest).await.unwrap_err();
    assert_eq!(seen.kind(), io::ErrorKind::ConnectionReset);
}

#[tokio::test(start_paused = true)]
async fn a_downstream_toxic_wraps_the_server_side_only() {
    let (client_near, mut client_far) = duplex(1024);
    let (server_near, mut server_far) = duplex(1024);
    let toxic = Toxic::Latency {
        latency: Duration::from_millis(40),
        jitter: Duration::ZERO,
        direction: Direction::Downstream,
    };
    let (mut client, mut server) = wrap(client_near, server_near, vec![guard(toxic)], None);
    client_far.write_all(b"up").await.unwrap();
    server_far.write_all(b"down").await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 8];
    assert_eq!(client.read(&mut buf).await.unwrap(), 2);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(server.read(&mut buf).await.unwrap(), 4);
    assert_eq!(started.elapsed(), Duration::from_millis(40));
}
