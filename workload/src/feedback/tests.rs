//! Saved feedback scenarios read back, decayed under tokio's paused clock,
//! listed, and mixed into a replay in proportion to their weights.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use sluice_filters::{
    format_rfc3339, parse_wall_clock, Artifact, ArtifactKind, Cause, FeedbackLineage,
    FeedbackManifest, FeedbackTrigger, FeedbackWindow, TriggerKind,
};

use super::*;
use crate::load::{Intended, ReplayOptions, Shard};

const HOUR_US: i64 = 3_600_000_000;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "sluice-feedback-read-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn created() -> i64 {
    parse_wall_clock("2026-12-06T08:00:00Z").unwrap()
}

fn manifest(route: &str, initial: f64, half_life: &str, requests: u64) -> FeedbackManifest {
    let artifact = Artifact::new(
        ArtifactKind::Feedback,
        route,
        json!({"route": route, "half_life": half_life}),
        Vec::new(),
    );
    FeedbackManifest {
        v: 1,
        id: artifact.id.clone(),
        trigger: FeedbackTrigger {
            kind: TriggerKind::RolloutBreach,
            cause: Cause::UpstreamTimeout,
            gate: "error_rate".into(),
            value: Some(50.0),
            bound: 1.0,
            unit: "%".into(),
            reason: "error_rate 50% > 1%".into(),
        },
        route: route.into(),
        rollout: Some("chat-v2".into()),
        fault: None,
        cluster: Some("llm-canary".into()),
        version: Some("v2".into()),
        lineage: FeedbackLineage::default(),
        window: FeedbackWindow {
            from: format_rfc3339(created() - 300_000_000),
            to: format_rfc3339(created()),
        },
        requests,
        errors: 0,
        error_rate: ((initial - 1.0) / 10.0).clamp(0.0, 1.0),
        initial_weight: initial,
        half_life: half_life.into(),
        created: format_rfc3339(created()),
        trace: "trace.jsonl".into(),
        notes: Vec::new(),
        artifact,
    }
}

