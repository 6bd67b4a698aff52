//! `sluice load` of a replay scenario against the mock: the flags are
//! refused without one, the quantised warning and the replay's flags reach
//! the result, and the mock gets the recorded bodies.

use super::*;

/// Six chat requests of two sessions: three pairs, each pair at one
/// instant (quantised), 100 ms between pairs.
fn quantised_trace() -> String {
    (0..6)
        .map(|i| {
            format!(
                r#"{{"v":1,"request_id":"q{i}","session_id":"s{}","method":"POST","path":"/v1/chat/completions","arrival_us":{},"body":{{"model":"m","messages":[{{"role":"user","content":"say {i}"}}]}},"output_tokens":3}}"#,
                i % 2,
                i / 2 * 100_000
            ) + "\n"
        })
        .collect()
}

fn replay_scenario(d: &Path, m: &Mock) -> PathBuf {
    std::fs::write(d.join("trace.jsonl"), quantised_trace()).unwrap();
    let path = d.join("replay.yaml");
    std::fs::write(
        &path,
        format!(
            "scenario: replayed\n\
             target: {{ base_url: 'http://{}' }}\n\
             workload: {{ replay: trace.jsonl, seed: 2 }}\n",
            m.mock.addr()
        ),
    )
    .unwrap();
    path
}

fn invalid(a: &RunArgs) -> Vec<String> {
    match execute(a, false).unwrap() {
        Outcome::Invalid(e) => e,
        Outcome::Ran(_) => panic!("ran"),
    }
}

#[test]
fn replay_flags_need_a_replay_scenario() {
    let m = mock(1, 1, 2);
    let d = dir("replay-flags");
    let mut a = args(write_scenario(&d, &m, 5, 1, ""), None, Shard::WHOLE);
    a.speed = Some(2.0);
    a.sample = Some(0.5);
    assert_eq!(
        invalid(&a),
        [
            "--speed: needs a replay scenario (`workload: { replay: trace.jsonl }`)",
            "--sample: needs a replay scenario (`workload: { replay: trace.jsonl }`)",
        ]
    );
    let mut a = args(replay_scenario(&d, &m), None, Shard::WHOLE);
    a.closed = Some(2);
    a.from = Some("soon".into());
    assert_eq!(
        invalid(&a),
        [
            "--closed: a replay keeps the recorded times; it runs open loop only",
            "--from: `soon` is neither an offset like 30s nor RFC 3339 (`soon` is not a \
             duration like 250ms or 1s)"
        ]
    );
    let mut a = args(replay_scenario(&d, &m), None, Shard::WHOLE);
    a.from = Some("1s".into());
    assert_eq!(
        invalid(&a),
        [format!(
            "{}: no recorded request is left in the window and the sample",
            d.join("trace.jsonl").display()
        )]
    );
    a.from = None;
    a.speed = Some(0.0);
    assert_eq!(invalid(&a), ["--speed: must be a number > 0, found 0"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_replay_sends_the_recorded_bodies_and_reports_its_warnings() {
    let m = mock(1, 1, 5);
    let d = dir("replay-run");
    let path = replay_scenario(&d, &m);
    let mut a = args(path.clone(), Some(d.join("run.json")), Shard::WHOLE);
    a.speed = Some(4.0);
    a.to = Some("150ms".into());
    let r = ran(execute(&a, false).unwrap());
    // The window keeps the first two pairs: 4 requests of 2 sessions.
    assert_eq!(r.dispatch.journeys, 2);
    assert_eq!(r.summary.completed, 4);
    assert_eq!(r.steps.len(), 1);
    assert_eq!(r.steps[0].name, "replay");
    // max_tokens from the recorded output_tokens: the mock honours it.
    assert_eq!(r.summary.total_output_tokens, 4 * 3);
    let mut said: Vec<String> = m
        .mock
        .seen()
        .iter()
        .map(|s| {
            let body: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
            body["messages"][0]["content"].as_str().unwrap().to_owned()
        })
        .collect();
    said.sort();
    assert_eq!(said, ["say 0", "say 1", "say 2", "say 3"]);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("run.json")).unwrap()).unwrap();
    assert_eq!(json["warnings"].as_array().unwrap().len(), 1);
    assert!(
        json["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("60.0% of inter-arrival times are exactly 0"),
        "{}",
        json["warnings"]
    );
    let replay = &json["replay"];
    assert_eq!(replay["file"], "trace.jsonl");
    assert_eq!(replay["speed"], 4.0);
    assert_eq!(replay["to"], "150ms");
    assert_eq!(replay["recorded_requests"], 6);
    assert_eq!(replay["planned_requests"], 4);
    assert_eq!(replay["planned_journeys"], 2);
    assert_eq!(
        replay["trace_sha256"].as_str().unwrap(),
        sluice_workload::sha256_file(&d.join("trace.jsonl")).unwrap()
    );
    // `sluice validate` says what the trace holds.
    assert_eq!(
        validate(&path).unwrap(),
        format!(
            "{}: valid scenario `replayed` (replay of trace.jsonl: 6 recorded requests in 2 \
             journeys, 0 thresholds)\nwarning: {}",
            path.display(),
            json["warnings"][0].as_str().unwrap()
        )
    );
    std::fs::remove_dir_all(&d).unwrap();
}
