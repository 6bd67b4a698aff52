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
/// connection with `hello` after `delay`, ends connections as `ending`
/// says, and counts the connections it accepted. It stops with the test's
/// runtime.
async fn counting_server(ending: Ending, delay: Duration) -> (String, Arc<AtomicUsize>) {
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
                        tokio::time::sleep(delay).await;
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
    let (base, accepted) = counting_server(Ending::KeepAlive, Duration::ZERO).await;
    let client = Client::new("pool", &[], None).unwrap();
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
        let (base, accepted) = counting_server(ending, Duration::ZERO).await;
        let client = Client::new("pool", &[], None).unwrap();
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

/// `n` requests to `url` at once; each one's outcome.
async fn at_once(client: &Arc<Client>, url: &str, n: usize, start: Instant) -> Vec<Outcome> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (client, url) = (client.clone(), url.to_owned());
        tasks.spawn(async move {
            let mut out = Outcome::default();
            client.send(get(url), start, &mut out).await;
            out
        });
    }
    let mut outs = Vec::new();
    while let Some(out) = tasks.join_next().await {
        outs.push(out.unwrap());
    }
    outs
}

#[tokio::test]
async fn at_max_connections_requests_wait_for_a_connection_and_none_fails() {
    // 10 at once on 2 connections, each answer 20 ms: five rounds.
    let answer = Duration::from_millis(20);
    let (base, accepted) = counting_server(Ending::KeepAlive, answer).await;
    let client = Arc::new(Client::new("pool", &[], Some(2)).unwrap());
    let start = Instant::now();
    let outs = at_once(&client, &format!("{base}/"), 10, start).await;
    assert!(outs
        .iter()
        .all(|o| (o.status, o.failure) == (Some(200), None)));
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "the cap held");
    // A request is sent when its connection is in hand: the last two
    // waited four answers for theirs, and the wait is no service time.
    let mut sent: Vec<u64> = outs.iter().map(|o| o.sent_us).collect();
    sent.sort_unstable();
    let waited = sent[9] - sent[0];
    assert!(waited >= 4 * 20_000, "sent {sent:?}");
    for o in &outs {
        let service = o.end_us - o.sent_us;
        assert!(service < waited, "service {service} µs of {o:?}");
    }

    // A server that closes after each answer: each close frees a slot
    // for the next waiting request, which opens a new connection.
    let (base, accepted) = counting_server(Ending::Close, Duration::from_millis(5)).await;
    let outs = at_once(&client, &format!("{base}/"), 10, start).await;
    assert!(outs
        .iter()
        .all(|o| (o.status, o.failure) == (Some(200), None)));
    assert_eq!(accepted.load(Ordering::SeqCst), 10);
}

#[tokio::test]
async fn a_request_that_gives_up_waiting_loses_no_connection() {
    let (base, accepted) = counting_server(Ending::KeepAlive, Duration::from_millis(200)).await;
    let client = Arc::new(Client::new("pool", &[], Some(1)).unwrap());
    let start = Instant::now();
    let first = {
        let (client, url) = (client.clone(), format!("{base}/"));
        tokio::spawn(async move {
            let mut out = Outcome::default();
            client.send(get(url), start, &mut out).await;
            out
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Waits behind the first, and times out while waiting.
    let mut impatient = get(format!("{base}/"));
    impatient.timeout = Duration::from_millis(50);
    let mut out = Outcome::default();
    client.send(impatient, start, &mut out).await;
    assert_eq!(out.failure, Some(Failure::Timeout));
    assert_eq!(first.await.unwrap().status, Some(200));
    // The connection went back past the request that left.
    let mut out = Outcome::default();
    client.send(get(format!("{base}/")), start, &mut out).await;
    assert_eq!((out.status, out.failure), (Some(200), None));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
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
    let client = Client::new("pool", &[], None).unwrap();
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