/// `n` requests 100 ms apart; every other in session `s<k/2>` when `sessions`.
fn trace(n: usize, sessions: bool) -> String {
    (0..n)
        .map(|k| {
            let session = match sessions {
                true => format!(r#","session_id":"s{}""#, k / 2),
                false => String::new(),
            };
            format!(
                r#"{{"v":1,"request_id":"q{k}"{session},"method":"POST","path":"/v1/chat/completions","arrival_us":{},"status":504}}"#,
                5_000_000 + k as u64 * 100_000
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn save(dir: &Path, name: &str, m: &FeedbackManifest, trace: &str) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("manifest.json"), serde_json::to_vec(m).unwrap()).unwrap();
    std::fs::write(d.join("trace.jsonl"), trace).unwrap();
}

#[tokio::test(start_paused = true)]
async fn weights_follow_the_half_life_as_the_paused_clock_advances() {
    let dir = TempDir::new("decay");
    save(
        &dir.0,
        "a",
        &manifest("chat", 4.0, "72h", 2),
        &trace(2, false),
    );
    save(
        &dir.0,
        "b",
        &manifest("search", 2.0, "24h", 2),
        &trace(2, false),
    );
    let saved = read_feedback_dir(&dir.0).unwrap();
    let clock = FeedbackClock::new(created());
    let weights = |now| -> Vec<f64> {
        feedback_rows(&saved, now)
            .iter()
            .map(|r| r.weight_now)
            .collect()
    };
    assert_eq!(weights(clock.now_us()), [4.0, 2.0]);
    tokio::time::advance(Duration::from_secs(24 * 3600)).await;
    assert_eq!(clock.now_us(), created() + 24 * HOUR_US);
    // a: 4 × 0.5^(1/3); b: one half-life.
    assert_eq!(weights(clock.now_us()), [3.175, 1.0]);
    tokio::time::advance(Duration::from_secs(48 * 3600)).await;
    assert_eq!(weights(clock.now_us()), [2.0, 0.25]);
    tokio::time::advance(Duration::from_secs(72 * 3600)).await;
    assert_eq!(weights(clock.now_us()), [1.0, 0.031]);
}

#[test]
fn a_bad_scenario_is_named_by_its_file_and_where_in_it() {
    let dir = TempDir::new("bad");
    let mut bad = manifest("chat", 2.0, "48h", 1);
    bad.error_rate = 1.5;
    save(&dir.0, "x", &bad, &trace(1, false));
    save(&dir.0, "y", &manifest("chat", 2.0, "48h", 1), "{\"v\":2}\n");
    // Being written: skipped.
    std::fs::create_dir_all(dir.0.join(".z.tmp")).unwrap();
    let errors = read_feedback_dir(&dir.0).unwrap_err();
    assert_eq!(
        errors,
        [
            format!(
                "{}: error_rate: 1.5 is not a fraction in [0, 1]",
                dir.0.join("x/manifest.json").display()
            ),
            format!(
                "{}: line 1: column 7: missing field `request_id`",
                dir.0.join("y/trace.jsonl").display()
            ),
        ]
    );
    let missing = dir.0.join("nope");
    assert_eq!(
        read_feedback_dir(&missing).unwrap_err(),
        [format!(
            "{}: No such file or directory (os error 2)",
            missing.display()
        )]
    );
}

#[test]
fn the_list_shows_why_each_was_saved_and_its_weight_now() {
    let dir = TempDir::new("list");
    save(
        &dir.0,
        "a",
        &manifest("chat", 4.0, "72h", 2),
        &trace(2, false),
    );
    let saved = read_feedback_dir(&dir.0).unwrap();
    let rows = feedback_rows(&saved, created() + 72 * HOUR_US);
    assert_eq!(rows[0].weight_now, 2.0);
    let want = [
        "ID  TRIGGER                              CAUSE             ROUTE  CLUSTER        \
         REQUESTS  CREATED              WEIGHT  NOW   HALF-LIFE",
        "a   rollout_breach: error_rate 50% > 1%  upstream_timeout  chat   llm-canary@v2  \
         2         2026-12-06 08:00:00  4.00    2.00  72h",
    ];
    assert_eq!(feedback_table(&rows), want.join("\n"));
    assert_eq!(feedback_table(&[]), "no feedback scenarios");
}

const BASE: &str = r#"
scenario: with-feedback
target: { base_url: "http://127.0.0.1:8080" }
workload: { replay: base.jsonl, seed: 9 }
"#;

#[test]
fn scenarios_are_mixed_in_proportion_to_their_weight_each_as_its_own_step() {
    let dir = TempDir::new("mix");
    std::fs::write(
        dir.0.join("base.jsonl"),
        r#"{"v":1,"request_id":"b0","arrival_us":1000000}
{"v":1,"request_id":"b1","arrival_us":3000000}
"#,
    )
    .unwrap();
    let fb = dir.0.join("feedback");
    // Weight 2 now: its three requests twice; weight 0.5: about half of
    // its forty sessions once; weight 0 (decayed past a thousand
    // half-lives): nothing.
    save(&fb, "a", &manifest("chat", 2.0, "72h", 3), &trace(3, false));
    save(&fb, "b", &manifest("chat", 1.0, "1h", 80), &trace(80, true));
    save(&fb, "c", &manifest("chat", 5.0, "1s", 1), &trace(1, false));
    let saved = read_feedback_dir(&fb).unwrap();
    let mut s = Scenario::from_yaml(BASE, &dir.0, &|_| None).unwrap();
    let now = created() + HOUR_US;
    let mix = mix_feedback(&mut s, &saved, now).unwrap();
    assert_eq!(mix.beside, None);
    let runs = mix.runs;
    let names: Vec<&str> = s.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["replay", "feedback/a", "feedback/b"]);
    let got: Vec<(&str, f64, usize, usize)> = runs
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.weight,
                r.recorded_requests,
                r.mixed_requests,
            )
        })
        .collect();
    let b_mixed = runs[1].mixed_requests;
    assert_eq!(
        got,
        [
            ("a", 1.981, 3, 6),
            ("b", 0.5, 80, b_mixed),
            ("c", 0.0, 1, 0)
        ]
    );
    // Whole sessions (two requests each), about half of the forty.
    assert!(
        b_mixed.is_multiple_of(2) && (24..=56).contains(&b_mixed),
        "{b_mixed}"
    );
    assert_eq!(runs[0].trigger, "rollout_breach: error_rate 50% > 1%");

    let r = &s.replay.as_ref().unwrap().recording.requests;
    assert_eq!(r.len(), 2 + 6 + b_mixed);
    // a's copies: from the replay's first request, 100 ms apart, the second
    // copy after the first's span and a one-second gap.
    let a: Vec<u64> = r
        .iter()
        .filter(|x| x.step == 1)
        .map(|x| x.arrival_us)
        .collect();
    assert_eq!(
        a,
        [1_000_000, 1_100_000, 1_200_000, 2_200_000, 2_300_000, 2_400_000]
    );
    assert!(r
        .iter()
        .filter(|x| x.step == 1)
        .all(|x| x.session.is_none()));
    // b's sessions stay whole and apart from the trace's own.
    let b: Vec<&Recorded> = r.iter().filter(|x| x.step == 2).collect();
    assert!(b
        .iter()
        .all(|x| x.session.as_deref().unwrap().starts_with("feedback/b/0/s")));
    // The same seed mixes the same sessions; the plan keeps them whole.
    let mut again = Scenario::from_yaml(BASE, &dir.0, &|_| None).unwrap();
    mix_feedback(&mut again, &saved, now).unwrap();
    assert_eq!(again.replay, s.replay);
    let plan = s
        .replay
        .as_ref()
        .unwrap()
        .recording
        .plan(&ReplayOptions::default(), s.plan.seed)
        .unwrap();
    assert_eq!(plan.journeys.len(), 2 + 6 + b_mixed / 2);
}

