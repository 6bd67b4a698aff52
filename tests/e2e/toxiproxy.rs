//! Toxiproxy's API spoken by sluice, driven by the real `toxiproxy-node-client` against a
//! real `redis-server`: a proxy created at run time, a latency toxic felt by PINGs through
//! it, down and up, reset, and a toxic that ends at `admin.toxiproxy_default_ttl`; toxics
//! that stack on one proxy (`stack`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_control::Config;
use sluice_proxy::Sluice;

use crate::harness::{self, Admin, TestConfig};
use crate::support::{self, RedisServer};
use crate::tcp;

const CLIENT: &str = "toxiproxy-node-client";

mod stack;

/// Redis and a sluice serving Toxiproxy's API with `ttl` as the toxics' TTL; `None`
/// (the test skips) without redis-server, node or the npm client.
async fn redis_and_sluice(ttl: &str) -> Option<(RedisServer, Sluice, String)> {
    redis_and_sluice_with(ttl, None).await
}

/// As [`redis_and_sluice`], with `faults` (a YAML flow list) as the config's experiments.
async fn redis_and_sluice_with(
    ttl: &str,
    faults: Option<&str>,
) -> Option<(RedisServer, Sluice, String)> {
    if !support::require("redis-server", support::redis_available())
        || !support::require(CLIENT, support::node_package_available(CLIENT))
    {
        return None;
    }
    let redis = RedisServer::start().await.unwrap();
    let mut config = TestConfig::new().admin(format!(
        "listen: 127.0.0.1:0, toxiproxy: 127.0.0.1:0, toxiproxy_default_ttl: {ttl}"
    ));
    if let Some(faults) = faults {
        config = config.section("faults", faults);
    }
    let yaml = config.yaml();
    let sluice = harness::start(&yaml);
    let api = format!(
        "http://{}",
        sluice.toxiproxy_addr.expect("Toxiproxy API served")
    );
    Some((redis, sluice, api))
}

/// One step of `tests/e2e/js/toxiproxy_client.js`, its printed JSON.
async fn client(api: &str, step: &str, args: &[&str]) -> Value {
    let script = support::workspace_root().join("tests/e2e/js/toxiproxy_client.js");
    let mut argv = vec![
        script.display().to_string(),
        api.to_string(),
        step.to_string(),
    ];
    argv.extend(args.iter().map(|a| (*a).to_string()));
    let modules = support::node_modules();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .args(&argv)
            .env("NODE_PATH", modules)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = tcp::text(&out);
    assert!(out.status.success(), "{step} {args:?}: {text}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{step}: {e}: {text}"))
}

async fn connect(addr: SocketAddr) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Duration::from_secs(5))
        .set_response_timeout(Duration::from_secs(5));
    redis::Client::open(format!("redis://{addr}"))?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

