//! An upstream's answer once its head is in: the body read chunk by chunk,
//! then the trailers (HTTP/2), and the connection (or the HTTP/2 stream's
//! place on it) given back to the client's pool when the body ends.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::Stream;
use http::HeaderMap;
use pingora::http::ResponseHeader;
use pingora::upstreams::peer::HttpPeer;
use sluice_filters::Failure;

use super::wire::Wire;
use super::{Failed, UpstreamClient};
use crate::http_proxy::classify;

pub(crate) struct Answer {
    client: Arc<UpstreamClient>,
    wire: Wire,
    peer: HttpPeer,
    head: ResponseHeader,
    endpoint: usize,
    reused: bool,
    /// The answer's trailers, once its body has ended (HTTP/2 only).
    trailers: Option<HeaderMap>,
}

/// One piece of an answer's body, as [`Answer::into_body`] yields them.
pub(crate) enum Part {
    Data(Bytes),
    /// The trailers, after the last data (gRPC's `grpc-status`).
    Trailers(Box<HeaderMap>),
}

impl Answer {
    pub(super) fn new(
        client: Arc<UpstreamClient>,
        wire: Wire,
        peer: HttpPeer,
        endpoint: usize,
        reused: bool,
    ) -> Result<Answer, Failed> {
        let Some(head) = wire.head().cloned() else {
            return Err(Failed {
                failure: Failure::UpstreamError,
                endpoint: Some(endpoint),
            });
        };
        Ok(Answer {
            client,
            wire,
            peer,
            head,
            endpoint,
            reused,
            trailers: None,
        })
    }

    pub(crate) fn head(&self) -> &ResponseHeader {
        &self.head
    }

    /// The index of the endpoint that answered, in its cluster.
    pub(crate) fn endpoint(&self) -> usize {
        self.endpoint
    }

    /// Whether the answer came on a pooled connection (or, over HTTP/2, on
    /// a connection already open).
    pub(crate) fn reused(&self) -> bool {
        self.reused
    }

    /// The trailers, once [`Answer::read`] has returned `None`.
    pub(crate) fn trailers(&self) -> Option<&HeaderMap> {
        self.trailers.as_ref()
    }

    /// The next body chunk; `None` at the end (the trailers read by then).
    /// Each read waits at most the peer's read timeout.
    pub(crate) async fn read(&mut self) -> Result<Option<Bytes>, Failure> {
        let failure =
            |e: Box<pingora::Error>| classify(&e.into_up()).unwrap_or(Failure::UpstreamError);
        match self.wire.read().await.map_err(failure)? {
            Some(chunk) => Ok(Some(chunk)),
            None => {
                self.trailers = self.wire.trailers().await.map_err(failure)?;
                Ok(None)
            }
        }
    }

    /// Ends the exchange: a body read to its end leaves the connection
    /// pooled (if the server keeps it alive); any other is closed.
    pub(crate) async fn finish(self) {
        self.client.release(self.wire, &self.peer).await;
    }

    /// The body (then the trailers, if any) as a stream that ends, with the
    /// connection pooled, at the body's end or at its first error. Unlike
    /// [`Answer::read`], waiting for its next item may be dropped and
    /// started again without losing bytes: the read in progress is kept
    /// inside the stream, which a loop that `select!`s between the upstream
    /// and a timer needs.
    pub(crate) fn into_body(self) -> impl Stream<Item = Result<Part, Failure>> + Send {
        futures_util::stream::unfold(Some(self), |state| async move {
            let mut answer = state?;
            match answer.read().await {
                Ok(Some(chunk)) => Some((Ok(Part::Data(chunk)), Some(answer))),
                Ok(None) => {
                    let trailers = answer.trailers.take();
                    answer.finish().await;
                    trailers.map(|t| (Ok(Part::Trailers(Box::new(t))), None))
                }
                Err(failure) => Some((Err(failure), None)),
            }
        })
    }
}
