//! Feedback scenarios from the control plane's side: a rollout that rolls
//! back under paused tokio time leaves a scenario with the route's
//! recorded lines of the window, its manifest naming the trigger and the
//! lineage ids; a halt without a recorder still leaves a manifest; a
//! directory that cannot be written stops the start.
// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_filters::{FeedbackManifest, TraceLine, TriggerKind};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::lineage::{cluster_id, event_artifact, rollout_artifact};
use crate::recorder::{Cut, Kept};
use crate::rollout::{Rollouts, Signals, State};
use crate::stats::Sample;
use crate::testing::{self, stable_canary};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "sluice-feedback-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct NoSignals;

impl Signals for NoSignals {
    fn gpu_memory_percent(&self) -> Option<f64> {
        None
    }
    fn upstream_waiting(&self, _: &str) -> Option<f64> {
        None
    }
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// A trace line as the recorder's writer keeps it.
fn kept(wall_us: i64, route: &str, cluster: &str, status: u16, n: usize) -> Kept {
    let line = TraceLine {
        v: 1,
        request_id: format!("r{n}"),
        route: Some(route.into()),
        cluster: Some(cluster.into()),
        method: Some("POST".into()),
        path: Some("/v1/chat/completions".into()),
        arrival_us: n as u64 * 1000,
        arrival: Some(sluice_filters::format_rfc3339(wall_us)),
        status: Some(status),
        ..TraceLine::default()
    };
    Kept {
        wall_us,
        route: route.into(),
        cluster: cluster.into(),
        status: Some(status),
        line: line.to_json().into_bytes(),
    }
}

/// The scenario directories under `dir` (temporary ones left out).
fn scenarios(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    found.sort();
    found
}

/// Waits (paused tokio time, real time for the blocking write) until `dir`
/// holds `n` scenarios.
async fn wait_for(dir: &Path, n: usize) -> Vec<PathBuf> {
    for _ in 0..2000 {
        let found = scenarios(dir);
        if found.len() >= n {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no {n} scenario(s) in {}", dir.display());
}

#[tokio::test(start_paused = true)]
async fn a_rollback_leaves_the_windows_traffic_and_a_manifest_naming_the_breach() {
    let dir = TempDir::new("rollback");
    let fb = dir.0.join("feedback");
    let text = format!(
        "{}rollouts:\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, \
         steps: [10, 50, 100], hold: 1s, min_requests: 5, gates: {{ error_rate: 1% }} }}\n\
         feedback: {{ dir: {}, before: 1m }}\n",
        stable_canary(),
        fb.display()
    );
    let (store, shared) = testing::store(&text);
    // The rollout leaves the live config once final: its definition as written.
    let config = testing::config(&text);
    prepare(&fb).unwrap();
    // What the recorder's writer kept: chat's canary failing, its stable
    // answering, another route, and a line older than `before`.
    let t = now_us();
    let recent = shared.recorder.recent();
    recent.push(kept(t - 120_000_000, "chat", "canary", 500, 0));
    recent.push(kept(t - 3_000_000, "chat", "stable", 200, 1));
    recent.push(kept(t - 2_000_000, "chat", "canary", 500, 2));
    recent.push(kept(t - 2_000_000, "other", "canary", 500, 3));
    recent.push(kept(t - 1_000_000, "chat", "canary", 200, 4));
    recent.push(kept(t - 500_000, "chat", "canary", 500, 5));

    let rollouts = Rollouts::with_signals(store.clone(), shared.clone(), Arc::new(NoSignals));
    let cancel = CancellationToken::new();
    let tasks = vec![
        tokio::spawn(shared.stats.clone().run_aggregator(cancel.clone())),
        tokio::spawn(rollouts.clone().run(cancel.clone())),
        tokio::spawn(run_feedback(store.clone(), shared.clone(), cancel.clone())),
    ];
    let keys = (
        shared.stats.key("chat", "stable", "v1"),
        shared.stats.key("chat", "canary", "v2"),
    );
    let sample = |key, status| Sample {
        key,
        status,
        latency: Duration::from_millis(50),
        tokens: None,
        load: false,
        grpc: None,
    };
    let mut state = State::Pending;
    for _ in 0..100 {
        for i in 0..10 {
            shared.stats.record(sample(keys.0, 200));
            shared
                .stats
                .record(sample(keys.1, if i < 5 { 500 } else { 200 }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        state = rollouts.status("chat-v2").map_or(state, |s| s.state);
        if state == State::RolledBack {
            break;
        }
    }
    assert_eq!(state, State::RolledBack);

    let found = wait_for(&fb, 1).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let text = std::fs::read_to_string(found[0].join("manifest.json")).unwrap();
    let m = FeedbackManifest::parse(&text).unwrap();
    assert_eq!(
        found[0].file_name().unwrap().to_str().unwrap(),
        m.id.as_str()
    );
    assert_eq!(m.trigger.kind, TriggerKind::RolloutBreach);
    assert_eq!(m.trigger.cause, sluice_filters::Cause::Other);
    assert_eq!(
        (m.trigger.gate.as_str(), m.trigger.bound),
        ("error_rate", 1.0)
    );
    assert_eq!(m.trigger.unit, "%");
    assert!(m.trigger.value.unwrap() > 1.0, "{:?}", m.trigger);
    assert!(
        m.trigger.reason.starts_with("error_rate "),
        "{}",
        m.trigger.reason
    );
    assert_eq!(m.route, "chat");
    assert_eq!(m.rollout.as_deref(), Some("chat-v2"));
    assert_eq!(
        (m.cluster.as_deref(), m.version.as_deref()),
        (Some("canary"), Some("v2"))
    );
    // The route's four lines within the minute before; the rate is the
    // canary's: 2 of its 3 failed.
    assert_eq!((m.requests, m.errors), (4, 2));
    assert!((m.error_rate - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(m.initial_weight, 5.0);
    assert_eq!(m.half_life, "48h");
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    let trace = std::fs::read_to_string(found[0].join("trace.jsonl")).unwrap();
    let ids: Vec<String> = sluice_filters::parse_lines(&trace)
        .map(|l| l.unwrap().request_id)
        .collect();
    assert_eq!(ids, ["r1", "r2", "r4", "r5"]);

    // The lineage: below the breach's event, of this rollout and canary.
    let (stable, canary) = (
        cluster_id(&config.clusters[0]),
        cluster_id(&config.clusters[1]),
    );
    let rollout = rollout_artifact(&config.rollouts[0], stable, canary.clone());
    let events = rollouts.status("chat-v2").unwrap().events.unwrap();
    let seq = events
        .iter()
        .position(|e| e.to == State::RolledBack)
        .unwrap();
    let event = event_artifact(&rollout.id, seq, &events[seq]);
    assert_eq!(m.lineage.cluster.as_ref(), Some(&canary));
    assert_eq!(m.lineage.rollout.as_ref(), Some(&rollout.id));
    assert_eq!(m.lineage.event.as_ref(), Some(&event.id));
    assert_eq!(m.artifact.parents, vec![event.id]);

    let audit: Vec<String> = shared
        .events
        .list()
        .into_iter()
        .filter(|e| e.source == "feedback")
        .map(|e| e.action)
        .collect();
    assert_eq!(
        audit,
        [format!(
            "feedback {}: rollout_breach of chat-v2 saved, 4 request(s) of route chat in {}",
            m.id,
            found[0].display()
        )]
    );
    cancel.cancel();
    for t in tasks {
        t.await.unwrap();
    }
}

fn halt_breach(config: &crate::config::Config) -> Breach {
    let experiment = sluice_filters::Experiment {
        id: "f-1".into(),
        matcher: sluice_filters::FaultMatch {
            route: Some("chat".into()),
            cluster: None,
            listener: None,
            headers: Vec::new(),
            model: None,
        },
        percent: 100.0,
        ttl: Duration::from_secs(60),
        max_active: None,
        halt_if: None,
        action: sluice_filters::FaultAction::Request(sluice_filters::RequestAction::Abort {
            status: 503,
            body: String::new(),
            grpc: None,
        }),
    };
    Breach::of_fault(config, &experiment, 40.0, 10.0, 1_800_000_000_000_000).unwrap()
}

#[test]
fn a_halt_without_a_recorder_still_leaves_a_manifest_and_never_overwrites() {
    let dir = TempDir::new("halt");
    let text = format!(
        "{}feedback: {{ dir: {}, half_life: {{ other: 6h }} }}\n",
        stable_canary(),
        dir.0.display()
    );
    let config = testing::config(&text);
    let breach = halt_breach(&config);
    // Both clusters of the route are the parents; no one cluster broke.
    let ids: Vec<_> = config.clusters.iter().map(cluster_id).collect();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(breach.cluster, None);
    let f = config.feedback.clone().unwrap();
    let first = write_scenario(&f, &breach, Cut::default(), false, 1_800_000_001_000_000).unwrap();
    let m = FeedbackManifest::parse(
        &std::fs::read_to_string(first.path.join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m.trigger.kind, TriggerKind::FaultHalt);
    assert_eq!(m.trigger.gate, "halt_if.error_rate");
    assert_eq!((m.trigger.value, m.trigger.bound), (Some(40.0), 10.0));
    assert_eq!(m.fault.as_deref(), Some("f-1"));
    assert_eq!(m.requests, 0);
    assert_eq!(m.notes, ["no recorder was on: the trace is empty"]);
    // The halt's own reading stands in for the window's rate.
    assert!((m.error_rate - 0.4).abs() < 1e-12);
    assert_eq!(m.initial_weight, 5.0);
    assert_eq!(m.half_life, "6h");
    assert_eq!(m.created, "2027-01-15T08:00:01.000000Z");
    assert_eq!(m.window.to, "2027-01-15T08:00:00.000000Z");
    assert_eq!(m.window.from, "2027-01-15T07:55:00.000000Z");
    assert_eq!(m.artifact.parents, want);
    assert_eq!(std::fs::read(first.path.join("trace.jsonl")).unwrap(), b"");

    // The same breach again: the same id, a second directory.
    let second = write_scenario(&f, &breach, Cut::default(), true, 1_800_000_002_000_000).unwrap();
    assert_eq!(second.id, first.id);
    assert_eq!(
        second.path.file_name().unwrap().to_str().unwrap(),
        format!("{}-2", first.id)
    );
    let again = FeedbackManifest::parse(
        &std::fs::read_to_string(second.path.join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        again.notes,
        ["the recorder kept no request of route `chat` in the window"]
    );
    assert_eq!(scenarios(&dir.0).len(), 2);
}

struct NoDataPlane;

impl crate::lifecycle::DataPlane for NoDataPlane {
    fn inflight(&self) -> usize {
        0
    }
    fn begin_drain(&self) {}
    fn stop(&self, _: crate::lifecycle::Stop) {}
    fn hand_over(&self) -> Result<usize, crate::lifecycle::HandOverError> {
        Err(crate::lifecycle::HandOverError("none".into()))
    }
}

#[test]
fn a_feedback_dir_that_cannot_be_written_stops_the_start() {
    let dir = TempDir::new("start");
    // A path under a regular file: refused to root as well.
    let file = dir.0.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let bad = file.join("feedback");
    let text = format!(
        "admin: {{ listen: 127.0.0.1:0 }}\n{}feedback: {{ dir: {} }}\n",
        stable_canary(),
        bad.display()
    );
    let config = testing::config(&text);
    let started = crate::ControlPlane::start(
        config,
        crate::ControlOptions::default(),
        Arc::new(NoDataPlane),
    );
    let Err(e) = started else {
        panic!("the control plane started with feedback.dir under a file");
    };
    assert_eq!(
        e.to_string(),
        format!(
            "feedback.dir: cannot create or write {}: Not a directory (os error 20)",
            bad.display()
        )
    );

    // A good one is created at start.
    let good = dir.0.join("made/at/start");
    let text = format!(
        "admin: {{ listen: 127.0.0.1:0 }}\n{}feedback: {{ dir: {} }}\n",
        stable_canary(),
        good.display()
    );
    let handle = crate::ControlPlane::start(
        testing::config(&text),
        crate::ControlOptions::default(),
        Arc::new(NoDataPlane),
    )
    .unwrap();
    assert!(good.is_dir());
    drop(handle);
}

#[test]
fn a_breach_is_a_gated_rollback_or_pause_never_an_operators() {
    let reading = |ok| crate::rollout::GateReading {
        gate: crate::config::Gate::ErrorRate,
        value: Some(9.0),
        bound: 1.0,
        unit: crate::config::Unit::Percent,
        samples: 50,
        stable_samples: None,
        ok: Some(ok),
    };
    let event = |from, to, evidence| RolloutEvent {
        at_ms: 0,
        time_ms: 0,
        from,
        to,
        step: 2,
        weight: 0,
        reason: String::new(),
        evidence,
        lineage: None,
    };
    use State::{Aborted, Paused, Progressing, RolledBack};
    assert!(is_breach(&event(
        Progressing,
        RolledBack,
        vec![reading(false)]
    )));
    assert!(is_breach(&event(Progressing, Paused, vec![reading(false)])));
    // An operator's pause or abort, a drift's pause, a step up: no breach.
    assert!(!is_breach(&event(Progressing, Paused, vec![])));
    assert!(!is_breach(&event(Progressing, Aborted, vec![])));
    assert!(!is_breach(&event(
        Progressing,
        Progressing,
        vec![reading(true)]
    )));
}
