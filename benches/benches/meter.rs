//! Cost per SSE chunk of `TokenMeter::feed` on a realistic OpenAI chat
//! stream (one event per chunk, and each event cut in two), beside a naive
//! meter that parses every event fully with serde_json.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::Value;
use sluice_filters::{Dialect, TokenMeter};

const TOKENS: usize = 256;

/// A gpt-4o-mini style stream: role chunk, one chunk per token, finish
/// chunk, usage chunk, `[DONE]`; one event per chunk.
fn stream() -> Vec<Vec<u8>> {
    let head = r#"{"id":"chatcmpl-AaBbCcDdEeFfGgHhIiJj","object":"chat.completion.chunk","created":1732900000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":["#;
    let event = |choices: &str, usage: &str| {
        format!("data: {head}{choices}],\"usage\":{usage}}}\n\n").into_bytes()
    };
    let mut chunks = vec![event(
        r#"{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}"#,
        "null",
    )];
    for i in 0..TOKENS {
        let choice = format!(
            r#"{{"index":0,"delta":{{"content":" token{i}"}},"logprobs":null,"finish_reason":null}}"#
        );
        chunks.push(event(&choice, "null"));
    }
    chunks.push(event(
        r#"{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}"#,
        "null",
    ));
    chunks.push(event(
        "",
        r#"{"prompt_tokens":12,"completion_tokens":256,"total_tokens":268}"#,
    ));
    chunks.push(b"data: [DONE]\n\n".to_vec());
    chunks
}

/// The baseline: every event parsed into a `serde_json::Value`.
#[derive(Default)]
struct NaiveMeter {
    buf: Vec<u8>,
    content_events: u32,
    first_content_at: Option<Duration>,
    output_tokens: Option<u64>,
    done: bool,
}

impl NaiveMeter {
    fn feed(&mut self, chunk: &[u8], at: Duration) -> u32 {
        self.buf.extend_from_slice(chunk);
        let mut completed = 0;
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buf.drain(..end + 2).collect();
            for line in event.split(|b| *b == b'\n') {
                let Some(data) = line.strip_prefix(b"data: ") else {
                    continue;
                };
                if data == b"[DONE]" {
                    self.done = true;
                    continue;
                }
                let Ok(v) = serde_json::from_slice::<Value>(data) else {
                    continue;
                };
                let content = v["choices"][0]["delta"]["content"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty());
                if content {
                    completed += 1;
                    self.first_content_at.get_or_insert(at);
                }
                if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
                    self.output_tokens = Some(n);
                }
            }
        }
        self.content_events += completed;
        completed
    }
}

fn bench(c: &mut Criterion) {
    let whole = stream();
    let halves: Vec<&[u8]> = whole
        .iter()
        .flat_map(|chunk| {
            let (a, b) = chunk.split_at(chunk.len() / 2);
            [a, b]
        })
        .collect();
    let mut group = c.benchmark_group("meter");
    // Per SSE event: the figure to read is time / event.
    group.throughput(Throughput::Elements(whole.len() as u64));
    let whole_chunks: Vec<&[u8]> = whole.iter().map(|chunk| &chunk[..]).collect();
    for (name, chunks) in [
        ("token_meter", &whole_chunks),
        ("token_meter_split_events", &halves),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut meter = TokenMeter::new(Dialect::OpenAi);
                for (i, chunk) in chunks.iter().enumerate() {
                    black_box(meter.feed(black_box(chunk), Duration::from_millis(i as u64)));
                }
                black_box(meter.finish(Duration::from_secs(1)))
            });
        });
    }
    group.bench_function("naive_serde_value", |b| {
        b.iter(|| {
            let mut meter = NaiveMeter::default();
            for (i, chunk) in whole.iter().enumerate() {
                black_box(meter.feed(black_box(chunk), Duration::from_millis(i as u64)));
            }
            black_box((meter.content_events, meter.output_tokens, meter.done))
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
