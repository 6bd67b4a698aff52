//! Rollouts driven end to end inside the control plane under paused tokio
//! time: synthetic traffic goes into the real stats windows (split by the
//! live weights, as the data plane would), the real registry and
//! controllers decide, the store swaps. A five-minute rollout takes
//! milliseconds.
// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod commands;
mod gates;
mod plan;
mod restart;
mod walk;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{RolloutStatus, Rollouts, Signals, State};
use crate::shared::Shared;
use crate::stats::{GrpcOutcome, Sample, StatsKey, TokenSample};
use crate::store::SnapshotStore;
use crate::testing::{self, stable_canary};

/// GPU and model-server readings the test sets.
#[derive(Default)]
pub(super) struct FakeSignals {
    gpu: Mutex<Option<f64>>,
    waiting: Mutex<Option<f64>>,
}

impl FakeSignals {
    fn set(&self, gpu: Option<f64>, waiting: Option<f64>) {
        *self.gpu.lock().unwrap() = gpu;
        *self.waiting.lock().unwrap() = waiting;
    }
}

impl Signals for FakeSignals {
    fn gpu_memory_percent(&self) -> Option<f64> {
        *self.gpu.lock().unwrap()
    }

    fn upstream_waiting(&self, cluster: &str) -> Option<f64> {
        assert_eq!(cluster, "canary");
        *self.waiting.lock().unwrap()
    }
}

/// How one version answers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape {
    ttft_ms: u64,
    latency_ms: u64,
    /// Percent of answers that are 500s.
    errors: u64,
}

const GOOD: Shape = Shape {
    ttft_ms: 100,
    latency_ms: 1000,
    errors: 0,
};

pub(super) struct Harness {
    store: Arc<SnapshotStore>,
    shared: Shared,
    rollouts: Arc<Rollouts>,
    signals: Arc<FakeSignals>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    keys: (StatsKey, StatsKey),
    /// Fraction of a canary request carried to the next slice.
    carry: f64,
    seq: u64,
    /// Canary requests sent so far, and when the first went.
    canary_sent: u64,
    first_canary: Option<Instant>,
    /// Every canary weight seen, without repeats.
    weights: Vec<u32>,
    /// Load traffic (`sluice load` from a trusted peer) sent to the canary
    /// in each slice on top of users', and how it answers.
    load: Option<(u64, Shape)>,
    /// The canary's requests are gRPC calls: this percent of them end with
    /// this code, the rest with OK.
    grpc: Option<(u64, u32)>,
}

impl Harness {
    /// A control plane with `rollouts` (YAML list items) in its config,
    /// started as at boot.
    async fn start(rollouts: &str) -> Harness {
        let text = match rollouts {
            "" => stable_canary(),
            r => format!("{}rollouts:\n{r}", stable_canary()),
        };
        Harness::start_config(&text).await
    }

    /// A control plane on the whole config `text` (clusters `stable` and
    /// `canary` on route `chat`, in any versions), started as at boot.
    async fn start_config(text: &str) -> Harness {
        let (store, shared) = testing::store(text);
        let signals = Arc::new(FakeSignals::default());
        let rollouts = Rollouts::with_signals(store.clone(), shared.clone(), signals.clone());
        Harness::on(store, shared, rollouts, signals, None).await
    }

