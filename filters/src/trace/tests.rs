#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use super::*;
use crate::genai::Operation;
use crate::meter::MeterSummary;
use crate::record::{TokenOutcome, UpstreamTiming};
use crate::redact::{RedactionConfig, Secret};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn redactor(key: &[u8]) -> Redactor {
    Redactor::new(&RedactionConfig::default(), Secret::new(key.to_vec())).unwrap()
}

fn outcome(input: Option<u64>) -> TokenOutcome {
    TokenOutcome {
        summary: MeterSummary {
            first_content_at: Some(Duration::from_micros(120_250)),
            output_tokens: Some(3),
            input_tokens: input,
            finish_reason: Some("stop".into()),
            clean_end: true,
            ..MeterSummary::default()
        },
        gaps: vec![ms(10), Duration::from_micros(20_500)],
    }
}

fn record<'a>(tokens: &'a TokenOutcome) -> RequestRecord<'a> {
    RequestRecord {
        request_id: "req-1",
        route: "chat",
        cluster: "llm-stable",
        version: "v1",
        model: "gpt-4o-mini",
        operation: Operation::Chat,
        method: "POST",
        path: "/v1/chat/completions?key=sk-abcdefghijklmnopqrstuvwxyz",
        status: 200,
        e2e: ms(400),
        failure: None,
        tokens: Some(tokens),
        prompt_fingerprint: Some("abc123"),
        upstream: UpstreamTiming::default(),
        load_run: Some("load-00000000000000ff"),
        grpc_status: None,
        grpc_method: None,
        kvcache_ratio: None,
    }
}

const BODY: &[u8] = br#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Mail bob@example.com"}]}"#;

fn input<'a>(record: &'a RequestRecord<'a>, bodies: Bodies) -> TraceInput<'a> {
    TraceInput {
        record,
        arrival: Duration::from_micros(1_500_250),
        wall_unix_us: 1_700_158_546_680_590,
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736"),
        session_id: Some("alice@example.com"),
        lineage_id: Some("0123456789abcdef"),
        think_time: Some(ms(2500)),
        body: Some(BODY),
        bodies,
    }
}

#[test]
fn a_line_from_a_record_has_every_field() {
    let tokens = outcome(Some(21));
    let record = record(&tokens);
    let line = TraceLine::from_record(&input(&record, Bodies::Redacted), &redactor(b"k"));
    assert_eq!(line.v, 1);
    assert_eq!(line.request_id, "req-1");
    assert_eq!(line.route.as_deref(), Some("chat"));
    assert_eq!(line.operation.as_deref(), Some("chat"));
    assert_eq!(line.arrival_us, 1_500_250);
    assert_eq!(line.arrival.as_deref(), Some("2023-11-16T18:15:46.680590Z"));
    assert_eq!(line.status, Some(200));
    assert_eq!(line.finish_reason.as_deref(), Some("stop"));
    assert_eq!(line.clean_end, Some(true));
    assert_eq!(line.ttft_ms, Some(120.25));
    assert_eq!(line.gaps_ms, vec![10.0, 20.5]);
    assert_eq!(line.e2e_ms, Some(400.0));
    assert_eq!(
        (line.input_tokens, line.input_tokens_estimated),
        (Some(21), false)
    );
    assert_eq!(
        (line.output_tokens, line.output_tokens_estimated),
        (Some(3), false)
    );
    assert_eq!(line.messages, Some(2));
    assert_eq!(line.hash_ids.len(), 1);
    assert_eq!(line.think_time_ms, Some(2500.0));
    assert_eq!(line.prompt_fingerprint.as_deref(), Some("abc123"));
    assert_eq!(line.load_run.as_deref(), Some("load-00000000000000ff"));
    assert_eq!(line.lineage_id.as_deref(), Some("0123456789abcdef"));
    // The session id, the path's query and the body's email are redacted.
    let session = line.session_id.as_deref().unwrap();
    assert!(session.starts_with("<email:"), "{session}");
    assert!(
        !line.path.as_deref().unwrap().contains("sk-abc"),
        "{:?}",
        line.path
    );
    let body = line.body.as_ref().unwrap().0.get();
    assert!(
        !body.contains("bob@example.com") && body.contains("<email:"),
        "{body}"
    );

    // The names of the issue, flat, in one JSON line that reads back equal.
    let json = line.to_json();
    assert!(!json.contains('\n'));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    for name in [
        "v",
        "request_id",
        "trace_id",
        "session_id",
        "load_run",
        "route",
        "cluster",
        "version",
        "lineage_id",
        "model",
        "operation",
        "method",
        "path",
        "arrival_us",
        "arrival",
        "status",
        "finish_reason",
        "clean_end",
        "ttft_ms",
        "gaps_ms",
        "e2e_ms",
        "input_tokens",
        "output_tokens",
        "input_tokens_estimated",
        "output_tokens_estimated",
        "prompt_fingerprint",
        "hash_ids",
        "messages",
        "think_time_ms",
        "body",
    ] {
        assert!(value.get(name).is_some(), "{name} missing from {json}");
    }
    assert_eq!(value.as_object().unwrap().len(), 30, "{json}");
    assert!(value["body"].is_object(), "the body is JSON, not a string");
    assert_eq!(parse_line(&json), Ok(line));
}

