//! Weighted splits that change at run time: exact extremes, proportions,
//! sticky sessions, and zero failed requests while weights swap under load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::json;

use sluice_proxy::Sluice;

use crate::harness::{listener, Admin, TestConfig};
use crate::support::NamedUpstream;

struct Pair {
    a: NamedUpstream,
    b: NamedUpstream,
}

/// Echo upstreams `a` (v1) and `b` (v2) behind route `chat` split `a: b`, sticky by
/// `x-session-id` or not; the control API, and the route's URL.
async fn split(a: u32, b: u32, sticky: bool) -> (Pair, Sluice, Admin, String) {
    let p = Pair {
        a: NamedUpstream::start("a").await.unwrap(),
        b: NamedUpstream::start("b").await.unwrap(),
    };
    let sticky = if sticky {
        "sticky: { header: x-session-id }"
    } else {
        ""
    };
    let sluice = TestConfig::http()
        .cluster_with("a", "llm", [p.a.addr()], "version: v1")
        .cluster_with("b", "llm", [p.b.addr()], "version: v2")
        .route_with("chat", &format!("a: {a}, b: {b}"), sticky)
        .start();
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat", listener(&sluice, "public"));
    (p, sluice, admin, url)
}

/// Sends `n` requests (optionally with a session header) and counts answers per upstream.
async fn tally(
    client: &reqwest::Client,
    url: &str,
    n: usize,
    session: Option<&str>,
) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for _ in 0..n {
        let mut req = client.get(url);
        if let Some(s) = session {
            req = req.header("x-session-id", s);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200);
        let who = r.headers()["x-upstream"].to_str().unwrap().to_string();
        *counts.entry(who).or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_change_at_run_time() {
    let (_pair, _sluice, admin, url) = split(100, 0, false).await;
    let client = reqwest::Client::new();

    assert_eq!(
        tally(&client, &url, 100, None).await,
        HashMap::from([("a".into(), 100)])
    );

    let (status, body) = admin.set_split("chat", json!({"a": 0, "b": 100})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        tally(&client, &url, 100, None).await,
        HashMap::from([("b".into(), 100)])
    );

    let (status, _) = admin.set_split("chat", json!({"a": 70, "b": 30})).await;
    assert_eq!(status, 200);
    let counts = tally(&client, &url, 1000, None).await;
    let b = counts.get("b").copied().unwrap_or(0);
    assert!((250..=350).contains(&b), "{counts:?}");

    let (_, routes) = admin.get("/v1/routes").await;
    assert_eq!(routes[0]["split"], json!({"a": 70, "b": 30}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_sessions_stay_put_and_move_only_when_their_cluster_empties() {
    let (_pair, _sluice, admin, url) = split(80, 20, true).await;
    let client = reqwest::Client::new();

    let sessions: Vec<String> = (0..200).map(|i| format!("session-{i}")).collect();
    let mut home = HashMap::new();
    for s in &sessions {
        let t = tally(&client, &url, 3, Some(s)).await;
        assert_eq!(t.len(), 1, "session {s} was split: {t:?}");
        home.insert(s.clone(), t.into_keys().next().unwrap());
    }
    let on_b = home.values().filter(|u| *u == "b").count();
    assert!((20..=70).contains(&on_b), "{on_b} of 200 on b at 20%");

    // A small change: sessions on b stay; a few from a move to b, none back.
    admin.set_split("chat", json!({"a": 75, "b": 25})).await;
    let mut moved = 0;
    for s in &sessions {
        let now = tally(&client, &url, 1, Some(s))
            .await
            .into_keys()
            .next()
            .unwrap();
        if home[s] == "b" {
            assert_eq!(now, "b", "session {s} left b on a small change");
        } else if now != home[s] {
            moved += 1;
        }
    }
    assert!(moved <= 30, "{moved} sessions moved on a 5-point change");

    // b goes to 0: every session is on a.
    admin.set_split("chat", json!({"a": 100, "b": 0})).await;
    for s in &sessions {
        assert_eq!(
            tally(&client, &url, 1, Some(s)).await,
            HashMap::from([("a".into(), 1)])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_failures_while_weights_swap_under_load() {
    let (p, _sluice, admin, url) = split(50, 50, false).await;
    let stop = Arc::new(AtomicBool::new(false));

    // 200 swaps through the control API, as fast as it answers.
    let swapper = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let splits = [(100, 0), (0, 100), (50, 50), (1, 99), (99, 1)];
            let mut swaps = 0;
            while swaps < 200 && !stop.load(Ordering::Relaxed) {
                let (a, b) = splits[swaps % splits.len()];
                let (status, _) = admin.set_split("chat", json!({"a": a, "b": b})).await;
                assert_eq!(status, 200);
                swaps += 1;
            }
            swaps
        })
    };

    // 3000 requests from 16 concurrent clients.
    let client = reqwest::Client::new();
    let mut workers = Vec::new();
    for _ in 0..16 {
        let (client, url) = (client.clone(), url.clone());
        workers.push(tokio::spawn(async move {
            let mut bad = Vec::new();
            for _ in 0..(3000 / 16 + 1) {
                match client.get(&url).send().await {
                    Ok(r) if r.status() == 200 => {}
                    Ok(r) => bad.push(r.status().to_string()),
                    Err(e) => bad.push(e.to_string()),
                }
            }
            bad
        }));
    }
    let mut failures = Vec::new();
    for w in workers {
        failures.extend(w.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.await.unwrap();
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(swaps >= 100, "only {swaps} swaps happened during the load");
    assert_eq!(p.a.requests() + p.b.requests(), 16 * (3000 / 16 + 1));
}