#[test]
fn a_synthetic_scenario_gets_the_saved_requests_beside_its_journeys() {
    let dir = TempDir::new("synthetic");
    let text = r#"
scenario: synthetic
target: { base_url: "http://127.0.0.1:8080" }
workload: { arrival: { kind: poisson, rate: 20 }, duration: 10s, seed: 5 }
steps: [{ name: ask, service: llm, prompt: hi }]
"#;
    let fb = dir.0.join("feedback");
    // Weight 2 (less an hour's decay of a 72 h half-life): its ten
    // sessions of two requests each, twice over, and a tenth of them
    // (drawn) once more.
    save(
        &fb,
        "a",
        &manifest("chat", 2.1, "72h", 20),
        &trace(20, true),
    );
    let saved = read_feedback_dir(&fb).unwrap();
    let mut s = Scenario::from_yaml(text, &dir.0, &|_| None).unwrap();
    let synthetic = s.plan.schedule().unwrap();
    let own = s.steps.len();
    let mix = mix_feedback(&mut s, &saved, created() + HOUR_US).unwrap();
    let names: Vec<&str> = s.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ask", "feedback/a"]);
    assert_eq!(mix.runs[0].weight, 2.08);
    let recording = mix.beside.unwrap();
    let sent = recording.requests.len();
    assert_eq!(mix.runs[0].mixed_requests, sent);
    // Two whole copies and whole sessions of the third.
    assert!(
        sent.is_multiple_of(2) && (40..=50).contains(&sent),
        "{sent}"
    );
    assert!(recording.requests.iter().all(|r| r.step == 1));
    // From the run's start at the recorded gaps: the second copy after the
    // first's 1.9 s span and a one-second gap.
    let at: Vec<u64> = recording.requests.iter().map(|r| r.arrival_us).collect();
    assert_eq!(&at[..3], [0, 100_000, 200_000]);
    assert_eq!(at[20], 2_900_000);

    let m = crate::Mixed::new(&s.plan, synthetic.clone(), own, recording).unwrap();
    let n = synthetic.arrivals.len() as u64;
    assert_eq!(m.first, n);
    assert_eq!(m.own_steps, 1);
    // Every synthetic arrival as it was, and a journey per saved session.
    let arrivals = &m.schedule.arrivals;
    assert_eq!(arrivals.len() as u64, n + sent as u64 / 2);
    let own_arrivals: Vec<Intended> = arrivals.iter().filter(|a| a.index < n).copied().collect();
    assert_eq!(own_arrivals, synthetic.arrivals);
    let planned: usize = m.journeys.iter().map(Vec::len).sum();
    assert_eq!(planned, sent);
    assert_eq!(m.journeys.len() as u64, arrivals.len() as u64 - n);
    // In time order, each index once: 0..n synthetic, then the saved ones.
    assert!(arrivals.windows(2).all(|w| w[0].at_us <= w[1].at_us));
    let mut indices: Vec<u64> = arrivals.iter().map(|a| a.index).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..arrivals.len() as u64).collect::<Vec<_>>());
    assert_eq!(m.schedule.span_us, synthetic.span_us);
    // Shards still partition the merged schedule.
    let halves = [0, 1].map(|i| {
        m.schedule
            .shard(Shard { index: i, count: 2 })
            .arrivals
            .len()
    });
    assert_eq!(halves[0] + halves[1], arrivals.len());
}

