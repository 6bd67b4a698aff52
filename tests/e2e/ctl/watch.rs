//! `sluice ctl rollout watch NAME` as a script would run it, against a real rollout on
//! live traffic: exit 1 when the slow canary is rolled back, 0 when a healthy one is
//! promoted, 2 when the rollout is not there or the API cannot be reached; piped, a line
//! per change and no colour.

use std::io::{BufRead as _, BufReader};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_proxy::Sluice;

use super::{ctl, ctl_at, finish, spawn_ctl, stderr, stdout};
use crate::harness::{listener, start};
use crate::rollout::{ask, mock, yaml};

/// Steady chat traffic from 4 workers until the handle is stopped, so the gates have
/// samples to judge.
struct Traffic {
    stop: Arc<AtomicBool>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    fn start(sluice: &Sluice) -> Traffic {
        let url = format!("http://{}/v1/chat/completions", listener(sluice, "public"));
        let stop = Arc::new(AtomicBool::new(false));
        let workers = (0..4)
            .map(|w| {
                let (url, stop) = (url.clone(), stop.clone());
                tokio::spawn(async move {
                    let client = reqwest::Client::new();
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) && n < 2000 {
                        ask(&client, &url, &[("x-session-id", &format!("w{w}-{n}"))]).await;
                        n += 1;
                    }
                })
            })
            .collect();
        Traffic { stop, workers }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers {
            w.await.unwrap();
        }
    }
}

/// Watches `chat-v2` until the watch exits; the traffic that lets the rollout decide starts
/// once the watch has shown it, before any gate could be judged, as it stood (pending or at
/// its first step).
async fn watch_under_traffic(sluice: &Sluice) -> Output {
    let url = format!("http://{}", sluice.admin_addr);
    let args = ["rollout", "watch", "chat-v2", "--interval", "100ms"];
    let mut child = spawn_ctl(&url, &sluice.token, &args);
    let (child, mut stdout, first) = tokio::task::spawn_blocking(move || {
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        (child, stdout, first)
    })
    .await
    .unwrap();
    assert!(
        first.starts_with("chat-v2 pending step 0/2 weight 0%")
            || first.starts_with("chat-v2 progressing step 1/2 weight 50%"),
        "{first}"
    );
    let traffic = Traffic::start(sluice);
    let mut out = tokio::task::spawn_blocking(move || finish(child, &mut stdout, LIMIT))
        .await
        .unwrap();
    traffic.stop().await;
    out.stdout = [first.into_bytes(), out.stdout].concat();
    out
}

/// Generous: the rollout decides in a few seconds (docs/BENCHMARKS.md has how fast).
const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_exits_1_when_the_canary_is_rolled_back() {
    let stable = mock("v1", 10).await;
    let canary = mock("v2", 400).await;
    let sluice = start(&yaml(&stable, &canary, "[50, 100]"));

    let out = watch_under_traffic(&sluice).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    // The state change is in the output: first under way, last rolled back with the
    // breach that decided it.
    assert!(lines.len() >= 2, "{text}");
    assert!(!lines[0].contains("rolled_back"), "{text}");
    let last = lines[lines.len() - 1];
    assert!(
        last.starts_with("chat-v2 rolled_back step 1/2 weight 0%"),
        "{text}"
    );
    assert!(last.contains("ttft_p95 "), "{text}");
    assert!(
        last.contains("last: progressing -> rolled_back (step 1, weight 0)"),
        "{text}"
    );
    // A line per change, not per poll.
    for pair in lines.windows(2) {
        assert_ne!(pair[0], pair[1], "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_exits_0_when_the_canary_is_promoted() {
    let stable = mock("v1", 10).await;
    let canary = mock("v2", 10).await;
    let sluice = start(&yaml(&stable, &canary, "[50, 100]"));

    let out = watch_under_traffic(&sluice).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("chat-v2 promoted step 2/2 weight 100%"),
        "{text}"
    );
    assert!(last.contains("-> promoted (step 2, weight 100)"), "{text}");
    assert!(text.lines().count() >= 2, "{text}");

    // The rollout is over: a second watch exits at once, on its first poll.
    let again = ctl(&sluice, &["rollout", "watch", "chat-v2"]).await;
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(stdout(&again).lines().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_exits_2_without_the_rollout_or_the_api() {
    let stable = mock("v1", 10).await;
    let canary = mock("v2", 10).await;
    let sluice = start(&yaml(&stable, &canary, "[50, 100]"));
    let out = ctl(&sluice, &["rollout", "watch", "nope"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), "name: unknown rollout `nope`\n");
    assert!(stdout(&out).is_empty());

    // Nothing listens on a port that was just freed.
    let port = crate::support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let out = ctl_at(
        &url,
        "t",
        &["rollout", "watch", "chat-v2"],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(&format!("error: {url}/v1/rollouts/chat-v2")),
        "{}",
        stderr(&out)
    );
}
