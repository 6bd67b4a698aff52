//! `routes[].max_body` on real sockets: a body at the limit passes byte-exact
//! on a kept-alive connection; a longer one, declared or chunked, is answered
//! 413 by sluice (and the client reads it, though it sent the whole body),
//! the connection closed, and counted.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{listener, metric_value, metrics_when, start, TestConfig};
use crate::support::NamedUpstream;

fn config(upstream: SocketAddr) -> String {
    TestConfig::new()
        .listener("public", "http", "")
        .cluster_with("up", "http", [upstream], "version: v1")
        .route_with(
            "all",
            "up: 100",
            "match: { path_prefix: / }, max_body: 1KiB",
        )
        .yaml()
}

fn post(length: usize) -> Vec<u8> {
    let mut r = format!("POST /v1/echo HTTP/1.1\r\nhost: a\r\ncontent-length: {length}\r\n\r\n")
        .into_bytes();
    r.extend(std::iter::repeat_n(b'x', length));
    r
}

/// Reads one answer with a `content-length` (head and body) from `s`.
async fn read_answer(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(
            n > 0,
            "closed before a whole answer: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        let Some(head_end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length: usize = text[..head_end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .expect("a content-length");
        if buf.len() >= head_end + 4 + length {
            return text;
        }
    }
}

/// Sends `request`, reads until sluice closes (at most 10 s), and says
/// whether it closed.
async fn exchange_to_close(addr: SocketAddr, request: &[u8]) -> (String, bool) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // sluice may answer before it has read everything.
    let _ = s.write_all(request).await;
    let mut out = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .is_ok();
    (String::from_utf8_lossy(&out).into_owned(), closed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_max_body_get_413_and_bodies_within_pass_untouched() {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice = start(&config(up.addr()));
    let addr = listener(&sluice, "public");

    // At the limit, twice on one kept-alive connection: passed whole.
    let mut s = TcpStream::connect(addr).await.unwrap();
    for _ in 0..2 {
        s.write_all(&post(1024)).await.unwrap();
        let answer = read_answer(&mut s).await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(answer.contains("\"body_len\":1024"), "{answer}");
    }

    // Declared past it: 413 before anything is sent upstream, and the
    // client, which sent the whole body, still reads it.
    let (answer, closed) = exchange_to_close(addr, &post(64 << 10)).await;
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer:.300}");
    assert!(answer.contains("\"error\":\"body_too_large\""), "{answer}");
    assert!(!answer.contains("x-upstream"), "{answer}");
    assert!(closed, "the connection is closed after a 413");

    // Chunked, crossing the limit in its second chunk: 413 as well.
    let chunk = "y".repeat(600);
    let chunked = format!(
        "POST /v1/echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n\
         258\r\n{chunk}\r\n258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n"
    );
    let (answer, closed) = exchange_to_close(addr, chunked.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer:.300}");
    assert!(answer.contains("\"error\":\"body_too_large\""), "{answer}");
    assert!(closed, "the connection is closed after a 413");

    // A chunked body within the limit passes whole.
    let small = format!(
        "POST /v1/echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n\
         258\r\n{chunk}\r\n0\r\n\r\n"
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(small.as_bytes()).await.unwrap();
    let answer = read_answer(&mut s).await;
    assert!(answer.contains("\"body_len\":600"), "{answer}");

    // Counted when each request is logged, which may follow the answer.
    let refused = |t: &str| {
        metric_value(
            t,
            "sluice_proxy_errors_total",
            &[("reason", "body_too_large")],
        )
    };
    let text = metrics_when(&sluice, |t| refused(t) == Some(2.0)).await;
    assert_eq!(refused(&text), Some(2.0), "{text}");
}
