// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;

use tokio::net::TcpListener;

use super::parse::{endpoint_load, sample, samples};
use super::*;
use crate::config::RawConfig;
use crate::testing::MetricsServer;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// What vLLM's V1 engine serves (trimmed), with two engines (data
/// parallel), histogram series and a LoRA info gauge whose label values
/// hold commas and quotes.
fn vllm_text() -> String {
    format!(
        r#"# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 12046.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 3.0
vllm:num_requests_running{{engine="1",model_name="{MODEL}"}} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{MODEL}"}} 7.0
vllm:num_requests_waiting{{engine="1",model_name="{MODEL}"}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{MODEL}"}} 0.42
vllm:kv_cache_usage_perc{{engine="1",model_name="{MODEL}"}} 0.17
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{{max_lora="4",running_lora_adapters="sql-lora,chat-lora",waiting_lora_adapters="say \"hi\", twice"}} 1.7212e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="{MODEL}"}} 123456.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.001",model_name="{MODEL}"}} 0.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="{MODEL}"}} 42.0
vllm:time_to_first_token_seconds_count{{engine="0",model_name="{MODEL}"}} 42.0
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="{MODEL}"}} 3.5
"#
    )
}

/// What llama.cpp's server serves at `/metrics` (with `--metrics`).
const LLAMACPP_TEXT: &str = "\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1024
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 682.667
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.25
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 2
";

#[test]
fn reads_labels_with_commas_escapes_and_timestamps() {
    let s = sample(r#"a:b_c{x="1,2", y="say \"hi\"\n",z="a\\b",} 1.5e3 1700000000000"#).unwrap();
    assert_eq!(s.name, "a:b_c");
    assert_eq!(
        s.labels,
        [
            ("x", "1,2".to_string()),
            ("y", "say \"hi\"\n".to_string()),
            ("z", "a\\b".to_string())
        ]
    );
    assert_eq!(s.value, 1500.0);
    assert_eq!(sample("up 1").unwrap().value, 1.0);
    assert_eq!(sample("  up {} +Inf").unwrap().value, f64::INFINITY);
    assert!(sample("up NaN").unwrap().value.is_nan());
    // OpenMetrics exemplar after the value.
    let s = sample(r#"req_bucket{le="1"} 4 # {trace_id="abc"} 0.5"#).unwrap();
    assert_eq!(s.value, 4.0);
}

#[test]
fn skips_comments_blanks_and_malformed_lines() {
    let text =
        "# HELP up x\n\n# EOF\nup\n{a=\"b\"} 1\n9lives 1\nx{a=\"b} 1\nx{a=b} 1\nx one\nok 2\n";
    let all: Vec<_> = samples(text).map(|s| (s.name, s.value)).collect();
    assert_eq!(all, [("ok", 2.0)]);
}

#[test]
fn maps_vllm_and_llamacpp_names() {
    assert_eq!(
        endpoint_load(&vllm_text()),
        EndpointLoad {
            running: Some(5.0),
            waiting: Some(7.0),
            kv_cache_usage: Some(0.42),
        }
    );
    assert_eq!(
        endpoint_load(LLAMACPP_TEXT),
        EndpointLoad {
            running: Some(1.0),
            waiting: Some(2.0),
            kv_cache_usage: Some(0.25),
        }
    );
    // Older vLLM: the GPU cache name, used only when the new one is absent.
    let old = "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.9\n";
    assert_eq!(endpoint_load(old).kv_cache_usage, Some(0.9));
    let both = format!("{old}vllm:kv_cache_usage_perc{{model_name=\"m\"}} 0.3\n");
    assert_eq!(endpoint_load(&both).kv_cache_usage, Some(0.3));
    // A server that exports none of them.
    assert_eq!(endpoint_load("up 1\n"), EndpointLoad::default());
}

/// A loopback port nobody listens on.
async fn dead_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
}

fn config(vllm: &[SocketAddr], llama: Option<SocketAddr>) -> String {
    let list = |addrs: &[SocketAddr]| {
        let each: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        each.join(", ")
    };
    let mut yaml = format!(
        "listeners:\n  - {{ name: public, listen: 127.0.0.1:18080, protocol: http }}\n\
         clusters:\n  - {{ name: vllm, kind: llm, endpoints: [{}], metrics_path: /metrics, metrics_interval: 1s }}\n",
        list(vllm)
    );
    if let Some(addr) = llama {
        yaml += &format!(
            "  - {{ name: llama, kind: llm, endpoints: [{addr}], metrics_path: /metrics, metrics_interval: 1s }}\n"
        );
    }
    yaml += "routes:\n  - { name: chat, listener: public, split: { vllm: 100 } }\n";
    yaml
}

/// Polls `check` every 10 ms for up to 10 s.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn scrapes_vllm_and_llamacpp_and_counts_dead_endpoints() {
    let vllm = MetricsServer::start(vllm_text()).await;
    let llama = MetricsServer::start(LLAMACPP_TEXT.to_string()).await;
    let dead = dead_addr().await;
    let yaml = config(&[vllm.addr, dead], Some(llama.addr));
    let (store, shared) = crate::testing::store(&yaml);
    let scraper = UpstreamScraper::new(shared.metrics.registry()).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(scraper.clone().run(store.clone(), cancel.clone()));

    let errors =
        format!("sluice_upstream_scrape_errors_total{{cluster=\"vllm\",endpoint=\"{dead}\"}} ");
    eventually("two failed scrapes of the dead endpoint", || {
        let text = shared.metrics.encode();
        text.lines()
            .find_map(|l| l.strip_prefix(&errors))
            .is_some_and(|n| n.parse::<u64>().unwrap() >= 2)
    })
    .await;
    eventually("both clusters scraped", || {
        scraper.latest("vllm").is_some() && scraper.latest("llama").is_some()
    })
    .await;
    // The data plane's table: each endpoint's own ratio (vLLM's largest
    // engine), none for the dead one.
    let readings = scraper.readings().clone();
    eventually("the KV readings published", || {
        readings.ratio("llama", llama.addr).is_some()
    })
    .await;
    assert_eq!(readings.ratio("vllm", vllm.addr), Some(0.42));
    assert_eq!(readings.ratio("llama", llama.addr), Some(0.25));
    assert_eq!(readings.ratio("vllm", dead), None);
    assert_eq!(readings.ratio("vllm", llama.addr), None);

    let text = shared.metrics.encode();
    let v = vllm.addr;
    let l = llama.addr;
    for line in [
        format!("sluice_upstream_requests_running{{cluster=\"vllm\",endpoint=\"{v}\"}} 5"),
        format!("sluice_upstream_requests_waiting{{cluster=\"vllm\",endpoint=\"{v}\"}} 7"),
        format!("sluice_upstream_kv_cache_usage_ratio{{cluster=\"vllm\",endpoint=\"{v}\"}} 0.42"),
        format!("sluice_upstream_up{{cluster=\"vllm\",endpoint=\"{v}\"}} 1"),
        format!("sluice_upstream_scrape_errors_total{{cluster=\"vllm\",endpoint=\"{v}\"}} 0"),
        format!("sluice_upstream_up{{cluster=\"vllm\",endpoint=\"{dead}\"}} 0"),
        format!("sluice_upstream_requests_running{{cluster=\"llama\",endpoint=\"{l}\"}} 1"),
        format!("sluice_upstream_requests_waiting{{cluster=\"llama\",endpoint=\"{l}\"}} 2"),
        format!("sluice_upstream_kv_cache_usage_ratio{{cluster=\"llama\",endpoint=\"{l}\"}} 0.25"),
        format!("sluice_upstream_up{{cluster=\"llama\",endpoint=\"{l}\"}} 1"),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in\n{text}"
        );
    }
    // The dead endpoint has no load series, and adds nothing to the load.
    let dead_running =
        format!("sluice_upstream_requests_running{{cluster=\"vllm\",endpoint=\"{dead}\"}}");
    assert!(!text.contains(&dead_running), "{text}");
    assert_eq!(
        scraper.latest("vllm"),
        Some(UpstreamLoad {
            running: Some(5.0),
            waiting: Some(7.0),
            kv_cache_usage: Some(0.42),
            endpoints_up: 1,
        })
    );
    assert_eq!(scraper.latest("nope"), None);

    let view = scraper.snapshot();
    let endpoints = view["clusters"][1]["endpoints"].as_array().unwrap();
    assert_eq!(view["clusters"][1]["cluster"], "vllm");
    let dead_view = endpoints
        .iter()
        .find(|e| e["endpoint"] == dead.to_string())
        .unwrap();
    assert_eq!(dead_view["up"], false);
    assert!(
        dead_view["error"].as_str().unwrap().contains("onnect"),
        "{dead_view}"
    );

    // The llama cluster leaves the config: its series and its load go.
    let raw = RawConfig::from_yaml(&config(&[vllm.addr, dead], None)).unwrap();
    store.replace("test", raw).unwrap();
    eventually("llama forgotten", || {
        scraper.latest("llama").is_none() && !shared.metrics.encode().contains("cluster=\"llama\"")
    })
    .await;
    eventually("llama's KV reading withdrawn", || {
        readings.ratio("llama", llama.addr).is_none()
    })
    .await;

    crate::testing::stop(&cancel, task).await;
}

