//! The recorder on real client traffic: the official OpenAI SDK holds three
//! multi-turn chat sessions (streamed and whole answers, a pause between
//! turns, an email and an API key in every prompt) through sluice with
//! `recorder:` on. The trace has one line per request, each session's
//! turns with their think times, token counts equal to the `usage` the
//! client got, and no secret.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_filters::{parse_lines, TraceLine};
use sluice_proxy::Sluice;

use crate::harness::{self, Admin};
use crate::support::{self, TempDir};

const SESSIONS: usize = 3;
const TURNS: usize = 3;
/// The client's pause between rounds of turns, in seconds.
const PAUSE_S: f64 = 0.25;

const SCRIPT: &str = r#"
import json, sys, time
import openai

port, sessions, turns, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-client-key-never-recorded", max_retries=0, timeout=30)
history = {s: [] for s in range(sessions)}
seen = []
for turn in range(turns):
    for s in range(sessions):
        prompt = f"turn {turn}: I am user{s}@example.com, my key is sk-proj-{s}abcdefghijklmnopqrstuvwxyz0123456789; summarise."
        if turn == 0:
            # A shared preamble longer than a hash block (2 KiB).
            prompt = "Context: " + "the quick brown fox jumps over the lazy dog. " * 60 + prompt
        history[s].append({"role": "user", "content": prompt})
        headers = {"x-session-id": f"session-{s}"}
        if (turn + s) % 2 == 0:
            stream = client.chat.completions.create(
                model="mock-llm", messages=history[s], stream=True,
                stream_options={"include_usage": True}, extra_headers=headers,
            )
            text, usage = "", None
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    text += chunk.choices[0].delta.content
                if chunk.usage is not None:
                    usage = chunk.usage
        else:
            whole = client.chat.completions.create(model="mock-llm", messages=history[s], extra_headers=headers)
            text, usage = whole.choices[0].message.content, whole.usage
        history[s].append({"role": "assistant", "content": text})
        seen.append({"session": f"session-{s}", "turn": turn, "prompt_tokens": usage.prompt_tokens,
                     "completion_tokens": usage.completion_tokens})
    time.sleep(pause)
print(json.dumps(seen))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_sessions_are_recorded_whole_and_redacted() {
    let Some(python) = support::python() else {
        support::require("python with openai (.venv)", false);
        return;
    };
    let dir = TempDir::new("recorder");
    let trace = dir.path().join("trace.jsonl");
    let mock = MockLlm::start(MockLlmOptions::paced_ms(10, 2, 8))
        .await
        .unwrap();
    let sluice = recording_sluice(mock.addr(), &trace);
    let port = harness::listener(&sluice, "public").port();
    let admin = Admin::new(&sluice);
    // The control plane starts the config's recording as it starts.
    let (status, body) = poll_recording(&admin).await;
    assert_eq!(
        (status, &body["source"]),
        (200, &Value::from("config")),
        "{body}"
    );

    let mut command = std::process::Command::new(python);
    command.args([
        "-c",
        SCRIPT,
        &port.to_string(),
        &SESSIONS.to_string(),
        &TURNS.to_string(),
        &PAUSE_S.to_string(),
    ]);
    let seen = support::run_json(command).await;
    let seen = seen.as_array().expect("the script's list");
    assert_eq!(seen.len(), SESSIONS * TURNS);

    // Lines are queued when sluice logs a request, a moment after the client
    // is done; DELETE writes what is queued and closes the file.
    let lines_metric = |t: &str| harness::metric_value(t, "sluice_recorder_lines_total", &[]);
    harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        lines_metric(t) == Some(seen.len() as f64)
    })
    .await;
    let (status, stopped) = admin.delete("/v1/recorder").await;
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["lines"], seen.len(), "{stopped}");
    assert_eq!(stopped["dropped_queue_full"], 0, "{stopped}");
    assert_eq!(admin.delete("/v1/recorder").await.0, 404);

    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<TraceLine> = parse_lines(&text).map(Result::unwrap).collect();
    assert_eq!(lines.len(), SESSIONS * TURNS, "{text}");
    for secret in ["@example.com", "sk-proj-", "sk-client-key"] {
        assert!(!text.contains(secret), "`{secret}` survived: {text}");
    }
    assert!(text.contains("<email:"), "{text}");

    let mut by_session: HashMap<&str, Vec<&TraceLine>> = HashMap::new();
    for line in &lines {
        let session = line.session_id.as_deref().expect("a session id");
        by_session.entry(session).or_default().push(line);
    }
    assert_eq!(by_session.len(), SESSIONS, "{text}");
    for turns in by_session.values_mut() {
        turns.sort_by_key(|l| l.arrival_us);
    }
    for want in seen {
        let session = want["session"].as_str().unwrap();
        let turn = want["turn"].as_u64().unwrap() as usize;
        let line = by_session[session][turn];
        let at = format!("{session} turn {turn}: {line:?}");
        assert_eq!(line.route.as_deref(), Some("chat"), "{at}");
        assert_eq!(line.status, Some(200), "{at}");
        assert_eq!(line.input_tokens, want["prompt_tokens"].as_u64(), "{at}");
        assert_eq!(
            line.output_tokens,
            want["completion_tokens"].as_u64(),
            "{at}"
        );
        assert!(
            !line.input_tokens_estimated && !line.output_tokens_estimated,
            "{at}"
        );
        assert_eq!(line.messages, Some(2 * turn as u32 + 1), "{at}");
        assert!(!line.hash_ids.is_empty(), "{at}");
        assert!(line.body.is_some(), "{at}");
        match turn {
            0 => assert_eq!(line.think_time_ms, None, "{at}"),
            _ => {
                // At least the client's pause; far less than a second more.
                let think = line.think_time_ms.expect("a think time");
                assert!(
                    (PAUSE_S * 1000.0..PAUSE_S * 1000.0 + 2000.0).contains(&think),
                    "{at}"
                );
            }
        }
        // Every prompt starts with the same preamble, whole blocks of it.
        let first = by_session[session][0];
        assert_eq!(line.hash_ids.first(), first.hash_ids.first(), "{at}");
    }
}

/// `GET /v1/recorder` until a recording runs (the control plane starts the
/// config's a moment after the listeners).
/// sluice in front of the LLM at `upstream`, its config recording every
/// request to `trace`.
pub(crate) fn recording_sluice(upstream: SocketAddr, trace: &Path) -> Sluice {
    harness::llm_config(upstream)
        .section(
            "recorder",
            format!("{{ path: \"{}\", percent: 100 }}", trace.display()),
        )
        .start()
}

/// `GET /v1/recorder` once it shows a recording (5 s at most).
pub(crate) async fn poll_recording(admin: &Admin) -> (u16, Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (status, body) = admin.get("/v1/recorder").await;
        if body["recording"] == true || tokio::time::Instant::now() > deadline {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
