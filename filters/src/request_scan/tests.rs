#![allow(clippy::unwrap_used)]

use sha2::{Digest, Sha256};

use super::*;

fn sha(text: &str) -> Option<String> {
    Some(hex(&Sha256::digest(text.as_bytes())))
}

#[test]
fn chat_body_with_string_and_part_contents() {
    let body = br#"{"model":"gpt-4o-mini","stream":true,"temperature":0.70,
        "messages":[{"role":"system","content":"Be brief."},
                    {"role":"user","content":[{"type":"text","text":"Caf\u00e9?"},
                        {"type":"image_url","image_url":{"url":"data:x"}}]}],
        "stream_options":{"include_usage":true}}"#;
    let info = scan_request(body);
    assert_eq!(
        info,
        RequestInfo {
            model: Some("gpt-4o-mini".into()),
            stream: true,
            temperature: Some(0.7),
            prompt_fingerprint: sha("Be brief.\nCafé?\ngpt-4o-mini\n0.70"),
            input_chars: 14,
            max_tokens: None,
        }
    );
    assert!(
        !format!("{info:?}").contains("brief"),
        "the prompt is never kept"
    );
}

#[test]
fn temperature_is_hashed_as_written() {
    let a = scan_request(br#"{"model":"m","prompt":"p","temperature":0.7}"#);
    let b = scan_request(br#"{"model":"m","prompt":"p","temperature":0.70}"#);
    assert_eq!(a.temperature, b.temperature);
    assert_ne!(a.prompt_fingerprint, b.prompt_fingerprint);
    assert_eq!(a.prompt_fingerprint, sha("p\nm\n0.7"));
}

#[test]
fn prompt_input_and_system_forms() {
    // OpenAI completions with a list of prompts; absent temperature hashes empty.
    let info = scan_request(br#"{"model":"m","prompt":["a","b"]}"#);
    assert_eq!(
        (info.prompt_fingerprint, info.input_chars, info.stream),
        (sha("a\nb\nm\n"), 2, false)
    );
    // Ollama /api/generate.
    let info = scan_request(br#"{"model":"llama3.2","system":"S","prompt":"P"}"#);
    assert_eq!(info.prompt_fingerprint, sha("S\nP\nllama3.2\n"));
    // Anthropic: system blocks and content blocks.
    let info = scan_request(
        br#"{"model":"c","max_tokens":9,"system":[{"type":"text","text":"S"}],
            "messages":[{"role":"user","content":[{"type":"text","text":"Q"}]}]}"#,
    );
    assert_eq!(info.prompt_fingerprint, sha("S\nQ\nc\n"));
    // Responses-style input messages; token-id prompts carry no text.
    let info = scan_request(br#"{"model":"m","input":[{"role":"user","content":"hi"}]}"#);
    assert_eq!(info.prompt_fingerprint, sha("hi\nm\n"));
    let info = scan_request(br#"{"model":"m","prompt":[1,2,3]}"#);
    assert_eq!(
        (info.prompt_fingerprint, info.input_chars),
        (sha("\nm\n"), 0)
    );
}

#[test]
fn truncated_body_still_names_the_model() {
    let body =
        br#"{"stream": true, "model" : "gpt-4o", "messages":[{"role":"user","content":"long"#;
    let info = scan_request(body);
    assert_eq!(
        info,
        RequestInfo {
            model: Some("gpt-4o".into()),
            stream: true,
            ..RequestInfo::default()
        }
    );
    assert_eq!(scan_request(b"not json"), RequestInfo::default());
    assert_eq!(scan_request(b""), RequestInfo::default());
}

#[test]
fn with_model_replaces_only_the_top_level_model() {
    let cases: [(&[u8], Option<&str>); 7] = [
        (
            br#"{"model": "gpt-4o", "messages":[{"model":"inner"}]}"#,
            Some(r#"{"model": "ckpt-2", "messages":[{"model":"inner"}]}"#),
        ),
        (
            br#" {"stream":true,"model":null}"#,
            Some(r#" {"stream":true,"model":"ckpt-2"}"#),
        ),
        (
            br#"{"messages":[]}"#,
            Some(r#"{"model":"ckpt-2","messages":[]}"#),
        ),
        (br#"{ }"#, Some(r#"{"model":"ckpt-2" }"#)),
        (br#"{"model":"a\u0041"}"#, Some(r#"{"model":"ckpt-2"}"#)),
        (b"[1,2]", None),
        (b"{\"model\": \"cut", None),
    ];
    for (body, want) in cases {
        let got = with_model(body, "ckpt-2").map(|b| String::from_utf8(b).unwrap());
        assert_eq!(got.as_deref(), want, "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn max_tokens_or_max_completion_tokens() {
    let info = scan_request(br#"{"model":"m","max_tokens":64}"#);
    assert_eq!(info.max_tokens, Some(64));
    let info = scan_request(br#"{"max_tokens":64,"max_completion_tokens":32}"#);
    assert_eq!(info.max_tokens, Some(32));
    assert_eq!(scan_request(br#"{"model":"m"}"#).max_tokens, None);
}
