//! One exchange's connection: an HTTP/1.1 connection of its own, or a
//! stream on a shared HTTP/2 connection (`clusters[].protocol: h2c | h2`,
//! or `auto` where TLS picks `h2`), behind one set of calls.

use bytes::Bytes;
use http::HeaderMap;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::v1::client::HttpSession as Http1Session;
use pingora::protocols::http::v2::client::Http2Session;
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorType};

pub(crate) enum Wire {
    H1(Box<Http1Session>),
    H2(Box<Http2Session>),
}

impl Wire {
    /// An HTTP/1.1 session on `stream`, with the peer's timeouts.
    pub(super) fn h1(stream: pingora::protocols::Stream, peer: &HttpPeer) -> Wire {
        Wire::h1_session(Http1Session::new_with_options(stream, peer), peer)
    }

    pub(super) fn h1_session(mut session: Http1Session, peer: &HttpPeer) -> Wire {
        session.read_timeout = peer.options.read_timeout;
        session.write_timeout = peer.options.write_timeout;
        Wire::H1(Box::new(session))
    }

    pub(super) fn h2(mut session: Http2Session, peer: &HttpPeer) -> Wire {
        session.read_timeout = peer.options.read_timeout;
        session.write_timeout = peer.options.write_timeout;
        Wire::H2(Box::new(session))
    }

    /// Writes the request and reads the answer's head (HTTP/1.1: skipping
    /// 1xx heads; HTTP/2 does not show them).
    pub(super) async fn exchange(
        &mut self,
        head: RequestHeader,
        body: &Bytes,
    ) -> pingora::Result<()> {
        match self {
            Wire::H1(session) => {
                session.write_request_header(Box::new(head)).await?;
                if !body.is_empty() {
                    session.write_body(body).await?;
                }
                session.finish_body().await?;
                loop {
                    session.read_response().await?;
                    match session.get_status() {
                        Some(s) if s.is_informational() => continue,
                        Some(_) => return Ok(()),
                        None => {
                            return Error::e_explain(
                                ErrorType::InvalidHTTPHeader,
                                "no response status",
                            )
                        }
                    }
                }
            }
            Wire::H2(session) => {
                session.write_request_header(Box::new(head), body.is_empty())?;
                if !body.is_empty() {
                    session.write_request_body(body.clone(), true).await?;
                }
                session.read_response_header().await
            }
        }
    }

    pub(super) fn head(&self) -> Option<&ResponseHeader> {
        match self {
            Wire::H1(session) => session.resp_header(),
            Wire::H2(session) => session.response_header(),
        }
    }

    /// The next body chunk; `None` at its end.
    pub(super) async fn read(&mut self) -> pingora::Result<Option<Bytes>> {
        match self {
            Wire::H1(session) => session.read_body_bytes().await,
            Wire::H2(session) => session.read_response_body().await,
        }
    }

    /// The trailers, after the body's end: HTTP/2's, if it sent any.
    pub(super) async fn trailers(&mut self) -> pingora::Result<Option<HeaderMap>> {
        match self {
            Wire::H1(_) => Ok(None),
            Wire::H2(session) => session.read_trailers().await,
        }
    }
}
