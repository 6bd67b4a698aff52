//! Fleet-wide budgets: three real `sluice run` processes share one real
//! `redis-server`. A tenant whose requests are spread over the three is held
//! to one budget (within the stated bound: the budget plus its refill, and
//! nothing more when the key is new to the whole fleet), another tenant is
//! untouched; with Redis stopped, the `open` route falls back to each
//! sluice's own whole budget and the `closed` one answers 503, each fall
//! counted once; with Redis back, the fleet decides again.

use std::fs::File;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_control::LIMIT_STORE_SCRIPT;
use sluice_filters::{FleetBucket, LeaseAsk};

use crate::cli::sluice_bin;
use crate::harness::{metric_value, TestConfig};
use crate::support::{self, free_port, Process, RedisServer, TempDir, WAIT_POLL};

/// The shared budget: 30 requests a minute, one every 2 s of refill.
const RPM: u64 = 30;
const START_TIMEOUT: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(10);

/// One `sluice run` child, killed on drop.
struct Node {
    _child: Process,
    port: u16,
    admin: u16,
    log: std::path::PathBuf,
}

fn limits(redis_port: u16, on_unavailable: &str) -> String {
    format!(
        "limits: {{ descriptor: [header:x-tenant], requests_per_minute: {RPM}, \
         store: {{ redis: {{ url: \"redis://127.0.0.1:{redis_port}\", sync_interval: 50ms, \
         on_unavailable: {on_unavailable} }} }} }}"
    )
}

