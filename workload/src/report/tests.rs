//! The report on result files made by the load engine's own summary
//! (`summarize` over synthetic requests with known times): the page is
//! self-contained and small, a known slowdown of the model is found in the
//! model layer and not the cache, and bad files are named where.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::*;
use crate::{
    summarize, Cache, Failure, Goodput, GrpcReply, Lineage as RunLineage, Outcome, RunInfo,
    RunOutput, Scenario,
};

fn scenario(name: &str) -> Scenario {
    let text = format!(
        "scenario: {name}\ntarget: {{ base_url: 'http://127.0.0.1:1' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 20s }}\n\
         steps:\n\
         \x20 - {{ name: cache, service: redis, command: [GET, k], target: '127.0.0.1:1' }}\n\
         \x20 - {{ name: answer, service: llm, prompt: hi }}\n"
    );
    Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap()
}

/// `n` journeys over 20 s in two stages: a redis GET of about 1 ms (a hit
/// one time in two), then a streamed answer: TTFT about 40 ms, 16 tokens
/// with gaps of `itl_ms` (±20%).
fn run_json(name: &str, n: u64, itl_ms: f64, seed: u64, detailed: bool) -> Value {
    run_json_lagged(name, n, itl_ms, seed, detailed, 200)
}

/// [`run_json`] with each redis request sent up to `lag_us` late.
fn run_json_lagged(
    name: &str,
    n: u64,
    itl_ms: f64,
    seed: u64,
    detailed: bool,
    lag_us: u64,
) -> Value {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut outcomes = Vec::new();
    for i in 0..n {
        let t = i * 20_000_000 / n;
        let stage = usize::from(t >= 10_000_000);
        let lag = rng.random_range(0..lag_us);
        let redis_end = t + lag + rng.random_range(700..1300);
        outcomes.push(Outcome {
            step: 0,
            index: i,
            stage,
            intended_us: t,
            sent_us: t + lag,
            end_us: redis_end,
            cache: Some(if i % 2 == 0 { Cache::Hit } else { Cache::Miss }),
            ..Outcome::default()
        });
        let sent = redis_end + 50;
        let first = sent + rng.random_range(30_000..50_000);
        let gaps: Vec<u64> = (0..15)
            .map(|_| (itl_ms * 1000.0 * rng.random_range(0.8..1.2)) as u64)
            .collect();
        outcomes.push(Outcome {
            step: 1,
            trace_id: format!("{:032x}", seed * 1_000_000 + i),
            index: i,
            stage,
            intended_us: redis_end,
            sent_us: sent,
            first_byte_us: Some(first),
            first_content_us: Some(first),
            end_us: first + gaps.iter().sum::<u64>(),
            gaps_us: gaps,
            status: Some(200),
            input_tokens: Some(8),
            output_tokens: Some(16),
            ..Outcome::default()
        });
    }
    summary_of(
        &scenario(name),
        outcomes,
        n,
        &format!("load-{seed}"),
        detailed,
    )
}

/// The result file `sluice load` writes for `outcomes` of `journeys` over
/// 20 s of `scenario`.
fn summary_of(
    scenario: &Scenario,
    outcomes: Vec<Outcome>,
    journeys: u64,
    run_id: &str,
    detailed: bool,
) -> Value {
    let out = RunOutput {
        outcomes,
        closed: None,
        journeys,
        span_us: 20_000_000,
        ran_us: 20_000_000,
        queued: 0,
        cut_in_flight: 0,
        cut_waiting: 0,
        elapsed: Duration::from_secs(20),
        interrupted: false,
        setup: Vec::new(),
        teardown: Vec::new(),
    };
    let info = RunInfo {
        run_id: run_id.into(),
        shard: "0/1".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        lineage: RunLineage {
            scenario_sha256: "ab".repeat(32),
            target: "http://127.0.0.1:1".into(),
            sluice_version: "0.1.0".into(),
            from_model: None,
            id: None,
            parents: Vec::new(),
        },
        goodput: Goodput::default(),
        detailed,
    };
    serde_json::to_value(summarize(scenario, &out, info)).unwrap()
}

