//! Toxics stacked on one proxy, as Toxiproxy chains them: two latencies add up, a latency
//! and a bandwidth both act, each comes off on its own; a config experiment on the proxy's
//! listener stacks with a toxic added through the API.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::harness::Admin;

use super::{client, connect, median, ping, pings, redis_and_sluice, redis_and_sluice_with};

const LATENCY: Duration = Duration::from_millis(150);

/// Adds toxic `name` of `kind` on the downstream stream of proxy `redis`.
async fn add(api: &str, name: &str, kind: &str, attributes: &str) {
    let toxic = client(
        api,
        "toxic",
        &["redis", name, kind, "downstream", attributes],
    )
    .await;
    assert_eq!(toxic["name"], name, "{toxic}");
}

async fn remove(api: &str, name: &str) {
    client(api, "remove-toxic", &["redis", name]).await;
}

/// Proxy `redis` in front of `upstream`; its address.
async fn proxy(api: &str, upstream: SocketAddr) -> SocketAddr {
    let upstream = upstream.to_string();
    let created = client(api, "create", &["redis", "127.0.0.1:0", &upstream]).await;
    created["listen"].as_str().unwrap().parse().unwrap()
}

/// Asserts every trip is at least `least` and their median under `most`.
fn between(trips: Vec<Duration>, least: Duration, most: Duration, what: &str) {
    assert!(trips.iter().all(|t| *t >= least), "{what}: {trips:?}");
    assert!(median(trips.clone()) < most, "{what}: {trips:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_latency_toxics_add_up_and_come_off_one_at_a_time() {
    let Some((redis, _sluice, api)) = redis_and_sluice("1h").await else {
        return;
    };
    let proxy = proxy(&api, redis.addr()).await;
    // Open before the toxics: it takes each up at its next read, as Toxiproxy does.
    let mut pooled = connect(proxy).await.unwrap();
    ping(&mut pooled).await.unwrap();

    let latency = r#"{"latency": 150, "jitter": 0}"#;
    add(&api, "first", "latency", latency).await;
    add(&api, "second", "latency", latency).await;
    let both = 2 * LATENCY;
    between(pings(proxy, 3).await, both, Duration::from_secs(5), "both");
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(ping(&mut pooled).await.unwrap());
    }
    between(open, both, Duration::from_secs(5), "both, open connection");

    // One off: the other still acts, on new and open connections.
    remove(&api, "first").await;
    between(pings(proxy, 3).await, LATENCY, both, "second only");
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(ping(&mut pooled).await.unwrap());
    }
    between(open, LATENCY, both, "second only, open connection");

    remove(&api, "second").await;
    assert!(median(pings(proxy, 5).await) < LATENCY);
    let mut open = Vec::new();
    for _ in 0..5 {
        open.push(ping(&mut pooled).await.unwrap());
    }
    assert!(median(open) < LATENCY);
}

/// How long a GET of `key` takes on a new connection to `proxy`; checks the value's size.
async fn get_time(proxy: SocketAddr, key: &str, size: usize) -> Duration {
    let mut conn = connect(proxy).await.unwrap();
    let started = Instant::now();
    let value: Vec<u8> = redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(value.len(), size);
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_and_bandwidth_toxics_both_act() {
    let Some((redis, _sluice, api)) = redis_and_sluice("1h").await else {
        return;
    };
    // 50 kB at 50 KB/s: 10 pieces of 5000 bytes, 100 ms apart, so at least 900 ms.
    let size = 50_000;
    let mut direct = connect(redis.addr()).await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(vec![b'x'; size])
        .query_async(&mut direct)
        .await
        .unwrap();
    let proxy = proxy(&api, redis.addr()).await;
    let transfer = Duration::from_millis(900);

    add(&api, "slow", "latency", r#"{"latency": 150, "jitter": 0}"#).await;
    add(&api, "thin", "bandwidth", r#"{"rate": 50}"#).await;
    let took = get_time(proxy, "big", size).await;
    assert!(
        took >= LATENCY + transfer,
        "latency and bandwidth: {took:?}"
    );

    // Latency off: PINGs are fast again, the large value still crawls.
    remove(&api, "slow").await;
    assert!(median(pings(proxy, 5).await) < LATENCY);
    let took = get_time(proxy, "big", size).await;
    assert!(took >= transfer, "bandwidth only: {took:?}");

    remove(&api, "thin").await;
    let took = get_time(proxy, "big", size).await;
    assert!(took < Duration::from_millis(500), "no toxic: {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_experiment_and_a_toxic_on_one_proxy_stack() {
    // The config's experiment names the run-time proxy's listener before it exists.
    let faults = "[{ id: cfg-latency, match: { listener: \"toxiproxy:redis\" }, percent: 100, \
                  ttl: 1h, action: { latency: { latency: 150ms, jitter: 0ms, direction: downstream } } }]";
    let Some((redis, sluice, api)) = redis_and_sluice_with("1h", Some(faults)).await else {
        return;
    };
    let proxy = proxy(&api, redis.addr()).await;
    let both = 2 * LATENCY;
    between(pings(proxy, 3).await, LATENCY, both, "config experiment");

    add(&api, "more", "latency", r#"{"latency": 150, "jitter": 0}"#).await;
    between(pings(proxy, 3).await, both, Duration::from_secs(5), "both");
    let admin = Admin::new(&sluice);
    let (_, listed) = admin.get("/v1/faults").await;
    assert_eq!(listed["faults"].as_array().unwrap().len(), 2, "{listed}");

    // The config's experiment off: the toxic alone.
    let (status, body) = admin.delete("/v1/faults/cfg-latency").await;
    assert!(status == 200 || status == 204, "{status} {body}");
    between(pings(proxy, 3).await, LATENCY, both, "toxic only");

    remove(&api, "more").await;
    assert!(median(pings(proxy, 5).await) < LATENCY);
}
