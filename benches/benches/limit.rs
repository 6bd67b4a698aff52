//! The cost of one local rate-limit decision on the hot path — the budget
//! key from the descriptors, the admission against four per-minute buckets
//! and a stream slot, and the settlement when the answer ends — beside two
//! naive ways of doing the same thing:
//! - `global_mutex`: the same bucket arithmetic with every key's state in one
//!   `HashMap` behind one `std::sync::Mutex`, and the key's `String` built
//!   and looked up per request (what sluice's per-key locks avoid under
//!   contention);
//! - `sliding_log`: a per-key log of `(time, tokens)` over the last minute,
//!   summed at each admission, the usual first rate limiter, whose cost grows
//!   with the traffic in the window.
//!
//! Each case is run with one tenant and with 10,000, and on two threads at
//! once (the contended case), at a simulated 1,000 requests per second
//! (the clock advances 1 ms per request).

// A bench is a test: a broken fixture should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sluice_control::{LimitsConfig, RouteLimits};
use sluice_filters::{limit_key, Cost, Decision, Descriptor, KeyState, Limits, Metrics};

/// Limits high enough that nothing is refused: the bench measures the
/// decision, not the refusal path.
const LIMITS: Limits = Limits {
    requests_per_minute: Some(1_000_000_000),
    input_tokens_per_minute: Some(1_000_000_000_000),
    output_tokens_per_minute: Some(1_000_000_000_000),
    total_tokens_per_minute: Some(1_000_000_000_000),
    concurrent_streams: Some(1_000_000),
};

const RESERVED: Cost = Cost {
    input: 300,
    output: 1024,
};
const ACTUAL: Cost = Cost {
    input: 280,
    output: 410,
};

fn descriptors() -> Vec<Descriptor> {
    vec![Descriptor::Header("x-tenant".into()), Descriptor::Model]
}

/// The tenants' header values, one per key.
fn tenants(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tenant-{i:05}")).collect()
}

fn sluice_limits() -> RouteLimits {
    let config = LimitsConfig {
        descriptor: descriptors(),
        limits: LIMITS,
        default_max_tokens: 1024,
        store: None,
    };
    RouteLimits::new("chat", config, &Metrics::new().unwrap())
}

/// One request through sluice's limiter: key, admit, settle.
fn sluice_request(limits: &RouteLimits, tenant: &str, now_ms: u64) {
    let key = limit_key(&limits.config.descriptor, "chat", Some("llama-3"), |h| {
        (h == "x-tenant").then_some(tenant.as_bytes())
    });
    let (decision, admission) = limits.admit(&key, RESERVED, now_ms);
    black_box(&decision);
    limits.settle(admission.unwrap(), ACTUAL, now_ms);
}

/// The same arithmetic, one lock for every key.
struct GlobalMutex {
    keys: Mutex<HashMap<String, KeyState>>,
}

impl GlobalMutex {
    fn new() -> Self {
        GlobalMutex {
            keys: Mutex::new(HashMap::new()),
        }
    }

    fn request(&self, tenant: &str, now_ms: u64) {
        let key = format!("{tenant}\u{1f}llama-3");
        let mut keys = self.keys.lock().unwrap();
        let state = keys
            .entry(key.clone())
            .or_insert_with(|| KeyState::new(&LIMITS, now_ms));
        let decision = state.admit(&LIMITS, RESERVED, now_ms);
        assert!(matches!(decision, Decision::Allowed(_)));
        drop(keys);
        let mut keys = self.keys.lock().unwrap();
        keys.get_mut(&key)
            .unwrap()
            .settle(&LIMITS, RESERVED, ACTUAL, now_ms);
    }
}

/// A per-key log of the last minute's `(time, tokens)`, summed at each
/// admission; the settlement appends a correction.
struct SlidingLog {
    keys: Mutex<HashMap<String, VecDeque<(u64, i64)>>>,
}

impl SlidingLog {
    fn new() -> Self {
        SlidingLog {
            keys: Mutex::new(HashMap::new()),
        }
    }

    fn request(&self, tenant: &str, now_ms: u64) {
        let key = format!("{tenant}\u{1f}llama-3");
        let limit = LIMITS.total_tokens_per_minute.unwrap() as i64;
        let mut keys = self.keys.lock().unwrap();
        let log = keys.entry(key.clone()).or_default();
        while log
            .front()
            .is_some_and(|(t, _)| now_ms.saturating_sub(*t) >= 60_000)
        {
            log.pop_front();
        }
        let used: i64 = log.iter().map(|(_, n)| n).sum();
        let cost = RESERVED.total() as i64;
        assert!(used + cost <= limit);
        log.push_back((now_ms, cost));
        drop(keys);
        let mut keys = self.keys.lock().unwrap();
        let correction = ACTUAL.total() as i64 - cost;
        keys.get_mut(&key).unwrap().push_back((now_ms, correction));
    }
}

/// Runs `request` for `iters` requests on `threads` threads at once, each
/// cycling through the tenants from its own place; returns the wall time of
/// the slowest. The simulated clock (`clock`, ms) goes on from batch to batch
/// and both threads share it, a request per millisecond each.
fn run_threads(
    iters: u64,
    threads: usize,
    tenants: &[String],
    clock: &AtomicU64,
    request: &(impl Fn(&str, u64) + Sync),
) -> Duration {
    let per_thread = iters.div_ceil(threads as u64);
    let base = clock.fetch_add(per_thread, Ordering::Relaxed);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let start = Instant::now();
                    for i in 0..per_thread {
                        let tenant = &tenants[(i as usize + t * 7919) % tenants.len()];
                        request(tenant, base + i);
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    })
}

fn bench_decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("limit_decision");
    group
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(3));
    for keys in [1usize, 10_000] {
        let tenants = tenants(keys);
        for threads in [1usize, 2] {
            let case = format!("{keys}_keys/{threads}_threads");
            // Fresh state and clock per case, warmed by criterion's own warm-up.
            let clock = AtomicU64::new(0);
            let sluice = sluice_limits();
            group.bench_function(BenchmarkId::new("sluice", &case), |b| {
                b.iter_custom(|iters| {
                    run_threads(iters, threads, &tenants, &clock, &|t, now| {
                        sluice_request(&sluice, t, now)
                    })
                })
            });
            let clock = AtomicU64::new(0);
            let global = GlobalMutex::new();
            group.bench_function(BenchmarkId::new("global_mutex", &case), |b| {
                b.iter_custom(|iters| {
                    run_threads(iters, threads, &tenants, &clock, &|t, now| {
                        global.request(t, now)
                    })
                })
            });
            let clock = AtomicU64::new(0);
            let log = SlidingLog::new();
            group.bench_function(BenchmarkId::new("sliding_log", &case), |b| {
                b.iter_custom(|iters| {
                    run_threads(iters, threads, &tenants, &clock, &|t, now| {
                        log.request(t, now)
                    })
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_decision);
criterion_main!(benches);