/// 2,000 unary gRPC calls of about 2 ms over 20 s; the first `failing` of
/// them fail, the very first DEADLINE_EXCEEDED (4), the rest UNAVAILABLE (14).
fn grpc_run(failing: u64) -> Value {
    let text = "scenario: rpc\ntarget: { base_url: 'http://127.0.0.1:1' }\n\
         workload: { arrival: { kind: constant, rate: 100 }, duration: 20s }\n\
         steps:\n\
         \x20 - { name: embed, service: grpc, method: embed.v1.Embedder/Embed }\n";
    let scenario = Scenario::from_yaml(text, Path::new("."), &|_| None).unwrap();
    let n = 2000;
    let outcomes = (0..n)
        .map(|i| {
            let t = i * 10_000;
            let fails = i < failing;
            let status = match (fails, i) {
                (false, _) => 0,
                (true, 0) => 4,
                (true, _) => 14,
            };
            Outcome {
                step: 0,
                index: i,
                intended_us: t,
                sent_us: t,
                first_byte_us: Some(t + 1_500),
                first_content_us: (!fails).then_some(t + 1_800),
                end_us: t + 2_000,
                status: Some(200),
                failure: fails.then_some(Failure::Status),
                grpc: Some(GrpcReply {
                    status: Some(status),
                    messages: u64::from(!fails),
                    bytes: if fails { 0 } else { 12 },
                }),
                ..Outcome::default()
            }
        })
        .collect();
    summary_of(&scenario, outcomes, n, "rpc", false)
}

