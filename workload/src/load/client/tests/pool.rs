//! The keep-alive pool: answers read to their end leave their connection
//! for the next request; a server that closes gets a new connection each
//! time, with no request lost.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::super::*;

/// How the test server ends a connection.
#[derive(Clone, Copy, PartialEq)]
enum Ending {
    /// When the client does.
    KeepAlive,
    /// After each answer, which says `connection: close`.
    Close,
    /// After each answer, which says `keep-alive`: the client learns it
    /// from the socket alone.
    Drop,
}

/// A plain HTTP/1.1 server on 127.0.0.1 that answers every request on a
/// connection with `hello`, ends connections as `ending` says, and counts
/// the connections it accepted. It stops with the test's runtime.
async fn counting_server(ending: Ending) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        // Bounded by the test: it ends with the runtime.
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                // Bounded by the client: it ends when the client closes.
                loop {
                    let Ok(n) = tcp.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    // One answer per complete request head (no bodies here).
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let close = ending != Ending::KeepAlive;
                        let connection = if ending == Ending::Close {
                            "close"
                        } else {
                            "keep-alive"
                        };
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: {connection}\r\n\r\nhello"
                        );
                        if tcp.write_all(answer.as_bytes()).await.is_err() || close {
                            return;
                        }
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), accepted)
}

fn get(url: String) -> Call {
    Call {
        method: Method::GET,
        uri: url,
        headers: Vec::new(),
        body: None,
        path: "/".to_owned(),
        timeout: Duration::from_secs(5),
        keep_body: true,
    }
}

#[tokio::test]
async fn answers_read_to_their_end_leave_the_connection_for_the_next() {
    let (base, accepted) = counting_server(Ending::KeepAlive).await;
    let client = Client::new("pool", &[]).unwrap();
    let start = Instant::now();
    for i in 0..50 {
        let mut out = Outcome::default();
        let body = client
            .send(get(format!("{base}/n/{i}")), start, &mut out)
            .await;
        assert_eq!((out.status, out.failure), (Some(200), None), "request {i}");
        assert_eq!(body, b"hello");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "50 requests in a row, one connection"
    );

    // Ten at once need ten connections, and no more come after them.
    let client = Arc::new(client);
    for _ in 0..3 {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..10 {
            let (client, url) = (client.clone(), format!("{base}/"));
            tasks.spawn(async move {
                let mut out = Outcome::default();
                client.send(get(url), start, &mut out).await;
                out.status
            });
        }
        while let Some(status) = tasks.join_next().await {
            assert_eq!(status.unwrap(), Some(200));
        }
    }
    assert!(
        accepted.load(Ordering::SeqCst) <= 11,
        "three waves of ten reuse the first wave's connections: {} accepted",
        accepted.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn a_server_that_closes_gets_a_new_connection_each_time() {
    for ending in [Ending::Close, Ending::Drop] {
        let (base, accepted) = counting_server(ending).await;
        let client = Client::new("pool", &[]).unwrap();
        let start = Instant::now();
        for i in 0..20 {
            let mut out = Outcome::default();
            let body = client.send(get(format!("{base}/")), start, &mut out).await;
            assert_eq!((out.status, out.failure), (Some(200), None), "request {i}");
            assert_eq!(body, b"hello");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 20);
    }
}

#[tokio::test]
async fn host_is_the_authority_unless_the_scenario_names_one() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (heads_tx, mut heads) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        // Bounded by the test: it ends with the runtime.
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let heads_tx = heads_tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                // Bounded by the client: it ends when the client closes.
                loop {
                    let Ok(n) = tcp.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head: Vec<u8> = seen.drain(..end + 4).collect();
                        let _ = heads_tx.send(String::from_utf8_lossy(&head).to_lowercase());
                        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if tcp.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let client = Client::new("pool", &[]).unwrap();
    let start = Instant::now();
    let mut out = Outcome::default();
    client
        .send(get(format!("http://{addr}/a")), start, &mut out)
        .await;
    assert_eq!(out.status, Some(200));
    let head = heads.recv().await.unwrap();
    assert!(head.starts_with("get /a http/1.1\r\n"), "{head}");
    let hosts: Vec<&str> = head.lines().filter(|l| l.starts_with("host:")).collect();
    assert_eq!(hosts, vec![format!("host: {addr}").as_str()], "{head}");

    let mut named = get(format!("http://{addr}/b"));
    named
        .headers
        .push(("Host".to_owned(), "api.example".to_owned()));
    let mut out = Outcome::default();
    client.send(named, start, &mut out).await;
    assert_eq!(out.status, Some(200));
    let head = heads.recv().await.unwrap();
    let hosts: Vec<&str> = head.lines().filter(|l| l.starts_with("host:")).collect();
    assert_eq!(hosts, vec!["host: api.example"], "{head}");
}
