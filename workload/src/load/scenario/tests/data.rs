//! `data: { NAME: { trace: FILE, field: F } }`: the prompts of a trace's
//! recorded bodies, in file order; lines without one skipped and counted;
//! a trace with none, or a variable with two sources, named by its path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use super::*;
use crate::trace::PromptField;

const DATA: &str =
    "data: { query: { values: [what is sluice, why open loop], order: sequential } }";

/// A chat body's line at `us` whose user messages are `users`.
fn chat(i: usize, users: &[&str]) -> String {
    let messages: Vec<String> = users
        .iter()
        .flat_map(|u| {
            [
                format!(r#"{{"role":"user","content":"{u}"}}"#),
                r#"{"role":"assistant","content":"ok"}"#.to_owned(),
            ]
        })
        .collect();
    format!(
        r#"{{"v":1,"request_id":"r{i}","arrival_us":{i},"body":{{"model":"m","messages":[{}]}}}}"#,
        messages.join(",")
    ) + "\n"
}

fn line(i: usize, rest: &str) -> String {
    format!(r#"{{"v":1,"request_id":"r{i}","arrival_us":{i}{rest}}}"#) + "\n"
}

/// A directory holding `t.jsonl` with `text`.
fn trace_dir(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-data-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.jsonl"), text).unwrap();
    dir
}

fn with_data(data: &str) -> String {
    assert!(GOOD.contains(DATA));
    GOOD.replace(DATA, data)
}

fn read(data: &str, dir: &Path) -> Result<Scenario, Vec<String>> {
    Scenario::from_yaml(&with_data(data), dir, &env)
        .map_err(|e| e.0.iter().map(ToString::to_string).collect())
}

/// A chat of two turns, a completion, a line without a body, an embedding
/// body (no prompt), and a one-turn chat with content parts.
fn mixed_trace() -> String {
    [
        chat(0, &["first <email:0123abcd0123> question", "its follow-up"]),
        line(1, r#","body":{"model":"m","prompt":"once upon"}"#),
        line(2, r#","input_tokens":300"#),
        line(3, r#","body":{"model":"m","input":"embed me"}"#),
        line(
            4,
            r#","body":{"messages":[{"role":"user","content":[{"type":"text","text":"part one"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"part two"}]}]}"#,
        ),
    ]
    .concat()
}

#[test]
fn a_trace_gives_the_prompts_of_its_bodies_in_file_order() {
    let dir = trace_dir("good", &mixed_trace());
    let s = read(
        "data: { query: { trace: t.jsonl, order: sequential } }",
        &dir,
    )
    .unwrap();
    let query = &s.data["query"];
    assert_eq!(
        query.values,
        ["its follow-up", "once upon", "part one\npart two"]
    );
    assert!(query.sequential);
    // The line without a body and the embedding are skipped and counted.
    assert_eq!(
        query.from_trace,
        Some(TraceData {
            file: "t.jsonl".into(),
            field: PromptField::LastUser,
            lines: 5,
            without_body: 1,
            without_prompt: 1,
        })
    );
    assert_eq!(
        s.warnings(),
        [
            "data.query: 2 of 5 lines of t.jsonl gave no value and were skipped (1 without a \
          body, 1 with a body but no user prompt)"
        ]
    );
    // Without `order`, drawn uniformly with the seed.
    let random = read("data: { query: { trace: t.jsonl } }", &dir).unwrap();
    assert!(!random.data["query"].sequential);
    assert_eq!(random.data["query"].values, query.values);
}

#[test]
fn the_field_chooses_which_prompt_of_a_body() {
    let dir = trace_dir("field", &mixed_trace());
    let values = |field: &str| {
        let data = format!("data: {{ query: {{ trace: t.jsonl, field: {field} }} }}");
        read(&data, &dir).unwrap().data["query"].clone()
    };
    assert_eq!(
        values("all_user").values,
        [
            "first <email:0123abcd0123> question\n\nits follow-up",
            "once upon",
            "part one\npart two"
        ]
    );
    let prompt = values("prompt");
    assert_eq!(prompt.values, ["once upon"]);
    let counts = prompt.from_trace.unwrap();
    assert_eq!((counts.without_body, counts.without_prompt), (1, 3));
    assert_eq!(
        read("data: { query: { trace: t.jsonl, field: system } }", &dir).unwrap_err(),
        ["data.query.field: must be one of last_user, all_user, prompt, found `system`"]
    );
}

#[test]
fn a_trace_without_a_usable_prompt_is_an_error_that_says_why() {
    let bodiless: String = (0..1204).map(|i| line(i, r#","input_tokens":9"#)).collect();
    let dir = trace_dir("none", &bodiless);
    std::fs::rename(dir.join("t.jsonl"), dir.join("prod.jsonl")).unwrap();
    assert_eq!(
        read("data: { query: { trace: prod.jsonl } }", &dir).unwrap_err(),
        [
            "data.query.trace: prod.jsonl: no line has a chat or completion body with a user \
             prompt (1,204 lines, 1,204 without a body)"
        ]
    );
    // A Mooncake trace, read by the same reader, has no bodies either.
    let mooncake = "{\"timestamp\":0,\"input_length\":10,\"output_length\":2,\"hash_ids\":[1]}\n\
                    {\"timestamp\":5,\"input_length\":12,\"output_length\":3,\"hash_ids\":[1]}\n";
    let dir = trace_dir("mooncake", mooncake);
    assert_eq!(
        read("data: { query: { trace: t.jsonl } }", &dir).unwrap_err(),
        [
            "data.query.trace: t.jsonl: no line has a chat or completion body with a user \
             prompt (2 lines, 2 without a body)"
        ]
    );
    // Chat bodies alone, asked for a completion's prompt.
    let dir = trace_dir("chats", &[chat(0, &["a"]), line(1, "")].concat());
    assert_eq!(
        read("data: { query: { trace: t.jsonl, field: prompt } }", &dir).unwrap_err(),
        [
            "data.query.trace: t.jsonl: no line has a completion body with a `prompt` (2 lines, \
             1 without a body, 1 with a body but no prompt)"
        ]
    );
}

#[test]
fn a_bad_or_missing_trace_is_named_with_its_line() {
    let bad = [chat(0, &["a"]), line(1, r#","tokens":3"#)].concat();
    let dir = trace_dir("bad", &bad);
    let err = read("data: { query: { trace: t.jsonl } }", &dir).unwrap_err();
    assert_eq!(err.len(), 1);
    assert!(
        err[0].starts_with("data.query.trace: t.jsonl:2: ")
            && err[0].contains("unknown field `tokens`"),
        "{err:?}"
    );
    assert_eq!(
        read("data: { query: { trace: nope.jsonl } }", &dir).unwrap_err(),
        ["data.query.trace: nope.jsonl: No such file or directory (os error 2)"]
    );
}

#[test]
fn a_variable_takes_exactly_one_source() {
    let dir = trace_dir("sources", &mixed_trace());
    assert_eq!(
        read("data: { query: { values: [a], trace: t.jsonl } }", &dir).unwrap_err(),
        ["data.query: needs exactly one of `file`, `values` and `trace`, found values, trace"]
    );
    assert_eq!(
        read(
            "data: { query: { file: q.txt, values: [a], trace: t.jsonl } }",
            &dir
        )
        .unwrap_err(),
        [
            "data.query: needs exactly one of `file`, `values` and `trace`, found file, values, \
             trace"
        ]
    );
    assert_eq!(
        read("data: { query: { order: sequential } }", &dir).unwrap_err(),
        ["data.query: needs exactly one of `file`, `values` and `trace`, found none"]
    );
    assert_eq!(
        read("data: { query: { values: [a], field: prompt } }", &dir).unwrap_err(),
        ["data.query.field: is for `trace` (which prompt of its bodies)"]
    );
}

#[test]
fn the_data_example_in_the_docs_reads() {
    let docs = include_str!("../../../../../docs/workload.md");
    let after = docs.split("### Data from a trace").nth(1).unwrap();
    let yaml = after.split("```yaml\n").nth(1).unwrap();
    let yaml = yaml.split("```").next().unwrap().trim();
    let dir = trace_dir("docs", &mixed_trace());
    std::fs::rename(dir.join("t.jsonl"), dir.join("prod.jsonl")).unwrap();
    let s = read(yaml, &dir).unwrap();
    assert_eq!(s.data["query"].values[0], "its follow-up");
    assert!(s.data["query"].sequential);
}
