//! The copy loop against in-memory pipes and a stream that fails.
// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{duplex, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::*;

/// Records everything it is shown.
#[derive(Default)]
struct Recorder {
    up: Vec<u8>,
    down: Vec<u8>,
}

impl Tap for Recorder {
    fn sent_to_upstream(&mut self, bytes: &[u8]) {
        self.up.extend_from_slice(bytes);
    }
    fn read_from_upstream(&mut self, bytes: &[u8]) {
        self.down.extend_from_slice(bytes);
    }
}

#[tokio::test]
async fn half_close_passes_on_and_every_byte_is_counted_and_tapped() {
    // Small pipes, so the payload crosses in many reads and partial writes.
    let (mut client, mut proxy_down) = duplex(1000);
    let (mut proxy_up, mut server) = duplex(777);
    let request: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let reply: Vec<u8> = (0..50_000u32).map(|i| (i % 13) as u8).collect();

    let proxy = tokio::spawn(async move {
        let mut tap = Recorder::default();
        let pumped = pump(&mut proxy_down, &mut proxy_up, &mut tap).await;
        (pumped, tap)
    });
    let server_reply = reply.clone();
    let server = tokio::spawn(async move {
        // Answers only once the client's EOF has come through.
        let mut got = Vec::new();
        server.read_to_end(&mut got).await?;
        server.write_all(&server_reply).await?;
        server.shutdown().await?;
        io::Result::Ok(got)
    });
    client.write_all(&request).await.unwrap();
    client.shutdown().await.unwrap();
    let mut back = Vec::new();
    client.read_to_end(&mut back).await.unwrap();

    assert!(server.await.unwrap().unwrap() == request);
    assert!(back == reply);
    let (pumped, tap) = proxy.await.unwrap();
    assert!(pumped.error.is_none(), "{:?}", pumped.error);
    assert_eq!(pumped.to_upstream, request.len() as u64);
    assert_eq!(pumped.to_downstream, reply.len() as u64);
    assert!(tap.up == request);
    assert!(tap.down == reply);
}

/// Accepts every write; every read fails.
struct Broken;

impl AsyncRead for Broken {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()))
    }
}

impl AsyncWrite for Broken {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn an_error_ends_the_copy_and_keeps_the_counts() {
    let (mut client, mut proxy_down) = duplex(64);
    client.write_all(b"abc").await.unwrap();
    let pumped = pump(&mut proxy_down, &mut Broken, &mut NoTap).await;
    assert_eq!(
        pumped.error.map(|e| e.kind()),
        Some(io::ErrorKind::ConnectionReset)
    );
    assert_eq!(pumped.to_upstream, 3);
    assert_eq!(pumped.to_downstream, 0);
}