#[test]
fn the_grpc_layer_is_held_to_its_success_rate_with_or_without_a_baseline() {
    // 1 failure in 2,000: 99.95% ended OK, on the bound.
    let r = build(&input(&grpc_run(1)), None, &Options::default());
    let layer = r
        .attribution
        .layers
        .iter()
        .find(|l| l.layer == "grpc service")
        .unwrap();
    assert_eq!(layer.steps, ["embed"]);
    let h = layer.health.as_ref().unwrap();
    assert!((h.value_pct - 99.95).abs() < 1e-9 && h.ok, "{h:?}");
    assert_eq!(h.not_ok_by_status, [("4".to_owned(), 1)].into());
    assert!(!render_html(&r).contains("banner bad"));
    // 5 in 2,000: 99.75%, under the bound, said on the page with the codes.
    let r = build(&input(&grpc_run(5)), None, &Options::default());
    let layer = |r: &Report, n: &str| r.attribution.layers.iter().find(|l| l.layer == n).cloned();
    let h = layer(&r, "grpc service").unwrap().health.unwrap();
    assert!((h.value_pct - 99.75).abs() < 1e-9 && !h.ok, "{h:?}");
    let page = render_html(&r);
    assert!(
        page.contains("gRPC calls: 99.75% ended OK, under 99.95% · status 14 × 4, 4 × 1"),
        "{page}"
    );
    let json = serde_json::to_value(&r).unwrap();
    let grpc = json["attribution"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layer"] == "grpc service")
        .unwrap()
        .clone();
    assert_eq!(grpc["health"]["metric"], "grpc_success_rate");
    assert_eq!(grpc["health"]["not_ok_by_status"]["14"], 4);
    // Against a baseline of 1 failure, 5 is not beyond noise as a share:
    // the bound still marks it.
    let r = build(
        &input(&grpc_run(5)),
        Some(&input(&grpc_run(1))),
        &Options::default(),
    );
    assert!(!layer(&r, "grpc service").unwrap().health.unwrap().ok);
    // Other layers have no bound; a run without grpc steps has no gRPC layer.
    assert!(layer(&r, "proxy/system").unwrap().health.is_none());
    let chat = build(
        &input(&run_json("chat", 40, 5.0, 1, false)),
        None,
        &Options::default(),
    );
    assert!(layer(&chat, "grpc service").is_none());
}

fn input(v: &Value) -> Input {
    Input::read(v).unwrap()
}

/// Every `<svg>` of the page has at least one drawn mark.
fn svgs_with_marks(page: &str) -> (usize, usize) {
    let svgs: Vec<&str> = page.split("<svg").skip(1).collect();
    let marked = svgs
        .iter()
        .filter(|s| {
            let body = s.split("</svg>").next().unwrap_or("");
            body.contains("class=\"mark")
        })
        .count();
    (svgs.len(), marked)
}

#[test]
fn a_run_alone_gives_a_self_contained_page_and_its_json_twin() {
    let v = run_json("chat", 400, 5.0, 1, true);
    let r = build(&input(&v), None, &Options::default());
    assert_eq!(r.kind, "load");
    assert_eq!(r.lineage.scenario, "chat");
    assert_eq!(
        r.lineage.ended_at.as_deref(),
        Some("2026-01-01T00:00:20.000000Z")
    );
    assert_eq!(r.totals.requests, 800);
    assert_eq!(
        r.cdfs.iter().map(|c| c.measure).collect::<Vec<_>>(),
        ["ttft", "itl", "e2el"]
    );
    let t = r.timeline.as_ref().unwrap();
    assert_eq!(t.stages.len(), 2);
    assert!(r.baseline.is_none() && !r.regressed());
    // Without a baseline the extra time is over the run's own medians. At
    // or above the p90 (HDR's rank: the 360th of 400): 41 journeys.
    assert_eq!(r.attribution.slow_journeys, 41);
    let model = &r.attribution.layers[0];
    assert_eq!((model.layer, model.status), ("model", "no baseline"));
    let page = render_html(&r);
    assert!(page.starts_with("<!doctype html>"));
    for banned in [
        "<script", "src=", "href=", "url(", "@import", "<link", "https://",
    ] {
        assert!(!page.contains(banned), "the page has {banned}");
    }
    // Three CDFs, the dispatch lag and the timeline, each drawn.
    assert_eq!(svgs_with_marks(&page), (5, 5));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["lineage"]["scenario_sha256"], "ab".repeat(32));
    assert_eq!(json["cdfs"][0]["measure"], "ttft");
    // Without --detailed: no timeline and no confidence, said on the page.
    let bare = build(
        &input(&run_json("chat", 400, 5.0, 1, false)),
        None,
        &Options::default(),
    );
    assert!(bare.timeline.is_none());
    assert_eq!(bare.attribution.layers[0].confidence, None);
    let page = render_html(&bare);
    assert!(page.contains("no latency over time: this run has no per-request rows"));
    assert!(
        page.contains("this run has no --detailed rows: the deviation is shown, but no confidence")
    );
    // Without ids (a file from before lineage): none shown, none in the JSON.
    assert!(
        page.contains("<dt>report lineage id</dt><dd>–</dd>"),
        "{page}"
    );
    assert!(serde_json::to_value(&bare).unwrap().get("id").is_none());
}

#[test]
fn a_report_shows_its_lineage_id_its_parents_and_the_runs_id() {
    let mut v = run_json("chat", 40, 5.0, 1, false);
    v["lineage"]["id"] = json!("1111111111111111");
    let mut r = build(&input(&v), None, &Options::default());
    assert_eq!(r.lineage.id.as_deref(), Some("1111111111111111"));
    let run = sluice_filters::ContentId::parse("1111111111111111").unwrap();
    let made = crate::report_artifact("report.html", Some(&run), None, json!({}));
    r.id = Some(made.id.clone());
    r.parents = made.parents.clone();
    let page = render_html(&r);
    for (k, v) in [
        ("report lineage id", made.id.as_str()),
        ("made from", "1111111111111111"),
        ("run lineage id", "1111111111111111"),
    ] {
        let item = format!("<dt>{k}</dt><dd>{v}</dd>");
        assert!(page.contains(&item), "{item} not on the page");
    }
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["id"], made.id.as_str());
    assert_eq!(j["parents"], json!(["1111111111111111"]));
    assert_eq!(j["lineage"]["id"], "1111111111111111");
}

