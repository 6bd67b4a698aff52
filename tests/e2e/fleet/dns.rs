//! Fleet mode at Kubernetes scale, on loopback: fifty real `sluice run`
//! processes, each with its control API on 127.0.0.N (N = 2..=51, one port
//! for all), named by a DNS server of the test's own (one name, fifty A
//! records, as a headless Service answers). A controller sluice with
//! `targets: { dns: ..., resolver: ... }` finds them and takes the canary
//! to 50 on all. Then: a 51st process (127.0.0.52) added to the answer
//! converges within the refresh and one reconcile interval; a split moved
//! by hand on one instance is set back and counted in
//! `sluice_fleet_drift_total`; the DNS server fails and the targets stay;
//! and an operator's abort reaches all 51 within a second by the
//! controller's audit log (every target answered 200), read back from the
//! instances within a generous bound (both times printed:
//! docs/BENCHMARKS.md).

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::cli::sluice_bin;
use crate::harness::{metric_value, metrics_when, start, Admin, TestConfig};
use crate::support::{DnsServer, Process, TempDir, WAIT_POLL};

const TOKEN_ENV: &str = "SLUICE_FLEET_DNS_E2E_TOKEN";
const TOKEN: &str = "fleet-dns-e2e-token";
const NAME: &str = "sluice-admin.fleet.test";
const INSTANCES: u8 = 50;
/// The controller's `refresh` and `reconcile_interval`.
const REFRESH: Duration = Duration::from_secs(1);
const RECONCILE: Duration = Duration::from_secs(1);
/// Scheduling on a 2-core machine running 52 sluices and the test.
const SLACK: Duration = Duration::from_millis(1500);
/// Fifty processes starting at once on two cores.
const START_LIMIT: Duration = Duration::from_secs(90);
/// How often the instances are read while a change spreads.
const POLL: Duration = Duration::from_millis(25);

/// 127.0.0.(i + 2): the first instance is 127.0.0.2.
fn ip(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, i + 2)
}

/// One `sluice run` child with its control API on `ip:admin_port`.
struct Node {
    _child: Process,
    base: String,
    log: std::path::PathBuf,
}

impl Node {
    fn spawn(dir: &TempDir, ip: Ipv4Addr, admin_port: u16, listen_port: u16) -> Node {
        let yaml = TestConfig::new()
            .admin(format!(
                "listen: \"{ip}:{admin_port}\", token_env: {TOKEN_ENV}"
            ))
            .runtime("threads: 1, grace_period: 1s")
            .listener_at("public", "http", format!("\"{ip}:{listen_port}\""), "")
            .cluster("stable", "llm", ["127.0.0.1:9"])
            .cluster("canary", "llm", ["127.0.0.1:9"])
            .route("chat", "stable: 100, canary: 0")
            .yaml();
        let config = dir.write(&format!("sluice-{ip}.yaml"), &yaml);
        let log = dir.path().join(format!("sluice-{ip}.log"));
        let out = File::create(&log).unwrap();
        let child = Command::new(sluice_bin())
            .args(["run", "-c"])
            .arg(&config)
            .env(TOKEN_ENV, TOKEN)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn sluice run");
        Node {
            _child: Process::new(child),
            base: format!("http://{ip}:{admin_port}"),
            log,
        }
    }

    /// The canary's weight on route chat; `None` while it does not answer.
    async fn canary(&self, client: &reqwest::Client) -> Option<u64> {
        let r = client
            .get(format!("{}/v1/routes", self.base))
            .bearer_auth(TOKEN)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        let routes: Value = r.json().await.ok()?;
        routes[0]["split"]["canary"].as_u64()
    }

