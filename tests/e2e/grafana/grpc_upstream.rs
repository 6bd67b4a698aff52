//! A gRPC server small enough to need no Python: h2c on 127.0.0.1:0, every call
//! answered `200`, `content-type: application/grpc`, one empty message and
//! `grpc-status: 0` in the trailers, the shape of a real server's answer. The
//! dashboard test needs calls counted by status, not a service. Stops on drop.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http2;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// One length-prefixed gRPC message of zero bytes: not compressed, length 0.
const EMPTY_MESSAGE: &[u8] = &[0, 0, 0, 0, 0];

type Frames = futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>;

pub(super) struct GrpcUpstream {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl GrpcUpstream {
    pub(super) async fn start() -> anyhow::Result<GrpcUpstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            // Aborting this task drops the set and ends every connection.
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                connections.spawn(async move {
                    let service = hyper::service::service_fn(answer);
                    let _ = http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(GrpcUpstream { addr, task })
    }

    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for GrpcUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads the call's message to its end, then answers it: headers, one empty
/// message, trailers with the status.
async fn answer(request: Request<Incoming>) -> Result<Response<StreamBody<Frames>>, Infallible> {
    let _ = request.into_body().collect().await;
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames = vec![
        Ok(Frame::data(Bytes::from_static(EMPTY_MESSAGE))),
        Ok(Frame::trailers(trailers)),
    ];
    let mut response = Response::new(StreamBody::new(futures_util::stream::iter(frames)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    Ok(response)
}