#[test]
fn a_model_30_percent_slower_is_marked_in_the_model_layer_and_not_the_cache() {
    let base = run_json("chat", 1000, 5.0, 2, true);
    let slow = run_json("chat", 1000, 6.5, 3, true);
    let r = build(&input(&slow), Some(&input(&base)), &Options::default());
    let b = r.baseline.as_ref().unwrap();
    let row = |m: &str| b.metrics.iter().find(|d| d.metric == m).unwrap();
    assert_eq!(row("p99_itl_ms").verdict, "regressed");
    assert_eq!(row("median_itl_ms").verdict, "regressed");
    let pct = row("median_itl_ms").percent.unwrap();
    assert!((25.0..35.0).contains(&pct), "{pct}");
    assert_eq!(row("median_ttft_ms").verdict, "within noise");
    assert_eq!(row("request_throughput").verdict, "within noise");
    assert!(r.regressed());
    let layer = |n: &str| r.attribution.layers.iter().find(|l| l.layer == n).unwrap();
    assert_eq!(layer("model").status, "regressed");
    assert_eq!(layer("cache").status, "within noise");
    // Every slow journey's extra time is in the model.
    assert_eq!(layer("model").confidence, Some(1.0));
    assert_eq!(layer("cache").confidence, Some(0.0));
    assert_eq!(layer("model").worst.len(), 5);
    assert_eq!(layer("model").worst[0].trace_id.len(), 32);
    assert!(
        b.regressions.contains(&"model: p99_itl_ms".to_owned()),
        "{:?}",
        b.regressions
    );
    assert!(!b.regressions.iter().any(|x| x.starts_with("cache")));
    let page = render_html(&r);
    assert!(page.contains("Regressed: "));
    assert!(page.contains(&layer("model").worst[0].trace_id));
    // Mann–Whitney on the gaps says the same.
    let itl = b.distributions.iter().find(|d| d.measure == "itl").unwrap();
    assert!(itl.beyond_noise && itl.test.effect > 0.9);
    // The same model again: nothing regressed.
    let again = run_json("chat", 1000, 5.0, 4, true);
    let r = build(&input(&again), Some(&input(&base)), &Options::default());
    assert!(!r.regressed(), "{:?}", r.baseline.unwrap().regressions);
}

#[test]
fn a_sub_millisecond_move_of_a_time_is_small_however_many_percent() {
    // The dispatch lag's p99 triples, from about 0.2 ms to 0.6 ms.
    let base = run_json("chat", 1000, 5.0, 2, false);
    let late = run_json_lagged("chat", 1000, 5.0, 3, false, 600);
    let lag = |o: &Options| {
        let r = build(&input(&late), Some(&input(&base)), o);
        let layer = r
            .attribution
            .layers
            .iter()
            .find(|l| l.layer == "proxy/system")
            .unwrap()
            .clone();
        let row = layer
            .metrics
            .iter()
            .find(|d| d.metric == "p99_dispatch_lag_ms")
            .unwrap()
            .clone();
        (layer.status, row)
    };
    let (status, row) = lag(&Options::default());
    assert!(row.beyond_noise && row.percent.unwrap() > 150.0, "{row:?}");
    assert_eq!(row.verdict, "small");
    assert_eq!(status, "within noise");
    // Without the floor, the same figures are a regression.
    let no_floor = Options {
        min_change_ms: 0.0,
        ..Options::default()
    };
    let (status, row) = lag(&no_floor);
    assert_eq!(row.verdict, "regressed");
    assert_eq!(status, "regressed");
}

#[test]
fn a_baseline_of_another_scenario_is_a_warning() {
    let r = build(
        &input(&run_json("chat", 100, 5.0, 1, false)),
        Some(&input(&run_json("rag", 100, 5.0, 1, false))),
        &Options::default(),
    );
    assert_eq!(
        r.warnings,
        [
            "the baseline ran scenario `rag` (sha256 abababababab), this run `chat` (sha256 \
          abababababab): the comparison may not be like for like"
        ]
    );
}

