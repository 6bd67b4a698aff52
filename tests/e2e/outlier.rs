//! `clusters[].outlier_detection` on real sockets: an endpoint that answers
//! 500 every time is ejected after `consecutive_5xx` of them (counted), gets
//! no request while out, and is used again once its ejection ends; a cluster
//! whose endpoints answer well keeps every one of them.

use std::time::{Duration, Instant};

use crate::harness::{listener, metrics, metrics_when, start, TestConfig};
use crate::support::NamedUpstream;

/// `n` requests through `url`; the `x-upstream` of each answer.
async fn answers(client: &reqwest::Client, url: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let r = client.get(url).send().await.unwrap();
        let name = r.headers()["x-upstream"].to_str().unwrap().to_string();
        out.push(name);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_answering_5xx_is_ejected_and_comes_back_and_good_ones_stay() {
    let good = NamedUpstream::start("good").await.unwrap();
    let bad = NamedUpstream::start_answering("bad", 500).await.unwrap();
    let other = NamedUpstream::start("other").await.unwrap();
    let config = TestConfig::new()
        .listener("public", "http", "")
        .cluster_with(
            "mixed",
            "http",
            [good.addr(), bad.addr()],
            "outlier_detection: { consecutive_5xx: 3, base_ejection: 3s }",
        )
        .cluster_with(
            "healthy",
            "http",
            [good.addr(), other.addr()],
            "outlier_detection: { consecutive_5xx: 3, base_ejection: 3s }",
        )
        .route_with("mixed", "mixed: 100", "match: { path_prefix: /mixed }")
        .route_with(
            "healthy",
            "healthy: 100",
            "match: { path_prefix: /healthy }",
        )
        .yaml();
    let sluice = start(&config);
    let base = format!("http://{}", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    // Round robin: the bad endpoint's third 500 comes within six requests.
    let first = answers(&client, &format!("{base}/mixed"), 6).await;
    assert_eq!(first.iter().filter(|n| *n == "bad").count(), 3, "{first:?}");
    let ejected_at = Instant::now();
    let text = metrics_when(&sluice, |t| t.contains("sluice_outlier_ejections_total")).await;
    let series = format!(
        "sluice_outlier_ejections_total{{cluster=\"mixed\",endpoint=\"{}\"}} 1",
        bad.addr()
    );
    assert!(text.contains(&series), "{text}");

    // While out, every request goes to the good one.
    let during = answers(&client, &format!("{base}/mixed"), 10).await;
    assert!(
        ejected_at.elapsed() < Duration::from_secs(3),
        "test setup: too slow"
    );
    assert!(during.iter().all(|n| n == "good"), "{during:?}");

    // After the ejection time, the bad one is tried again.
    tokio::time::sleep(Duration::from_millis(3_100).saturating_sub(ejected_at.elapsed())).await;
    let after = answers(&client, &format!("{base}/mixed"), 4).await;
    assert!(after.iter().any(|n| n == "bad"), "{after:?}");

    // Good answers eject nobody: both endpoints keep serving.
    let healthy = answers(&client, &format!("{base}/healthy"), 20).await;
    assert_eq!(
        healthy.iter().filter(|n| *n == "good").count(),
        10,
        "{healthy:?}"
    );
    assert_eq!(
        healthy.iter().filter(|n| *n == "other").count(),
        10,
        "{healthy:?}"
    );
    let text = metrics(&sluice).await;
    assert!(!text.contains("cluster=\"healthy\",endpoint"), "{text}");
}
