//! Broken, truncated and unusual streams, non-streaming answers, and
//! dialect detection.

use super::*;

fn read_all(dialect: Dialect, body: &[u8]) -> MeterSummary {
    let mut meter = TokenMeter::new(dialect);
    meter.feed(body, ms(5));
    meter.finish(ms(9))
}

const CHUNK: &str =
    r#"data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}"#;

#[test]
fn detect_by_content_type_and_path() {
    let sse = Some(&b"text/event-stream; charset=utf-8"[..]);
    let cases: &[(&str, Option<&[u8]>, Dialect)] = &[
        ("/v1/chat/completions", sse, Dialect::OpenAi),
        ("/v1/completions?x=1", sse, Dialect::OpenAi),
        (
            "/v1/messages",
            Some(b"Text/Event-Stream"),
            Dialect::Anthropic,
        ),
        ("/anthropic/v1/messages?beta=true", sse, Dialect::Anthropic),
        ("/generate_stream", sse, Dialect::Tgi),
        ("/api/chat", Some(b"application/x-ndjson"), Dialect::Ollama),
        ("/api/generate", Some(b"application/json"), Dialect::Ollama),
        ("/api/chat", None, Dialect::Ollama),
        ("/other", Some(b"application/x-ndjson"), Dialect::Ollama),
        (
            "/v1/chat/completions",
            Some(b"application/json"),
            Dialect::Json,
        ),
        (
            "/v1/chat/completions",
            Some(b"text/plain"),
            Dialect::Unknown,
        ),
        ("/v1/chat/completions", None, Dialect::Unknown),
    ];
    for (path, ct, dialect) in cases {
        assert_eq!(Dialect::detect(path, *ct), *dialect, "{path} {ct:?}");
    }
}

#[test]
fn truncated_stream_is_not_a_clean_end() {
    let f = fixture("openai_chat.sse");
    // Cut after the fourth content event, before the finish reason.
    let cut = event_ends(f.bytes, Dialect::OpenAi)[4].0;
    let s = read_all(Dialect::OpenAi, &f.bytes[..cut]);
    assert!(!s.clean_end);
    assert_eq!(
        (s.content_events, s.output_tokens, s.output_tokens_estimated),
        (4, Some(4), true)
    );
    assert_eq!((s.finish_reason, s.malformed_events), (None, 0));

    // Cut inside an event: the unfinished event is read at the end and
    // counted as malformed.
    let s = read_all(Dialect::OpenAi, &f.bytes[..cut + 40]);
    assert_eq!(
        (s.clean_end, s.content_events, s.malformed_events),
        (false, 4, 1)
    );
}

#[test]
fn anthropic_cut_before_message_delta_is_estimated() {
    let f = fixture("anthropic_messages.sse");
    let cut = memchr::memmem::find(f.bytes, b"event: message_delta").unwrap_or(0);
    let s = read_all(Dialect::Anthropic, &f.bytes[..cut]);
    assert_eq!(
        (s.input_tokens, s.output_tokens, s.output_tokens_estimated),
        (Some(25), Some(3), true)
    );
    assert!(!s.clean_end);
}

#[test]
fn malformed_events_are_counted_and_skipped() {
    let body = format!(
        "{CHUNK}\n\ndata: not json\n\ndata: {{\"choices\":[{{\"delta\":{{\"content\":\"cut\n\n{CHUNK}\n\ndata: [DONE]\n\n"
    );
    let s = read_all(Dialect::OpenAi, body.as_bytes());
    assert_eq!(
        (s.content_events, s.malformed_events, s.clean_end),
        (2, 2, true)
    );

    let body = b"{\"response\":\"a\",\"done\":false}\n{oops\n{\"done\":true,\"eval_count\":1}\n";
    let s = read_all(Dialect::Ollama, body);
    assert_eq!(
        (s.content_events, s.malformed_events, s.clean_end),
        (1, 1, true)
    );

    // A count object that does not parse is counted too.
    let body =
        b"data: {\"choices\":[],\"usage\":{\"completion_tokens\":\"ten\"}}\n\ndata: [DONE]\n\n";
    let s = read_all(Dialect::OpenAi, body);
    assert_eq!((s.malformed_events, s.output_tokens_estimated), (1, true));
}

#[test]
fn last_event_without_blank_line_is_read_at_finish() {
    let mut meter = TokenMeter::new(Dialect::OpenAi);
    assert_eq!(meter.feed(CHUNK.as_bytes(), ms(3)), 0);
    let s = meter.finish(ms(7));
    assert_eq!((s.content_events, s.first_content_at), (1, Some(ms(7))));

    let s = read_all(
        Dialect::OpenAi,
        format!("{CHUNK}\n\ndata: [DONE]").as_bytes(),
    );
    assert!(s.clean_end);
    let s = read_all(Dialect::Ollama, b"{\"done\":true,\"eval_count\":2}");
    assert_eq!((s.clean_end, s.output_tokens), (true, Some(2)));
}

#[test]
fn sse_fields_comments_and_multiline_data() {
    let body = ": keep-alive\n\nid: 7\nretry: 100\ndata:{\"choices\":[{\"delta\":\n\
                data: {\"content\":\"hi\"}}]}\n\n: ping\n\nevent: x\n\ndata:[DONE]\n\n";
    let s = read_all(Dialect::OpenAi, body.as_bytes());
    assert_eq!(
        (s.content_events, s.malformed_events, s.clean_end),
        (1, 0, true)
    );
}