    /// The tasks of a control plane on these parts, started; `load` as
    /// [`Harness::load`].
    async fn on(
        store: Arc<SnapshotStore>,
        shared: Shared,
        rollouts: Arc<Rollouts>,
        signals: Arc<FakeSignals>,
        load: Option<(u64, Shape)>,
    ) -> Harness {
        let cancel = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(shared.stats.clone().run_aggregator(cancel.clone())),
            tokio::spawn(rollouts.clone().run(cancel.clone())),
        ];
        let version = |name: &str| {
            let snapshot = store.load();
            snapshot
                .config
                .cluster(name)
                .map_or_else(String::new, |c| c.version.clone())
        };
        let keys = (
            shared.stats.key("chat", "stable", &version("stable")),
            shared.stats.key("chat", "canary", &version("canary")),
        );
        let mut h = Harness {
            store,
            shared,
            rollouts,
            signals,
            cancel,
            tasks,
            keys,
            carry: 0.0,
            seq: 0,
            canary_sent: 0,
            first_canary: None,
            weights: Vec::new(),
            load,
            grpc: None,
        };
        // Let the registry start the controllers and their first tick run.
        tokio::time::sleep(Duration::from_millis(1)).await;
        h.note_weight();
        h
    }

    /// (stable, canary) weights of the live split.
    fn split(&self) -> (u32, u32) {
        let snapshot = self.store.load();
        let split = &snapshot.config.raw.routes[0].split;
        (split["stable"], split["canary"])
    }

    fn status(&self) -> RolloutStatus {
        self.rollouts.status("chat-v2").unwrap()
    }

    fn note_weight(&mut self) {
        let w = self.split().1;
        if self.weights.last() != Some(&w) {
            self.weights.push(w);
        }
    }

    fn sample(&mut self, key: StatsKey, shape: Shape) -> Sample {
        self.seq += 1;
        Sample {
            load: false,
            grpc: None,
            key,
            status: if self.seq % 100 < shape.errors {
                500
            } else {
                200
            },
            latency: Duration::from_millis(shape.latency_ms),
            tokens: Some(TokenSample {
                ttft: Some(Duration::from_millis(shape.ttft_ms)),
                tpot: Some(Duration::from_millis(20)),
                gaps: vec![Duration::from_millis(20); 2],
                output_tokens: 10,
                ..TokenSample::default()
            }),
        }
    }

    /// 100 ms of traffic at `rps`, split by the live weights; the canary
    /// answers as `canary(its weight)` says.
    async fn slice(&mut self, rps: u64, canary: &impl Fn(u32) -> Shape) {
        let (stable_w, canary_w) = self.split();
        let total = f64::from(stable_w + canary_w).max(1.0);
        let n = rps as f64 / 10.0;
        self.carry += n * f64::from(canary_w) / total;
        let to_canary = self.carry.floor() as u64;
        self.carry -= to_canary as f64;
        let to_stable = (n * f64::from(stable_w) / total).round() as u64;
        let shape = canary(canary_w);
        for i in 0..to_canary {
            let mut s = self.sample(self.keys.1, shape);
            if let Some((percent, code)) = self.grpc {
                // Spread evenly over the canary's own calls.
                let nth = self.canary_sent + i;
                let fails = (nth + 1) * percent / 100 > nth * percent / 100;
                let code = if fails { code } else { 0 };
                s.grpc = Some(GrpcOutcome::Status(code));
            }
            self.shared.stats.record(s);
        }
        for _ in 0..to_stable {
            let s = self.sample(self.keys.0, GOOD);
            self.shared.stats.record(s);
        }
        if let Some((n, shape)) = self.load {
            for _ in 0..n {
                let mut s = self.sample(self.keys.1, shape);
                s.load = true;
                self.shared.stats.record(s);
            }
        }
        if to_canary > 0 && self.first_canary.is_none() {
            self.first_canary = Some(Instant::now());
        }
        self.canary_sent += to_canary;
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.note_weight();
    }

    /// Traffic until `until` holds of the rollout's status or `limit`
    /// passes; the status at the end.
    async fn drive(
        &mut self,
        limit: Duration,
        rps: u64,
        canary: impl Fn(u32) -> Shape,
        until: impl Fn(&RolloutStatus) -> bool,
    ) -> RolloutStatus {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            self.slice(rps, &canary).await;
            let status = self.status();
            if until(&status) {
                return status;
            }
        }
        self.status()
    }

    fn metrics(&self) -> String {
        self.shared.metrics.encode()
    }

    /// The audit log's entries about the rollout's transitions, with their
    /// source (`rollout`, or `api` for an operator's command).
    fn audit(&self) -> Vec<String> {
        self.shared
            .events
            .list()
            .into_iter()
            .filter(|e| e.action.starts_with("rollout "))
            .map(|e| match e.source.as_str() {
                "rollout" => e.action,
                source => format!("{source}: {}", e.action),
            })
            .collect()
    }

    async fn stop(self) {
        self.cancel.cancel();
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .expect("tasks end on cancel")
                .unwrap();
        }
    }
}

fn is_final(s: &RolloutStatus) -> bool {
    matches!(
        s.state,
        State::Promoted | State::RolledBack | State::Aborted
    )
}

/// A rollout on route chat with these extra fields (a YAML flow mapping's
/// tail, e.g. `, hold: 1m`).
fn rollout(extra: &str) -> String {
    format!(
        "  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, hold: 1m, \
         min_requests: 50{extra} }}\n"
    )
}
