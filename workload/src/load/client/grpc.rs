//! The grpc steps' client: HTTP/2 alone over a keep-alive pool (h2c with
//! prior knowledge for http targets, ALPN `h2` over TLS for https ones),
//! one unary request message in gRPC's length-prefixed framing, the answer
//! read whole (a server stream's messages counted as they arrive), and the
//! outcome from `grpc-status` in the trailers (or in the headers of a
//! trailers-only answer). Timed on the run's clock into the same
//! [`Outcome`] as an HTTP request.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::TokioExecutor;
use sluice_filters::GrpcFramer;

use super::{since, traced, Call, Failure, Outcome, MAX_CHUNKS, MAX_KEPT};

/// A grpc answer, as `--detailed` writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GrpcReply {
    /// `grpc-status` (0 is OK); `None` when the answer carried none.
    pub status: Option<u32>,
    /// Whole messages received (one for a unary call, any number for a
    /// server stream).
    pub messages: u64,
    /// Their bytes, the 5-byte prefixes left out.
    pub bytes: u64,
}

/// gRPC's RESOURCE_EXHAUSTED: counted as rate limited, as a 429 is.
const RESOURCE_EXHAUSTED: u32 = 8;

/// The HTTP/2 pool and the run's id.
#[derive(Clone)]
pub(crate) struct Grpc {
    pool: Pool<HttpsConnector<HttpConnector>, Full<Bytes>>,
    run_id: HeaderValue,
}

/// One message in gRPC's framing: the compressed flag (0), the length as
/// a big-endian u32, the bytes.
pub(crate) fn frame(message: &[u8]) -> Vec<u8> {
    let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// `grpc-timeout` in the spec's notation: at most 8 digits and a unit,
/// the finest unit that fits (rounded up, so the server never gets less).
pub(crate) fn grpc_timeout(d: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = d.as_nanos();
    for (unit, per) in [
        ("n", 1u128),
        ("u", 1_000),
        ("m", 1_000_000),
        ("S", 1_000_000_000),
        ("M", 60_000_000_000),
    ] {
        let n = nanos.div_ceil(per);
        if n <= MAX {
            return format!("{n}{unit}");
        }
    }
    format!("{}H", nanos.div_ceil(3_600_000_000_000).min(MAX))
}

/// A `grpc-status` value: a decimal number.
fn status_of(v: Option<&HeaderValue>) -> Option<u32> {
    v.and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse().ok())
}

impl Grpc {
    pub(crate) fn new(run_id: &str, ca_certs: &[Vec<u8>]) -> Result<Grpc, String> {
        let pool = Pool::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .http2_only(true)
            .build(super::h2_connector(ca_certs)?);
        Ok(Grpc {
            pool,
            run_id: HeaderValue::from_str(run_id)
                .unwrap_or_else(|_| HeaderValue::from_static("invalid")),
        })
    }

