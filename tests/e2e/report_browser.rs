//! `sluice report` on real `sluice load` runs (the binary, against the mock
//! LLM and a real redis-server): the page loads in headless Chromium with
//! the network off, with no console error and marks in every plot (the
//! screenshot is kept in target/artifacts/report.png), and a model slowed
//! by 30% is marked in the model layer and not in the cache. A run of a
//! model fitted by `sluice fit` draws its inter-arrival times against every
//! candidate (target/artifacts/report-fitplot.png).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::cli::sluice;
use crate::support::{have, redis_available, require, workspace_root, RedisServer, TempDir};

/// A cache lookup (a miss: the key is never set), then a streamed answer
/// of 16 tokens; two stages, 15/s then 30/s, 3 s each.
fn scenario(dir: &Path, name: &str, mock: &MockLlm, redis: impl std::fmt::Display) -> PathBuf {
    let text = format!(
        "scenario: report-e2e\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 15 }}, stages: [ {{ rate: 15, for: 3s }}, {{ rate: 30, for: 3s }} ], seed: 5 }}\n\
         steps:\n\
         \x20 - {{ name: cache, service: redis, command: [GET, 'q:{{{{word}}}}'], target: '{}' }}\n\
         \x20 - {{ name: answer, service: llm, depends_on: cache, model: m, prompt: 'Say {{{{word}}}}', max_tokens: 16, ignore_eos: true }}\n\
         data: {{ word: {{ values: [a, b, c] }} }}\n\
         thresholds: {{ ttft_p95: 2s, error_rate: 1% }}\n",
        mock.addr(),
        redis
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

async fn mock(itl: Duration) -> MockLlm {
    MockLlm::start(MockLlmOptions {
        itl,
        ..MockLlmOptions::paced_ms(30, 10, 16)
    })
    .await
    .unwrap()
}

/// `sluice load SCENARIO --detailed -o OUT`.
async fn load(scenario: &Path, out: &Path) {
    let o = sluice(vec![
        "load".into(),
        scenario.display().to_string(),
        "--detailed".into(),
        "-o".into(),
        out.display().to_string(),
    ])
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn run_report(args: &[&str]) -> std::process::Output {
    Command::new(crate::cli::sluice_bin())
        .arg("report")
        .args(args)
        .output()
        .unwrap()
}

/// Chromium headless with the network off: no proxy reachable, no name
/// resolved, none of its own background traffic.
fn chromium(profile: &Path, extra: &[String]) -> std::process::Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .output()
        .unwrap()
}

/// Each `<svg>` of a page, its body.
fn plots(dom: &str) -> Vec<&str> {
    dom.split("<svg")
        .skip(1)
        .map(|s| s.split("</svg>").next().unwrap_or(""))
        .collect()
}

/// A plot's drawn data marks (the class `mark` the SVG helpers give them).
fn marks(svg: &str) -> usize {
    [
        "<path class=\"mark",
        "<circle class=\"mark",
        "<rect class=\"mark",
    ]
    .iter()
    .map(|m| svg.matches(m).count())
    .sum()
}

/// The page loaded in chromium: its DOM after load, with no console
/// message or failed load in chromium's log.
fn dump_dom(profile: &Path, page: &Path) -> String {
    let dom = chromium(
        profile,
        &["--dump-dom".into(), format!("file://{}", page.display())],
    );
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(dom.status.success(), "{log}");
    for bad in ["CONSOLE", "Failed to load resource", "net::ERR"] {
        assert!(!log.contains(bad), "chromium logged {bad}:\n{log}");
    }
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_of_a_real_run_renders_in_headless_chromium_with_the_network_off() {
    if !require("redis-server", redis_available()) || !require("chromium", have("chromium")) {
        return;
    }
    let redis = RedisServer::start().await.unwrap();
    let m = mock(Duration::from_millis(10)).await;
    let tmp = TempDir::new("report-browser");
    let path = scenario(tmp.path(), "scenario.yaml", &m, redis.addr());
    let (base, run) = (tmp.path().join("base.json"), tmp.path().join("run.json"));
    load(&path, &base).await;
    load(&path, &run).await;
    let page = tmp.path().join("report.html");
    let o = run_report(&[
        run.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let url = format!("file://{}", page.display());
    let dom = chromium(
        &tmp.path().join("profile-dom"),
        &["--dump-dom".into(), url.clone()],
    );
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let log = String::from_utf8_lossy(&dom.stderr);
    for bad in ["CONSOLE", "Failed to load resource", "net::ERR"] {
        assert!(!log.contains(bad), "chromium logged {bad}:\n{log}");
    }
    let dom = String::from_utf8_lossy(&dom.stdout);
    let svgs = plots(&dom);
    // The three CDFs, the dispatch lag and the timeline.
    assert_eq!(svgs.len(), 5, "{dom}");
    for (i, svg) in svgs.iter().enumerate() {
        assert!(marks(svg) > 0, "plot {i} has no marks: {svg}");
    }
    assert!(dom.contains("Against the baseline") && dom.contains("Attribution by layer"));
    let artifacts = workspace_root().join("target").join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let o = chromium(
        &tmp.path().join("profile-shot"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000".into(),
            url,
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // The IHDR: 1280 × 2000.
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1280);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 2000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_30_percent_slower_is_marked_in_the_model_layer_and_not_the_cache() {
    if !require("redis-server", redis_available()) {
        return;
    }
    let redis = RedisServer::start().await.unwrap();
    let tmp = TempDir::new("report-regression");
    let (base, slow) = (tmp.path().join("base.json"), tmp.path().join("slow.json"));
    let fast = mock(Duration::from_millis(10)).await;
    load(
        &scenario(tmp.path(), "base.yaml", &fast, redis.addr()),
        &base,
    )
    .await;
    let slowed = mock(Duration::from_millis(13)).await;
    load(
        &scenario(tmp.path(), "slow.yaml", &slowed, redis.addr()),
        &slow,
    )
    .await;
    let (r, stderr) = regression_report(&tmp, &slow, &base);
    // Another target address, the same scenario text otherwise: a warning.
    assert!(
        stderr.contains("warning: the baseline ran scenario `report-e2e`"),
        "{stderr}"
    );
    let (model, cache) = (layer(&r, "model"), layer(&r, "cache"));
    assert_eq!(model["status"], "regressed", "{model}");
    assert_ne!(cache["status"], "regressed", "{cache}");
    let confidence = model["confidence"].as_f64().unwrap();
    assert!(confidence >= 0.8, "{model}");
    assert!(cache["confidence"].as_f64().unwrap() <= 0.2, "{cache}");
    assert_eq!(model["worst"][0]["trace_id"].as_str().unwrap().len(), 32);
    let itl = r["baseline"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == "median_itl_ms")
        .unwrap();
    assert_eq!(itl["verdict"], "regressed", "{itl}");
    let pct = itl["percent"].as_f64().unwrap();
    assert!((15.0..45.0).contains(&pct), "{itl}");
}

/// `sluice report RUN --baseline BASE --json --fail-on-regression`, which
/// must exit 99: the JSON twin and stderr.
fn regression_report(tmp: &TempDir, run: &Path, base: &Path) -> (Value, String) {
    let json = tmp.path().join("report.json");
    let o = run_report(&[
        run.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
        "--json",
        "-o",
        json.to_str().unwrap(),
        "--fail-on-regression",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(99), "{stderr}");
    let r = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (r, stderr)
}

/// The root-cause matrix's row for `name`.
fn layer(report: &Value, name: &str) -> Value {
    report["attribution"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layer"] == name)
        .unwrap()
        .clone()
}

/// Redis behind a sluice tcp listener, slowed by an L4 `latency` fault of
/// 80 ms on its answers: the cache layer is marked and blamed, not the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_slowed_by_an_l4_latency_fault_is_marked_in_the_cache_layer() {
    let Some((_redis, proxy)) = crate::tcp::redis_behind_sluice().await else {
        return;
    };
    let admin = crate::harness::Admin::new(&proxy);
    let cache = crate::harness::listener(&proxy, "cache");
    let tmp = TempDir::new("report-cache-regression");
    let (base, slow) = (tmp.path().join("base.json"), tmp.path().join("slow.json"));
    let llm = mock(Duration::from_millis(10)).await;
    let path = scenario(tmp.path(), "scenario.yaml", &llm, cache);
    load(&path, &base).await;
    let experiment = serde_json::json!({"id": "slow-cache", "ttl": "5m",
        "match": {"listener": "cache"},
        "action": {"latency": {"latency": "80ms", "direction": "downstream"}}});
    let (status, body) = admin.post("/v1/faults", experiment.to_string()).await;
    assert_eq!(status, 201, "{body}");
    load(&path, &slow).await;

    let (r, _) = regression_report(&tmp, &slow, &base);
    let (model, cache) = (layer(&r, "model"), layer(&r, "cache"));
    assert_eq!(cache["status"], "regressed", "{cache}");
    assert!(cache["confidence"].as_f64().unwrap() >= 0.8, "{cache}");
    // The blame is the confidence: the slow journeys' extra time is not in
    // the model. Its status is not asserted: on a CI machine running the
    // whole suite on two cores, the p99 gap of a 10 ms mock moves by 10%+
    // between two runs (CI read 12.9 -> 14.6 ms), a real change in the
    // tail that the bootstrap rightly calls beyond noise. The model's
    // middle, which a slower cache cannot move, must stay put.
    assert!(model["confidence"].as_f64().unwrap() <= 0.2, "{model}");
    let median_gap = model["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == "median_itl_ms")
        .unwrap();
    assert_ne!(median_gap["verdict"], "regressed", "{model}");
}

/// A trace of `n` requests whose gaps are gamma (shape 0.5, mean 40 ms:
/// bursty), seeded, in sluice's trace schema.
fn gamma_trace(path: &Path, n: usize) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(16);
    let gamma = rand_distr::Gamma::new(0.5, 0.08).unwrap();
    let mut t = 0.0f64;
    let mut text = String::new();
    for i in 0..n {
        t += rng.sample(gamma);
        text.push_str(&format!(
            "{{\"v\":1,\"request_id\":\"r{i}\",\"arrival_us\":{}}}\n",
            (t * 1e6) as u64
        ));
    }
    std::fs::write(path, text).unwrap();
}

/// `sluice fit` on a seeded trace, a 4 s `from_model:` load of its model
/// against the mock LLM, and the report: the run file carries the model's
/// kind, `--fit` with the fit's JSON draws every candidate, and the page
/// shows the inter-arrival plot with its marks in headless chromium.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_from_model_run_draws_its_inter_arrival_times_against_every_candidate() {
    if !require("chromium", have("chromium")) {
        return;
    }
    let m = MockLlm::start(MockLlmOptions::paced_ms(5, 2, 4))
        .await
        .unwrap();
    let tmp = TempDir::new("report-fitplot");
    let (trace, model) = (
        tmp.path().join("trace.jsonl"),
        tmp.path().join("model.yaml"),
    );
    gamma_trace(&trace, 1500);
    let o = sluice(vec![
        "fit".into(),
        trace.display().to_string(),
        "-o".into(),
        model.display().to_string(),
        "--json".into(),
    ])
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fit_json = tmp.path().join("fit.json");
    std::fs::write(&fit_json, &o.stdout).unwrap();
    let fitted: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        fitted["candidates"].as_array().unwrap().len(),
        5,
        "{fitted}"
    );
    assert_eq!(fitted["iat_quantiles"].as_array().unwrap().len(), 101);
    let best = fitted["best"].as_str().unwrap().to_owned();

    let path = tmp.path().join("scenario.yaml");
    std::fs::write(
        &path,
        format!(
            "scenario: fitplot-e2e\n\
             target: {{ base_url: 'http://{}' }}\n\
             workload: {{ from_model: model.yaml, duration: 4s, seed: 3 }}\n\
             steps:\n\
             \x20 - {{ name: answer, service: llm, model: m, prompt: hi, max_tokens: 4 }}\n",
            m.addr()
        ),
    )
    .unwrap();
    let run = tmp.path().join("run.json");
    load(&path, &run).await;
    let r: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    let carried = &r["arrival_fit"];
    assert_eq!(carried["v"], 1, "{carried}");
    assert_eq!(carried["source"], "model.yaml");
    assert_eq!(carried["best"], best.as_str());
    assert_eq!(carried["candidates"].as_array().unwrap().len(), 1);

    // The twin: the run's own fit, then every candidate with `--fit`.
    let twin = tmp.path().join("report.json");
    let json_of = |extra: &[&str]| -> Value {
        let mut args = vec![
            run.to_str().unwrap(),
            "--json",
            "-o",
            twin.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = run_report(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&std::fs::read(&twin).unwrap()).unwrap()
    };
    let own = json_of(&[]);
    assert_eq!(own["arrivals"]["candidates"].as_array().unwrap().len(), 1);
    let all = json_of(&["--fit", fit_json.to_str().unwrap()])["arrivals"].clone();
    let candidates = all["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 5, "{all}");
    assert_eq!(all["trace"].as_array().unwrap().len(), 101);
    let gaps = all["gaps"].as_u64().unwrap();
    // About 25 arrivals a second for 4 s.
    assert!((40..=200).contains(&gaps), "{all}");
    // The run's gaps are read in the fit's units: the best candidate is
    // within twice the 5% KS critical value (1.36/√n) of them. Four seconds
    // of a bursty process is a small sample (this seed draws 61 gaps, KS
    // 0.28); gaps read in ms as s would put the KS near 1.
    let picked = candidates.iter().find(|c| c["best"] == true).unwrap();
    assert_eq!(picked["kind"], best.as_str());
    let ks = picked["ks_run"].as_f64().unwrap();
    assert!(ks < 2.0 * 1.36 / (gaps as f64).sqrt(), "KS {ks}: {all}");

    // The page, in chromium: the five plots of a `--detailed` run and the
    // inter-arrival plot, with the five candidates, the trace's dots and
    // the run's line drawn.
    let page = tmp.path().join("report.html");
    let o = run_report(&[
        run.to_str().unwrap(),
        "--fit",
        fit_json.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dom = dump_dom(&tmp.path().join("profile-dom"), &page);
    let svgs = plots(&dom);
    assert_eq!(svgs.len(), 6, "{dom}");
    let plot = svgs
        .iter()
        .find(|s| s.contains("Inter-arrival CDF"))
        .unwrap();
    assert_eq!(plot.matches("<path class=\"mark line").count(), 6, "{plot}");
    // Every fifth percentile of the trace, its minimum left off when it is
    // below the axis (which starts at the 1st percentile).
    let dots = plot.matches("<circle class=\"mark base").count();
    assert!((20..=21).contains(&dots), "{plot}");
    assert_eq!(plot.matches(" best\"").count(), 2, "{plot}"); // the line and its key
    assert!(dom.contains("Inter-arrival times against the fit"));
    let artifacts = workspace_root().join("target").join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("report-fitplot.png");
    let _ = std::fs::remove_file(&shot);
    let o = chromium(
        &tmp.path().join("profile-shot"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2600".into(),
            format!("file://{}", page.display()),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(&std::fs::read(&shot).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
}