#[test]
fn saved_requests_past_the_scenario_lengthen_the_run() {
    let dir = TempDir::new("longer");
    let text = r#"
scenario: short
target: { base_url: "http://127.0.0.1:8080" }
workload: { arrival: { kind: poisson, rate: 5 }, duration: 2s, warmup: 1s }
steps: [{ name: ask, service: llm, prompt: hi }]
"#;
    let fb = dir.0.join("feedback");
    // Weight 3: three copies of a 0.4 s window, 1.4 s apart: to 3.2 s.
    save(
        &fb,
        "a",
        &manifest("chat", 3.0, "10000h", 5),
        &trace(5, false),
    );
    let saved = read_feedback_dir(&fb).unwrap();
    let mut s = Scenario::from_yaml(text, &dir.0, &|_| None).unwrap();
    let synthetic = s.plan.schedule().unwrap();
    let mix = mix_feedback(&mut s, &saved, created()).unwrap();
    let m = crate::Mixed::new(&s.plan, synthetic, 1, mix.beside.unwrap()).unwrap();
    assert_eq!(m.schedule.span_us, 3_200_000);
    let saved_at: Vec<(u64, bool)> = m
        .schedule
        .arrivals
        .iter()
        .filter(|a| a.index >= m.first)
        .map(|a| (a.at_us, a.warmup))
        .collect();
    assert_eq!(saved_at.len(), 15);
    assert_eq!(saved_at[..2], [(0, true), (100_000, true)]);
    assert_eq!(saved_at[14], (3_200_000, false));
}

#[test]
fn a_feedback_step_takes_replay_steps_timeout_but_not_its_thresholds() {
    let dir = TempDir::new("mix-step");
    std::fs::write(
        dir.0.join("base.jsonl"),
        "{\"v\":1,\"request_id\":\"b0\",\"arrival_us\":0}\n",
    )
    .unwrap();
    let fb = dir.0.join("feedback");
    save(&fb, "a", &manifest("chat", 2.0, "72h", 3), &trace(3, false));
    let saved = read_feedback_dir(&fb).unwrap();
    let text = format!(
        "{BASE}replay_step: {{ timeout: 30s, thresholds: {{ error_rate: 1% }}, model: smol }}\n"
    );
    let mut s = Scenario::from_yaml(&text, &dir.0, &|_| None).unwrap();
    mix_feedback(&mut s, &saved, created() + HOUR_US).unwrap();
    let (own, fed) = (&s.steps[0], &s.steps[1]);
    assert_eq!(
        (own.name.as_str(), fed.name.as_str()),
        ("replay", "feedback/a")
    );
    assert_eq!(own.thresholds.len(), 1);
    assert!(fed.thresholds.is_empty());
    assert_eq!(fed.timeout, Duration::from_secs(30));
    assert_eq!(fed.model.as_deref(), Some("smol"));
}