#[test]
fn plan_takes_llm_clusters_with_a_metrics_path_only() {
    let yaml = "listeners:\n  - { name: public, listen: 127.0.0.1:18080, protocol: http }\n\
        clusters:\n\
        \x20 - { name: a, kind: llm, endpoints: [127.0.0.1:8000, localhost:8001], metrics_path: /metrics, metrics_interval: 2s }\n\
        \x20 - { name: b, kind: llm, endpoints: [127.0.0.1:8002] }\n\
        \x20 - { name: c, kind: cache, endpoints: [127.0.0.1:6379] }\n\
        routes:\n  - { name: chat, listener: public, split: { a: 100 } }\n";
    let plan = plan(&Config::from_yaml(yaml).unwrap());
    assert!(plan.skipped_tls.is_empty());
    assert_eq!(plan.clusters.len(), 1);
    let (name, interval, targets) = &plan.clusters[0];
    assert_eq!((name.as_str(), *interval), ("a", Duration::from_secs(2)));
    assert_eq!(targets[0].endpoint, "127.0.0.1:8000");
    assert_eq!(targets[0].uri, "http://127.0.0.1:8000/metrics");
    assert_eq!(targets[0].host, None);
    assert_eq!(targets[1].endpoint, "localhost:8001");
    assert_eq!(targets[1].host.as_ref().unwrap(), "localhost:8001");
}

#[test]
fn a_scrape_more_often_than_once_a_second_is_refused() {
    let yaml = config(&["127.0.0.1:8000".parse().unwrap()], None)
        .replace("metrics_interval: 1s", "metrics_interval: 500ms");
    let errors = Config::from_yaml(&yaml).unwrap_err();
    let texts: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "clusters[0].metrics_interval: must be at least 1s (a model server is scraped at most \
          once a second), found 500ms"
        ]
    );
}