#[test]
fn a_line_without_a_lineage_id_still_reads_and_one_with_it_reads_back() {
    // Lines written before `lineage_id` existed: unknown, not an error.
    let old = r#"{"v":1,"request_id":"r1","cluster":"llm","version":"v1","arrival_us":5}"#;
    let line = parse_line(old).unwrap();
    assert_eq!(line.lineage_id, None);
    let new = r#"{"v":1,"request_id":"r1","lineage_id":"0123456789abcdef","arrival_us":5}"#;
    assert_eq!(
        parse_line(new).unwrap().lineage_id.as_deref(),
        Some("0123456789abcdef")
    );
    // Other unknown fields are still refused.
    assert!(parse_line(r#"{"v":1,"request_id":"r1","arrival_us":5,"lineage":"x"}"#).is_err());
}

#[test]
fn without_usage_input_tokens_are_estimated_and_bodies_follow_the_setting() {
    let tokens = outcome(None);
    let record = record(&tokens);
    let r = redactor(b"k");
    let line = TraceLine::from_record(&input(&record, Bodies::None), &r);
    // "Be brief.\nMail bob@example.com": 30 characters, 4 to a token.
    assert_eq!(
        (line.input_tokens, line.input_tokens_estimated),
        (Some(8), true)
    );
    assert_eq!(line.body, None);
    let full = TraceLine::from_record(&input(&record, Bodies::Full), &r);
    assert_eq!(full.body.unwrap().0.get().as_bytes(), BODY);
    let mut cut = input(&record, Bodies::Redacted);
    cut.body = Some(&BODY[..40]);
    let line = TraceLine::from_record(&cut, &r);
    assert_eq!(
        (line.body, line.messages, line.hash_ids.len()),
        (None, None, 0)
    );
}

#[test]
fn hash_ids_share_exactly_the_shared_blocks_and_are_keyed() {
    let secret = Secret::new(b"one".to_vec());
    let common = "a".repeat(2 * HASH_BLOCK_BYTES);
    let x = hash_ids(&format!("{common}{}", "x".repeat(100)), &secret);
    let y = hash_ids(&format!("{common}{}", "y".repeat(3000)), &secret);
    assert_eq!((x.len(), y.len()), (3, 4));
    assert_eq!(x[..2], y[..2]);
    assert_ne!(x[2], y[2]);
    // Rolling: the same block after a different prefix is a different id.
    let z = hash_ids(
        &format!("{}{}", "b".repeat(HASH_BLOCK_BYTES), &common),
        &secret,
    );
    assert_ne!(z[1], x[0]);
    assert!(x.iter().chain(&y).all(|id| *id < 1 << 53));
    // A short prompt's id depends on the key: no dictionary of guesses.
    let other = Secret::new(b"two".to_vec());
    assert_ne!(hash_ids("yes", &secret), hash_ids("yes", &other));
    assert_eq!(hash_ids("", &secret), Vec::<u64>::new());
}

#[test]
fn bad_lines_say_what_is_wrong() {
    let err = |text: &str| parse_line(text).unwrap_err();
    assert_eq!(
        err(r#"{"v":1,"request_id":"a","arrival_us":5,"colour":"red"}"#)
            .split(", expected")
            .next(),
        Some("column 47: unknown field `colour`")
    );
    assert_eq!(
        err(r#"{"v":2,"request_id":"a","arrival_us":5}"#),
        "unsupported trace version 2 (this sluice reads 1)"
    );
    assert_eq!(
        err(r#"{"v":1,"request_id":"a","arrival_us":5,"ttft_ms":-1.0}"#),
        "ttft_ms: -1 is not a time (ms >= 0)"
    );
    assert_eq!(
        err(r#"{"v":1,"request_id":"a","arrival_us":5,"arrival":"noon"}"#),
        "arrival: `noon` is not a timestamp (expected YYYY-MM-DD HH:MM:SS)"
    );
    assert_eq!(
        err(r#"{"v":1,"request_id":"a"}"#),
        "column 24: missing field `arrival_us`"
    );
    let text = "{\"v\":1,\"request_id\":\"a\",\"arrival_us\":1}\n\n{\"v\":1,\"request_id\":7}\n";
    let results: Vec<_> = parse_lines(text).collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    let e = results[1].clone().unwrap_err();
    assert_eq!(e.line, 3);
    assert!(
        e.to_string().starts_with("line 3: column 21: invalid type"),
        "{e}"
    );
}

#[test]
fn a_users_request_has_no_load_run() {
    let tokens = outcome(Some(21));
    let mut record = record(&tokens);
    record.load_run = None;
    let line = TraceLine::from_record(&input(&record, Bodies::None), &redactor(b"k"));
    assert_eq!(line.load_run, None);
    let json = line.to_json();
    assert!(!json.contains("load_run"), "{json}");
    assert_eq!(parse_line(&json), Ok(line));
}

#[test]
fn a_grpc_call_carries_its_method_and_status_and_others_neither() {
    let tokens = outcome(Some(21));
    let mut record = record(&tokens);
    record.path = "/test.Svc/Count";
    record.grpc_method = Some("test.Svc/Count");
    record.grpc_status = Some(14);
    let line = TraceLine::from_record(&input(&record, Bodies::None), &redactor(b"k"));
    assert_eq!(line.grpc_method.as_deref(), Some("test.Svc/Count"));
    assert_eq!(line.grpc_status, Some(14));
    let json = line.to_json();
    assert!(
        json.contains(r#""grpc_method":"test.Svc/Count","grpc_status":14"#),
        "{json}"
    );
    assert_eq!(parse_line(&json), Ok(line));

    // A call that ended without a status: its method, no status (unknown).
    record.grpc_status = None;
    let line = TraceLine::from_record(&input(&record, Bodies::None), &redactor(b"k"));
    assert_eq!(line.grpc_method.as_deref(), Some("test.Svc/Count"));
    assert!(
        !line.to_json().contains("grpc_status"),
        "{}",
        line.to_json()
    );

    // Not a gRPC call: neither field is written.
    let plain = self::record(&tokens);
    let json = TraceLine::from_record(&input(&plain, Bodies::None), &redactor(b"k")).to_json();
    assert!(!json.contains("grpc_"), "{json}");
    // Lines written before the fields existed read as unknown.
    let old = parse_line(r#"{"v":1,"request_id":"r1","arrival_us":5}"#).unwrap();
    assert_eq!((old.grpc_method, old.grpc_status), (None, None));
}

#[test]
fn the_kvcache_ratio_round_trips_and_old_lines_read_as_unknown() {
    let tokens = outcome(Some(21));
    let mut record = record(&tokens);
    record.kvcache_ratio = Some(0.375);
    let line = TraceLine::from_record(&input(&record, Bodies::None), &redactor(b"k"));
    assert_eq!(line.kvcache_ratio, Some(0.375));
    let json = line.to_json();
    assert!(json.contains(r#""kvcache_ratio":0.375"#), "{json}");
    assert_eq!(parse_line(&json), Ok(line));

    // Unknown: not written at all.
    record.kvcache_ratio = None;
    let json = TraceLine::from_record(&input(&record, Bodies::None), &redactor(b"k")).to_json();
    assert!(!json.contains("kvcache_ratio"), "{json}");
    // A line written before the field existed reads as unknown.
    let old = parse_line(r#"{"v":1,"request_id":"r1","arrival_us":5}"#).unwrap();
    assert_eq!(old.kvcache_ratio, None);
    // A value that is no ratio is refused, named.
    assert_eq!(
        parse_line(r#"{"v":1,"request_id":"r1","arrival_us":5,"kvcache_ratio":1.5}"#),
        Err("kvcache_ratio: 1.5 is not a ratio (0..=1)".to_owned())
    );
}