#[test]
fn other_kinds_of_content() {
    let tools = r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#;
    let reasoning = r#"data: {"choices":[{"delta":{"reasoning_content":"hm","content":null}}]}"#;
    let refusal = r#"data: {"choices":[{"delta":{"refusal":"no"}}]}"#;
    let empty_tools = r#"data: {"choices":[{"delta":{"tool_calls":[ ]}}]}"#;
    let body = format!("{tools}\n\n{reasoning}\n\n{refusal}\n\n{empty_tools}\n\n");
    assert_eq!(read_all(Dialect::OpenAi, body.as_bytes()).content_events, 3);

    // Spaces after colons, as Python's json.dumps writes them.
    let body =
        "data: {\"choices\": [{\"delta\": {\"content\": \"a\"}, \"finish_reason\": \"stop\"}]}\n\n";
    let s = read_all(Dialect::OpenAi, body.as_bytes());
    assert_eq!(
        (s.content_events, s.finish_reason.as_deref()),
        (1, Some("stop"))
    );
}

#[test]
fn keys_inside_text_are_not_fields() {
    let body = r#"data: {"choices":[{"delta":{"content":"say \"finish_reason\":\"x\", \"usage\":{}"},"finish_reason":null}]}"#;
    let s = read_all(Dialect::OpenAi, format!("{body}\n\n").as_bytes());
    assert_eq!(
        (s.content_events, s.finish_reason, s.output_tokens_estimated),
        (1, None, true)
    );
}

#[test]
fn oversized_event_is_dropped_and_the_rest_read() {
    let mut meter = TokenMeter::new(Dialect::OpenAi);
    meter.feed(b"data: {\"content\":\"", ms(1));
    let filler = vec![b'a'; 64 * 1024];
    for _ in 0..20 {
        meter.feed(&filler, ms(2));
    }
    meter.feed(b"\"}\n", ms(3));
    meter.feed(format!("\n{CHUNK}\n\ndata: [DONE]\n\n").as_bytes(), ms(4));
    let s = meter.finish(ms(5));
    assert_eq!(
        (s.content_events, s.malformed_events, s.clean_end),
        (1, 1, true)
    );
}

#[test]
fn json_answers() {
    let openai = br#"{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}"#;
    let mut meter = TokenMeter::new(Dialect::Json);
    meter.feed(&openai[..40], ms(1));
    assert_eq!(meter.feed(&openai[40..], ms(2)), 0);
    let s = meter.finish(ms(3));
    let expected = MeterSummary {
        dialect: Dialect::Json,
        input_tokens: Some(9),
        output_tokens: Some(2),
        finish_reason: some("stop"),
        response_model: some("gpt-4o"),
        clean_end: true,
        ..MeterSummary::default()
    };
    assert_eq!(s, expected);

    let anthropic = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-3-5-haiku","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":3}}"#;
    let s = read_all(Dialect::Json, anthropic);
    assert_eq!(
        (s.input_tokens, s.output_tokens, s.finish_reason.as_deref()),
        (Some(5), Some(3), Some("end_turn"))
    );

    let tgi =
        br#"{"generated_text":"Hi","details":{"finish_reason":"length","generated_tokens":4}}"#;
    let s = read_all(Dialect::Json, tgi);
    assert_eq!(
        (s.output_tokens, s.finish_reason.as_deref()),
        (Some(4), Some("length"))
    );

    let s = read_all(Dialect::Json, br#"{"choices":[{"#);
    assert_eq!(
        (s.clean_end, s.malformed_events, s.output_tokens),
        (false, 1, None)
    );
    assert_eq!(
        read_all(Dialect::Json, b""),
        MeterSummary {
            dialect: Dialect::Json,
            ..MeterSummary::default()
        }
    );
}

#[test]
fn json_answer_over_the_limit_is_not_read() {
    let mut meter = TokenMeter::new(Dialect::Json);
    meter.feed(b"{\"pad\":\"", ms(1));
    meter.feed(&vec![b'a'; frame::MAX_WHOLE], ms(2));
    meter.feed(b"\",\"usage\":{\"completion_tokens\":1}}", ms(3));
    let s = meter.finish(ms(4));
    assert_eq!(
        (s.clean_end, s.malformed_events, s.output_tokens),
        (false, 1, None)
    );
}

#[test]
fn unknown_reads_nothing() {
    let f = fixture("openai_chat.sse");
    let s = read_all(Dialect::Unknown, f.bytes);
    assert_eq!(s, MeterSummary::default());
}

#[test]
fn finish_twice_gives_the_same_summary_and_later_chunks_are_ignored() {
    let mut meter = TokenMeter::new(Dialect::Json);
    meter.feed(b"{\"model\":", ms(1));
    let first = meter.finish(ms(2));
    assert_eq!(meter.feed(CHUNK.as_bytes(), ms(3)), 0);
    assert_eq!(meter.finish(ms(4)), first);
    assert_eq!(first.malformed_events, 1);
}

#[test]
fn anthropic_without_event_lines_uses_the_type_field() {
    let f = fixture("anthropic_messages.sse");
    let body: Vec<u8> = f
        .bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.starts_with(b"event:"))
        .flat_map(|line| line.iter().copied().chain([b'\n']))
        .collect();
    let (with_names, _) = by_event(f.bytes, Dialect::Anthropic);
    let (without, _) = by_event(&body, Dialect::Anthropic);
    assert_eq!(with_names, without);
}
