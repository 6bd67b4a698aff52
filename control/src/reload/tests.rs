// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::events::EventLog;
use crate::shared::Shared;
use crate::testing::{self, ab_chat};

/// A config file in the temp dir, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(test: &str, text: &str) -> TempFile {
        let path =
            std::env::temp_dir().join(format!("sluice-reload-{test}-{}.yaml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    fn write(&self, text: &str) {
        std::fs::write(&self.0, text).unwrap();
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn store() -> (Arc<SnapshotStore>, Shared) {
    testing::store(&ab_chat(""))
}

fn split(store: &SnapshotStore) -> Vec<(String, u32)> {
    store.load().config.routes[0].split.clone()
}

#[test]
fn a_changed_file_is_applied_and_a_broken_one_rejected() {
    let (s, shared) = store();
    let file = TempFile::new("once", &ab_chat(""));
    file.write(&ab_chat("").replace("b: 0", "b: 10"));
    assert_eq!(reload_from_file(&s, &file.0, "file"), Ok(2));
    assert_eq!(split(&s), [("a".to_string(), 100), ("b".to_string(), 10)]);

    file.write("routes: [ {name: chat");
    let err = reload_from_file(&s, &file.0, "sighup").unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert_eq!(s.load().version, 2);

    file.write(&ab_chat("").replace("a: 100", "a: 0"));
    let err = reload_from_file(&s, &file.0, "file").unwrap_err();
    assert_eq!(err.to_string(), "routes[0].split: weights sum to 0");

    let gone = file.0.with_extension("missing");
    let err = reload_from_file(&s, &gone, "file").unwrap_err();
    assert_eq!(err.0[0].path, gone.display().to_string());
    assert!(err.0[0].message.starts_with("cannot read: "), "{err}");

    assert_eq!(s.load().version, 2);
    assert_eq!(split(&s), [("a".to_string(), 100), ("b".to_string(), 10)]);
    let events: Vec<(String, String, String)> = shared
        .events
        .list()
        .into_iter()
        .map(|e| (e.source, e.action, e.result))
        .collect();
    let event = |source: &str, result: &str| {
        (
            source.to_string(),
            if source == "startup" {
                "load config"
            } else {
                ACTION
            }
            .to_string(),
            result.to_string(),
        )
    };
    assert_eq!(
        events,
        [
            event("startup", "applied"),
            event("file", "applied"),
            event("sighup", "rejected"),
            event("file", "rejected"),
            event("file", "rejected"),
        ]
    );
    // Each counted as a reload too, the dashboard's annotation.
    let text = shared.metrics.encode();
    for series in [
        r#"sluice_config_reloads_total{result="applied",source="file"} 1"#,
        r#"sluice_config_reloads_total{result="rejected",source="file"} 2"#,
        r#"sluice_config_reloads_total{result="rejected",source="sighup"} 1"#,
        r#"sluice_config_reloads_total{result="applied",source="sighup"} 0"#,
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
}

/// Lets the watcher run until the paused clock has moved `secs` seconds.
async fn advance(secs: u64) {
    for _ in 0..secs * 10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The results of the changes the file poll made (a SIGHUP sent by another
/// test reaches every watcher in the process, so those are left out).
fn file_results(events: &EventLog) -> Vec<String> {
    events
        .list()
        .into_iter()
        .filter(|e| e.source == "file")
        .map(|e| e.result)
        .collect()
}

/// A SIGHUP reaches every watcher in the process: the two watcher tests
/// must not overlap, or one's signal reloads the other's file early.
static SIGNAL_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(start_paused = true)]
async fn the_watcher_reloads_on_change_only() {
    let _serial = SIGNAL_TESTS.lock().await;
    let (s, shared) = store();
    let file = TempFile::new("watch", &ab_chat(""));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(watch_config_file(s.clone(), file.0.clone(), cancel.clone()));

    // Unchanged content is not reloaded, however long it sits.
    advance(3).await;
    assert!(file_results(&shared.events).is_empty());

    file.write(&ab_chat("").replace("b: 0", "b: 5"));
    advance(2).await;
    assert_eq!(file_results(&shared.events), ["applied"]);
    assert_eq!(split(&s)[1], ("b".to_string(), 5));

    // A broken file is rejected once, not once a second.
    file.write("{");
    advance(3).await;
    assert_eq!(file_results(&shared.events), ["applied", "rejected"]);
    assert_eq!(split(&s)[1], ("b".to_string(), 5));

    // Fixing it applies it.
    file.write(&ab_chat("").replace("b: 0", "b: 7"));
    advance(2).await;
    assert_eq!(
        file_results(&shared.events),
        ["applied", "rejected", "applied"]
    );
    assert_eq!(split(&s)[1], ("b".to_string(), 7));

    cancel.cancel();
    task.await.unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn sighup_reloads_at_once() {
    let _serial = SIGNAL_TESTS.lock().await;
    use tokio::signal::unix::{signal, SignalKind};
    // Once any SIGHUP handler is installed the signal no longer ends the
    // process, so sending one before the watcher listens is harmless.
    let _ours = signal(SignalKind::hangup()).unwrap();
    let (s, shared) = store();
    let file = TempFile::new("sighup", &ab_chat(""));
    let cancel = CancellationToken::new();
    let task = tokio::spawn(watch_config_file(s.clone(), file.0.clone(), cancel.clone()));
    // Same content: only the signal can make this reload.
    let pid = std::process::id().to_string();
    let mut reloaded = false;
    for _ in 0..100 {
        let status = std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::sleep(Duration::from_millis(100)).await;
        let events = shared.events.list();
        if let Some(e) = events.iter().find(|e| e.source == "sighup") {
            assert_eq!(e.action, ACTION);
            assert_eq!(e.result, "applied");
            reloaded = true;
            break;
        }
    }
    assert!(reloaded, "no reload after SIGHUP");
    cancel.cancel();
    task.await.unwrap();
}
