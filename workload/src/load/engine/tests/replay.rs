//! A replay into a loopback server that keeps each request's path, body
//! and arrival time: the recorded requests arrive with their bodies, each
//! session in its recorded order, with the recorded gaps divided by the
//! speed (generous bounds), and a sample keeps or drops each session whole.
//! A row without a body goes as a chat completion sized to its recorded
//! tokens, and `replay_step` sets the step's timeout and thresholds.

use std::collections::BTreeMap;
use std::time::Instant;

use http_body_util::BodyExt;
use serde_json::Value;

use super::*;
use crate::load::client::Failure;
use crate::load::prompt::FILLER_WORDS;
use crate::load::replay::{Recording, ReplayOptions, HASH_BLOCK_TOKENS};
use crate::load::scenario::REPLAY_STEP;
use crate::load::summary::ThresholdResult;

/// What the server saw: `METHOD path`, body, when, and the
/// `x-sluice-perturbed` header.
pub(super) type Got = (String, Vec<u8>, Instant, Option<String>);

pub(super) struct Recorder {
    pub(super) addr: SocketAddr,
    pub(super) got: Arc<Mutex<Vec<Got>>>,
    _runtime: tokio::runtime::Runtime,
}

pub(super) fn recorder() -> Recorder {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let got: Arc<Mutex<Vec<Got>>> = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let g = g.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let g = g.clone();
                    async move {
                        let at = Instant::now();
                        let path = format!("{} {}", req.method(), req.uri().path());
                        let perturbed = req
                            .headers()
                            .get(sluice_filters::PERTURBED_HEADER)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        g.lock().unwrap().push((path, body.to_vec(), at, perturbed));
                        let ok = Full::new(Bytes::from_static(b"{}"));
                        Ok::<_, Infallible>(hyper::Response::new(ok))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Recorder {
        addr,
        got,
        _runtime: runtime,
    }
}

/// Request i: at `offsets_ms[i]`, path `/r{i}`, body `{"i": i}`, in
/// session `sessions[i]` (`-` for none).
fn trace(offsets_ms: &[u64], sessions: &[&str]) -> String {
    offsets_ms
        .iter()
        .zip(sessions)
        .enumerate()
        .map(|(i, (ms, s))| {
            let session = match *s {
                "-" => String::new(),
                s => format!(r#","session_id":"{s}""#),
            };
            format!(
                r#"{{"v":1,"request_id":"q{i}"{session},"method":"PUT","path":"/r{i}","arrival_us":{},"body":{{"i":{i}}}}}"#,
                ms * 1000
            ) + "\n"
        })
        .collect()
}

fn replay_scenario(addr: SocketAddr, name: &str, trace_text: &str, seed: u64) -> Scenario {
    let dir = std::env::temp_dir().join(format!("sluice-engine-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.jsonl"), trace_text).unwrap();
    let text = format!(
        "scenario: replay\n\
         target: {{ base_url: 'http://{addr}' }}\n\
         workload: {{ replay: t.jsonl, seed: {seed} }}\n"
    );
    Scenario::from_yaml(&text, &dir, &|_| None).unwrap()
}

fn replay(s: &Scenario, options: &ReplayOptions) -> (RunOutput, crate::load::replay::Replay) {
    let recording: &Recording = &s.replay.as_ref().unwrap().recording;
    let plan = recording.plan(options, s.plan.seed).unwrap();
    let out = run_replay(
        s,
        &plan.schedule,
        &plan.journeys,
        &self::options(None),
        Arc::new(Live::default()),
    )
    .unwrap();
    (out, plan)
}

#[test]
fn recorded_requests_arrive_in_order_with_their_bodies_and_scaled_gaps() {
    let server = recorder();
    // Sessions a and b interleave; the last request has none.
    let offsets = [0, 200, 400, 600, 800, 1000];
    let sessions = ["a", "b", "a", "b", "a", "-"];
    let s = replay_scenario(server.addr, "order", &trace(&offsets, &sessions), 1);
    let speed = 2.0;
    let (out, plan) = replay(
        &s,
        &ReplayOptions {
            speed,
            ..ReplayOptions::default()
        },
    );
    assert_eq!(out.journeys, 3);
    assert_eq!(plan.journeys.len(), 3);
    assert_eq!(out.outcomes.len(), 6);
    assert!(out
        .outcomes
        .iter()
        .all(|o| o.failure.is_none() && o.step == 0));
    // Intended times are the recorded offsets over the speed.
    let mut intended: Vec<u64> = out.outcomes.iter().map(|o| o.intended_us).collect();
    intended.sort_unstable();
    assert_eq!(intended, [0, 100_000, 200_000, 300_000, 400_000, 500_000]);

    let got = server.got.lock().unwrap().clone();
    assert_eq!(got.len(), 6);
    let first = got.iter().map(|g| g.2).min().unwrap();
    let mut seen = BTreeMap::new();
    for (path, body, at, _) in &got {
        let i: usize = path.trim_start_matches("PUT /r").parse().unwrap();
        assert_eq!(body, format!(r#"{{"i":{i}}}"#).as_bytes(), "{path}");
        seen.insert(i, at.duration_since(first));
    }
    assert_eq!(seen.len(), 6, "every recorded request once");
    for (i, ms) in offsets.iter().enumerate() {
        let expected = Duration::from_millis(*ms).div_f64(speed);
        let at = seen[&i];
        assert!(
            at + Duration::from_millis(20) >= expected
                && at <= expected + Duration::from_millis(250),
            "request {i} at {at:?}, expected about {expected:?}"
        );
    }
    // Within a session, in recorded order.
    for session in [&[0, 2, 4][..], &[1, 3]] {
        let order: Vec<Duration> = session.iter().map(|i| seen[i]).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    }
}

#[test]
fn a_sample_keeps_or_drops_each_session_whole() {
    let server = recorder();
    // Ten sessions of three requests, 10 ms apart.
    let offsets: Vec<u64> = (0..30).map(|i| i * 10).collect();
    let names: Vec<String> = (0..30).map(|i| format!("s{}", i % 10)).collect();
    let sessions: Vec<&str> = names.iter().map(String::as_str).collect();
    let s = replay_scenario(server.addr, "sample", &trace(&offsets, &sessions), 7);
    let (out, plan) = replay(
        &s,
        &ReplayOptions {
            sample: Some(0.5),
            ..ReplayOptions::default()
        },
    );
    let kept = plan.journeys.len();
    assert!((1..10).contains(&kept), "{kept} of 10 sessions kept");
    assert_eq!(out.outcomes.len(), kept * 3);
    let got = server.got.lock().unwrap().clone();
    let mut per_session: BTreeMap<usize, usize> = BTreeMap::new();
    for (path, ..) in &got {
        let i: usize = path.trim_start_matches("PUT /r").parse().unwrap();
        *per_session.entry(i % 10).or_default() += 1;
    }
    assert_eq!(per_session.len(), kept);
    assert!(per_session.values().all(|n| *n == 3), "{per_session:?}");
}

/// A Mooncake-style row: no path, no body, its sizes and `hash_ids`.
fn bodiless(i: usize, at_ms: u64, input: u64, output: u64, hash_ids: &[u64]) -> String {
    format!(
        r#"{{"v":1,"request_id":"m{i}","arrival_us":{},"input_tokens":{input},"output_tokens":{output},"hash_ids":{hash_ids:?}}}"#,
        at_ms * 1000
    ) + "\n"
}

/// The bodies the server got, in the order of their user message's length.
fn bodies_of(server: &Recorder) -> Vec<Value> {
    let mut got: Vec<Value> = server
        .got
        .lock()
        .unwrap()
        .iter()
        .map(|(_, body, ..)| serde_json::from_slice(body).unwrap())
        .collect();
    got.sort_by_key(|b| b["messages"][0]["content"].as_str().map(str::len));
    got
}

fn words(body: &Value) -> Vec<String> {
    let text = body["messages"][0]["content"].as_str().unwrap();
    text.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn a_bodiless_row_is_sent_as_a_chat_completion_of_its_recorded_size() {
    let trace = bodiless(0, 0, 300, 20, &[]);
    let run = |seed| {
        let server = recorder();
        let s = replay_scenario(server.addr, &format!("sized{seed}"), &trace, seed);
        let (out, _) = replay(&s, &ReplayOptions::default());
        assert_eq!(out.outcomes.len(), 1);
        assert!(out.outcomes[0].failure.is_none());
        let got = server.got.lock().unwrap().clone();
        assert_eq!(got[0].0, "POST /v1/chat/completions");
        bodies_of(&server)
    };
    let first = run(4);
    let body = &first[0];
    // 300 filler words, each one token: the size sized_prompt counts.
    let said = words(body);
    assert_eq!(said.len(), 300);
    assert!(said.iter().all(|w| FILLER_WORDS.contains(&w.as_str())));
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(body["max_tokens"], 20);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["model"], "default");
    assert!(body.get("ignore_eos").is_none());
    // The same seed sends the same body; another seed another prompt.
    assert_eq!(run(4), first);
    assert_ne!(words(&run(5)[0]), said);
}

#[test]
fn rows_sharing_a_first_hash_block_share_their_prompts_prefix() {
    // Rows 0 and 1 share block 11, then part; row 2 has its own block.
    let trace = [
        bodiless(0, 0, 600, 5, &[11, 12]),
        bodiless(1, 10, 700, 5, &[11, 13]),
        bodiless(2, 20, 800, 5, &[14, 15]),
    ]
    .concat();
    let server = recorder();
    let s = replay_scenario(server.addr, "blocks", &trace, 9);
    let (out, _) = replay(&s, &ReplayOptions::default());
    assert_eq!(out.outcomes.len(), 3);
    let got = bodies_of(&server);
    let w: Vec<Vec<String>> = got.iter().map(words).collect();
    assert_eq!(w.iter().map(Vec::len).collect::<Vec<_>>(), [600, 700, 800]);
    let block = HASH_BLOCK_TOKENS as usize;
    assert_eq!(w[0][..block], w[1][..block], "block 11 is one prefix");
    assert_ne!(w[0][block..], w[1][block..600]);
    assert_ne!(w[0][..block], w[2][..block]);
}

#[test]
fn replay_step_sets_the_timeout_and_thresholds_of_the_replayed_requests() {
    // The server holds the first request for 2 s; the step gives up at 200 ms.
    let srv = server(0, Duration::from_secs(2));
    let dir = std::env::temp_dir().join(format!("sluice-engine-rstep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = [bodiless(0, 0, 10, 5, &[]), bodiless(1, 50, 10, 5, &[])].concat();
    std::fs::write(dir.join("t.jsonl"), trace).unwrap();
    let text = format!(
        "scenario: replay\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ replay: t.jsonl, seed: 1 }}\n\
         replay_step: {{ timeout: 200ms, thresholds: {{ error_rate: 10% }}, model: smol, \
           ignore_eos: true }}\n",
        srv.addr
    );
    let s = Scenario::from_yaml(&text, &dir, &|_| None).unwrap();
    let (out, _) = replay(&s, &ReplayOptions::default());
    let mut failures: Vec<Option<Failure>> = out.outcomes.iter().map(|o| o.failure).collect();
    failures.sort_by_key(|f| f.is_none());
    assert_eq!(failures, [Some(Failure::Timeout), None]);
    let r = report(&s, &out);
    let step: Vec<&ThresholdResult> = r
        .thresholds
        .iter()
        .filter(|t| t.step.as_deref() == Some(REPLAY_STEP))
        .collect();
    assert_eq!(step.len(), 1, "{:?}", r.thresholds);
    assert_eq!((step[0].name, step[0].value), ("error_rate", Some(50.0)));
    assert!(!step[0].passed && !r.passed);
}
