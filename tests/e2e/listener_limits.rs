//! `listeners[].limits` on real sockets: oversized heads get 431/414 (and
//! the client reads them), slow and idle connections are closed at their
//! timeouts, and normal traffic, kept alive, is untouched.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{listener, metrics_when, start, TestConfig};
use crate::support::NamedUpstream;

fn limited(upstream: SocketAddr) -> String {
    TestConfig::new()
        .listener(
            "public",
            "http",
            "limits: { header_timeout: 1s, idle_timeout: 1s, max_uri_bytes: 1KiB }",
        )
        .cluster_with("up", "http", [upstream], "version: v1")
        .route_with("all", "up: 100", "match: { path_prefix: / }")
        .yaml()
}

/// Sends `request` and reads until the server closes (at most 20 s).
async fn exchange(addr: SocketAddr, request: &[u8]) -> (String, Duration) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    // The server may answer before it has read everything.
    let _ = s.write_all(request).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out)).await;
    (
        String::from_utf8_lossy(&out).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_heads_get_431_and_414() {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice = start(&limited(up.addr()));
    let addr = listener(&sluice, "public");

    let big = format!(
        "GET /v1/x HTTP/1.1\r\nhost: a\r\nx-big: {}\r\n\r\n",
        "b".repeat(1 << 20)
    );
    let (answer, _) = exchange(addr, big.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer:.200}");
    assert!(answer.contains("header_too_large"), "{answer}");

    // A long URI is 414, even with a header over the total behind it.
    let long = format!(
        "GET /{} HTTP/1.1\r\nhost: a\r\nx-big: {}\r\n\r\n",
        "u".repeat(2000),
        "b".repeat(100_000)
    );
    let (answer, _) = exchange(addr, long.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 414 "), "{answer:.200}");

    let text = metrics_when(&sluice, |t| {
        t.contains("sluice_listener_limited_total{limit=\"max_uri_bytes\",listener=\"public\"} 1")
    })
    .await;
    assert!(
        text.contains(
            "sluice_listener_limited_total{limit=\"max_header_bytes\",listener=\"public\"} 1"
        ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_are_closed_and_normal_keep_alive_is_untouched() {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice = start(&limited(up.addr()));
    let addr = listener(&sluice, "public");

    // Silent, and trickling a head that never ends: both closed at header_timeout.
    let (answer, took) = exchange(addr, b"").await;
    assert_eq!(answer, "");
    assert!(took < Duration::from_secs(15), "{took:?}");
    let (answer, took) = exchange(addr, b"GET /v1/x HTTP/1.1\r\nhost: a\r\nx-slow: 1").await;
    assert_eq!(answer, "");
    assert!(took < Duration::from_secs(15), "{took:?}");

    // Normal traffic: two requests on one connection, then the idle close.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        s.write_all(b"GET /v1/models HTTP/1.1\r\nhost: a\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    for answer in &seen {
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    }
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut rest)).await;
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(rest.is_empty(), "{rest:?}");

    let text = metrics_when(&sluice, |t| {
        t.contains("sluice_listener_limited_total{limit=\"idle_timeout\",listener=\"public\"} 1")
    })
    .await;
    assert!(
        text.contains(
            "sluice_listener_limited_total{limit=\"header_timeout\",listener=\"public\"} 2"
        ),
        "{text}"
    );
    assert!(text.contains(
        "sluice_listener_limited_total{limit=\"max_header_bytes\",listener=\"public\"} 0"
    ));
}

/// `max_connections: 2`: with two connections open, a third is accepted
/// and closed at once with nothing written, and counted; once one of the
/// two closes, a new connection is served again. The two open ones are
/// served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_max_connections_are_closed_at_accept_and_counted() {
    let up = NamedUpstream::start("a").await.unwrap();
    let config = TestConfig::new()
        .listener("public", "http", "limits: { max_connections: 2 }")
        .cluster_with("up", "http", [up.addr()], "version: v1")
        .route_with("all", "up: 100", "match: { path_prefix: / }")
        .yaml();
    let sluice = start(&config);
    let addr = listener(&sluice, "public");
    let request = b"GET /v1/models HTTP/1.1\r\nhost: a\r\n\r\n";

    // One request on a kept-alive connection: its answer's head.
    async fn ask(s: &mut TcpStream, request: &[u8]) -> String {
        s.write_all(request).await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
    let mut first = TcpStream::connect(addr).await.unwrap();
    let mut second = TcpStream::connect(addr).await.unwrap();
    // Served: both count as open from here on.
    assert!(ask(&mut first, request).await.starts_with("HTTP/1.1 200 "));
    assert!(ask(&mut second, request).await.starts_with("HTTP/1.1 200 "));

    let (answer, took) = exchange(addr, request).await;
    assert_eq!(answer, "", "a third connection got an answer");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let text = metrics_when(&sluice, |t| {
        t.contains("sluice_listener_limited_total{limit=\"max_connections\",listener=\"public\"} 1")
    })
    .await;
    assert!(
        text.contains("sluice_listener_connections{listener=\"public\"} 2"),
        "{text}"
    );
    assert!(ask(&mut first, request).await.starts_with("HTTP/1.1 200 "));

    // One closes: a new connection is served (its slot comes back when
    // the server sees the close, so try for a while).
    drop(second);
    let mut served = false;
    for _ in 0..50 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let _ = s.write_all(request).await;
        let mut buf = vec![0u8; 64 * 1024];
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await;
        if let Ok(Ok(n)) = read {
            if String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200 ") {
                served = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        served,
        "no connection was served after one of the two closed"
    );
}

/// HTTP/2 heads arrive through h2, not the stream layer: the same limits
/// hold (431 from h2 itself past `max_header_bytes`, counted as HTTP/2
/// counts a header list; 414 from sluice past `max_uri_bytes`), and the
/// connection serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_h2c_heads_get_431_and_414_and_the_connection_goes_on() {
    let up = NamedUpstream::start("a").await.unwrap();
    let yaml = TestConfig::new()
        .listener(
            "public",
            "http",
            "limits: { max_uri_bytes: 1KiB, max_header_bytes: 16KiB }",
        )
        .cluster_with("up", "http", [up.addr()], "version: v1")
        .route_with("all", "up: 100", "match: { path_prefix: / }")
        .yaml();
    let sluice = start(&yaml);
    let base = format!("http://{}", listener(&sluice, "public"));
    let h2c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();

    // 16 KiB of header list (pingora's own bound is 64 KiB).
    let big = h2c
        .get(format!("{base}/v1/x"))
        .header("x-big", "b".repeat(20_000))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 431);

    let long = h2c
        .get(format!("{base}/{}", "u".repeat(2000)))
        .send()
        .await
        .unwrap();
    assert_eq!(long.status(), 414);
    assert_eq!(long.version(), http::Version::HTTP_2);
    let body = long.text().await.unwrap();
    assert!(body.contains("uri_too_long"), "{body}");

    // Within the limits, on the same connection: untouched.
    let fine = h2c
        .get(format!("{base}/{}", "u".repeat(900)))
        .header("x-fine", "f".repeat(10_000))
        .send()
        .await
        .unwrap();
    assert_eq!(fine.status(), 200);
    assert_eq!(up.requests(), 1);
}