    /// Sends `call` (its body the request message) now and fills `out`;
    /// returns the answer's messages, prefixes left out, when `keep_body`.
    pub(crate) async fn send(&self, call: Call, start: Instant, out: &mut Outcome) -> Vec<u8> {
        let sent = Instant::now();
        out.sent_us = since(start, sent);
        let mut kept = Vec::new();
        let timeout = call.timeout;
        let result =
            tokio::time::timeout(timeout, self.exchange(call, start, out, &mut kept)).await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(())) => out.failure = Some(Failure::Transport),
            Err(_) => out.failure = Some(Failure::Timeout),
        }
        out.end_us = since(start, Instant::now());
        kept
    }

    async fn exchange(
        &self,
        call: Call,
        start: Instant,
        out: &mut Outcome,
        kept: &mut Vec<u8>,
    ) -> Result<(), ()> {
        let request = traced(Request::post(&call.uri), &call, &self.run_id, out);
        let request = request
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers")
            .header("grpc-timeout", grpc_timeout(call.timeout))
            .body(Full::new(Bytes::from(frame(
                call.body.as_deref().unwrap_or_default(),
            ))))
            .map_err(|_| ())?;
        let response = self.pool.request(request).await.map_err(|_| ())?;
        let status = response.status().as_u16();
        out.status = Some(status);
        if !(200..=299).contains(&status) {
            out.failure = Some(match status {
                429 => Failure::RateLimited,
                _ => Failure::Status,
            });
            return Ok(());
        }
        let mut reply = GrpcReply {
            // A trailers-only answer: the status is in the headers.
            status: status_of(response.headers().get("grpc-status")),
            ..GrpcReply::default()
        };
        let mut body = response.into_body();
        // The proxy's meter's framer: only a split prefix is carried, so a
        // huge message costs no memory unless its bytes are kept.
        let mut framer = GrpcFramer::new();
        let mut keep = call.keep_body.then_some(kept);
        let mut last: Option<u64> = None;
        for _ in 0..MAX_CHUNKS {
            let Some(frame) = body.frame().await else {
                break;
            };
            let frame = frame.map_err(|_| ())?;
            let frame = match frame.into_data() {
                Ok(data) => {
                    let at_us = since(start, Instant::now());
                    out.first_byte_us.get_or_insert(at_us);
                    let ended = framer.feed_with(&data, |piece| {
                        reply.bytes += piece.len() as u64;
                        if let Some(k) = keep.as_deref_mut() {
                            if k.len() + piece.len() <= MAX_KEPT {
                                k.extend_from_slice(piece);
                            }
                        }
                    });
                    for _ in 0..ended {
                        reply.messages += 1;
                        if let Some(l) = last {
                            out.gaps_us.push(at_us.saturating_sub(l));
                        }
                        out.first_content_us.get_or_insert(at_us);
                        last = Some(at_us);
                    }
                    continue;
                }
                Err(frame) => frame,
            };
            if let Ok(trailers) = frame.into_trailers() {
                if let Some(s) = status_of(trailers.get("grpc-status")) {
                    reply.status = Some(s);
                }
            }
        }
        // A body that ends inside a message was cut.
        out.failure = match (reply.status, framer.in_message()) {
            (_, true) | (None, _) => Some(Failure::Transport),
            (Some(0), false) => None,
            (Some(RESOURCE_EXHAUSTED), false) => Some(Failure::RateLimited),
            (Some(_), false) => Some(Failure::Status),
        };
        out.grpc = Some(reply);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_message_is_framed_with_a_zero_flag_and_a_big_endian_length() {
        assert_eq!(frame(b""), [0, 0, 0, 0, 0]);
        assert_eq!(
            frame(b"hello"),
            [0, 0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o']
        );
        let big = vec![7u8; 300];
        assert_eq!(frame(&big)[..5], [0, 0, 0, 1, 44]);
    }

    #[test]
    fn framed_messages_read_back_whole_however_the_chunks_split_them() {
        // The client frames with `frame` and reads with the meter's framer.
        let mut wire = frame(b"msg-0");
        wire.extend(frame(b""));
        wire.extend(frame(&[9u8; 300]));
        for cut in 0..=wire.len() {
            let mut f = GrpcFramer::new();
            let mut kept = Vec::new();
            let mut ended = f.feed_with(&wire[..cut], |p| kept.extend_from_slice(p));
            ended += f.feed_with(&wire[cut..], |p| kept.extend_from_slice(p));
            assert_eq!(ended, 3, "cut at {cut}");
            assert!(!f.in_message());
            assert_eq!(&kept[..5], b"msg-0");
            assert_eq!(kept.len(), 305);
        }
        let mut f = GrpcFramer::new();
        assert_eq!(f.feed(&wire[..wire.len() - 1]), 2);
        assert!(f.in_message(), "a cut body is inside a message");
    }

    #[test]
    fn grpc_timeout_uses_the_finest_unit_of_at_most_8_digits() {
        let cases = [
            (Duration::from_millis(2000), "2000000u"),
            (Duration::from_millis(250), "250000u"),
            (Duration::from_nanos(1500), "1500n"),
            (Duration::from_secs(60), "60000000u"),
            (Duration::from_secs(100_000), "100000S"),
            (Duration::from_secs(200_000_000), "3333334M"),
        ];
        for (d, want) in cases {
            assert_eq!(grpc_timeout(d), want, "{d:?}");
        }
    }
}
