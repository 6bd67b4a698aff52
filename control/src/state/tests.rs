//! The state file without sockets: its strict reading (full error texts),
//! the atomic write, what a live snapshot saves, and the overlay: splits,
//! experiments by their absolute expiry, rollouts and their controllers,
//! and a state that does not fit refused whole.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::{digest, write_atomic, SavedFault};
use super::*;
use crate::config::{RawConfig, RawFault};
use crate::rollout::State;
use crate::testing::{self, stable_canary};

const NOW_MS: u64 = 1_700_000_000_000;

fn config_text() -> String {
    format!(
        "{}rollouts:\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, \
         gates: {{ error_rate: 1% }} }}\n",
        stable_canary()
    )
}

fn file() -> RawConfig {
    testing::config(&config_text()).raw
}

fn fault(id: &str) -> RawFault {
    RawFault::from_yaml(&format!(
        "{{ id: {id}, match: {{ route: chat }}, ttl: 10m, action: {{ abort: {{ status: 503 }} }} }}"
    ))
    .unwrap()
}

fn empty(base: &RawConfig) -> StateFile {
    StateFile {
        v: 1,
        saved_ms: NOW_MS,
        config_digest: digest(base),
        splits: Default::default(),
        faults: Vec::new(),
        rollouts: base.rollouts.clone(),
        controllers: Vec::new(),
    }
}

fn controller(name: &str, state: State, step: usize, weight: u32) -> SavedController {
    SavedController {
        name: name.into(),
        route: "chat".into(),
        stable: "stable".into(),
        canary: "canary".into(),
        state,
        step,
        weight,
        breaches: 1,
        finished: None,
        events: Vec::new(),
    }
}

fn parse_error(text: &str) -> String {
    StateFile::parse(Path::new("/var/lib/sluice/state.json"), text.as_bytes())
        .unwrap_err()
        .to_string()
}

#[test]
fn a_broken_file_is_refused_with_its_path_line_and_column() {
    assert_eq!(
        parse_error("{\"v\": 1,\n \"saved_ms\": 12,\n \"config_digest\": \"x\",,"),
        "/var/lib/sluice/state.json: not JSON: key must be a string at line 3 column 23"
    );
}

#[test]
fn an_unknown_key_a_wrong_type_and_another_version_are_refused() {
    assert_eq!(
        parse_error(r#"{"v": 1, "saved_ms": 1, "config_digest": "x", "weights": {}}"#),
        "/var/lib/sluice/state.json: weights: unknown field `weights`, expected one of `v`, \
         `saved_ms`, `config_digest`, `splits`, `faults`, `rollouts`, `controllers` \
         at line 1 column 55"
    );
    assert_eq!(
        parse_error(
            r#"{"v": 1, "saved_ms": 1, "config_digest": "x", "splits": {"chat": {"a": -1}}}"#
        ),
        "/var/lib/sluice/state.json: splits.chat.a: invalid value: integer `-1`, \
         expected u32 at line 1 column 73"
    );
    assert_eq!(
        parse_error(r#"{"v": 2, "saved_ms": 1, "config_digest": "x"}"#),
        "/var/lib/sluice/state.json: v: state format 2 is not one this sluice reads (it reads 1)"
    );
    assert_eq!(
        parse_error(""),
        "/var/lib/sluice/state.json: not JSON: EOF while parsing a value at line 1 column 0"
    );
}

/// A private directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("sluice-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_file_is_replaced_whole_and_reads_back() {
    let dir = Dir::new("write");
    prepare_dir(&dir.0).unwrap();
    assert_eq!(StateFile::read(&dir.0).unwrap(), None);
    let base = file();
    let mut state = empty(&base);
    state.splits.insert(
        "chat".into(),
        [("stable".into(), 90), ("canary".into(), 10)].into(),
    );
    state.faults.push(SavedFault {
        spec: fault("f1"),
        expires_ms: NOW_MS + 5_000,
        halted: true,
    });
    state
        .controllers
        .push(controller("chat-v2", State::Paused, 2, 5));
    state.write(&dir.0).unwrap();
    assert_eq!(StateFile::read(&dir.0).unwrap(), Some(state.clone()));
    // Another write replaces it; no temp file is left beside it.
    state.saved_ms += 1;
    state.write(&dir.0).unwrap();
    assert_eq!(StateFile::read(&dir.0).unwrap(), Some(state));
    let names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [FILE_NAME]);
    write_atomic(&dir.0, FILE_NAME, b"{").unwrap();
    assert!(StateFile::read(&dir.0).is_err());
}

#[test]
fn a_directory_that_cannot_be_made_is_an_error() {
    let dir = Dir::new("blocked");
    std::fs::create_dir_all(&dir.0).unwrap();
    let blocker = dir.0.join("file");
    std::fs::write(&blocker, "x").unwrap();
    assert!(prepare_dir(&blocker.join("state")).is_err());
}

#[test]
fn the_overlay_sets_splits_rollouts_and_experiments_by_their_expiry() {
    let base = file();
    let mut state = empty(&base);
    state.splits.insert(
        "chat".into(),
        [("stable".into(), 70), ("canary".into(), 30)].into(),
    );
    state.faults = vec![
        SavedFault {
            spec: fault("gone"),
            expires_ms: NOW_MS - 1,
            halted: false,
        },
        SavedFault {
            spec: fault("left"),
            expires_ms: NOW_MS + 90_000,
            halted: false,
        },
        SavedFault {
            spec: fault("stopped"),
            expires_ms: NOW_MS + 1,
            halted: true,
        },
    ];
    state.controllers = vec![
        controller("chat-v2", State::Progressing, 2, 30),
        // Not in `rollouts:` and not finished: nothing to restore.
        controller("other", State::Progressing, 1, 5),
    ];
    let r = overlay(&base, &state, NOW_MS).unwrap();
    assert!(!r.file_changed);
    let split = &r.config.route("chat").unwrap().split;
    assert_eq!(
        split,
        &[("canary".to_string(), 30), ("stable".to_string(), 70)]
    );
    let ids: Vec<&str> = r.config.faults.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["left", "stopped"]);
    assert_eq!(r.config.raw.faults[0].ttl.as_deref(), Some("90000ms"));
    assert_eq!(r.config.raw.faults[1].ttl.as_deref(), Some("1ms"));
    assert_eq!(r.expired, ["gone"]);
    assert_eq!(r.halted, ["stopped"]);
    assert_eq!(
        r.controllers,
        [controller("chat-v2", State::Progressing, 2, 30)]
    );
    assert!(r.finished.is_empty());
}

