//! The recorder's redaction cost per KiB of request body, side by side with
//! its floor: a serde_json parse and re-serialise of the same body (what any
//! recorder that rewrites JSON values must at least do).
//!
//! Bodies are chat requests of about `--kib` KiB: clean prose, and the same
//! prose with four secrets (an email, a card, an API key, a JWT). Each figure
//! is the median of `--rounds` rounds of `--iterations` calls.
//!
//! cargo run --release -p sluice-benches --bin redact_cost -- --rounds 5

use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use std::time::Duration;

use sluice_filters::{
    Bodies, Operation, RedactionConfig, Redactor, RequestRecord, Secret, TraceInput, TraceLine,
};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
    /// Body size in KiB.
    #[arg(long, default_value_t = 4)]
    kib: usize,
}

const PROSE: &str = "The quarterly report covers revenue, churn and the roadmap for the next \
    release; please summarise the risks in three bullet points and keep it short. ";

fn body(kib: usize, secrets: bool) -> Vec<u8> {
    let mut text = String::new();
    while text.len() < kib * 1024 - 200 {
        text.push_str(PROSE);
    }
    if secrets {
        text.push_str(
            "Contact ann.lee@example.com, card 4111 1111 1111 1111, key \
             sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr, token \
             eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        );
    }
    serde_json::to_vec(&serde_json::json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are a careful analyst."},
            {"role": "user", "content": text},
        ],
        "max_tokens": 256,
    }))
    .unwrap_or_default()
}

/// µs per KiB of `body` for `f`, median of the rounds.
fn per_kib(args: &Args, body: &[u8], f: impl Fn(&[u8]) -> usize) -> f64 {
    let mut rounds: Vec<f64> = (0..args.rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..args.iterations {
                black_box(f(black_box(body)));
            }
            let us = start.elapsed().as_secs_f64() * 1e6 / args.iterations as f64;
            us / (body.len() as f64 / 1024.0)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

/// µs per call of `f`, median of the rounds.
fn per_call(args: &Args, f: impl Fn() -> usize) -> f64 {
    let mut rounds: Vec<f64> = (0..args.rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..args.iterations {
                black_box(f());
            }
            start.elapsed().as_secs_f64() * 1e6 / args.iterations as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

/// What the recorder's writer does per request: the trace line built from
/// the record (redaction of path, session and body, block hashes) and
/// serialised.
fn line_cost(args: &Args, redactor: &Redactor, path: &str, body: Option<&[u8]>) -> f64 {
    let record = RequestRecord {
        request_id: "0123456789abcdef-00000001",
        route: "chat",
        cluster: "llm",
        version: "v1",
        model: "m",
        operation: Operation::Chat,
        method: "POST",
        path,
        status: 200,
        e2e: Duration::from_micros(1234),
        failure: None,
        tokens: None,
        prompt_fingerprint: None,
        upstream: Default::default(),
        load_run: None,
        grpc_status: None,
        grpc_method: None,
        kvcache_ratio: None,
    };
    per_call(args, || {
        let input = TraceInput {
            record: &record,
            arrival: Duration::from_micros(5_000_000),
            wall_unix_us: 1_795_000_000_000_000,
            trace_id: None,
            session_id: Some("session-42"),
            lineage_id: None,
            think_time: None,
            body,
            bodies: Bodies::Redacted,
        };
        serde_json::to_vec(&TraceLine::from_record(&input, redactor)).map_or(0, |v| v.len())
    })
}

// A bench prints its table on stdout.
#[allow(clippy::print_stdout)]
fn main() {
    let args = Args::parse();
    let redactor = match Redactor::new(&RedactionConfig::default(), Secret::new(*b"bench")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("redactor: {e}");
            std::process::exit(1);
        }
    };
    let redact = |b: &[u8]| redactor.redact_json(b).map_or(0, |out| out.len());
    let floor = |b: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(b)
            .ok()
            .and_then(|v| serde_json::to_vec(&v).ok())
            .map_or(0, |out| out.len())
    };
    println!("| body | size | redact µs/KiB | serde_json round trip µs/KiB | ratio |");
    println!("|---|---:|---:|---:|---:|");
    for (name, secrets) in [("clean prose", false), ("prose + 4 secrets", true)] {
        let b = body(args.kib, secrets);
        let r = per_kib(&args, &b, redact);
        let s = per_kib(&args, &b, floor);
        println!(
            "| {name} | {:.1} KiB | {r:.2} | {s:.2} | {:.1}× |",
            b.len() as f64 / 1024.0,
            r / s
        );
    }
    println!();
    println!("| trace line (the writer's work per request) | µs |");
    println!("|---|---:|");
    let get = line_cost(&args, &redactor, "/v1/models", None);
    println!("| GET /v1/models, no body | {get:.2} |");
    let chat = body(args.kib, false);
    let with_body = line_cost(&args, &redactor, "/v1/chat/completions", Some(&chat));
    println!(
        "| chat, {:.1} KiB body | {with_body:.2} |",
        chat.len() as f64 / 1024.0
    );
}
