use std::time::Duration;

use serde_json::json;

use super::*;

#[test]
fn reads_text_from_an_openai_stream_split_across_events() {
    let body = b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\"Hello\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\" world\"}}]}\n\n\
data: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
    assert_eq!(answer_text(body).as_deref(), Some("Hello world"));
}

#[test]
fn reads_text_from_crlf_anthropic_and_ollama_streams() {
    let anthropic = b"event: content_block_delta\r\ndata: {\"delta\":{\"text\":\"Hel\"}}\r\n\r\n\
event: content_block_delta\r\ndata: {\"delta\":{\"text\":\"lo\"}}\r\n\r\n";
    assert_eq!(answer_text(anthropic).as_deref(), Some("Hello"));
    let ollama = b"{\"message\":{\"content\":\"a\"},\"done\":false}\n\
{\"message\":{\"content\":\"b\"},\"done\":false}\n{\"done\":true}\n";
    assert_eq!(answer_text(ollama).as_deref(), Some("ab"));
}

#[test]
fn reads_text_from_json_answers_of_each_shape() {
    let openai = json!({"choices":[{"message":{"content":"hi there"}}]}).to_string();
    assert_eq!(answer_text(openai.as_bytes()).as_deref(), Some("hi there"));
    let anthropic = json!({"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]});
    assert_eq!(
        answer_text(anthropic.to_string().as_bytes()).as_deref(),
        Some("ab")
    );
    let tgi = json!({"generated_text":"tgi"}).to_string();
    assert_eq!(answer_text(tgi.as_bytes()).as_deref(), Some("tgi"));
    assert_eq!(answer_text(b"plain bytes"), None);
}

#[test]
fn similarity_is_token_set_jaccard() {
    assert_eq!(similarity("The cat sat.", "the CAT sat"), 1.0);
    assert_eq!(similarity("", ""), 1.0);
    assert_eq!(similarity("a b", "c d"), 0.0);
    // {a, b, c} vs {b, c, d}: 2 shared of 4.
    assert_eq!(similarity("a b c", "b c d"), 0.5);
}

#[test]
fn ids_by_pointer_with_wildcards() {
    let doc = json!({"results":[{"id":"a"},{"id":7},{"name":"no id"}],"ids":[["x","y"],["z"]]});
    assert_eq!(ids_at(&doc, "/results/*/id"), vec!["a", "7"]);
    assert_eq!(ids_at(&doc, "/ids/0/*"), vec!["x", "y"]);
    assert_eq!(ids_at(&doc, "/ids/*/*"), vec!["x", "y", "z"]);
    assert!(ids_at(&doc, "/missing/*").is_empty());
}

#[test]
fn recall_at_k_counts_the_primary_ids_in_the_shadow_top_k() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(recall_at_k(&s(&["a", "b"]), &s(&["b", "a"])), 1.0);
    assert_eq!(recall_at_k(&s(&["a", "b"]), &s(&["a", "c", "b"])), 0.5);
    assert_eq!(recall_at_k(&s(&[]), &s(&[])), 1.0);
    assert_eq!(recall_at_k(&s(&[]), &s(&["a"])), 0.0);
}

fn leg(status: u16, ms: u64, text: &str) -> Leg {
    Leg {
        status,
        latency: Duration::from_millis(ms),
        ttft: Some(Duration::from_millis(ms / 2)),
        output_tokens: Some(text.split(' ').count() as u64),
        text: Some(text.into()),
        ids: None,
        grpc_status: None,
        message: None,
    }
}

#[test]
fn compares_every_figure() {
    let c = compare(&leg(200, 100, "a b c"), &leg(503, 200, "a b"));
    assert!(!c.same_status_class);
    assert_eq!(c.latency_ratio, Some(2.0));
    assert_eq!(c.ttft_ratio, Some(2.0));
    assert_eq!(c.output_token_delta, Some(-1));
    assert!((c.similarity.unwrap_or(0.0) - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(c.recall, None);
}

#[test]
fn a_difference_counts_only_beyond_the_noise_floor() {
    let primary = leg(200, 100, "a b c d");
    let shadow = compare(&primary, &leg(200, 100, "a b c e"));
    // No noise copies: any text change is a difference.
    assert_eq!(
        differences(&shadow, &NoiseFloor::default(), 1.0),
        vec!["text"]
    );
    // Two identical calls to the primary differed as much: not a difference.
    let noise = [compare(&primary, &leg(200, 100, "a b c f"))];
    let floor = NoiseFloor::from_noise(&noise);
    assert!(differences(&shadow, &floor, 1.0).is_empty());
    // Identical answers never differ.
    let same = compare(&primary, &primary);
    assert!(differences(&same, &NoiseFloor::default(), 1.0).is_empty());
    // A status change is one unless the primary's own status flaps.
    let failed = compare(&primary, &leg(500, 100, "a b c d"));
    assert_eq!(
        differences(&failed, &NoiseFloor::default(), 1.0),
        vec!["status"]
    );
    let flapping = NoiseFloor {
        status_flaps: true,
        ..NoiseFloor::default()
    };
    assert!(differences(&failed, &flapping, 1.0).is_empty());
}

#[test]
fn fingerprints_do_not_depend_on_chunking() {
    assert_eq!(
        fingerprint(&[&b"abc"[..]]),
        fingerprint(&[&b"a"[..], &b"bc"[..]])
    );
    assert_ne!(fingerprint(&[&b"abc"[..]]), fingerprint(&[&b"abd"[..]]));
}

/// A unary gRPC call: status 200 always, the code in `grpc-status`.
fn call(code: u32, message: &str) -> Leg {
    Leg {
        status: 200,
        latency: Duration::from_millis(10),
        grpc_status: Some(code),
        message: Some(fingerprint(&[message.as_bytes()])),
        ..Leg::default()
    }
}

#[test]
fn grpc_calls_differ_by_status_code_and_message_bytes() {
    let primary = call(0, "reply");
    assert!(differences(&compare(&primary, &primary), &NoiseFloor::default(), 1.0).is_empty());
    // HTTP 200 both ways, yet UNAVAILABLE is not OK.
    let failed = compare(&primary, &call(14, "reply"));
    assert_eq!(
        differences(&failed, &NoiseFloor::default(), 1.0),
        vec!["grpc_status"]
    );
    let other = compare(&primary, &call(0, "other"));
    assert_eq!(
        differences(&other, &NoiseFloor::default(), 1.0),
        vec!["message"]
    );
    // A server stream (no single message) is not compared by bytes.
    let stream = Leg {
        message: None,
        ..call(0, "x")
    };
    assert_eq!(compare(&primary, &stream).message_differs, None);
    // Two identical calls to the primary differed so too: not a difference.
    let noise = [compare(&primary, &call(14, "other"))];
    let floor = NoiseFloor::from_noise(&noise);
    assert!(floor.grpc_status_flaps && floor.message_flaps);
    assert!(differences(&failed, &floor, 1.0).is_empty());
    assert!(differences(&other, &floor, 1.0).is_empty());
}
