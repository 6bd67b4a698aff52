//! What the integrity run's client and upstreams agree on: the headers that
//! carry each request's id, its body's SHA-256 and the answer it asks for;
//! the bodies themselves (deterministic bytes from the id, so either side can
//! make them); and a body sent in frames, which HTTP/1.1 sends chunked.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use sha2::{Digest, Sha256};

/// The request's number.
pub const ID: &str = "x-integrity-id";
/// The SHA-256 (hex) of the body it comes with, request or answer.
pub const SHA256: &str = "x-integrity-sha256";
/// The answer asked for: `length:N`, `chunked:N` or `sse:N` (about N bytes).
pub const ANSWER: &str = "x-integrity-answer";
/// The upstream's check of the request body: `ok` or `bad`.
pub const REQUEST_CHECK: &str = "x-integrity-request";

/// How an answer is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One body with `content-length`.
    Length,
    /// Frames without a length: chunked on HTTP/1.1, DATA frames on h2.
    Chunked,
    /// `text/event-stream` events, sent one frame per few events.
    Sse,
}

impl Framing {
    pub const ALL: [Framing; 3] = [Framing::Length, Framing::Chunked, Framing::Sse];

    fn name(self) -> &'static str {
        match self {
            Framing::Length => "length",
            Framing::Chunked => "chunked",
            Framing::Sse => "sse",
        }
    }

    /// The `x-integrity-answer` value asking for `bytes` so framed.
    pub fn ask(self, bytes: usize) -> String {
        format!("{}:{bytes}", self.name())
    }

    /// Reads an `x-integrity-answer` value.
    pub fn parse(value: &str) -> Option<(Framing, usize)> {
        let (name, bytes) = value.split_once(':')?;
        let framing = Framing::ALL.into_iter().find(|f| f.name() == name)?;
        Some((framing, bytes.parse().ok()?))
    }
}

/// `len` bytes that depend on `seed` (xorshift64): cheap to make, and a
/// body moved, cut or mixed with another's no longer hashes the same.
pub fn bytes_of(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// An event stream of about `len` bytes from `seed`'s bytes, hex-encoded
/// in events of at most 64 bytes' worth, ending with `data: [DONE]`.
pub fn events_of(seed: u64, len: usize) -> Vec<u8> {
    let raw = bytes_of(seed, len / 2);
    let mut out = Vec::with_capacity(len + 64);
    for chunk in raw.chunks(64) {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(hex(chunk).as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

pub fn sha256_hex(body: &[u8]) -> String {
    hex(&Sha256::digest(body))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// `body` cut at the frame sizes `sizes` yields, cycling (a size of 0 is
/// read as 1), for a body sent in frames.
pub fn frames(body: Bytes, sizes: &[usize]) -> VecDeque<Bytes> {
    let mut out = VecDeque::new();
    let mut at = 0;
    let mut i = 0;
    while at < body.len() {
        let take = sizes[i % sizes.len()].max(1).min(body.len() - at);
        out.push_back(body.slice(at..at + take));
        at += take;
        i += 1;
    }
    out
}

/// A body sent frame by frame, with no length known up front.
pub struct Framed(pub VecDeque<Bytes>);

impl Body for Framed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        // No exact size: HTTP/1.1 sends it chunked.
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_header_reads_back_and_bodies_differ_by_seed() {
        for f in Framing::ALL {
            assert_eq!(Framing::parse(&f.ask(4096)), Some((f, 4096)));
        }
        assert_eq!(Framing::parse("gzip:3"), None);
        assert_eq!(bytes_of(7, 13).len(), 13);
        assert_ne!(bytes_of(7, 64), bytes_of(8, 64));
        assert_eq!(bytes_of(7, 64), bytes_of(7, 64));
        // The SHA-256 of "abc" (FIPS 180-2's example).
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let events = events_of(1, 300);
        assert!(events.ends_with(b"data: [DONE]\n\n"));
        let framed = frames(Bytes::from(bytes_of(3, 1000)), &[7, 0, 300]);
        let joined: Vec<u8> = framed.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(joined, bytes_of(3, 1000));
    }
}
