//! One hostile admin request does not hold the control plane: a body nested
//! 100,000 deep is refused at once, `/healthz` answers meanwhile, and a
//! failing canary is rolled back in its usual time (it took 30 s when the
//! body was parsed on the control thread).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{listener, start, Admin};
use crate::rollout::{ask, mock, yaml};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_body_is_refused_at_once_while_a_rollback_acts_in_its_usual_time() {
    let stable = mock("v1", 10).await;
    let canary = mock("v2", 400).await;
    let sluice = start(&yaml(&stable, &canary, "[50, 100]"));
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));

    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..8 {
        let (url, stop) = (url.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 2000 {
                ask(&client, &url, &[("x-session-id", &format!("w{w}-{n}"))]).await;
                n += 1;
            }
        }));
    }
    // The hostile client: 600 KB of nested objects, again and again.
    let hostile = {
        let admin = Admin::new(&sluice);
        let health = format!("http://{}/healthz", sluice.admin_addr);
        let stop = stop.clone();
        tokio::spawn(async move {
            let deep = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
            let client = reqwest::Client::new();
            let mut answers = Vec::new();
            for _ in 0..10 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let sent = Instant::now();
                let (status, body) = admin.post("/v1/faults", deep.clone()).await;
                let took = sent.elapsed();
                let healthy = client
                    .get(&health)
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await
                    .map(|r| r.status().as_u16());
                answers.push((status, body["error"].clone(), took, healthy.ok()));
            }
            answers
        })
    };

    let started = Instant::now();
    let mut status = serde_json::Value::Null;
    while started.elapsed() < Duration::from_secs(30) {
        status = admin.get("/v1/rollouts/chat-v2").await.1;
        if status["state"] == "rolled_back" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let decided = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let answers = hostile.await.unwrap();
    assert_eq!(status["state"], "rolled_back", "{status}");
    // Generous, as in rollout.rs: the same rollback without the hostile
    // client is decided well within this.
    assert!(decided < Duration::from_secs(10), "{decided:?}");
    assert!(!answers.is_empty());
    for (status, error, took, healthy) in answers {
        assert_eq!(status, 400);
        assert_eq!(
            error,
            "body nests deeper than 64 levels (admin.max_body_depth)"
        );
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert_eq!(healthy, Some(200));
    }
}
