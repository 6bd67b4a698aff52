// Tests may spawn bare tasks (each test's runtime ends with it).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

use super::*;
use crate::events::{acting_as, EventLog};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-audit-{name}-{}", std::process::id()))
}

#[tokio::test]
async fn events_and_changes_land_as_json_lines_with_the_token_name() {
    let path = temp("lines");
    let _ = std::fs::remove_file(&path);
    let registry = Registry::new();
    let (file, writer) = audit_file(path.clone(), &registry).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(writer.run(cancel.clone()));
    let log = EventLog::default();
    log.set_audit_file(file.clone());
    log.push("startup", "load config", 1, Vec::new());
    let ((), made) = acting_as("ops", || {
        log.push("api", "set split of route chat", 2, vec![])
    });
    assert_eq!(made.len(), 1);
    file.append_change(&ChangeLine {
        time_ms: 7,
        token: "ops",
        peer: "127.0.0.1".into(),
        method: "PUT",
        path: "/v1/routes/chat/split",
        status: 200,
        summary: "set split of route chat".into(),
        events: &made,
    });
    cancel.cancel();
    task.await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["kind"], "event");
    assert_eq!(lines[0]["action"], "load config");
    assert_eq!(lines[0].get("token"), None);
    assert_eq!(lines[1]["kind"], "change");
    assert_eq!(lines[1]["token"], "ops");
    assert_eq!(lines[1]["status"], 200);
    assert_eq!(lines[1]["events"][0]["token"], "ops");
    assert_eq!(log.list()[1].token.as_deref(), Some("ops"));
    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn a_write_error_is_counted_and_the_writer_goes_on() {
    let path = temp("missing-dir").join("audit.jsonl");
    let registry = Registry::new();
    let (file, writer) = audit_file(path, &registry).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(writer.run(cancel.clone()));
    let log = EventLog::default();
    log.set_audit_file(file.clone());
    log.push("startup", "load config", 1, Vec::new());
    let errors = file.errors.with_label_values(&["write"]);
    for _ in 0..200 {
        if errors.get() > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(errors.get(), 1);
    cancel.cancel();
    task.await.unwrap();
}
