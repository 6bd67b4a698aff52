// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

use super::*;

/// Stats with their aggregator task running, as the control plane runs them.
struct Running {
    stats: Arc<Stats>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start() -> Running {
        let stats = Stats::new();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(stats.clone().run_aggregator(cancel.clone()));
        Running {
            stats,
            cancel,
            task,
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn window_reports_rates_errors_and_percentiles_then_forgets() {
    let running = Running::start();
    let stats = &running.stats;
    let key = stats.key("chat", "a", "v1");
    assert_eq!(stats.key("chat", "a", "v1"), key);
    tokio::time::advance(Duration::from_secs(10)).await;
    for i in 0..100u64 {
        stats.record(Sample {
            load: false,
            grpc: None,
            key,
            status: if i < 5 { 503 } else { 200 },
            latency: Duration::from_millis(i + 1),
            tokens: (i < 10).then(|| TokenSample {
                ttft: Some(Duration::from_millis(100 + i)),
                tpot: Some(Duration::from_millis(20)),
                gaps: vec![Duration::from_millis(10); 4],
                output_tokens: 5,
                ..TokenSample::default()
            }),
        });
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let rows = stats.rows();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!((r.requests, r.errors), (100, 5));
    assert!((r.rps - 10.0).abs() < 0.01);
    assert!((r.error_rate - 0.05).abs() < 1e-9);
    assert!((49.0..=51.0).contains(&r.latency_ms.p50), "{r:?}");
    assert!((98.0..=100.5).contains(&r.latency_ms.p99), "{r:?}");
    let ttft = r.ttft_ms.clone().unwrap();
    assert!((104.0..=106.0).contains(&ttft.p50), "{r:?}");
    assert!(
        (9.9..=10.1).contains(&r.gap_ms.clone().unwrap().p99),
        "{r:?}"
    );
    assert_eq!(r.output_tokens, 50);
    assert!((r.output_tokens_per_second - 5.0).abs() < 0.01);
    tokio::time::advance(Duration::from_secs(11)).await;
    assert!(stats.rows().is_empty());
    running.stop().await;
}

fn sample(key: StatsKey, status: u16, ttft_ms: u64) -> Sample {
    Sample {
        load: false,
        grpc: None,
        key,
        status,
        latency: Duration::from_millis(ttft_ms + 100),
        tokens: Some(TokenSample {
            ttft: Some(Duration::from_millis(ttft_ms)),
            tpot: Some(Duration::from_millis(10)),
            gaps: vec![Duration::from_millis(10), Duration::from_millis(30)],
            output_tokens: 3,
            ..TokenSample::default()
        }),
    }
}

/// Lets the aggregator fold what was recorded (paused clock: it runs before
/// time moves on).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn the_current_partial_second_counts_at_once() {
    let running = Running::start();
    let stats = &running.stats;
    let key = stats.key("chat", "canary", "v2");
    tokio::time::advance(Duration::from_millis(10_500)).await;
    for _ in 0..20 {
        stats.record(sample(key, 200, 400));
    }
    settle().await;
    let v = stats.view(key, Duration::from_secs(10));
    assert_eq!((v.requests, v.errors, v.gap_requests), (20, 0, 20));
    assert_eq!(v.count(Measure::Ttft), 20);
    assert_eq!(v.count(Measure::Gap), 40);
    assert!((398.0..=402.0).contains(&v.quantile_ms(Measure::Ttft, 0.95).unwrap()));
    assert!((29.0..=31.0).contains(&v.quantile_ms(Measure::Gap, 0.99).unwrap()));
    assert_eq!(v.error_percent(), Some(0.0));
    // Another key saw nothing.
    let other = stats.view(stats.key("chat", "stable", "v1"), Duration::from_secs(10));
    assert_eq!(other.requests, 0);
    assert_eq!(other.quantile_ms(Measure::Ttft, 0.95), None);
    assert_eq!(other.error_percent(), None);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_view_reads_any_window_up_to_a_minute() {
    let running = Running::start();
    let stats = &running.stats;
    let key = stats.key("chat", "canary", "v2");
    // Asking once keeps a minute of history for the key from then on.
    assert_eq!(stats.view(key, Duration::from_secs(60)).requests, 0);
    // One request a second for 50 s, the last five of them errors.
    for s in 0..50u64 {
        stats.record(sample(key, if s >= 45 { 500 } else { 200 }, 100 + s));
        settle().await;
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    // Now in second 50, which has nothing yet.
    let count = |secs: u64| stats.view(key, Duration::from_secs(secs)).requests;
    assert_eq!(count(1), 0);
    assert_eq!(count(2), 1);
    assert_eq!(count(10), 9);
    assert_eq!(count(30), 29);
    assert_eq!(count(60), 50);
    // Beyond a minute is a minute; a fraction of a second rounds up.
    assert_eq!(count(600), 50);
    assert_eq!(
        stats.view(key, Duration::from_millis(1500)).requests,
        count(2)
    );
    let v = stats.view(key, Duration::from_secs(10));
    assert_eq!(v.errors, 5);
    assert_eq!(v.error_percent(), Some(5.0 * 100.0 / 9.0));
    // /v1/stats keeps its ten-second window.
    let rows = stats.rows();
    assert_eq!(rows[0].requests, 9);
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(count(60), 0);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn growing_a_ring_keeps_its_history() {
    let running = Running::start();
    let stats = &running.stats;
    let key = stats.key("chat", "a", "v1");
    for _ in 0..8 {
        stats.record(sample(key, 200, 50));
        settle().await;
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    // The ring was ten seconds long; asking for thirty keeps the eight.
    assert_eq!(stats.view(key, Duration::from_secs(30)).requests, 8);
    for _ in 0..20 {
        stats.record(sample(key, 200, 50));
        settle().await;
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(stats.view(key, Duration::from_secs(30)).requests, 28);
    running.stop().await;
}

#[test]
fn views_merge_and_skip_what_they_never_saw() {
    let key = StatsKey(0);
    let mut a = WindowView::default();
    a.add(&Sample {
        load: false,
        grpc: None,
        key,
        status: 200,
        latency: Duration::from_millis(5),
        tokens: None,
    });
    assert_eq!(a.count(Measure::Ttft), 0);
    let mut b = WindowView::default();
    b.add(&sample(key, 503, 200));
    a.merge(&b);
    assert_eq!((a.requests, a.errors, a.output_tokens), (2, 1, 3));
    assert_eq!(a.count(Measure::Latency), 2);
    assert_eq!(a.count(Measure::Ttft), 1);
    assert_eq!(a.error_percent(), Some(50.0));
}

#[tokio::test(start_paused = true)]
async fn load_traffic_counts_unless_a_view_leaves_it_out() {
    let running = Running::start();
    let stats = &running.stats;
    let key = stats.key("chat", "canary", "v2");
    // A rollout's 30 s window, asked before any traffic, grows both rings.
    let users = |stats: &Stats| stats.view_of(key, Duration::from_secs(30), &Measure::ALL, false);
    assert_eq!(users(stats).requests, 0);
    tokio::time::advance(Duration::from_secs(10)).await;
    for i in 0..30u64 {
        // Users: 10 fast answers; load: 20 slow errors, in the same seconds.
        if i < 10 {
            stats.record(sample(key, 200, 100));
        }
        let mut load = sample(key, 500, 900);
        load.load = true;
        stats.record(load);
        if i % 10 == 9 {
            tokio::time::advance(Duration::from_secs(1)).await;
        }
    }
    settle().await;
    let all = stats.view(key, Duration::from_secs(30));
    assert_eq!((all.requests, all.errors), (40, 30));
    let only = users(stats);
    assert_eq!((only.requests, only.errors), (10, 0));
    assert_eq!(only.count(Measure::Ttft), 10);
    assert!((99.0..=101.0).contains(&only.quantile_ms(Measure::Ttft, 0.99).unwrap()));
    // `/v1/stats` shows all of it.
    let rows = stats.rows();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].requests, rows[0].errors), (40, 30));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn token_points_are_kept_per_second_up_to_the_cap_and_merged_only_when_asked() {
    let running = Running::start();
    let stats = &running.stats;
    let (a, b) = (stats.key("chat", "a", "v1"), stats.key("other", "a", "v1"));
    tokio::time::advance(Duration::from_secs(5)).await;
    // 600 answers of route chat in one second (over the cap), and two of
    // route other.
    for i in 0..600u64 {
        stats.record(Sample {
            tokens: Some(TokenSample {
                output_tokens: 10 + i,
                ..TokenSample::default()
            }),
            latency: Duration::from_millis(100 + i),
            ..sample(a, 200, 0)
        });
    }
    stats.record(sample(b, 200, 50));
    stats.record(Sample {
        tokens: Some(TokenSample {
            output_tokens: 7,
            ..TokenSample::default()
        }),
        latency: Duration::from_millis(70),
        ..sample(b, 200, 0)
    });
    settle().await;
    let window = Duration::from_secs(2);
    let view = stats.view_merged(&[a, b], window, &[Measure::TokenPoints]);
    assert_eq!(view.requests, 602);
    assert_eq!(view.token_points.len(), MAX_TOKEN_POINTS + 2);
    assert_eq!(view.token_points[0], (10, 100.0));
    assert!(view.token_points.contains(&(7, 70.0)));
    assert!(view.token_points.contains(&(3, 150.0)));
    // The histograms' readers do not pay for the points.
    assert!(stats.view(a, window).token_points.is_empty());
    // The next second keeps its own.
    tokio::time::advance(Duration::from_secs(1)).await;
    stats.record(Sample {
        tokens: Some(TokenSample {
            output_tokens: 3,
            ..TokenSample::default()
        }),
        ..sample(a, 200, 0)
    });
    settle().await;
    let view = stats.view_merged(&[a], window, &[Measure::TokenPoints]);
    assert_eq!(view.token_points.len(), MAX_TOKEN_POINTS + 1);
    running.stop().await;
}
