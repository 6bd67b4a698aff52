//! sluice's `/metrics` as Prometheus sees it: `promtool check metrics` is
//! clean, and a real Prometheus scrapes it and computes a TTFT quantile.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{listener, llm_config, metrics};
use crate::support::{have, require, Prometheus};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_is_clean_and_prometheus_computes_a_ttft_quantile() {
    if !require(
        "prometheus and promtool",
        have("prometheus") && have("promtool"),
    ) {
        return;
    }
    let mock = MockLlm::start(MockLlmOptions::paced_ms(40, 5, 6))
        .await
        .unwrap();
    let sluice = llm_config(mock.addr()).start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    for _ in 0..5 {
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": true});
        let r = client.post(&url).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let dead = format!("http://{}/nothing-here", listener(&sluice, "public"));
    client.get(&dead).send().await.unwrap();

    let text = metrics(&sluice).await;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let prom = Prometheus::start(&[sluice.admin_addr]).await;
    let promql = "histogram_quantile(0.5, sum by (le) (gen_ai_client_operation_time_to_first_chunk_seconds_bucket{route=\"chat\"}))";
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut value = None;
    while Instant::now() < deadline {
        value = prom.query(promql).await;
        if value.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let p50 = value.expect("Prometheus answered the TTFT quantile");
    assert!((0.02..0.5).contains(&p50), "p50 TTFT {p50}s");
}
