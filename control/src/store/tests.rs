#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::testing;

fn store() -> (Arc<SnapshotStore>, Shared) {
    testing::store(&testing::ab_chat(""))
}

fn set_b(weight: u32) -> impl FnOnce(&mut RawConfig) -> Result<(), ConfigErrors> {
    move |raw| {
        raw.routes[0].split.insert("b".into(), weight);
        Ok(())
    }
}

#[test]
fn a_change_builds_a_new_snapshot_and_old_readers_keep_theirs() {
    let (s, shared) = store();
    let before = s.load();
    let after = s.apply("api", "set split", set_b(50)).unwrap();
    assert_eq!(after.version, 2);
    assert_eq!(before.version, 1);
    assert_eq!(before.routes[0].table.total(), 100);
    assert_eq!(s.load().routes[0].table.total(), 150);
    // Endpoint state carries over when endpoints did not change.
    assert!(Arc::ptr_eq(
        &before.clusters[0].endpoints,
        &after.clusters[0].endpoints
    ));
    let events = shared.events.list();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].result, "applied");
}

#[test]
fn an_invalid_change_keeps_the_old_snapshot_and_is_logged() {
    let (s, shared) = store();
    let err = s
        .apply("api", "set split", |raw| {
            raw.routes[0].split.insert("a".into(), 0);
            Ok(())
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "routes[0].split: weights sum to 0");
    assert_eq!(s.load().version, 1);
    let last = shared.events.list().pop().unwrap();
    assert_eq!(last.result, "rejected");
    assert_eq!(last.errors, ["routes[0].split: weights sum to 0"]);
}

#[test]
fn listener_changes_need_a_restart() {
    let (s, _shared) = store();
    let mut raw = s.load().config.raw.clone();
    raw.listeners[0].listen = "127.0.0.1:18081".into();
    let err = s.replace("file", raw).unwrap_err();
    assert_eq!(
        err.to_string(),
        "listeners: cannot change at run time; restart sluice to apply"
    );
}

#[test]
fn concurrent_writers_lose_nothing() {
    let (s, _shared) = store();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..50 {
                    s.apply("api", "bump", |raw| {
                        *raw.routes[0].split.get_mut("b").unwrap() += 1;
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    let snap = s.load();
    assert_eq!(snap.version, 201);
    assert_eq!(snap.config.raw.routes[0].split["b"], 200);
}
