//! `circuit_breakers.max_connections` on real sockets, against raw HTTP/1.1
//! upstreams that count the connections they accept: past the limit a
//! request is answered 503 `overflow` at once and no connection is made;
//! pooled connections serve what follows untouched; connections the
//! upstream closes give their places back; an overflow ejects no endpoint.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::{listener, metric_value, metrics_when, TestConfig};

/// A raw upstream: `GET /hold` is answered with the head and one chunk,
/// the rest once [`Upstream::release`] is called; anything else `200 ok`,
/// with `connection: close` (and a close) when made `closing`.
struct Upstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    release: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    async fn start(closing: bool) -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (release, released) = watch::channel(false);
        let (a, r) = (accepted.clone(), requests.clone());
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((conn, _)) = l.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                conns.spawn(serve(conn, closing, r.clone(), released.clone()));
            }
        });
        Upstream {
            addr,
            accepted,
            requests,
            release,
            task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    fn release(&self) {
        self.release.send_replace(true);
    }
}

async fn serve(
    mut conn: TcpStream,
    closing: bool,
    requests: Arc<AtomicUsize>,
    mut released: watch::Receiver<bool>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        // GETs only: the head is the whole request.
        let hold = buf.starts_with(b"GET /hold ");
        buf.clear();
        requests.fetch_add(1, Ordering::SeqCst);
        if hold {
            let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n3\r\nhi\n\r\n";
            if conn.write_all(head).await.is_err() {
                return;
            }
            let _ = released.wait_for(|r| *r).await;
            if conn.write_all(b"4\r\nbye\n\r\n0\r\n\r\n").await.is_err() {
                return;
            }
        } else if closing {
            let answer = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";
            let _ = conn.write_all(answer).await;
            return;
        } else {
            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            if conn.write_all(answer).await.is_err() {
                return;
            }
        }
    }
}

fn gauge(text: &str, cluster: &str) -> Option<f64> {
    metric_value(text, "sluice_upstream_connections", &[("cluster", cluster)])
}

async fn get_ok(client: &reqwest::Client, url: &str) {
    let r = client.get(url).send().await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    assert_eq!(r.text().await.unwrap(), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_a_request_gets_503_without_a_new_connection_or_an_ejection() {
    let (a, b) = (Upstream::start(false).await, Upstream::start(false).await);
    let sluice = TestConfig::http()
        .cluster_with(
            "capped",
            "http",
            [a.addr, b.addr],
            "circuit_breakers: { max_connections: 2 }",
        )
        .route("r", "capped: 100")
        .start();
    let base = format!("http://{}", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    // Two streams held open, one on each endpoint (round robin): the two
    // connections the cluster may have.
    let hold = format!("{base}/hold");
    let (first, second) = tokio::join!(client.get(&hold).send(), client.get(&hold).send());
    let (mut first, mut second) = (first.unwrap(), second.unwrap());
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    assert_eq!(first.chunk().await.unwrap().unwrap(), "hi\n");
    assert_eq!(second.chunk().await.unwrap().unwrap(), "hi\n");
    assert_eq!((a.accepted(), b.accepted()), (1, 1));

    let refused = client.get(format!("{base}/ok")).send().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.headers()["x-sluice-error"], "overflow");
    let text = refused.text().await.unwrap();
    assert!(text.contains("\"error\":\"overflow\""), "{text}");
    assert!(text.contains("max_connections"), "{text}");
    assert_eq!(a.accepted() + b.accepted(), 2, "no third connection");
    assert_eq!(
        a.requests() + b.requests(),
        2,
        "the refused request went nowhere"
    );
    let text = metrics_when(&sluice, |t| gauge(t, "capped") == Some(2.0)).await;
    assert_eq!(gauge(&text, "capped"), Some(2.0), "{text}");
    assert_eq!(
        metric_value(
            &text,
            "sluice_circuit_breaker_overflow_total",
            &[("cluster", "capped"), ("breaker", "max_connections")]
        ),
        Some(1.0),
        "{text}"
    );

    // The streams end; once both are logged (after their connections went
    // back to the pool), requests reuse the pooled connections, and both
    // endpoints take their turn: the overflow ejected neither.
    a.release();
    b.release();
    for r in [first, second] {
        assert_eq!(r.text().await.unwrap(), "bye\n");
    }
    metrics_when(&sluice, |t| {
        metric_value(
            t,
            "sluice_requests_total",
            &[("cluster", "capped"), ("status_class", "2xx")],
        ) == Some(2.0)
    })
    .await;
    let served = (a.requests(), b.requests());
    for _ in 0..20 {
        get_ok(&client, &format!("{base}/ok")).await;
    }
    assert_eq!(
        (a.requests() - served.0, b.requests() - served.1),
        (10, 10),
        "each endpoint served half"
    );
    assert_eq!(
        (a.accepted(), b.accepted()),
        (1, 1),
        "pooled connections only"
    );
    let text = metrics_when(&sluice, |t| gauge(t, "capped") == Some(2.0)).await;
    assert_eq!(gauge(&text, "capped"), Some(2.0), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_upstream_closes_give_their_places_back() {
    let up = Upstream::start(true).await;
    let sluice = TestConfig::http()
        .cluster_with(
            "one",
            "http",
            [up.addr],
            "circuit_breakers: { max_connections: 1 }",
        )
        .route("r", "one: 100")
        .start();
    let url = format!("http://{}/ok", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    for _ in 0..20 {
        get_ok(&client, &url).await;
    }
    assert_eq!(up.accepted(), 20, "a new connection for each request");
    let text = metrics_when(&sluice, |t| gauge(t, "one") == Some(0.0)).await;
    assert_eq!(gauge(&text, "one"), Some(0.0), "{text}");
    assert_eq!(
        metric_value(
            &text,
            "sluice_circuit_breaker_overflow_total",
            &[("breaker", "max_connections")]
        ),
        None,
        "{text}"
    );
}
