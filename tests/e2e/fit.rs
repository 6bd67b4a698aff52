//! `sluice fit` on traffic recorded through sluice: a scripted client holds
//! bursty multi-turn sessions (session starts in bursts, a seeded number of
//! turns each, a seeded lognormal think time between an answer and the next
//! turn) against the mock LLM, with the recorder on. The fitted session
//! figures — how many sessions, turns per session, the think time — match
//! what the client did, within 10%.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::cli;
use crate::harness::{self, Admin};
use crate::recorder::{poll_recording, recording_sluice};
use crate::support::TempDir;

/// Session starts come in `BURSTS` bursts of `PER_BURST`, `BURST_GAP` apart.
const BURSTS: usize = 4;
const PER_BURST: usize = 6;
const BURST_GAP: Duration = Duration::from_millis(400);
/// Turns per session: uniform in this range.
const TURNS: std::ops::RangeInclusive<usize> = 2..=6;
/// The think time: ln(seconds) normal, median 250 ms.
const THINK_MEDIAN_S: f64 = 0.25;
const THINK_SIGMA: f64 = 0.5;

/// What one session did, as the client measured it.
struct Done {
    turns: usize,
    /// From the end of each answer to the next turn's send.
    thinks: Vec<f64>,
}

async fn session(client: reqwest::Client, url: String, id: String, plan: Vec<Duration>) -> Done {
    let mut thinks = Vec::new();
    let mut answered: Option<Instant> = None;
    for (turn, think) in plan.iter().enumerate() {
        if let Some(at) = answered {
            tokio::time::sleep_until((at + *think).into()).await;
            thinks.push(at.elapsed().as_secs_f64());
        }
        let body = json!({
            "model": "mock-llm",
            "messages": [{"role": "user", "content": format!("{id} turn {turn}: tell me more")}],
        });
        let response = client
            .post(&url)
            .header("x-session-id", &id)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        answered = Some(Instant::now());
    }
    Done {
        turns: plan.len(),
        thinks,
    }
}

/// Nearest-rank median.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len().div_ceil(2) - 1]
}

fn within_10pct(got: f64, want: f64) -> bool {
    (got - want).abs() <= 0.1 * want
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fitted_sessions_and_think_times_match_the_client() {
    let dir = TempDir::new("fit-e2e");
    let trace = dir.path().join("trace.jsonl");
    let mock = MockLlm::start(MockLlmOptions::paced_ms(5, 1, 8))
        .await
        .unwrap();
    let sluice = recording_sluice(mock.addr(), &trace);
    let url = format!(
        "http://{}/v1/chat/completions",
        harness::listener(&sluice, "public")
    );
    let admin = Admin::new(&sluice);
    let (status, recording) = poll_recording(&admin).await;
    assert_eq!(
        status, 200,
        "the config's recording never started: {recording}"
    );

    // The plan up front, from a seed: each session's turns and think times.
    let mut rng = StdRng::seed_from_u64(14);
    let normal = rand_distr::Normal::new(THINK_MEDIAN_S.ln(), THINK_SIGMA).unwrap();
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for burst in 0..BURSTS {
        tokio::time::sleep(if burst == 0 {
            Duration::ZERO
        } else {
            BURST_GAP
        })
        .await;
        for s in 0..PER_BURST {
            let turns = rng.random_range(TURNS);
            let plan: Vec<Duration> = (0..turns)
                .map(|_| Duration::from_secs_f64(rng.sample(normal).exp()))
                .collect();
            let id = format!("session-{burst}-{s}");
            tasks.push(tokio::spawn(session(client.clone(), url.clone(), id, plan)));
        }
    }
    let mut done = Vec::new();
    for task in tasks {
        done.push(task.await.unwrap());
    }
    let requests: usize = done.iter().map(|d| d.turns).sum();
    let lines = |t: &str| harness::metric_value(t, "sluice_recorder_lines_total", &[]);
    harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        lines(t) == Some(requests as f64)
    })
    .await;
    let (status, stopped) = admin.delete("/v1/recorder").await;
    assert_eq!((status, &stopped["lines"]), (200, &json!(requests)));

    let out = cli::sluice(vec![
        "fit".into(),
        trace.display().to_string(),
        "--json".into(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let fitted: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fitted["requests"], json!(requests), "{fitted}");
    let sessions = &fitted["sessions"];
    assert_eq!(
        sessions["sessions"],
        json!(BURSTS * PER_BURST),
        "{sessions}"
    );

    let mut turns: Vec<f64> = done.iter().map(|d| d.turns as f64).collect();
    let turns_p50 = median(&mut turns);
    let fitted_turns = sessions["turns"]["p50"].as_f64().unwrap();
    assert!(
        within_10pct(fitted_turns, turns_p50),
        "turns p50: fitted {fitted_turns}, client {turns_p50}"
    );

    let mut thinks: Vec<f64> = done.iter().flat_map(|d| d.thinks.clone()).collect();
    let think_p50 = median(&mut thinks);
    let think = &sessions["think_time"];
    let fitted_think = match think["kind"].as_str() {
        Some("lognormal") => think["mu"].as_f64().unwrap().exp(),
        Some("empirical") => think["quantiles"]["p50"].as_f64().unwrap(),
        other => panic!("think_time kind {other:?}: {sessions}"),
    };
    assert!(
        within_10pct(fitted_think, think_p50),
        "think time median: fitted {fitted_think} s, client {think_p50} s ({think})"
    );
    eprintln!(
        "fit e2e: {requests} requests, {} sessions; turns p50 fitted {fitted_turns} client \
         {turns_p50}; think p50 fitted {fitted_think:.4} s client {think_p50:.4} s ({})",
        BURSTS * PER_BURST,
        think["kind"]
    );
    // And the client's own draw: the scripted median, within the sample's noise.
    assert!(
        (think_p50 / THINK_MEDIAN_S - 1.0).abs() < 0.3,
        "client think median {think_p50} s"
    );
}