#[test]
fn a_finished_rollout_comes_back_in_the_history_and_not_in_the_config() {
    let base = file();
    let mut state = empty(&base);
    state.rollouts = Vec::new();
    let mut aborted = controller("chat-v2", State::Aborted, 1, 0);
    aborted.finished = Some(base.rollouts[0].clone());
    let mut gone = controller("old", State::Promoted, 3, 100);
    let mut definition = base.rollouts[0].clone();
    definition.name = "old".into();
    definition.canary = "no-such-cluster".into();
    gone.finished = Some(definition);
    state.controllers = vec![aborted.clone(), gone];
    let r = overlay(&base, &state, NOW_MS).unwrap();
    assert!(r.config.rollouts.is_empty());
    assert_eq!(r.finished.len(), 1);
    assert_eq!(r.finished[0].0, aborted);
    assert_eq!(r.finished[0].1.name, "chat-v2");
    assert_eq!(r.forgotten, ["old"]);
}

#[test]
fn a_state_that_does_not_fit_is_refused_whole() {
    let base = file();
    let mut state = empty(&base);
    state
        .splits
        .insert("gone".into(), [("stable".into(), 1)].into());
    state
        .splits
        .insert("chat".into(), [("stable".into(), 1)].into());
    let e = overlay(&base, &state, NOW_MS).unwrap_err();
    assert_eq!(e.to_string(), "splits.gone: the config has no route `gone`");

    let mut state = empty(&base);
    state.splits.insert(
        "chat".into(),
        [("stable".into(), 0), ("canary".into(), 0)].into(),
    );
    state.faults.push(SavedFault {
        spec: fault("f1"),
        expires_ms: NOW_MS + 1000,
        halted: false,
    });
    let e = overlay(&base, &state, NOW_MS).unwrap_err();
    assert_eq!(e.to_string(), "routes[0].split: weights sum to 0");
}

#[test]
fn a_changed_file_is_noted_and_the_state_wins() {
    let base = file();
    let mut state = empty(&base);
    state.splits.insert(
        "chat".into(),
        [("stable".into(), 60), ("canary".into(), 40)].into(),
    );
    let mut edited = base.clone();
    edited.routes[0].split.insert("stable".into(), 99);
    let r = overlay(&edited, &state, NOW_MS).unwrap();
    assert!(r.file_changed);
    assert_eq!(r.config.raw.routes[0].split["canary"], 40);
}

#[tokio::test(start_paused = true)]
async fn a_snapshot_saves_changed_splits_and_absolute_expiries() {
    let (store, _shared) = testing::store(&config_text());
    store
        .apply("api", "split", |raw| {
            raw.routes[0].split.insert("canary".into(), 20);
            raw.routes[0].split.insert("stable".into(), 80);
            raw.faults.push(fault("f1"));
            Ok(())
        })
        .unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;
    let now = tokio::time::Instant::now().into_std();
    let saved = capture(&store.load(), &store.base(), Vec::new(), now, NOW_MS);
    assert_eq!(saved.config_digest, digest(&store.base()));
    assert_eq!(saved.splits.len(), 1);
    assert_eq!(saved.splits["chat"]["canary"], 20);
    assert_eq!(saved.faults.len(), 1);
    // 10m from when it was added, 1m ago.
    assert_eq!(saved.faults[0].expires_ms, NOW_MS + 9 * 60_000);
    assert!(!saved.faults[0].halted);
    assert_eq!(saved.rollouts, store.base().rollouts);
    // Laid over the file again, it gives the same live config back, less
    // the time gone by.
    let r = overlay(&store.base(), &saved, NOW_MS).unwrap();
    assert_eq!(r.config.raw.routes, store.load().config.raw.routes);
    assert_eq!(r.config.raw.faults[0].ttl.as_deref(), Some("540000ms"));
    // A file reload replaces the base: the split is no longer a change.
    store
        .replace("file", store.load().config.raw.clone())
        .unwrap();
    let saved = capture(&store.load(), &store.base(), Vec::new(), now, NOW_MS);
    assert!(saved.splits.is_empty());
}

#[test]
fn load_moves_a_refused_file_aside_and_starts_from_the_config() {
    let dir = Dir::new("refused");
    prepare_dir(&dir.0).unwrap();
    std::fs::write(dir.0.join(FILE_NAME), "{\"v\": 1,").unwrap();
    let config = testing::config(&config_text());
    let message = match load(&dir.0, &config, NOW_MS) {
        Loaded::Refused(message) => message,
        other => panic!("{other:?}"),
    };
    let path = dir.0.join(FILE_NAME);
    let aside = dir.0.join(REFUSED_NAME);
    assert_eq!(
        message,
        format!(
            "{}: not JSON: EOF while parsing a value at line 1 column 8 (moved to {})",
            path.display(),
            aside.display()
        )
    );
    assert!(!path.exists());
    assert!(aside.exists());
    assert!(matches!(load(&dir.0, &config, NOW_MS), Loaded::None));
}
