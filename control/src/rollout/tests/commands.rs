//! Operators: commands, rollouts added and removed at run time, weights
//! changed by hand.

use super::*;
use crate::config::{RawConfig, RawRollout};
use crate::rollout::{Command, RolloutError};

#[tokio::test(start_paused = true)]
async fn pause_resume_promote() {
    let mut h = Harness::start(&rollout(", gates: { error_rate: 1% }")).await;
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |s| s.weight == 5)
        .await;
    assert_eq!(s.weight, 5);
    let s = h.rollouts.command("chat-v2", Command::Pause).unwrap();
    assert_eq!((s.state, s.weight), (State::Paused, 5));
    assert_eq!(
        h.rollouts.command("chat-v2", Command::Pause),
        Err(RolloutError::NotAllowed(
            "cannot pause a rollout that is paused".into()
        ))
    );
    // Three holds go by while paused: the weight stays.
    let s = h
        .drive(Duration::from_secs(180), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::Paused, 5));
    let s = h.rollouts.command("chat-v2", Command::Resume).unwrap();
    assert_eq!(s.state, State::Progressing);
    // The hold starts again from the resume.
    let resumed = Instant::now();
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |s| s.weight == 20)
        .await;
    let waited = Instant::now() - resumed;
    assert!(waited >= Duration::from_secs(60), "{waited:?}");
    assert_eq!(s.weight, 20);
    let s = h.rollouts.command("chat-v2", Command::Promote).unwrap();
    assert_eq!((s.state, s.weight), (State::Promoted, 100));
    assert_eq!(h.split(), (0, 100));
    assert_eq!(
        h.rollouts.command("chat-v2", Command::Abort),
        Err(RolloutError::NotAllowed(
            "cannot abort a rollout that is promoted".into()
        ))
    );
    let audit = h.audit();
    assert_eq!(
        audit[2..],
        [
            "api: rollout chat-v2: paused (operator: pause)",
            "api: rollout chat-v2: step 2 → weight 5 (operator: resume)",
            "rollout chat-v2: step 3 → weight 20 (held 1m with every judged gate passing)",
            "api: rollout chat-v2: promoted → weight 100 (operator: promote)",
            "api: rollout chat-v2: finished (promoted), out of the config",
        ]
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn abort_sets_the_canary_to_zero() {
    let mut h = Harness::start(&rollout(", gates: { error_rate: 1% }")).await;
    h.drive(Duration::from_secs(120), 1000, |_| GOOD, |s| s.weight == 5)
        .await;
    let s = h.rollouts.command("chat-v2", Command::Abort).unwrap();
    assert_eq!((s.state, s.weight), (State::Aborted, 0));
    assert_eq!(h.split(), (100, 0));
    // Final: the controller has stopped, nothing moves any more.
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::Aborted, 0));
    assert_eq!(
        h.rollouts.command("nope", Command::Abort),
        Err(RolloutError::Unknown("nope".into()))
    );
    h.stop().await;
}

fn raw(text: &str) -> RawRollout {
    RawRollout::from_yaml(text).unwrap()
}

