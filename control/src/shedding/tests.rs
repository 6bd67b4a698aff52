// Tests spawn the loop on their own runtime, which ends with them.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use rand::{Rng, SeedableRng};

use super::*;
use crate::stats::{Sample, TokenSample};
use crate::testing::{ab_chat, stop, store, MetricsServer};

const SHEDDING: &str = "shedding: { priority: { levels: [interactive, batch] }, \
     bounds: { ttft_p95: 500ms }, window: 2s, interval: 250ms, hold: 3s, min_requests: 5 }";

/// The store on route `chat` (all on cluster `a`) with `shedding`, its
/// stats aggregator and the shedding loop running.
struct Running {
    store: Arc<SnapshotStore>,
    shared: Shared,
    cancel: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    fn start(shedding: &str) -> Running {
        let (store, shared) = store(&ab_chat(shedding));
        let cancel = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(shared.stats.clone().run_aggregator(cancel.clone())),
            tokio::spawn(run_shedding(
                store.clone(),
                shared.clone(),
                Observers::default(),
                cancel.clone(),
            )),
        ];
        Running {
            store,
            shared,
            cancel,
            tasks,
        }
    }

    fn runtime(&self) -> Arc<RouteShedding> {
        self.store.load().routes[0].shedding.clone().unwrap()
    }

    /// One answer through route `chat` to cluster `a`.
    fn answer(&self, ttft_ms: u64, tokens: u64, e2e_ms: f64) {
        let key = self.shared.stats.key("chat", "a", "v1");
        self.shared.stats.record(Sample {
            key,
            status: 200,
            latency: Duration::from_secs_f64(e2e_ms / 1000.0),
            tokens: Some(TokenSample {
                ttft: Some(Duration::from_millis(ttft_ms)),
                output_tokens: tokens,
                ..TokenSample::default()
            }),
            load: false,
            grpc: None,
        });
    }

    fn shedding_events(&self) -> Vec<crate::events::Event> {
        self.shared
            .events
            .list()
            .into_iter()
            .filter(|e| e.source == "shedding")
            .collect()
    }

    async fn stop(self) {
        for task in self.tasks {
            stop(&self.cancel, task).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_breach_sheds_batch_and_calm_holds_restore_it_step_by_step_each_change_an_event() {
    let running = Running::start(SHEDDING);
    let route = running.runtime();
    assert_eq!(route.level(), 0.0);
    let (batch, interactive) = (route.rank(Some(b"batch")), route.rank(Some(b"interactive")));
    assert_eq!((interactive, batch, route.rank(None)), (0, 1, 1));
    assert!(!route.sheds(batch, 0));
    // Five slow first tokens: over the 500 ms bound.
    for _ in 0..5 {
        running.answer(900, 10, 1000.0);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(route.level(), 1.0);
    assert!(route.sheds(batch, 0) && route.sheds(batch, u64::MAX));
    assert!(!route.sheds(interactive, 0));
    assert_eq!(route.metrics.shed[1].get(), 2);
    assert_eq!(route.metrics.level.get(), 1.0);
    let events = running.shedding_events();
    assert_eq!(events.len(), 1, "{events:?}");
    let evidence = events[0].evidence.clone().unwrap();
    // The windows' histograms keep two significant digits and a half.
    let p95 = evidence["signals"][0]["value"].as_f64().unwrap();
    assert!((895.0..=905.0).contains(&p95), "{p95}");
    assert_eq!(
        events[0].action,
        format!(
            "route chat: shedding level 0 -> 1: ttft_p95 {}ms > 500ms",
            p95.round()
        )
    );
    assert_eq!(
        evidence,
        serde_json::json!({"route": "chat", "from": 0.0, "to": 1.0, "signals": [
            {"signal": "ttft_p95", "value": p95, "bound": 500.0, "breached": true},
        ]})
    );
    // The highest level of two priorities is 1: still breached, it stays.
    for _ in 0..5 {
        running.answer(900, 10, 1000.0);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(route.level(), 1.0);
    // Nothing more arrives: the slow answers leave the 2 s window, the
    // signals read nothing (calm), and batch comes back a quarter at a
    // time, one 3 s hold each.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(route.level(), 1.0, "the hold is not over");
    let mut seen = Vec::new();
    for _ in 0..80 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if seen.last() != Some(&route.level()) {
            seen.push(route.level());
        }
    }
    assert_eq!(seen, [1.0, 0.75, 0.5, 0.25, 0.0]);
    assert!(!route.sheds(batch, 0));
    let events = running.shedding_events();
    let to: Vec<f64> = events
        .iter()
        .map(|e| e.evidence.as_ref().unwrap()["to"].as_f64().unwrap())
        .collect();
    assert_eq!(to, [1.0, 0.75, 0.5, 0.25, 0.0]);
    assert_eq!(
        events[1].action,
        "route chat: shedding level 1 -> 0.75: ttft_p95 n/a vs 500ms"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_partly_restored_priority_is_shed_by_its_share() {
    let running = Running::start(
        "shedding: { priority: { levels: [interactive, batch] }, bounds: { ttft_p95: 500ms }, \
         window: 1s, interval: 250ms, hold: 1s, min_requests: 5, restore_steps: 2 }",
    );
    let route = running.runtime();
    for _ in 0..5 {
        running.answer(900, 10, 1000.0);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(route.level(), 1.0);
    while route.level() == 1.0 {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(route.level(), 0.5);
    // Half the random numbers shed a batch request; interactive never.
    let shed = (0..100u64)
        .filter(|i| route.sheds(1, (2 * i + 1) * (u64::MAX / 200)))
        .count();
    assert_eq!(shed, 50);
    assert!(!route.sheds(0, 0));
    assert_eq!(route.metrics.level.get(), 0.5);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn answers_between_the_bound_and_its_recovery_hold_the_level() {
    let running = Running::start(SHEDDING);
    let route = running.runtime();
    for _ in 0..5 {
        running.answer(900, 10, 1000.0);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(route.level(), 1.0);
    // 450 ms first tokens for 8 s: under the bound, over 80% of it.
    for _ in 0..32 {
        for _ in 0..5 {
            running.answer(450, 10, 500.0);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(route.level(), 1.0);
    assert_eq!(running.shedding_events().len(), 1);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_token_cost_over_its_calm_baseline_sheds() {
    let running = Running::start(
        "shedding: { priority: { levels: [interactive, batch] }, \
         bounds: { token_cost_excess_p99: 0.8ms }, window: 2s, interval: 1s, hold: 3s }",
    );
    let route = running.runtime();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // Calm: 100 answers a second at 5 ms a token (the baseline), then
    // busier: 200 a second at 7 ms a token, 2 ms over it.
    for (per_second, ms_per_token, seconds) in [(100, 5.0, 4), (200, 7.0, 3)] {
        for _ in 0..seconds * 4 {
            for _ in 0..per_second / 4 {
                let tokens: u64 = rng.random_range(16..=256);
                let jitter: f64 = rng.random_range(0.0..10.0);
                running.answer(40, tokens, 40.0 + ms_per_token * tokens as f64 + jitter);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if ms_per_token == 5.0 {
            assert_eq!(route.level(), 0.0, "the baseline itself is no excess");
        }
    }
    assert_eq!(route.level(), 1.0);
    let events = running.shedding_events();
    assert_eq!(events.len(), 1, "{events:?}");
    let signal = &events[0].evidence.as_ref().unwrap()["signals"][0];
    assert_eq!(signal["signal"], "token_cost_excess_p99");
    let excess = signal["value"].as_f64().unwrap();
    assert!((1.7..2.3).contains(&excess), "{excess}");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_changed_rule_starts_at_level_zero_and_an_unchanged_one_keeps_its_level() {
    let running = Running::start(SHEDDING);
    for _ in 0..5 {
        running.answer(900, 10, 1000.0);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(running.runtime().level(), 1.0);
    // A split change rebuilds the snapshot: the shedding rule is the same.
    running
        .store
        .apply("test", "touch split", |raw| {
            raw.routes[0].split.insert("b".into(), 0);
            raw.routes[0].split.insert("a".into(), 100);
            raw.routes[0].allow_version_header = Some(true);
            Ok(())
        })
        .unwrap();
    assert_eq!(running.runtime().level(), 1.0);
    running
        .store
        .apply("test", "longer hold", |raw| {
            let s = raw.routes[0].shedding.as_mut().unwrap();
            s.hold = Some("10s".into());
            Ok(())
        })
        .unwrap();
    assert_eq!(running.runtime().level(), 0.0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_servers_queue_gauge_sheds_and_its_fall_restores() {
    let server = MetricsServer::start(
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 40\n"
            .to_owned(),
    )
    .await;
    let yaml = format!(
        "listeners:\n  - {{ name: public, listen: 127.0.0.1:18080, protocol: http }}\n\
         clusters:\n  - {{ name: vllm, kind: llm, endpoints: [{}], metrics_path: /metrics, \
         metrics_interval: 1s }}\n\
         routes:\n  - {{ name: chat, listener: public, split: {{ vllm: 100 }}, \
         shedding: {{ priority: {{ levels: [interactive, batch] }}, bounds: {{ queue: 16 }}, \
         interval: 50ms, hold: 200ms, restore_steps: 1 }} }}\n",
        server.addr
    );
    let (store, shared) = store(&yaml);
    let registry = prometheus::Registry::new();
    let observers = Observers {
        gpu: None,
        upstreams: Some(crate::upstream_metrics::UpstreamScraper::new(&registry).unwrap()),
    };
    let cancel = CancellationToken::new();
    let scraper = observers.upstreams.clone().unwrap();
    let tasks = [
        tokio::spawn(scraper.run(store.clone(), cancel.clone())),
        tokio::spawn(run_shedding(
            store.clone(),
            shared.clone(),
            observers,
            cancel.clone(),
        )),
    ];
    let route = store.load().routes[0].shedding.clone().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while route.level() == 0.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(route.level(), 1.0);
    let events: Vec<_> = shared
        .events
        .list()
        .into_iter()
        .filter(|e| e.source == "shedding")
        .collect();
    assert_eq!(
        events[0].action,
        "route chat: shedding level 0 -> 1: queue 40 > 16"
    );
    // The server stops answering: no reading is calm, and after the hold
    // the level is 0.
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(10);
    while route.level() > 0.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(route.level(), 0.0);
    for task in tasks {
        stop(&cancel, task).await;
    }
}
