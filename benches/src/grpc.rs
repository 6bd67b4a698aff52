//! The unary gRPC bench's two ends (benches/grpc.sh): an echo server
//! (`/bench.Echo/Echo`, the request's bytes back) and a closed-loop tonic client, both
//! on a raw-bytes codec so that no protobuf is generated or parsed: what is measured is
//! the framing, HTTP/2 and whatever proxy sits between them.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes};
use hdrhistogram::Histogram;
use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::Service;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};

/// The one method the echo server answers.
pub const ECHO_PATH: &str = "/bench.Echo/Echo";

/// Messages are their bytes: nothing to encode or decode.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawCodec;

/// [`RawCodec`]'s both halves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Raw;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// The method: the request message is the answer.
#[derive(Clone, Copy)]
struct Echo;

impl Service<Request<Bytes>> for Echo {
    type Response = Response<Bytes>;
    type Error = Status;
    type Future = Ready<Result<Response<Bytes>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        ready(Ok(Response::new(request.into_inner())))
    }
}

/// The HTTP/2 service: [`ECHO_PATH`] to [`Echo`], any other path UNIMPLEMENTED (what
/// tonic's generated routers do, without their router).
#[derive(Clone, Copy)]
struct EchoServer;

type Answer = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

impl Service<http::Request<Body>> for EchoServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Answer {
        if request.uri().path() == ECHO_PATH {
            Box::pin(async move {
                Ok(tonic::server::Grpc::new(RawCodec)
                    .unary(Echo, request)
                    .await)
            })
        } else {
            let status = Status::unimplemented(request.uri().path().to_owned());
            Box::pin(ready(Ok(status.into_http())))
        }
    }
}

/// Serves the echo method on `listener` (h2c, as gRPC without TLS) until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    Server::builder()
        .serve_with_incoming_shutdown(EchoServer, incoming, shutdown)
        .await?;
    Ok(())
}

/// One closed-loop run: `concurrency` callers, each sending its next call as soon as
/// the last one answered, over `connections` HTTP/2 connections (callers spread over
/// them round-robin).
#[derive(Clone, Debug)]
pub struct LoadPlan {
    /// `http://host:port`: the server, or a proxy in front of it.
    pub target: String,
    /// Calls made before this are not counted (connections, pools and caches warm up).
    pub warmup: Duration,
    /// The measured time after the warm-up.
    pub duration: Duration,
    pub concurrency: usize,
    pub connections: usize,
    /// Bytes of each request message (the answer has as many).
    pub size: usize,
}

/// What a run measured: calls that started within the measured time.
#[derive(Clone, Debug)]
pub struct LoadReport {
    pub calls: u64,
    /// Calls that failed: a gRPC status other than OK, a transport error, or an answer
    /// whose bytes were not the request's.
    pub errors: u64,
    pub seconds: f64,
    /// Of the calls that succeeded, µs.
    pub latency: Histogram<u64>,
}

impl LoadReport {
    pub fn calls_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.calls as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// The run as one JSON object: calls, calls/s, errors, p50/p99/max in ms.
    pub fn to_json(&self, plan: &LoadPlan) -> serde_json::Value {
        let ms = |us: u64| us as f64 / 1000.0;
        serde_json::json!({
            "target": plan.target,
            "seconds": self.seconds,
            "concurrency": plan.concurrency,
            "connections": plan.connections,
            "size": plan.size,
            "calls": self.calls,
            "calls_per_s": self.calls_per_s(),
            "errors": self.errors,
            "p50_ms": ms(self.latency.value_at_quantile(0.50)),
            "p99_ms": ms(self.latency.value_at_quantile(0.99)),
            "max_ms": ms(self.latency.max()),
        })
    }
}

/// Latencies from 1 µs to an hour, 3 significant digits.
fn histogram() -> anyhow::Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 3_600_000_000, 3)?)
}

/// Runs `plan`: connects every connection first (a target that refuses is an error,
/// not a run of errors), then drives the callers until the measured time is over.
pub async fn load(plan: &LoadPlan) -> anyhow::Result<LoadReport> {
    let endpoint = Endpoint::from_shared(plan.target.clone())?.tcp_nodelay(true);
    let mut channels = Vec::with_capacity(plan.connections.max(1));
    for _ in 0..plan.connections.max(1) {
        channels.push(endpoint.connect().await?);
    }
    let payload = Bytes::from(vec![b'x'; plan.size]);
    let started = Instant::now();
    let measured_from = started + plan.warmup;
    let end = measured_from + plan.duration;
    let mut callers = tokio::task::JoinSet::new();
    for i in 0..plan.concurrency.max(1) {
        let channel = channels[i % channels.len()].clone();
        let payload = payload.clone();
        callers.spawn(caller(channel, payload, measured_from, end));
    }
    let mut report = LoadReport {
        calls: 0,
        errors: 0,
        seconds: 0.0,
        latency: histogram()?,
    };
    while let Some(done) = callers.join_next().await {
        let (calls, errors, latency) = done??;
        report.calls += calls;
        report.errors += errors;
        report.latency.add(&latency)?;
    }
    report.seconds = plan.duration.as_secs_f64();
    Ok(report)
}

/// One closed-loop caller: its calls, errors and latencies within the measured time.
async fn caller(
    channel: Channel,
    payload: Bytes,
    measured_from: Instant,
    end: Instant,
) -> anyhow::Result<(u64, u64, Histogram<u64>)> {
    let mut grpc = tonic::client::Grpc::new(channel);
    let path = PathAndQuery::from_static(ECHO_PATH);
    let (mut calls, mut errors, mut latency) = (0, 0, histogram()?);
    loop {
        let at = Instant::now();
        if at >= end {
            return Ok((calls, errors, latency));
        }
        let answer = match grpc.ready().await {
            Ok(()) => {
                grpc.unary(Request::new(payload.clone()), path.clone(), RawCodec)
                    .await
            }
            Err(e) => Err(Status::unavailable(e.to_string())),
        };
        if at < measured_from {
            continue;
        }
        calls += 1;
        match answer {
            Ok(reply) if reply.get_ref() == &payload => {
                let us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
                latency.saturating_record(us.max(1));
            }
            _ => errors += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_load_client_gets_every_call_echoed_by_the_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, async {
            let _ = stopped.await;
        }));
        let plan = LoadPlan {
            target: format!("http://{addr}"),
            warmup: Duration::from_millis(100),
            duration: Duration::from_secs(1),
            concurrency: 4,
            connections: 2,
            size: 100,
        };
        let report = load(&plan).await.unwrap();
        assert!(report.calls > 0, "{report:?}");
        assert_eq!(report.errors, 0, "{report:?}");
        assert_eq!(report.latency.len(), report.calls);
        let json = report.to_json(&plan);
        assert_eq!(json["calls"], report.calls);
        assert!(json["p99_ms"].as_f64().unwrap() >= json["p50_ms"].as_f64().unwrap());
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn another_method_is_unimplemented() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, async {
            let _ = stopped.await;
        }));
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let answer = grpc
            .unary(
                Request::new(Bytes::from_static(b"hi")),
                PathAndQuery::from_static("/bench.Echo/Other"),
                RawCodec,
            )
            .await;
        assert_eq!(answer.unwrap_err().code(), tonic::Code::Unimplemented);
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
