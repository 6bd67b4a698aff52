//! An upstream's answer once its head is in: the body read chunk by chunk,
//! and the connection given back to the client's pool when the body ends.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::Stream;
use pingora::http::ResponseHeader;
use pingora::protocols::http::v1::client::HttpSession;
use pingora::upstreams::peer::HttpPeer;
use sluice_filters::Failure;

use super::{Failed, UpstreamClient};
use crate::http_proxy::classify;

pub(crate) struct Answer {
    client: Arc<UpstreamClient>,
    session: HttpSession,
    peer: HttpPeer,
    head: ResponseHeader,
    endpoint: usize,
    reused: bool,
}

impl Answer {
    pub(super) fn new(
        client: Arc<UpstreamClient>,
        session: HttpSession,
        peer: HttpPeer,
        endpoint: usize,
        reused: bool,
    ) -> Result<Answer, Failed> {
        let Some(head) = session.resp_header().cloned() else {
            return Err(Failed {
                failure: Failure::UpstreamError,
                endpoint: Some(endpoint),
            });
        };
        Ok(Answer {
            client,
            session,
            peer,
            head,
            endpoint,
            reused,
        })
    }

    pub(crate) fn head(&self) -> &ResponseHeader {
        &self.head
    }

    /// The index of the endpoint that answered, in its cluster.
    pub(crate) fn endpoint(&self) -> usize {
        self.endpoint
    }

    /// Whether the answer came on a pooled connection.
    pub(crate) fn reused(&self) -> bool {
        self.reused
    }

    /// The next body chunk; `None` at the end, after which the connection
    /// is back in the pool. Each read waits at most the peer's read timeout.
    pub(crate) async fn read(&mut self) -> Result<Option<Bytes>, Failure> {
        self.session
            .read_body_bytes()
            .await
            .map_err(|e| classify(&e.into_up()).unwrap_or(Failure::UpstreamError))
    }

    /// Ends the exchange: a body read to its end leaves the connection
    /// pooled (if the server keeps it alive); any other is closed.
    pub(crate) async fn finish(self) {
        self.client.release(self.session, &self.peer).await;
    }

    /// The body as a stream of chunks that ends (with the connection pooled)
    /// at the body's end or at its first error. Unlike [`Answer::read`],
    /// waiting for its next item may be dropped and started again without
    /// losing bytes: the read in progress is kept inside the stream, which
    /// a loop that `select!`s between the upstream and a timer needs.
    pub(crate) fn into_body(self) -> impl Stream<Item = Result<Bytes, Failure>> + Send {
        futures_util::stream::unfold(Some(self), |state| async move {
            let mut answer = state?;
            match answer.read().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(answer))),
                Ok(None) => {
                    answer.finish().await;
                    None
                }
                Err(failure) => Some((Err(failure), None)),
            }
        })
    }
}
