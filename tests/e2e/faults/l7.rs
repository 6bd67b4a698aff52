//! Faults before the upstream: abort, delay, close, reset; TTL, max_active,
//! halt_if; header faults.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde_json::json;

use super::{abort, add, faulted, show, yaml};
use crate::harness::{get_with_header, listener, metrics_when, start};
use crate::support::NamedUpstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_at_half_answers_about_half_and_keeps_the_connection() {
    let (up, sluice, admin) = faulted().await;
    let id = add(
        &admin,
        json!({"id": "half", "percent": 50, "ttl": "5m", "match": {"route": "chat"}, "action": abort(503)}),
    )
    .await;
    let url = format!("http://{}/v1/chat", listener(&sluice, "public"));
    // One connection for all: an injected answer must not close it.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let mut aborted = 0;
    for _ in 0..300 {
        let r = client.get(&url).send().await.unwrap();
        match r.status().as_u16() {
            503 => {
                assert_eq!(r.headers()["x-sluice-fault"], "half");
                assert_eq!(r.text().await.unwrap(), "injected");
                aborted += 1;
            }
            200 => assert_eq!(r.headers()["x-upstream"], "a"),
            other => panic!("status {other}"),
        }
    }
    assert!((110..=190).contains(&aborted), "{aborted} of 300 aborted");
    assert_eq!(up.requests(), 300 - aborted);
    let body = show(&admin, &id).await;
    assert_eq!(body["injected"], aborted);
    let series =
        format!("sluice_faults_injected_total{{experiment=\"half\",kind=\"abort\"}} {aborted}");
    let text = metrics_when(&sluice, |t| t.contains(&series)).await;
    assert!(text.contains(&series), "{text}");
    assert!(text.contains("sluice_faults_active 1"), "{text}");

    // Removed: nothing is aborted any more.
    let (status, _) = admin.delete(&format!("/v1/faults/{id}")).await;
    assert_eq!(status, 200);
    for _ in 0..50 {
        assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_holds_the_request_then_serves_it() {
    let (up, sluice, admin) = faulted().await;
    add(
        &admin,
        json!({"id": "slow", "ttl": "5m", "action": {"delay": {"delay": "300ms", "jitter": "20ms", "distribution": "normal"}}}),
    )
    .await;
    let url = format!("http://{}/v1/chat", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let started = Instant::now();
        let r = client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        // A normal draw may fall below the mean; 200 ms is 5 sigma under it.
        assert!(started.elapsed() >= Duration::from_millis(200));
    }
    assert_eq!(show(&admin, "slow").await["injected"], 3);
    assert_eq!(up.requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_experiment_fires_within_its_ttl_and_never_after() {
    let (_up, sluice, admin) = faulted().await;
    let id = add(
        &admin,
        json!({"id": "short", "ttl": "2s", "action": abort(503)}),
    )
    .await;
    let url = format!("http://{}/v1/chat", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 503);
    // Wait, bounded, until the API says it expired.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let body = show(&admin, &id).await;
        if body["state"] == "expired" {
            assert_eq!(body["time_left_ms"], 0);
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..20 {
        assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    }
    assert_eq!(show(&admin, &id).await["injected"], 1);
    // The control loop notes the expiry in the audit log.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, events) = admin.get("/v1/events").await;
        let noted = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "expire fault short (ttl ended)");
        if noted {
            break;
        }
        assert!(Instant::now() < deadline, "{events}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_active_caps_the_requests_faulted_at_once() {
    let (_up, sluice, admin) = faulted().await;
    add(
        &admin,
        json!({"id": "capped", "ttl": "5m", "max_active": 2, "action": {"delay": {"delay": "3s"}}}),
    )
    .await;
    let url = format!("http://{}/v1/chat", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    let started = Instant::now();
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let r = client.get(&url).send().await.unwrap();
                assert_eq!(r.status(), 200);
            })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }
    // Six requests sent together, each delayed 3 s if faulted: if they all
    // went out within those 3 s, exactly two held a place.
    if started.elapsed() < Duration::from_secs(6) {
        assert_eq!(show(&admin, "capped").await["injected"], 2);
    }
    assert_eq!(show(&admin, "capped").await["active_requests"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halt_if_stops_an_experiment_that_pushes_the_error_rate_over_its_bound() {
    let (_up, sluice, admin) = faulted().await;
    let id = add(
        &admin,
        json!({"id": "harsh", "ttl": "5m", "match": {"route": "chat"},
               "halt_if": {"error_rate": "30%", "window": "10s"}, "action": abort(500)}),
    )
    .await;
    let url = format!("http://{}/v1/chat", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut aborted = 0;
    loop {
        let status = client.get(&url).send().await.unwrap().status();
        if status == StatusCode::OK {
            break;
        }
        aborted += 1;
        assert!(Instant::now() < deadline, "still aborting after {aborted}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(aborted >= 5, "halted after {aborted} aborts");
    assert_eq!(show(&admin, &id).await["state"], "halted");
    for _ in 0..10 {
        assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    }
    let (_, events) = admin.get("/v1/events").await;
    let halted = events["events"].as_array().unwrap().iter().any(|e| {
        e["action"]
            .as_str()
            .unwrap()
            .starts_with("halt fault harsh: route error rate")
    });
    assert!(halted, "{events}");
}

/// `close` ends the client's connection with a FIN (the client reads EOF),
/// `reset` with a RST (the client's read fails with ECONNRESET); neither
/// answers, and other requests are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_with_a_fin_and_reset_with_a_rst_unanswered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (up, sluice, admin) = faulted().await;
    let addr = listener(&sluice, "public");
    for action in ["close", "reset"] {
        let id = add(
            &admin,
            json!({"id": action, "ttl": "5m", "match": {"headers": {"x-victim": "yes"}}, "action": {action: {}}}),
        )
        .await;
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET /v1/chat HTTP/1.1\r\nhost: sluice\r\nx-victim: yes\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut answer))
            .await
            .expect("the connection ends");
        match action {
            "close" => assert_eq!(read.unwrap(), 0, "EOF, no answer"),
            _ => assert_eq!(
                read.expect_err("a reset").kind(),
                std::io::ErrorKind::ConnectionReset,
                "{answer:?}"
            ),
        }
        assert!(answer.is_empty(), "{action}: {answer:?}");
        // Others are served.
        let url = format!("http://{addr}/v1/chat");
        assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);
        assert_eq!(show(&admin, &id).await["injected"], 1);
        admin.delete(&format!("/v1/faults/{id}")).await;
    }
    assert_eq!(up.requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_faults_work_only_where_the_route_allows_them() {
    let up = NamedUpstream::start("a").await.unwrap();
    for allowed in [false, true] {
        let sluice = start(&yaml(&up, allowed));
        let url = format!("http://{}/v1/chat", listener(&sluice, "public"));
        let r = get_with_header(&url, "x-sluice-fault-abort", "503").await;
        assert_eq!(r.status().as_u16(), if allowed { 503 } else { 200 });
        let started = Instant::now();
        let r = get_with_header(&url, "x-sluice-fault-delay", "250ms").await;
        assert_eq!(r.status(), 200);
        if allowed {
            assert!(started.elapsed() >= Duration::from_millis(250));
            let text = metrics_when(&sluice, |t| {
                t.contains("sluice_faults_injected_total{experiment=\"header\",kind=\"delay\"} 1")
            })
            .await;
            assert!(
                text.contains(
                    "sluice_faults_injected_total{experiment=\"header\",kind=\"abort\"} 1"
                ),
                "{text}"
            );
        } else {
            let text = metrics_when(&sluice, |_| true).await;
            assert!(!text.contains("experiment=\"header\""), "{text}");
        }
    }
}

/// An experiment matching on the model fires for a client that names the
/// model only in the JSON body (as the OpenAI SDK does), and a request for
/// another model reaches the upstream with its body byte-exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_named_only_in_the_body_is_matched() {
    let (up, sluice, admin) = faulted().await;
    let id = add(
        &admin,
        json!({"id": "by-model", "ttl": "5m", "match": {"model": "victim-model"}, "action": abort(503)}),
    )
    .await;
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    let body = |model: &str| {
        format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#)
    };
    let hit = client
        .post(&url)
        .body(body("victim-model"))
        .send()
        .await
        .unwrap();
    assert_eq!(hit.status(), StatusCode::SERVICE_UNAVAILABLE);
    let other = body("other-model");
    let miss = client.post(&url).body(other.clone()).send().await.unwrap();
    assert_eq!(miss.status(), StatusCode::OK);
    let echo: serde_json::Value = miss.json().await.unwrap();
    assert_eq!(
        echo["body_sha256"],
        crate::support::sha256_hex(other.as_bytes())
    );
    assert_eq!(echo["body_len"], other.len());
    assert_eq!(show(&admin, &id).await["injected"], 1);
    assert_eq!(up.requests(), 1);
}
