//! The integrity run's upstream: checks each request body against its
//! SHA-256, notes its id once, and answers the body asked for with that
//! body's SHA-256. HTTP/1.1 and h2c on one port; the primary's clusters and
//! the shadow are each one of these.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use super::wire::{self, Framed, Framing};

/// Which ids an upstream saw: one bit each, set once.
pub struct IdSet(Vec<AtomicU64>);

impl IdSet {
    pub fn new(ids: u64) -> Self {
        IdSet((0..ids.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }

    /// Notes `id`; false if it was already there (or out of range).
    pub fn insert(&self, id: u64) -> bool {
        let Some(word) = self.0.get((id / 64) as usize) else {
            return false;
        };
        let bit = 1 << (id % 64);
        word.fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    pub fn len(&self) -> u64 {
        self.0
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What an upstream (or the set sharing one [`Seen`]) was sent.
pub struct Seen {
    /// Requests whose body hashed as its header said.
    pub good: AtomicU64,
    /// Requests whose body did not (or that came without the headers).
    pub bad: AtomicU64,
    /// Ids seen before: the same request sent again.
    pub again: AtomicU64,
    pub ids: IdSet,
}

impl Seen {
    pub fn new(ids: u64) -> Arc<Self> {
        Arc::new(Seen {
            good: AtomicU64::new(0),
            bad: AtomicU64::new(0),
            again: AtomicU64::new(0),
            ids: IdSet::new(ids),
        })
    }
}

/// Starts one upstream on a loopback port, noting into `seen`.
pub(crate) async fn start(seen: Arc<Seen>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| answer(req, seen.clone()));
                let builder = auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
            });
        }
    });
    Ok(addr)
}

type Answer = Response<BoxBody<Bytes, hyper::Error>>;

async fn answer(req: Request<Incoming>, seen: Arc<Seen>) -> Result<Answer, hyper::Error> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let id = header(wire::ID).and_then(|v| v.parse::<u64>().ok());
    let sha = header(wire::SHA256);
    let asked = header(wire::ANSWER).and_then(|v| Framing::parse(&v));
    let body = req.into_body().collect().await?.to_bytes();
    let (Some(id), Some(sha), Some((framing, bytes))) = (id, sha, asked) else {
        seen.bad.fetch_add(1, Ordering::Relaxed);
        return Ok(status(400));
    };
    let check = if wire::sha256_hex(&body) == sha {
        seen.good.fetch_add(1, Ordering::Relaxed);
        "ok"
    } else {
        seen.bad.fetch_add(1, Ordering::Relaxed);
        "bad"
    };
    if !seen.ids.insert(id) {
        seen.again.fetch_add(1, Ordering::Relaxed);
    }
    let payload = match framing {
        Framing::Sse => wire::events_of(id, bytes),
        Framing::Length | Framing::Chunked => wire::bytes_of(id ^ ANSWER_SEED, bytes),
    };
    let builder = Response::builder()
        .header(wire::REQUEST_CHECK, check)
        .header(wire::SHA256, wire::sha256_hex(&payload));
    let payload = Bytes::from(payload);
    let response = match framing {
        Framing::Length => builder.body(Full::new(payload).map_err(|e| match e {}).boxed()),
        Framing::Chunked => builder.body(
            Framed(wire::frames(payload, &[1, 4096, 333, 65_536]))
                .map_err(|e| match e {})
                .boxed(),
        ),
        Framing::Sse => builder.header("content-type", "text/event-stream").body(
            Framed(wire::frames(payload, &[150, 1_500]))
                .map_err(|e| match e {})
                .boxed(),
        ),
    };
    Ok(response.unwrap_or_else(|_| status(500)))
}

/// Answers' bytes differ from the requests' of the same id.
const ANSWER_SEED: u64 = 0x5eed;

fn status(code: u16) -> Answer {
    let mut r = Response::new(Full::new(Bytes::new()).map_err(|e| match e {}).boxed());
    *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::BAD_REQUEST);
    r
}