#[test]
fn bad_files_and_metrics_are_named_where() {
    let text = serde_json::to_string_pretty(&run_json("chat", 10, 5.0, 1, false)).unwrap();
    let cut = &text.as_bytes()[..text.len() / 2];
    let lines = text[..text.len() / 2].lines().count();
    let col = text[..text.len() / 2].lines().last().unwrap().len();
    assert_eq!(
        parse_json(cut).unwrap_err(),
        format!(
            "the file ends early at line {lines} column {col}: truncated (was the run stopped \
             while writing it?)"
        )
    );
    let mut v = run_json("chat", 10, 5.0, 1, false);
    v["steps"][1]["histograms"]["ttft_us"] = json!("%%%");
    assert_eq!(
        Input::read(&v).unwrap_err(),
        "steps[1].histograms.ttft_us: not base64"
    );
    v["steps"][1].as_object_mut().unwrap().remove("completed");
    assert_eq!(Input::read(&v).unwrap_err(), "steps[1].completed: missing");
    assert_eq!(
        Input::read(&json!({"kind": "capacity", "stages": []})).unwrap_err(),
        "stages: empty: a capacity search with no stage"
    );
    assert_eq!(
        Metric::parse("p98_ttft_ms").unwrap_err(),
        "unknown metric `p98_ttft_ms` (known: {median,p90,p95,p99,p999}_{ttft,ttft_sent,tpot,\
         itl,e2el,service_time,dispatch_lag}_ms, request_throughput, output_throughput, \
         error_rate, hit_ratio, queued_share, late_share)"
    );
}

#[test]
fn a_100k_request_detailed_run_gives_a_page_under_2_mb() {
    let v = run_json("chat", 50_000, 5.0, 9, true);
    assert_eq!(v["requests"].as_array().unwrap().len(), 100_000);
    let r = build(&input(&v), None, &Options::default());
    let page = render_html(&r);
    assert!(page.len() < 2 * 1024 * 1024, "{} bytes", page.len());
    assert_eq!(svgs_with_marks(&page), (5, 5));
}

#[test]
fn a_capacity_file_shows_its_curve_knee_slope_and_recommendation() {
    let run = run_json("chat", 100, 5.0, 1, false);
    let stage = |rate: f64, achieved: f64, purpose: &str, slope: f64| {
        json!({
            "rate": rate, "achieved_rate": achieved, "purpose": purpose,
            "token_throughput": achieved * 16.0, "p99_slope_ms_per_token": slope,
            "p99_excess_ms_per_token": slope - 5.0,
            "token_bins": [{"tokens": 8, "p99_ms": 60.0 + 8.0 * slope},
                           {"tokens": 16, "p99_ms": 61.0 + 16.0 * slope},
                           {"tokens": 32, "p99_ms": 59.0 + 32.0 * slope}],
            "cost_per_1k": 0.004, "score": 0.3,
            "sla": [{"gate": "ttft_p95", "value": 120.0, "bound": 800.0, "passed": true}],
            "run": run,
        })
    };
    let file = json!({
        "kind": "capacity", "max_rate": 40.0, "recommended_rate": 32.0,
        "binding": "P99 sensitivity binds: at 40 req/s each token costs 0.9 ms more than at 5.",
        "stages": [stage(5.0, 5.0, "probe", 5.0), stage(20.0, 19.8, "probe", 5.2),
                   stage(40.0, 36.0, "probe", 5.9), stage(32.0, 31.7, "confirm", 5.4)],
        "knee": {"rate": 36.0, "bound": -0.3, "second_derivative": [0.0, -0.1, -0.5]},
    });
    let r = build(&input(&file), None, &Options::default());
    assert_eq!(r.kind, "capacity");
    let c = r.capacity.as_ref().unwrap();
    assert_eq!(c.shown_stage, 3);
    // The intercept is the median of p99 − slope·tokens: 60.
    assert_eq!(c.stages[0].intercept_ms, Some(60.0));
    let page = render_html(&r);
    assert!(page.contains(
        "Recommended 32 req/s · highest rate within every SLA 40 req/s. P99 sensitivity binds"
    ));
    assert!(page.contains("knee 36 req/s"));
    assert!(page.contains("5.4 ms/tok"));
    // Two capacity plots, the three CDFs and the dispatch lag.
    assert_eq!(svgs_with_marks(&page), (6, 6));
    let mut bad = file.clone();
    bad["stages"][3]["run"]
        .as_object_mut()
        .unwrap()
        .remove("lineage");
    assert_eq!(
        Input::read(&bad).unwrap_err(),
        "stages[3].run.lineage: missing"
    );
}

