//! Cost of the RESP observer per byte the L4 copy loop moves: one
//! redis-benchmark-like pipeline of 16 GET and 16 SET (requests and
//! replies), fed to a session that records into the real metric handles,
//! beside the copy of the same bytes the loop makes anyway.

// A bench is a test: a broken fixture should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sluice_filters::{
    Metrics, RespCommand, RespExchange, RespReplyParser, RespRequestParser, RespSession,
};

/// 16 SETs and 16 GETs of a 3-byte value, as redis-benchmark -P 16 sends them.
fn pipeline() -> (Vec<u8>, Vec<u8>) {
    let mut requests = Vec::new();
    let mut replies = Vec::new();
    for _ in 0..16 {
        requests.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nxxx\r\n");
        replies.extend_from_slice(b"+OK\r\n");
    }
    for _ in 0..16 {
        requests.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$16\r\nkey:__rand_int__\r\n");
        replies.extend_from_slice(b"$3\r\nxxx\r\n");
    }
    (requests, replies)
}

fn observer(c: &mut Criterion) {
    let (requests, replies) = pipeline();
    let metrics = Metrics::new().unwrap();
    let handles = metrics.resp.handles("cache", "redis");
    let mut group = c.benchmark_group("resp");
    group.throughput(Throughput::Bytes((requests.len() + replies.len()) as u64));

    group.bench_function("copy_only_32_commands", |b| {
        let mut buf = vec![0u8; 8 * 1024];
        b.iter(|| {
            buf[..requests.len()].copy_from_slice(black_box(&requests));
            buf[..replies.len()].copy_from_slice(black_box(&replies));
            black_box(&buf);
        })
    });

    group.bench_function("observe_32_commands", |b| {
        let mut session = RespSession::default();
        let mut now = 0u64;
        b.iter(|| {
            now += 1_000;
            session.requests_sent(black_box(&requests), now).unwrap();
            session
                .replies_received(black_box(&replies), now + 500, &mut |e| handles.record(&e))
                .unwrap();
        })
    });

    group.bench_function("parse_requests_32_commands", |b| {
        let mut parser = RespRequestParser::default();
        b.iter(|| {
            let mut n = 0;
            parser.feed(black_box(&requests), &mut |_| n += 1).unwrap();
            black_box(n)
        })
    });

    group.bench_function("parse_replies_32_commands", |b| {
        let mut parser = RespReplyParser::default();
        b.iter(|| {
            let mut n = 0;
            parser.feed(black_box(&replies), &mut |_| n += 1).unwrap();
            black_box(n)
        })
    });

    group.bench_function("record_32_exchanges", |b| {
        let exchange = RespExchange {
            command: RespCommand::named("get"),
            error: false,
            null: false,
            queued: false,
            latency_ns: 50_000,
        };
        b.iter(|| {
            for _ in 0..32 {
                handles.record(black_box(&exchange));
            }
        })
    });

    group.bench_function("observe_32_commands_byte_by_byte", |b| {
        let mut session = RespSession::default();
        let mut now = 0u64;
        b.iter(|| {
            now += 1_000;
            for byte in requests.chunks(1) {
                session.requests_sent(black_box(byte), now).unwrap();
            }
            for byte in replies.chunks(1) {
                session
                    .replies_received(black_box(byte), now + 500, &mut |e| handles.record(&e))
                    .unwrap();
            }
        })
    });
    group.finish();
}

criterion_group!(benches, observer);
criterion_main!(benches);