impl Node {
    fn spawn(dir: &TempDir, i: usize, upstream: std::net::SocketAddr, redis_port: u16) -> Self {
        let (port, admin) = (free_port(), free_port());
        let yaml = TestConfig::new()
            .admin(format!("listen: 127.0.0.1:{admin}"))
            .listener_at("public", "http", format!("127.0.0.1:{port}"), "")
            .cluster_with("llm", "llm", [upstream], "version: v1")
            .route_with(
                "closed",
                "llm: 100",
                &format!(
                    "match: {{ path_prefix: /v1/, headers: {{ x-mode: closed }} }}, {}",
                    limits(redis_port, "closed")
                ),
            )
            .route_with(
                "open",
                "llm: 100",
                &format!(
                    "match: {{ path_prefix: /v1/ }}, {}",
                    limits(redis_port, "open")
                ),
            )
            .yaml();
        let config = dir.write(&format!("sluice-{i}.yaml"), &yaml);
        let log = dir.path().join(format!("sluice-{i}.log"));
        let out = File::create(&log).unwrap();
        let child = Command::new(sluice_bin())
            .args(["run", "-c"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn sluice run");
        Node {
            _child: Process::new(child),
            port,
            admin,
            log,
        }
    }

    async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin);
        match reqwest::get(&url).await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// `/metrics` once `ready` holds for it, or a failure with this sluice's log.
    async fn metrics_when(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = self.metrics().await;
            if ready(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not so on :{}\n{text}\n{}",
                self.admin,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            tokio::time::sleep(WAIT_POLL).await;
        }
    }
}

fn value(text: &str, name: &str, route: &str) -> Option<f64> {
    metric_value(text, name, &[("route", route)])
}

/// One chat completion through `node` for `tenant`: the status and the
/// `x-sluice-error` header.
async fn ask(client: &reqwest::Client, node: &Node, tenant: &str, closed: bool) -> (u16, String) {
    let mut request = client
        .post(format!(
            "http://127.0.0.1:{}/v1/chat/completions",
            node.port
        ))
        .header("x-tenant", tenant)
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}));
    if closed {
        request = request.header("x-mode", "closed");
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    let error = response
        .headers()
        .get("x-sluice-error")
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    let _ = response.bytes().await;
    (status, error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sluices_share_one_budget_in_redis_and_fall_back_as_configured() {
    if !support::require("redis-server", support::redis_available()) {
        return;
    }
    let redis = RedisServer::start().await.unwrap();
    let redis_port = redis.port();
    let mock = MockLlm::start(MockLlmOptions::paced_ms(0, 0, 2))
        .await
        .unwrap();
    let dir = TempDir::new("fleet-limits");
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::spawn(&dir, i, mock.addr(), redis_port))
        .collect();
    // Each has met the other two in Redis before any request.
    for node in &nodes {
        node.metrics_when("three peers", |t| {
            ["open", "closed"].iter().all(|r| {
                value(t, "sluice_ratelimit_store_peers", r) == Some(3.0)
                    && value(t, "sluice_ratelimit_store_up", r) == Some(1.0)
            })
        })
        .await;
    }

    // Tenant a, round robin over the three, as fast as one client goes, for 3 s.
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut admitted = [0u64; 3];
    let mut sent = 0usize;
    while started.elapsed() < Duration::from_secs(3) {
        let i = sent % 3;
        let (status, error) = ask(&client, &nodes[i], "a", false).await;
        match status {
            200 => admitted[i] += 1,
            429 => assert_eq!(error, "rate_limited"),
            other => panic!("status {other} ({error})"),
        }
        sent += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total: u64 = admitted.iter().sum();
    // The bound (docs/limits.md): the budget, plus its refill over the run,
    // plus the first shares of sluices that met the key after the fleet had
    // spent it, none here: all three met it when its bucket was full.
    let refill = RPM as f64 * elapsed / 60.0;
    let bound = RPM as f64 + refill;
    eprintln!(
        "fleet limits: {sent} sent over {elapsed:.2}s, admitted {total} {admitted:?}, \
         budget + refill {bound:.2}, overshoot {:.2}",
        total as f64 - bound
    );
    assert!(
        sent > 3 * RPM as usize,
        "the run must ask for more than the budget: {sent}"
    );
    assert!(total as f64 <= bound, "{total} admitted, bound {bound:.2}");
    assert!(total >= RPM - 1, "{total} admitted of a budget of {RPM}");
    // Each sluice spent part of the one budget (alone, each would admit 30).
    assert!(admitted.iter().all(|a| *a >= 1 && *a < RPM), "{admitted:?}");

    // Tenant b has its own budget, untouched by a's.
    for i in 0..6 {
        assert_eq!(ask(&client, &nodes[i % 3], "b", false).await.0, 200);
    }
    assert_eq!(ask(&client, &nodes[0], "a", true).await.0, 200);

    // Redis stops: every sluice falls back, each route once.
    drop(redis);
    for node in &nodes {
        node.metrics_when("fallen back", |t| {
            ["open", "closed"].iter().all(|r| {
                value(t, "sluice_ratelimit_store_up", r) == Some(0.0)
                    && value(t, "sluice_ratelimit_store_fallbacks_total", r) == Some(1.0)
            })
        })
        .await;
    }
    // open: one sluice alone enforces the whole budget, for a new tenant c.
    let mut local = 0;
    for _ in 0..40 {
        let (status, _) = ask(&client, &nodes[0], "c", false).await;
        local += u64::from(status == 200);
    }
    assert_eq!(local, RPM);
    // closed: refused with 503, whoever asks.
    for node in &nodes {
        let (status, error) = ask(&client, node, "d", true).await;
        assert_eq!(
            (status, error.as_str()),
            (503, "ratelimit_store_unavailable")
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for node in &nodes {
        let text = node.metrics().await;
        assert_eq!(
            value(&text, "sluice_ratelimit_store_fallbacks_total", "closed"),
            Some(1.0),
            "{text}"
        );
    }

    // Redis is back (empty) on its port: the fleet decides again.
    let _redis = RedisServer::start_on(redis_port).await.unwrap();
    let deadline = Instant::now() + SETTLE;
    for node in &nodes {
        node.metrics_when("store back", |t| {
            value(t, "sluice_ratelimit_store_up", "closed") == Some(1.0)
        })
        .await;
        assert!(Instant::now() < deadline);
    }
    for node in &nodes {
        assert_eq!(ask(&client, node, "d", true).await.0, 200);
    }
}

/// `EVAL` of the store's script through `redis-cli`, as sluice `id`, on
/// the buckets of `prefix` (its peers `PREFIX:peers`): a heartbeat, or one
/// bucket's sync. Answers the peers, then the grant and the pool.
fn eval(port: u16, prefix: &str, id: &str, sync: Option<(u64, &LeaseAsk)>) -> Vec<f64> {
    let mut keys = vec![format!("{prefix}:peers")];
    let mut args = vec![id.to_owned(), "1000".to_owned(), "120000".to_owned()];
    if let Some((limit, ask)) = sync {
        keys.push(format!("{prefix}:b"));
        args.push(limit.to_string());
        args.extend([ask.held, ask.returned, ask.debt, ask.want, ask.least].map(|x| x.to_string()));
    }
    let out = Command::new("redis-cli")
        .args([
            "-p",
            &port.to_string(),
            "--no-raw",
            "EVAL",
            LIMIT_STORE_SCRIPT,
        ])
        .arg(keys.len().to_string())
        .args(keys)
        .args(args)
        .output()
        .expect("redis-cli");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| l.split('"').nth(1)?.parse().ok())
        .collect()
}

fn lease_ask(held: f64, returned: f64, debt: f64, want: f64, least: f64) -> LeaseAsk {
    LeaseAsk {
        held,
        returned,
        debt,
        want,
        least,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_script_answers_as_its_model() {
    if !support::require("redis-server", support::redis_available()) {
        return;
    }
    let redis = RedisServer::start().await.unwrap();
    // Sluice 0 makes the bucket alone: its first share is all it keeps.
    let mut model = FleetBucket::full(30, 1, 1_000, 0);
    let steps = [
        // Sluice 0's first share of 10 paid, 6 left of it, 2 more wanted.
        (0, lease_ask(6.0, 0.0, 10.0, 2.0, 0.0)),
        // Sluice 1's first share, and more than the pool has.
        (1, lease_ask(10.0, 0.0, 10.0, 50.0, 0.0)),
        // Sluice 0 gives back all but 1 after spending 3.
        (0, lease_ask(1.0, 4.0, 0.0, 0.0, 0.0)),
        // A debt of answers longer than reserved.
        (0, lease_ask(0.0, 0.0, 7.0, 3.0, 1.0)),
        // Sluice 1 gives 5 back and wants 4, but no less than 3: the pool's
        // 2 stay there...
        (1, lease_ask(1.0, 5.0, 0.0, 4.0, 3.0)),
        // ...for one that can use them.
        (0, lease_ask(0.0, 0.0, 0.0, 2.0, 1.0)),
    ];
    let started = Instant::now();
    // The script refills on Redis's clock: at most this much can differ.
    let slack = || 30.0 * (started.elapsed().as_millis() as f64 + 2.0) / 60_000.0;
    let mut granted = Vec::new();
    for (i, (sluice, ask)) in steps.iter().enumerate() {
        let got = eval(redis.port(), "t", &format!("s{sluice}"), Some((30, ask)));
        let want = model.sync(30, *sluice, ask, 0);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            (got[1] - want.granted).abs() <= slack(),
            "step {i}: {got:?} vs {want:?}"
        );
        assert!(
            (got[2] - want.pool).abs() <= slack(),
            "step {i}: {got:?} vs {want:?}"
        );
        granted.push(want.granted);
    }
    // The known answers: 2 of a pool of 20; the pool's last 8 of the 50
    // asked; 4 given back; a debt of 7 leaves the pool owing 3; 5 given back
    // leave 2, too few for the one and enough for the other.
    assert_eq!(granted, [2.0, 8.0, 0.0, 0.0, 0.0, 2.0]);
    assert_eq!((model.pool, model.leased()), (0.0, 3.0));

    // Sluices 0 and 1 stop syncing: past the peer time (1 s here) their
    // leases no longer hold the pool below 30 - 3.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let got = eval(
        redis.port(),
        "t",
        "s2",
        Some((30, &lease_ask(0.0, 29.0, 0.0, 0.0, 0.0))),
    );
    assert_eq!(got[0], 1.0, "one peer left: {got:?}");
    assert!(got[2] > 29.0 && got[2] <= 30.0, "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_keeps_each_peers_first_share_of_a_new_bucket_for_the_peer_time() {
    if !support::require("redis-server", support::redis_available()) {
        return;
    }
    let redis = RedisServer::start().await.unwrap();
    for (i, id) in ["s0", "s1", "s2"].iter().enumerate() {
        assert_eq!(eval(redis.port(), "u", id, None), [i as f64 + 1.0]);
    }
    let started = Instant::now();
    let slack = || 30.0 * (started.elapsed().as_millis() as f64 + 2.0) / 60_000.0;
    let mut model = FleetBucket::full(30, 3, 1_000, 0);
    // Sluice 0, busy, wants 10 more than its first share; sluice 1 pays its
    // first share from the 10 kept for it rather than from a pool sluice 0
    // emptied: nothing is granted and the pool stays at 0, not -10.
    let steps = [
        (0, lease_ask(6.0, 0.0, 10.0, 10.0, 0.0), 0.0),
        (1, lease_ask(9.0, 0.0, 10.0, 5.0, 0.0), 0.0),
    ];
    for (sluice, ask, granted) in steps {
        let got = eval(redis.port(), "u", &format!("s{sluice}"), Some((30, &ask)));
        let want = model.sync(30, sluice, &ask, 0);
        assert_eq!(got[0], 3.0, "{got:?}");
        assert_eq!(want.granted, granted);
        assert!(
            (got[1] - want.granted).abs() <= slack(),
            "{got:?} vs {want:?}"
        );
        assert!((got[2] - want.pool).abs() <= slack(), "{got:?} vs {want:?}");
    }
    // Sluice 2 never came: past the peer time its share is sluice 0's.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let ask = lease_ask(6.0, 0.0, 0.0, 30.0, 0.0);
    let got = eval(redis.port(), "u", "s0", Some((30, &ask)));
    let now = started.elapsed().as_millis() as u64;
    let want = model.sync(30, 0, &ask, now);
    assert!(want.granted >= 10.0, "{want:?}");
    assert!(
        (got[1] - want.granted).abs() <= slack(),
        "{got:?} vs {want:?}"
    );
}