async fn ping(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<Duration> {
    let started = Instant::now();
    let pong: String = redis::cmd("PING").query_async(conn).await?;
    assert_eq!(pong, "PONG");
    Ok(started.elapsed())
}

/// Round trips of `n` PINGs on a new connection.
async fn pings(addr: SocketAddr, n: usize) -> Vec<Duration> {
    let mut conn = connect(addr).await.unwrap();
    let mut trips = Vec::new();
    for _ in 0..n {
        trips.push(ping(&mut conn).await.unwrap());
    }
    trips
}

fn median(mut trips: Vec<Duration>) -> Duration {
    trips.sort();
    trips[trips.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_node_client_drives_latency_down_up_and_reset() {
    let Some((redis, sluice, api)) = redis_and_sluice("1h").await else {
        return;
    };
    let version = client(&api, "version", &[]).await;
    assert_eq!(version["version"], "2.12.0-sluice");
    let upstream = redis.addr().to_string();
    let created = client(&api, "create", &["redis", "127.0.0.1:0", &upstream]).await;
    assert_eq!(created["enabled"], true);
    assert_eq!(created["upstream"], upstream.as_str());
    let proxy: SocketAddr = created["listen"].as_str().unwrap().parse().unwrap();
    assert_ne!(proxy.port(), 0, "the bound port is answered: {created}");

    // Through the proxy, untouched: the PINGs reach the real Redis, quickly.
    assert!(median(pings(proxy, 5).await) < Duration::from_millis(150));
    // A client connected before the toxic, as a pooled one is.
    let mut pooled = connect(proxy).await.unwrap();
    assert!(ping(&mut pooled).await.unwrap() < Duration::from_millis(150));

    // latency 200 ms downstream: every answer waits at least that long, on
    // new connections and on the one already open (as Toxiproxy does).
    let toxic = client(&api, "latency", &["redis", "200"]).await;
    assert_eq!(toxic["name"], "latency_downstream");
    assert_eq!(toxic["attributes"]["latency"], 200);
    for trip in pings(proxy, 3).await {
        assert!(trip >= Duration::from_millis(200), "{trip:?}");
    }
    for _ in 0..3 {
        let trip = ping(&mut pooled).await.unwrap();
        assert!(
            trip >= Duration::from_millis(200),
            "open connection: {trip:?}"
        );
    }
    // The toxic is an experiment like any other, on the proxy's listener, audited.
    let admin = Admin::new(&sluice);
    let (status, faults) = admin.get("/v1/faults").await;
    assert_eq!(status, 200, "{faults}");
    let listed = faults["faults"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{faults}");
    assert_eq!(listed[0]["match"]["listener"], "toxiproxy:redis");
    assert_eq!(listed[0]["kind"], "latency");
    assert_eq!(listed[0]["state"], "active");
    let (_, events) = admin.get("/v1/events").await;
    let toxiproxy_events = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "toxiproxy")
        .count();
    assert!(toxiproxy_events >= 2, "{events}");

    // Removed: fast again, the open connection too.
    client(&api, "remove-toxic", &["redis", "latency_downstream"]).await;
    assert!(median(pings(proxy, 5).await) < Duration::from_millis(150));
    let mut after = Vec::new();
    for _ in 0..5 {
        after.push(ping(&mut pooled).await.unwrap());
    }
    assert!(median(after) < Duration::from_millis(150));
    drop(pooled);

    // Down: the open connection is closed and a new one refused.
    let mut open = connect(proxy).await.unwrap();
    ping(&mut open).await.unwrap();
    let down = client(&api, "down", &["redis"]).await;
    assert_eq!(down["enabled"], false);
    assert!(
        ping(&mut open).await.is_err(),
        "a connection outlived its proxy going down"
    );
    assert!(
        connect(proxy).await.is_err(),
        "a disabled proxy accepted a connection"
    );

    // Up again, on the same address.
    let up = client(&api, "up", &["redis"]).await;
    assert_eq!(up["enabled"], true);
    assert_eq!(up["listen"], proxy.to_string().as_str());
    assert_eq!(pings(proxy, 2).await.len(), 2);

    // Reset: the toxics go, the proxy stays up.
    client(&api, "latency", &["redis", "200"]).await;
    client(&api, "down", &["redis"]).await;
    client(&api, "reset", &[]).await;
    let toxics = client(&api, "toxics", &["redis"]).await;
    assert_eq!(toxics["toxics"], serde_json::json!([]));
    assert!(median(pings(proxy, 5).await) < Duration::from_millis(150));
    let (_, faults) = admin.get("/v1/faults").await;
    assert_eq!(faults["faults"], serde_json::json!([]), "{faults}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toxic_ends_at_the_default_ttl() {
    // Long enough for a node process to start and add the toxic on a busy machine.
    let ttl = Duration::from_secs(3);
    let Some((redis, _sluice, api)) = redis_and_sluice("3s").await else {
        return;
    };
    let upstream = redis.addr().to_string();
    let created = client(&api, "create", &["redis", "127.0.0.1:0", &upstream]).await;
    let proxy: SocketAddr = created["listen"].as_str().unwrap().parse().unwrap();
    // Before the toxic is added: its TTL ends no sooner than `ttl` from here.
    let started = Instant::now();
    client(&api, "latency", &["redis", "300"]).await;
    for trip in pings(proxy, 2).await {
        assert!(trip >= Duration::from_millis(300), "{trip:?}");
    }
    // Past the TTL the toxic is gone from the API and from new connections.
    let deadline = started + ttl + Duration::from_secs(10);
    loop {
        let toxics = client(&api, "toxics", &["redis"]).await;
        if toxics["toxics"] == serde_json::json!([]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the toxic outlived its TTL: {toxics}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        started.elapsed() >= ttl,
        "gone after {:?}",
        started.elapsed()
    );
    assert!(median(pings(proxy, 5).await) < Duration::from_millis(150));
}

#[test]
fn a_non_loopback_toxiproxy_address_is_refused() {
    let yaml = TestConfig::new()
        .admin("listen: 127.0.0.1:0, toxiproxy: 0.0.0.0:8474")
        .yaml();
    let errors = Config::from_yaml(&yaml).unwrap_err().to_string();
    assert!(
        errors.contains(
            "admin.toxiproxy: 0.0.0.0:8474 is not a loopback address: Toxiproxy's API has no authentication"
        ),
        "{errors}"
    );
}