#[tokio::test(start_paused = true)]
async fn rollouts_added_and_removed_at_run_time_live_in_the_config() {
    let mut h = Harness::start("").await;
    assert!(h.rollouts.list().is_empty());
    let body = "{name: chat-v2, route: chat, stable: stable, canary: canary, hold: 10s, \
                min_requests: 20, gates: {ttft_p95: 150ms}}";
    let s = h.rollouts.add(raw(body)).unwrap();
    assert_eq!((s.state, s.weight), (State::Pending, 0));
    assert_eq!(h.store.load().config.raw.rollouts[0].name, "chat-v2");
    assert_eq!(
        h.rollouts.add(raw(body)),
        Err(RolloutError::Exists("chat-v2".into()))
    );
    // It runs like one from the config file.
    let s = h
        .drive(Duration::from_secs(60), 1000, |_| GOOD, |s| s.weight == 20)
        .await;
    assert_eq!(s.weight, 20);
    assert_eq!(h.rollouts.list().len(), 1);
    assert!(h.rollouts.list()[0].events.is_none());
    // Removing it stops it where it stands.
    h.rollouts.remove("chat-v2").unwrap();
    assert!(h.rollouts.list().is_empty());
    assert!(h.store.load().config.rollouts.is_empty());
    for _ in 0..600 {
        h.slice(1000, &|_| GOOD).await;
    }
    assert_eq!(h.split(), (80, 20));
    assert!(!h.metrics().contains("sluice_rollout_weight{"));
    assert_eq!(
        h.rollouts.remove("chat-v2"),
        Err(RolloutError::Unknown("chat-v2".into()))
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_bad_rollout_is_refused_with_paths_relative_to_it() {
    let h = Harness::start("").await;
    let e = h
        .rollouts
        .add(raw(
            "{name: x, route: chat, stable: stable, canary: nope, steps: [5], gates: {}}",
        ))
        .unwrap_err();
    let RolloutError::Invalid(errors) = e else {
        panic!("{e:?}")
    };
    assert_eq!(
        errors.to_string(),
        "canary: cluster `nope` is not in the split of route `chat`\n\
         steps: the last step must be 100, found 5\n\
         gates: at least one gate is required"
    );
    assert!(h.store.load().config.rollouts.is_empty());
    assert_eq!(
        RawRollout::from_yaml("").unwrap_err().to_string(),
        ": a rollout is required (YAML or JSON, the shape of one `rollouts:` item)"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn weights_changed_by_hand_pause_the_rollout() {
    let mut h = Harness::start(&rollout(", gates: { error_rate: 1% }")).await;
    h.drive(Duration::from_secs(120), 1000, |_| GOOD, |s| s.weight == 5)
        .await;
    h.store
        .apply("api", "set split of route chat", |raw| {
            raw.routes[0].split.insert("canary".into(), 0);
            raw.routes[0].split.insert("stable".into(), 100);
            Ok(())
        })
        .unwrap();
    let s = h
        .drive(
            Duration::from_secs(5),
            1000,
            |_| GOOD,
            |s| s.state == State::Paused,
        )
        .await;
    assert_eq!(s.state, State::Paused);
    let last = s.events.unwrap().pop().unwrap();
    assert_eq!(
        last.reason,
        "the split of route chat was changed outside the rollout (stable: 100, canary: 0; \
         the rollout set 95 and 5)"
    );
    // It stays as the operator left it until resumed, which restores its step.
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, h.split()), (State::Paused, (100, 0)));
    h.rollouts.command("chat-v2", Command::Resume).unwrap();
    assert_eq!(h.split(), (95, 5));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_changed_definition_is_taken_in_place() {
    let mut h = Harness::start(&rollout(", gates: { error_rate: 1% }")).await;
    h.drive(Duration::from_secs(120), 1000, |_| GOOD, |s| s.weight == 5)
        .await;
    h.store
        .apply("api", "edit rollout", |raw| {
            raw.rollouts[0].steps = Some(vec![5, 50, 100]);
            Ok(())
        })
        .unwrap();
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |s| s.weight > 5)
        .await;
    assert_eq!((s.weight, s.steps.as_slice()), (50, &[5, 50, 100][..]));
    assert_eq!(h.weights, [1, 5, 50]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_finished_rollout_the_config_lists_again_is_not_started_again() {
    let h = Harness::start(&rollout(", gates: { error_rate: 1% }")).await;
    let file = h.store.load().config.raw.clone();
    h.rollouts.command("chat-v2", Command::Promote).unwrap();
    assert!(h.store.load().config.rollouts.is_empty());
    // A reload of the file it came from lists it again: it is taken out
    // again and stays as it finished.
    let reload = |raw: RawConfig| {
        h.store
            .apply("reload", "reload config file", |r| {
                *r = raw;
                Ok(())
            })
            .unwrap();
    };
    reload(file.clone());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(h.store.load().config.rollouts.is_empty());
    assert_eq!(h.status().state, State::Promoted);
    assert_eq!(
        h.audit().last().unwrap(),
        "rollout chat-v2: has finished (promoted), not started again; delete it to run it again"
    );
    // Deleted, it runs again from the start.
    h.rollouts.remove("chat-v2").unwrap();
    assert_eq!(
        h.rollouts.status("chat-v2"),
        Err(RolloutError::Unknown("chat-v2".into()))
    );
    reload(file);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(h.status().state, State::Progressing);
    assert_eq!(h.status().step, 1);
    h.stop().await;
}