    async fn set_split(&self, client: &reqwest::Client, stable: u64, canary: u64) {
        let r = client
            .put(format!("{}/v1/routes/chat/split", self.base))
            .bearer_auth(TOKEN)
            .json(&json!({"stable": stable, "canary": canary}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
}

/// Polls each node until it reports `canary`, and that node no more: a
/// node already there is not read again, so the reading loads the nodes
/// less as the change spreads. The time until the last got there; fails
/// after `limit` naming the nodes that did not.
async fn until_all(
    client: &reqwest::Client,
    nodes: &[&Node],
    canary: u64,
    limit: Duration,
) -> Duration {
    let started = Instant::now();
    let each = nodes.iter().map(|node| async move {
        loop {
            let weight = node.canary(client).await;
            if weight == Some(canary) {
                return Ok(started.elapsed());
            }
            if started.elapsed() > limit {
                return Err(format!("{} at {weight:?}", node.base));
            }
            tokio::time::sleep(POLL).await;
        }
    });
    let (mut took, mut off) = (Duration::ZERO, Vec::new());
    for result in join_all(each).await {
        match result {
            Ok(t) => took = took.max(t),
            Err(e) => off.push(e),
        }
    }
    if !off.is_empty() {
        let log = std::fs::read_to_string(&nodes[0].log).unwrap_or_default();
        panic!(
            "{} of {} not at canary {canary} after {limit:?}: {off:?}\nfirst node's log:\n{log}",
            off.len(),
            nodes.len()
        );
    }
    took
}

/// A port free on 127.0.0.2 (and so, the addresses being distinct, a
/// moment ago on every 127.0.0.N that nothing else binds).
fn free_port_on_2() -> u16 {
    let probe = std::net::TcpListener::bind((ip(0), 0)).unwrap();
    probe.local_addr().unwrap().port()
}

fn controller_yaml(dns_port: u16, admin_port: u16) -> String {
    let rollout = format!(
        "\n  - name: chat-v2\n    route: chat\n    stable: stable\n    canary: canary\n\
         \x20   steps: [50, 100]\n    hold: 1h\n    gates: {{ ttft_p95: 1s }}\n\
         \x20   targets: {{ dns: \"{NAME}:{admin_port}\", resolver: \"127.0.0.1:{dns_port}\", \
         refresh: {}ms }}\n\
         \x20   reconcile_interval: {}ms\n    target_token_env: {TOKEN_ENV}",
        REFRESH.as_millis(),
        RECONCILE.as_millis()
    );
    TestConfig::new()
        .admin(format!("listen: 127.0.0.1:0, token_env: {TOKEN_ENV}"))
        .runtime("threads: 2, grace_period: 1s")
        .listener("public", "http", "")
        .cluster("stable", "llm", ["127.0.0.1:9"])
        .cluster("canary", "llm", ["127.0.0.1:9"])
        .route("chat", "stable: 100, canary: 0")
        .section("rollouts", rollout)
        .yaml()
}

/// The controller's status once `ready` holds for it (10 s at most).
async fn status_when(control: &Admin, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, status) = control.get("/v1/rollouts/chat-v2").await;
        if ready(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "{what}: {status:#}");
        tokio::time::sleep(WAIT_POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_instances_found_in_dns_converge_drift_back_and_roll_back_within_a_second() {
    std::env::set_var(TOKEN_ENV, TOKEN);
    let dir = TempDir::new("fleet-dns");
    let (admin_port, listen_port) = (free_port_on_2(), free_port_on_2());
    let nodes: Vec<Node> = (0..INSTANCES)
        .map(|i| Node::spawn(&dir, ip(i), admin_port, listen_port))
        .collect();
    let client = reqwest::Client::new();
    let all: Vec<&Node> = nodes.iter().collect();
    let started = until_all(&client, &all, 0, START_LIMIT).await;
    eprintln!("fleet dns: {INSTANCES} sluices up in {started:.1?}");

    let dns = DnsServer::start(NAME, (0..INSTANCES).map(ip).collect()).await;
    let controller = start(&controller_yaml(dns.addr().port(), admin_port));
    let control = Admin::new(&controller);
    let took = until_all(&client, &all, 50, Duration::from_secs(15)).await;
    eprintln!("fleet dns: step 1 (canary 50) on {INSTANCES} instances {took:.1?} after the start");
    let status = status_when(&control, "every target took 50", |s| {
        s["targets"].as_array().is_some_and(|t| {
            t.len() == usize::from(INSTANCES)
                && t.iter().all(|t| t["weight"] == 50 && t["pending"] == false)
        })
    })
    .await;
    let discovery = &status["discovery"];
    assert_eq!(
        discovery["dns"],
        format!("{NAME}:{admin_port}"),
        "{status:#}"
    );
    assert_eq!(discovery["resolver"], dns.addr().to_string());
    assert_eq!(discovery["addresses"], INSTANCES);
    assert!(discovery["resolved_ms"].as_u64().is_some(), "{discovery}");
    assert_eq!(
        status["targets"][0]["url"],
        format!("http://127.0.0.2:{admin_port}")
    );

    // A pod started after the rollout began, ready, then in the answer.
    let late = Node::spawn(&dir, ip(INSTANCES), admin_port, listen_port);
    until_all(&client, &[&late], 0, START_LIMIT).await;
    dns.set((0..=INSTANCES).map(ip).collect());
    let converged = until_all(&client, &[&late], 50, REFRESH + RECONCILE + SLACK).await;
    eprintln!(
        "fleet dns: the late instance converged {converged:.2?} after it entered DNS \
         (refresh {REFRESH:?}, reconcile {RECONCILE:?})"
    );
    let mut everyone = all.clone();
    everyone.push(&late);
    status_when(&control, "the late target listed", |s| {
        s["discovery"]["addresses"] == INSTANCES + 1
    })
    .await;

    // Drift: one instance moved by hand is set back within an interval.
    let moved = &nodes[7];
    moved.set_split(&client, 100, 0).await;
    let back = until_all(&client, &[moved], 50, RECONCILE + SLACK).await;
    eprintln!("fleet dns: a drifted instance set back after {back:.2?}");
    let drift = |t: &str| metric_value(t, "sluice_fleet_drift_total", &[("rollout", "chat-v2")]);
    let text = metrics_when(&controller, |t| drift(t) == Some(1.0)).await;
    assert_eq!(drift(&text), Some(1.0), "{text}");
    let status = status_when(&control, "the drift counted", |s| {
        s["targets"][7]["drift"] == 1
    })
    .await;
    assert_eq!(status["targets"][7]["url"], moved.base);

    // The DNS server fails: the controller says so and keeps every target.
    dns.fail(true);
    let status = status_when(&control, "the lookup failure shown", |s| {
        s["discovery"]["failures"].as_u64() >= Some(1)
    })
    .await;
    let error = status["discovery"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(NAME), "{status:#}");
    assert_eq!(status["targets"].as_array().unwrap().len(), everyone.len());
    let (_, log) = control.get("/v1/events").await;
    let kept = format!(
        "rollout chat-v2: DNS {NAME}:{admin_port} not resolved; keeping the last {} target(s)",
        everyone.len()
    );
    assert!(
        log["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == kept),
        "{log:#}"
    );

    // The rollback, DNS still down: every instance at canary 0 within 1 s.
    // One read of every instance, for the polling's share of the figure.
    let read = Instant::now();
    join_all(everyone.iter().map(|n| n.canary(&client))).await;
    eprintln!(
        "fleet dns: one read of all {} instances takes {:.0?}",
        everyone.len(),
        read.elapsed()
    );
    let asked = Instant::now();
    let (code, answer) = control.post("/v1/rollouts/chat-v2/abort", "").await;
    assert_eq!(code, 200, "{answer}");
    let rollback = until_all(&client, &everyone, 0, Duration::from_secs(10)).await;
    let total = asked.elapsed();
    eprintln!(
        "fleet dns: rollback on {} instances in {rollback:.0?} after the abort answered \
         ({total:.0?} from the command)",
        everyone.len()
    );
    let status = status_when(&control, "every target took 0", |s| {
        s["state"] == "aborted"
            && s["targets"]
                .as_array()
                .is_some_and(|t| t.iter().all(|t| t["weight"] == 0 && t["pending"] == false))
    })
    .await;
    assert_eq!(status["targets"].as_array().unwrap().len(), everyone.len());
    assert!(dns.queries() > 3, "the name was asked again every refresh");
    // The controller's own account, the figure: from the abort's
    // audit entry to the one that says all 51 answered 200 to weight 0.
    let (_, log) = control.get("/v1/events").await;
    let at = |prefix: &str| {
        log["events"].as_array().unwrap().iter().find_map(|e| {
            let action = e["action"].as_str()?;
            action
                .starts_with(prefix)
                .then(|| e["time_ms"].as_u64())
                .flatten()
        })
    };
    let all_zero = format!(
        "rollout chat-v2: weight 0 applied on all {} target(s)",
        everyone.len()
    );
    let from = at("rollout chat-v2: aborted → weight 0").expect("the abort in the audit log");
    let to = at(&all_zero).unwrap_or_else(|| panic!("`{all_zero}` not in the audit log: {log:#}"));
    let applied = Duration::from_millis(to - from);
    eprintln!("fleet dns: the controller's audit log: abort to all at 0 in {applied:?}");
    assert!(
        applied < Duration::from_secs(1),
        "rollback took {applied:?}"
    );
    // As read from the instances (the polling's own latency included): a
    // generous bound, the figure itself goes to docs/BENCHMARKS.md.
    assert!(
        total < Duration::from_secs(3),
        "rollback read after {total:?}"
    );
}
