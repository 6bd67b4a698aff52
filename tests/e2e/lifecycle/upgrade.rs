//! Zero-downtime upgrade of the real binary under load: `sluice run
//! --upgrade` waits on `runtime.upgrade_sock`, SIGQUIT makes the running one
//! hand its listening sockets over, stop accepting, drain and exit 0, and
//! not one request of a client loop running throughout fails.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_cli::{MockLlm, MockLlmOptions};

use super::many_streams::{stream, Outcome};
use super::{process, Running};
use crate::harness::metric_value;
use crate::support::{free_port, TempDir, WAIT_POLL};

/// Clients sending one stream after another, each about 0.2 s long.
const CLIENTS: usize = 16;
const TOKENS: u32 = 10;
const GRACE: Duration = Duration::from_secs(30);
/// How long the load goes on once the old process has exited.
const AFTER: Duration = Duration::from_secs(1);

/// Requests answered whole, and what went wrong with the rest.
#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    failed: Mutex<Vec<String>>,
}

/// Sends streams through `proxy` one after another until `stop`.
async fn client_loop(
    client: reqwest::Client,
    proxy: SocketAddr,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) {
    let unused = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let outcome: Outcome = stream(client.clone(), proxy, unused.clone(), TOKENS).await;
        match outcome {
            Ok(()) => tally.ok.fetch_add(1, Ordering::SeqCst),
            Err(e) => {
                tally.failed.lock().unwrap().push(e);
                0
            }
        };
    }
}

/// Polls until `done` holds, failing with `what` after `timeout`.
async fn wait_until(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(WAIT_POLL).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigquit_hands_the_listeners_to_sluice_run_upgrade_and_no_request_fails() {
    let mock = MockLlm::start(MockLlmOptions::paced_ms(20, 20, TOKENS))
        .await
        .unwrap();
    let (port, admin) = (free_port(), free_port());
    let dir = TempDir::new("upgrade");
    let sock = dir.path().join("upgrade.sock");
    let yaml = process(admin)
        .runtime(format!(
            "threads: 2, grace_period: {}s, upgrade_sock: \"{}\"",
            GRACE.as_secs(),
            sock.display()
        ))
        .listener_at("public", "http", format!("127.0.0.1:{port}"), "")
        .cluster("llm", "llm", [mock.addr()])
        .route_with("chat", "llm: 100", "match: { path_prefix: / }")
        .yaml();
    let mut old = Running::spawn_as(&dir, "old", &yaml, admin, &[]);
    old.ready().await;

    let proxy = SocketAddr::from(([127, 0, 0, 1], port));
    let client = reqwest::Client::new();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            tokio::spawn(client_loop(
                client.clone(),
                proxy,
                tally.clone(),
                stop.clone(),
            ))
        })
        .collect();
    let ok = || tally.ok.load(Ordering::SeqCst);
    wait_until(
        Duration::from_secs(30),
        "no load through the old process",
        || ok() >= 50,
    )
    .await;

    let mut new = Running::spawn_as(&dir, "new", &yaml, admin, &["--upgrade"]);
    wait_until(
        Duration::from_secs(30),
        "the new process never waited on the socket",
        || sock.exists(),
    )
    .await;
    let before_quit = ok();
    let old_pid = old.child.id().to_string();
    let quit = Command::new("kill")
        .args(["-QUIT", &old_pid])
        .status()
        .unwrap();
    assert!(quit.success());

    let status = old.exit(GRACE + Duration::from_secs(10)).await;
    let status = status.unwrap_or_else(|| panic!("old still running:\n{}", old.output()));
    assert!(status.success(), "old: {status}:\n{}", old.output());
    assert!(
        new.child.try_wait().unwrap().is_none(),
        "new exited:\n{}",
        new.output()
    );
    let at_old_exit = ok();
    tokio::time::sleep(AFTER).await;
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.unwrap();
    }
    let failed = std::mem::take(&mut *tally.failed.lock().unwrap());
    let total = ok() + failed.len();
    eprintln!(
        "{total} requests: {} before SIGQUIT, {} by the old's exit, {} failed",
        before_quit,
        at_old_exit,
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {total} failed, first: {:?}\nold:\n{}\nnew:\n{}",
        failed.len(),
        failed.first(),
        old.output(),
        new.output()
    );
    assert!(
        ok() > at_old_exit,
        "nothing served after the old process exited"
    );
    assert!(
        old.output().contains("listening sockets handed over"),
        "{}",
        old.output()
    );

    // The admin port is the new process's now: it is ready, and its
    // metrics count only what it served (the old one served the rest).
    new.ready().await;
    let metrics = new
        .client
        .get(format!("{}/metrics", new.admin))
        .bearer_auth(super::TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let served = metric_value(&metrics, "sluice_requests_total", &[("route", "chat")]);
    let served = served.unwrap_or_else(|| panic!("no chat requests in:\n{metrics}"));
    assert!(
        served >= 1.0 && served < ok() as f64,
        "new served {served} of {}",
        ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigquit_with_nobody_waiting_on_the_socket_leaves_sluice_serving() {
    let mock = MockLlm::start(MockLlmOptions::paced_ms(5, 5, 2))
        .await
        .unwrap();
    let (port, admin) = (free_port(), free_port());
    let dir = TempDir::new("upgrade-alone");
    let sock = dir.path().join("upgrade.sock");
    let yaml = process(admin)
        .runtime(format!("threads: 1, upgrade_sock: \"{}\"", sock.display()))
        .listener_at("public", "http", format!("127.0.0.1:{port}"), "")
        .cluster("llm", "llm", [mock.addr()])
        .route_with("chat", "llm: 100", "match: { path_prefix: / }")
        .yaml();
    let mut sluice = Running::spawn(&dir, &yaml, admin);
    sluice.ready().await;
    let pid = sluice.child.id().to_string();
    let quit = Command::new("kill").args(["-QUIT", &pid]).status().unwrap();
    assert!(quit.success());

    // pingora's sender gives up after about 5 s of retries.
    let failed = "graceful upgrade failed; still serving";
    wait_until(
        Duration::from_secs(30),
        "no failed hand-over logged",
        || sluice.output().contains(failed),
    )
    .await;
    assert!(
        sluice.child.try_wait().unwrap().is_none(),
        "{}",
        sluice.output()
    );
    sluice.ready().await;
    let proxy = SocketAddr::from(([127, 0, 0, 1], port));
    let outcome = stream(reqwest::Client::new(), proxy, Arc::default(), 2).await;
    assert_eq!(outcome, Ok(()), "{}", sluice.output());
}
