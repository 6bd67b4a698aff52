//! One streamed chat completion, with the arrival time of every chunk.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

/// The streamed chat request every bench sends.
pub const CHAT_BODY: &str =
    r#"{"model":"bench","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// What the client saw of one stream.
#[derive(Clone, Debug, Default)]
pub struct StreamTiming {
    /// Request sent → first chunk carrying content.
    pub ttft: Duration,
    /// Gaps between chunks carrying content.
    pub gaps: Vec<Duration>,
    /// Chunks that carried more than one content event (coalesced).
    pub coalesced: usize,
    pub content_events: usize,
}

/// The content timings of many streams, pooled.
#[derive(Clone, Debug, Default)]
pub struct PooledTimings {
    pub ttft: Vec<Duration>,
    pub gaps: Vec<Duration>,
    pub coalesced: usize,
    pub events: usize,
}

impl PooledTimings {
    pub fn add(&mut self, timing: StreamTiming) {
        self.ttft.push(timing.ttft);
        self.gaps.extend(timing.gaps);
        self.coalesced += timing.coalesced;
        self.events += timing.content_events;
    }
}

/// `streams` streams to `url` at once, each on a task of its own; every one must succeed.
pub async fn stream_many(
    client: &HttpClient,
    url: &str,
    streams: usize,
) -> anyhow::Result<Vec<StreamTiming>> {
    let tasks: Vec<_> = (0..streams)
        .map(|_| {
            let (client, url) = (client.clone(), url.to_owned());
            tokio::spawn(async move { stream_once(&client, &url).await })
        })
        .collect();
    let mut out = Vec::with_capacity(streams);
    for task in tasks {
        out.push(task.await??);
    }
    Ok(out)
}

pub async fn stream_once(client: &HttpClient, url: &str) -> anyhow::Result<StreamTiming> {
    let request = http::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(CHAT_BODY.as_bytes())))?;
    let start = Instant::now();
    let response = client.request(request).await?;
    read_stream(start, response, |_| {}).await
}

/// Reads a streamed answer to its end, timing every chunk that carries
/// content from `start` (when the request was sent). `on_first` runs once,
/// when the first content arrives.
pub async fn read_stream<B>(
    start: Instant,
    response: http::Response<B>,
    mut on_first: impl FnMut(Duration),
) -> anyhow::Result<StreamTiming>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    anyhow::ensure!(response.status() == 200, "status {}", response.status());
    let mut body = response.into_body();
    let mut timing = StreamTiming::default();
    let mut last: Option<Instant> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let events = memchr_count(data, b"\"content\":\"");
        if events == 0 {
            continue;
        }
        let now = Instant::now();
        match last {
            None => {
                timing.ttft = now - start;
                on_first(timing.ttft);
            }
            Some(prev) => timing.gaps.push(now - prev),
        }
        if events > 1 {
            timing.coalesced += 1;
        }
        timing.content_events += events;
        last = Some(now);
    }
    Ok(timing)
}

fn memchr_count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}
