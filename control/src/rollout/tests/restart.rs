//! Rollouts across a restart with `runtime.state_dir`: the state the
//! writer would have saved at that moment goes through the file format and
//! the overlay into a fresh store and registry, as `ControlPlane::start`
//! does after a `kill -9`.

use super::*;
use crate::rollout::Command;
use crate::state::{capture, overlay, StateFile};

impl Harness {
    /// Ends this control plane as a `kill -9` would (nothing more is
    /// written), and starts a new one from the state saved now.
    async fn restart(self) -> Harness {
        let now_ms = 1_000_000;
        let saved = capture(
            &self.store.load(),
            &self.store.base(),
            self.rollouts.saved(),
            Instant::now().into_std(),
            now_ms,
        );
        let text = serde_json::to_vec(&saved).unwrap();
        let state = StateFile::parse(std::path::Path::new("state.json"), &text).unwrap();
        let base = (*self.store.base()).clone();
        let load = self.load;
        self.stop().await;
        let restored = overlay(&base, &state, now_ms).unwrap();
        let shared = Shared::new().unwrap();
        let store = SnapshotStore::with_base(restored.config.clone(), base, &shared);
        let signals = Arc::new(FakeSignals::default());
        let rollouts = Rollouts::with_signals(store.clone(), shared.clone(), signals.clone());
        rollouts.restore(restored.controllers, restored.finished);
        Harness::on(store, shared, rollouts, signals, load).await
    }
}

fn steps(extra: &str) -> String {
    rollout(&format!(
        ", steps: [10, 50, 100], interval: 1s, gates: {{ error_rate: 1% }}{extra}"
    ))
}

#[tokio::test(start_paused = true)]
async fn a_rollout_goes_on_from_its_step_after_a_restart() {
    let mut h = Harness::start(&steps("")).await;
    let s = h
        .drive(Duration::from_secs(180), 1000, |_| GOOD, |s| s.step == 2)
        .await;
    assert_eq!((s.state, s.step, s.weight), (State::Progressing, 2, 50));
    // Mid-hold at step 2.
    h.drive(Duration::from_secs(20), 1000, |_| GOOD, |_| false)
        .await;
    let before = h.status().events.unwrap();
    let mut h = h.restart().await;
    let s = h.status();
    assert_eq!((s.state, s.step, s.weight), (State::Progressing, 2, 50));
    assert_eq!(h.split(), (50, 50));
    let events = s.events.unwrap();
    assert_eq!(events[..before.len()], before[..]);
    assert_eq!(
        events.last().unwrap().reason,
        "sluice restarted; goes on from the saved state"
    );
    // On from step 2: the next weight is 100, never 10 again; the hold at
    // step 2 starts again from the restart.
    let restarted = Instant::now();
    let s = h
        .drive(Duration::from_secs(180), 1000, |_| GOOD, is_final)
        .await;
    assert_eq!((s.state, s.weight), (State::Promoted, 100));
    assert!(Instant::now() - restarted >= Duration::from_secs(60));
    assert_eq!(h.weights, [50, 100]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn on_restart_pause_comes_back_paused_at_its_step() {
    let mut h = Harness::start(&steps(", on_restart: pause")).await;
    h.drive(Duration::from_secs(180), 1000, |_| GOOD, |s| s.step == 2)
        .await;
    let mut h = h.restart().await;
    let s = h.status();
    assert_eq!((s.state, s.step, s.weight), (State::Paused, 2, 50));
    assert_eq!(
        s.events.unwrap().last().unwrap().reason,
        "sluice restarted (on_restart: pause)"
    );
    // Paused: two holds go by at 50.
    let s = h
        .drive(Duration::from_secs(130), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::Paused, 50));
    let s = h.rollouts.command("chat-v2", Command::Resume).unwrap();
    assert_eq!((s.state, s.step, s.weight), (State::Progressing, 2, 50));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_paused_rollout_stays_paused_at_its_step() {
    let mut h = Harness::start(&steps("")).await;
    h.drive(Duration::from_secs(180), 1000, |_| GOOD, |s| s.step == 2)
        .await;
    h.rollouts.command("chat-v2", Command::Pause).unwrap();
    let h = h.restart().await;
    let s = h.status();
    assert_eq!((s.state, s.step, s.weight), (State::Paused, 2, 50));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_aborted_rollout_stays_aborted_with_its_canary_at_0() {
    let mut h = Harness::start(&steps("")).await;
    h.drive(Duration::from_secs(60), 1000, |_| GOOD, |s| s.weight == 10)
        .await;
    let s = h.rollouts.command("chat-v2", Command::Abort).unwrap();
    assert_eq!((s.state, s.weight), (State::Aborted, 0));
    assert!(h.store.load().config.rollouts.is_empty());
    let mut h = h.restart().await;
    // The file lists it, the state does not: it is in the history, not run.
    assert!(h.store.load().config.rollouts.is_empty());
    let s = h
        .drive(Duration::from_secs(30), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::Aborted, 0));
    assert_eq!(h.split(), (100, 0));
    assert_eq!(h.weights, [0]);
    let listed = h.rollouts.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, State::Aborted);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_rolled_back_rollout_stays_rolled_back() {
    let mut h = Harness::start(&steps("")).await;
    let bad = Shape { errors: 50, ..GOOD };
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| bad, is_final)
        .await;
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
    let mut h = h.restart().await;
    let s = h
        .drive(Duration::from_secs(30), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
    assert_eq!(h.split(), (100, 0));
    assert!(h.store.load().config.rollouts.is_empty());
    h.stop().await;
}
