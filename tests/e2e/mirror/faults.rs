//! Bodies reach the shadow byte-exact, bodies over `max_body` are not
//! mirrored, and a dead, slow or resetting shadow leaves the primary
//! error-free.

use bytes::Bytes;
use rand::RngCore;

use sluice_cli::MockLlmOptions;

use super::{at_once, config, copies, drive, metrics_when_counted, mirror_count, mirrored, shadow};
use crate::harness::{listener, start};
use crate::support::{free_port, sha256_hex, NamedUpstream};

const MIB: usize = 1024 * 1024;

fn random_body(len: usize) -> Bytes {
    let mut body = vec![0u8; len];
    rand::rng().fill_bytes(&mut body);
    Bytes::from(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mib_bodies_arrive_byte_exact_and_two_mib_are_not_mirrored() {
    let (_primary, shadow, sluice) = mirrored("{ cluster: shadow, max_body: 1MiB }").await;
    let url = format!("http://{}/v1/embeddings", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    let mut sent = Vec::new();
    for _ in 0..3 {
        let body = random_body(MIB);
        sent.push(sha256_hex(&body));
        let r = client.post(&url).body(body).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let seen = copies(&shadow, 3).await;
    let mut got: Vec<String> = seen.iter().map(|s| sha256_hex(&s.body)).collect();
    got.sort();
    sent.sort();
    assert_eq!(got, sent, "the shadow got the same bytes");
    assert!(seen.iter().all(|s| s.body.len() == MIB));

    // Twice the limit: the primary gets all of it, the shadow nothing.
    let big = random_body(2 * MIB);
    let want = sha256_hex(&big);
    let r = client.post(&url).body(big).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let echo: serde_json::Value = r.json().await.unwrap();
    assert_eq!(echo["body_sha256"], want.as_str());
    let metrics = metrics_when_counted(&sluice, "body_too_large", 1).await;
    assert_eq!(mirror_count(&metrics, "body_too_large"), 1);
    assert_eq!(mirror_count(&metrics, "ok"), 3);
    assert_eq!(shadow.seen().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_carry_the_rewritten_model_and_headers() {
    let (_primary, shadow, sluice) = mirrored(
        "{ cluster: shadow, rewrite: { model: shadow-model, headers: { x-env: shadow } } }",
    )
    .await;
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let body = br#"{"model":"prod-model","messages":[{"role":"user","content":"hi"}]}"#;
    let r = reqwest::Client::new()
        .post(&url)
        .header("x-env", "prod")
        .body(&body[..])
        .send()
        .await
        .unwrap();
    let echo: serde_json::Value = r.json().await.unwrap();
    // The primary saw the request untouched.
    assert_eq!(echo["body_sha256"], sha256_hex(body).as_str());
    let seen = copies(&shadow, 1).await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].model().as_deref(), Some("shadow-model"));
    assert_eq!(seen[0].header("x-env"), Some("shadow"));
}

/// Runs 60 requests through a route mirroring ×3 into `shadow`; every one
/// must succeed, and copies are counted with each of `results`. With
/// `gated`, the shadow's failures must then close the gate: 20 more requests
/// and some of their copies are `shadow_down` (never collected nor queued).
async fn primary_unharmed(
    shadow: std::net::SocketAddr,
    mirror: &str,
    results: &[&str],
    gated: bool,
) {
    let primary = NamedUpstream::start("primary").await.unwrap();
    let sluice = start(&config(primary.addr(), shadow, mirror));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let statuses = drive(&url, 60, 4, |_| Vec::new(), Bytes::from_static(b"{}")).await;
    assert_eq!(statuses.len(), 60);
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(primary.requests(), 60);
    let mut metrics = String::new();
    for result in results {
        metrics = metrics_when_counted(&sluice, result, 1).await;
        assert!(mirror_count(&metrics, result) >= 1, "{result}: {metrics}");
    }
    if gated {
        let statuses = drive(&url, 20, 1, |_| Vec::new(), Bytes::from_static(b"{}")).await;
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
        assert_eq!(primary.requests(), 80);
        metrics = metrics_when_counted(&sluice, "shadow_down", 1).await;
        assert!(mirror_count(&metrics, "shadow_down") >= 1, "{metrics}");
    }
    assert_eq!(mirror_count(&metrics, "ok"), 0);
    let errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_requests_total") && !l.contains("\"2xx\""))
        .filter(|l| !l.ends_with(" 0"))
        .collect();
    assert!(errors.is_empty(), "the primary answered errors: {errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_shadow_leaves_the_primary_error_free() {
    let dead = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    primary_unharmed(
        dead,
        "{ cluster: shadow, copies: 3 }",
        &["connect_error"],
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_answering_in_5s_leaves_the_primary_error_free() {
    let slow = shadow(MockLlmOptions::paced_ms(5000, 0, 1)).await;
    // With 4 copies in flight at most, the rest are dropped; those sent
    // time out before the shadow answers.
    primary_unharmed(
        slow.addr(),
        "{ cluster: shadow, copies: 3, timeout: 4s, max_in_flight: 4 }",
        &["in_flight", "timeout"],
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resetting_shadow_leaves_the_primary_error_free() {
    let reset = shadow(MockLlmOptions {
        reset: true,
        ..at_once()
    })
    .await;
    // The reset reaches the copy with its request on the wire (`error`) or, on
    // a busy machine, while the client still sets the connection up (reading
    // its addresses fails: `connect_error`). Either way the copy fails.
    primary_unharmed(
        reset.addr(),
        "{ cluster: shadow, copies: 3 }",
        &["error|connect_error"],
        true,
    )
    .await;
}