#[test]
fn baselines_are_saved_in_order_and_listed_with_their_trend() {
    let dir = std::env::temp_dir().join(format!("sluice-baselines-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        newest_baseline(&dir, "chat").unwrap_err(),
        format!(
            "no saved baseline `chat` in {} (save one with `sluice baseline save RUN.json --name \
             chat`)",
            dir.display()
        )
    );
    for (i, itl) in [5.0, 5.5, 6.5].into_iter().enumerate() {
        let text = serde_json::to_vec(&run_json("chat", 200, itl, i as u64, false)).unwrap();
        let s = save_baseline(&dir, "chat", &text).unwrap();
        assert_eq!(s.seq, i as u32 + 1);
    }
    assert_eq!(
        save_baseline(&dir, "../x", b"{}").unwrap_err(),
        "--name `../x`: a baseline's name is 1 to 64 of A-Z a-z 0-9 - _ . (not starting with .)"
    );
    assert_eq!(
        save_baseline(&dir, "chat", b"{\"v\": 1")
            .unwrap_err()
            .split(':')
            .next(),
        Some("the file ends early at line 1 column 7")
    );
    assert_eq!(newest_baseline(&dir, "chat").unwrap().seq, 3);
    let listed = list_baselines(&dir).unwrap();
    assert_eq!(listed.len(), 1);
    let runs: Vec<(Saved, Run)> = listed[0]
        .1
        .iter()
        .map(|s| {
            let v = parse_json(&std::fs::read(&s.path).unwrap()).unwrap();
            (s.clone(), read_run(&v).unwrap())
        })
        .collect();
    let table = trend_table("chat", &runs, &[Metric::parse("median_itl_ms").unwrap()]);
    let last = table.lines().last().unwrap();
    assert!(last.starts_with("  median_itl_ms (ms) "), "{table}");
    // 5, 5.5 and 6.5 ms: the lowest, a third of the way, the highest.
    let cells: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 2], "▁▃█", "{table}");
    let change: f64 = cells[cells.len() - 1]
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!((27.0..33.0).contains(&change), "{table}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A legend wider than the plot wraps onto more rows, inside the chart,
/// and the chart grows by those rows (nine stages' names ran off its left
/// edge on one row).
#[test]
fn a_wide_legend_wraps_inside_the_chart() {
    let series = |n: usize| {
        (0..n)
            .map(|i| svg::Series {
                name: format!("stage {i} at {}.00 req/s", 10 + i),
                points: vec![[1.0, 1.0], [2.0, 2.0]],
                class: format!("c{}", i % 6),
                kind: svg::Kind::Line,
            })
            .collect()
    };
    let chart = |n| svg::Chart {
        title: "p99 against tokens".into(),
        series: series(n),
        ..svg::Chart::default()
    };
    let attr = |svg: &str, tag: &str, name: &str| -> Vec<f64> {
        svg.split(&format!("<{tag} "))
            .skip(1)
            .filter_map(|t| {
                let (_, rest) = t.split_once(&format!(" {name}=\""))?;
                rest.split('"').next()?.parse().ok()
            })
            .collect()
    };
    let one = svg::render(&chart(2));
    let nine = svg::render(&chart(9));
    assert!(one.contains(r#"viewBox="0 0 560 300""#), "{one}");
    let keys = attr(&nine, "rect", "x");
    let key_rows: std::collections::BTreeSet<i64> =
        attr(&nine, "rect", "y").iter().map(|y| *y as i64).collect();
    assert_eq!(keys.len(), 9);
    assert!(keys.iter().all(|x| *x >= 62.0), "{keys:?}");
    assert!(key_rows.len() >= 3, "{key_rows:?}");
    let extra = 16 * (key_rows.len() - 1);
    assert!(
        nine.contains(&format!(r#"viewBox="0 0 560 {}""#, 300 + extra)),
        "{nine}"
    );
}
