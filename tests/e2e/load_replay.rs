//! Replay from a recording, end to end: a client's sessions go through the
//! real sluice proxy (recorder on) to the mock LLM; the `sluice` binary
//! then replays the trace into a second mock at `--speed 2`. Every
//! recorded request arrives with its recorded prompt and its recorded
//! output length as `max_tokens`, each session in order, and `run.json`
//! says what was replayed.

use std::time::Duration;

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::cli;
use crate::harness::{self, Admin};
use crate::recorder::{poll_recording, recording_sluice};
use crate::support::TempDir;

/// Three sessions of two turns, and two requests without a session.
const SENT: [(&str, Option<&str>); 8] = [
    ("one", Some("s-a")),
    ("two", Some("s-b")),
    ("three", Some("s-a")),
    ("four", None),
    ("five", Some("s-c")),
    ("six", Some("s-b")),
    ("seven", None),
    ("eight", Some("s-c")),
];

fn recording_mock() -> MockLlmOptions {
    MockLlmOptions {
        record: true,
        ..MockLlmOptions::paced_ms(2, 1, 5)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_trace_replays_through_sluice_load() {
    let dir = TempDir::new("load-replay");
    let trace = dir.path().join("trace.jsonl");
    let upstream = MockLlm::start(recording_mock()).await.unwrap();
    let sluice = recording_sluice(upstream.addr(), &trace);
    let admin = Admin::new(&sluice);
    let (status, recording) = poll_recording(&admin).await;
    assert_eq!(status, 200, "the recording never started: {recording}");
    let url = format!(
        "http://{}/v1/chat/completions",
        harness::listener(&sluice, "public")
    );
    let client = reqwest::Client::new();
    for (i, (word, session)) in SENT.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        let body = json!({
            "model": "mock-llm",
            "messages": [{"role": "user", "content": format!("say {word}")}],
            "max_tokens": 1 + i % 3,
        });
        let mut req = client.post(&url).json(&body);
        if let Some(s) = session {
            req = req.header("x-session-id", *s);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let lines = |t: &str| harness::metric_value(t, "sluice_recorder_lines_total", &[]);
    harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        lines(t) == Some(SENT.len() as f64)
    })
    .await;
    let (status, _) = admin.delete("/v1/recorder").await;
    assert_eq!(status, 200);

    let target = MockLlm::start(recording_mock()).await.unwrap();
    let scenario = dir.path().join("replay.yaml");
    std::fs::write(
        &scenario,
        format!(
            "scenario: replayed\n\
             target: {{ base_url: 'http://{}' }}\n\
             workload: {{ replay: trace.jsonl, seed: 1 }}\n\
             thresholds: {{ error_rate: 1% }}\n",
            target.addr()
        ),
    )
    .unwrap();
    let out = cli::sluice(vec!["validate".into(), scenario.display().to_string()]).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "{}: valid scenario `replayed` (replay of trace.jsonl: 8 recorded requests in 5 \
             journeys, 1 thresholds)",
            scenario.display()
        )
    );
    let run = dir.path().join("run.json");
    let out = cli::sluice(vec![
        "load".into(),
        scenario.display().to_string(),
        "--speed".into(),
        "2".into(),
        "-o".into(),
        run.display().to_string(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");

    // What the target got: every prompt once, with the recorded output
    // length as max_tokens, and each session's turns in order.
    let seen: Vec<Value> = target
        .seen()
        .iter()
        .map(|s| serde_json::from_slice(&s.body).unwrap())
        .collect();
    assert_eq!(seen.len(), SENT.len());
    let said = |b: &Value| b["messages"][0]["content"].as_str().unwrap().to_owned();
    for (i, (word, _)) in SENT.iter().enumerate() {
        let b = seen
            .iter()
            .find(|b| said(b) == format!("say {word}"))
            .unwrap_or_else(|| panic!("`say {word}` was not replayed: {seen:?}"));
        assert_eq!(b["max_tokens"], json!(1 + i % 3), "{b}");
    }
    let order: Vec<String> = seen.iter().map(said).collect();
    let at = |w: &str| order.iter().position(|s| *s == format!("say {w}")).unwrap();
    for (first, then) in [("one", "three"), ("two", "six"), ("five", "eight")] {
        assert!(at(first) < at(then), "{order:?}");
    }

    let report: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    assert_eq!(
        report["summary"]["completed"],
        json!(SENT.len()),
        "{report}"
    );
    assert_eq!(report["dispatch"]["journeys"], json!(5));
    assert_eq!(report["steps"][0]["name"], "replay");
    assert_eq!(report["warnings"], json!([]));
    let replay = &report["replay"];
    assert_eq!(replay["file"], "trace.jsonl");
    assert_eq!(replay["speed"], json!(2.0));
    assert_eq!(replay["recorded_requests"], json!(SENT.len()));
    assert_eq!(replay["planned_journeys"], json!(5));
    assert_eq!(report["passed"], json!(true));
}

/// Mooncake rows: `timestamp` (ms), `input_length`, `output_length`,
/// `hash_ids`. Rows 0 and 1 share block 1, row 2 has blocks of its own.
const MOONCAKE: [(u64, u64, u64, &[u64]); 3] = [
    (0, 300, 20, &[1]),
    (40, 700, 5, &[1, 2]),
    (80, 900, 8, &[3, 4]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converted_mooncake_trace_replays_with_prompts_of_its_recorded_sizes() {
    let dir = TempDir::new("load-replay-mooncake");
    let rows: String = MOONCAKE
        .iter()
        .map(|(ms, input, output, ids)| {
            json!({"timestamp": ms, "input_length": input, "output_length": output,
                   "hash_ids": ids})
            .to_string()
                + "\n"
        })
        .collect();
    let mooncake = dir.write("mooncake.jsonl", &rows);
    let trace = dir.path().join("trace.jsonl");
    let out = cli::sluice(
        [
            "trace",
            "convert",
            &mooncake.display().to_string(),
            &trace.display().to_string(),
            "--to",
            "sluice",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let target = MockLlm::start(recording_mock()).await.unwrap();
    let scenario = dir.path().join("replay.yaml");
    std::fs::write(
        &scenario,
        format!(
            "scenario: mooncake\n\
             target: {{ base_url: 'http://{}' }}\n\
             workload: {{ replay: trace.jsonl, seed: 3 }}\n\
             replay_step: {{ model: mock-llm, timeout: 10s, thresholds: {{ error_rate: 1% }} }}\n",
            target.addr()
        ),
    )
    .unwrap();
    let run = dir.path().join("run.json");
    let out = cli::sluice(vec![
        "load".into(),
        scenario.display().to_string(),
        "-o".into(),
        run.display().to_string(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    // Each row went as a streamed chat completion: a user message of its
    // recorded input length in filler words, its output length as max_tokens.
    let mut seen: Vec<Value> = target
        .seen()
        .iter()
        .map(|s| {
            assert_eq!(s.path, "/v1/chat/completions");
            serde_json::from_slice(&s.body).unwrap()
        })
        .collect();
    assert_eq!(seen.len(), MOONCAKE.len());
    let words = |b: &Value| -> Vec<String> {
        let text = b["messages"][0]["content"].as_str().unwrap();
        text.split_whitespace().map(str::to_owned).collect()
    };
    seen.sort_by_key(|b| words(b).len());
    for (b, (_, input, output, _)) in seen.iter().zip(MOONCAKE) {
        assert_eq!(words(b).len() as u64, input, "{b}");
        assert_eq!(b["max_tokens"], json!(output), "{b}");
        assert_eq!(b["stream"], json!(true));
        assert_eq!(b["stream_options"]["include_usage"], json!(true));
        assert_eq!(b["model"], "mock-llm");
        assert_eq!(b["messages"][0]["role"], "user");
    }
    // Rows sharing hash block 1 share its words; row 2 starts otherwise.
    let (w0, w1, w2) = (words(&seen[0]), words(&seen[1]), words(&seen[2]));
    assert_eq!(w1[..300], w0[..]);
    assert_ne!(w2[..300], w0[..]);

    // The server's usage (the mock counts the prompt's words) is the trace's.
    let report: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    let recorded: u64 = MOONCAKE.iter().map(|r| r.1).sum();
    assert_eq!(
        report["summary"]["total_input_tokens"],
        json!(recorded),
        "{report}"
    );
    assert_eq!(report["summary"]["completed"], json!(MOONCAKE.len()));
    let step = &report["thresholds"][0];
    assert_eq!(
        (&step["step"], &step["name"], &step["passed"]),
        (&json!("replay"), &json!("error_rate"), &json!(true)),
        "{report}"
    );
}
