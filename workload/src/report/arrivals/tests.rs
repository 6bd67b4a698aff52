//! The inter-arrival plot's data against known answers: seeded exponential
//! gaps drawn against an exponential candidate and a wrong one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::super::attach::FitCandidate;
use super::*;

const RATE: f64 = 40.0;

/// `n` journeys whose intended starts are a Poisson process of `RATE`
/// per second (µs, so each gap is rounded down to the microsecond); each
/// journey has two rows, the second sent 5 ms after the first, which must
/// not count as an arrival.
fn poisson_rows(n: u64, seed: u64) -> Vec<Row> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0f64;
    let mut rows = Vec::new();
    for i in 0..n {
        let u: f64 = rng.random();
        t += -(1.0 - u).ln() / RATE;
        let at = (t * 1e6) as u64;
        for (step, delay) in [(0, 0), (1, 5_000)] {
            rows.push(Row {
                step,
                index: i,
                intended_us: at + delay,
                sent_us: at + delay,
                end_us: at + delay + 1_000,
                ..Row::default()
            });
        }
    }
    rows
}

fn fit(candidates: Vec<Arrival>, best: &str) -> AttachedFit {
    AttachedFit {
        source: "fit.json".to_owned(),
        of: "requests",
        best: best.to_owned(),
        samples: None,
        candidates: candidates.into_iter().map(FitCandidate::bare).collect(),
        quantiles: None,
    }
}

#[test]
fn seeded_exponential_gaps_match_their_candidate_and_not_a_wrong_one() {
    let n = 20_000;
    let rows = poisson_rows(n, 7);
    let a = arrivals(
        &fit(
            vec![
                Arrival::Exponential { rate: RATE },
                Arrival::Exponential { rate: 2.0 * RATE },
            ],
            "exponential",
        ),
        Some(&rows),
        "0/1",
    );
    assert_eq!(a.gaps + a.zero_gaps, n - 1);
    assert!(a.notes.is_empty(), "{:?}", a.notes);
    assert_eq!(a.run.len(), GRID);
    // DKW: P(sup |F_n − F| > 0.015) ≤ 2 exp(−2 n 0.015²) ≈ 2.5e-4 at
    // n = 20,000; the seed is fixed, so this is a known answer.
    for p in &a.run {
        let truth = 1.0 - (-RATE * p[0] / 1000.0).exp();
        assert!((p[1] - truth).abs() < 0.015, "{p:?} vs {truth}");
    }
    // The grid spans the gaps: from their 1st percentile to the largest.
    assert!((a.run[0][1] - 0.01).abs() < 1e-3, "{:?}", a.run[0]);
    assert_eq!(a.run[GRID - 1][1], 1.0);
    // The candidate's curve is its CDF at the grid's x (ms back to s).
    let exact = &a.candidates[0];
    assert!(exact.best);
    for p in &exact.points {
        let truth = -(-RATE * p[0] / 1000.0).exp_m1();
        assert!((p[1] - truth).abs() < 1e-12, "{p:?} vs {truth}");
    }
    assert_eq!(exact.kind, "exponential");
    assert_eq!(exact.params, "rate=40/s");
    // KS: under the 5% critical value 1.358/√n for the true rate; for twice
    // the rate, sup |e^{−λx} − e^{−2λx}| = 1/4 (at e^{−λx} = 1/2).
    let critical = 1.358 / ((n - 1) as f64).sqrt();
    let ks = exact.ks_run.unwrap();
    assert!(ks < critical, "{ks} vs {critical}");
    let wrong = a.candidates[1].ks_run.unwrap();
    assert!((wrong - 0.25).abs() < 0.015, "{wrong}");
    assert!(!a.candidates[1].best);
}

#[test]
fn a_journey_arrives_at_its_first_intended_send() {
    let rows = vec![
        Row {
            index: 1,
            intended_us: 3_000,
            ..Row::default()
        },
        Row {
            index: 0,
            intended_us: 1_500,
            ..Row::default()
        },
        Row {
            index: 0,
            intended_us: 1_000,
            ..Row::default()
        },
        Row {
            index: 2,
            intended_us: 3_000,
            ..Row::default()
        },
    ];
    assert_eq!(arrival_times(&rows), [1_000, 3_000, 3_000]);
    let a = arrivals(
        &fit(vec![Arrival::Exponential { rate: 1.0 }], "exponential"),
        Some(&rows),
        "0/1",
    );
    // 2 ms, then 0 (left out and counted, as the fit leaves them out).
    assert_eq!((a.gaps, a.zero_gaps), (1, 1));
    let merged = arrivals(
        &fit(vec![Arrival::Exponential { rate: 1.0 }], "exponential"),
        Some(&rows),
        "merged 2",
    );
    assert_eq!(
        merged.notes,
        [
            "this file merges 2 shards and keeps the per-request rows of one of them, one \
          arrival in 2: its gaps are about 2 times the model's"
        ]
    );
}

#[test]
fn the_ks_statistic_takes_ties_together() {
    // F(1) = 1/2, F(2) = 3/4 for an exponential of rate ln 2.
    let a = Arrival::Exponential {
        rate: std::f64::consts::LN_2,
    };
    // Below 1, F_n = 0 and F(1) = 1/2: D = 1/2.
    let d = ks_statistic(&[1.0, 1.0, 2.0, 2.0], &a).unwrap();
    assert!((d - 0.5).abs() < 1e-12, "{d}");
    // F_n(1) = 3/4 ⇒ |3/4 − 1/2| = 1/4; at 2: |1 − 3/4| = 1/4 and
    // |3/4 − 3/4| = 0; before 1: 1/2.
    let d = ks_statistic(&[1.0, 1.0, 1.0, 2.0], &a).unwrap();
    assert!((d - 0.5).abs() < 1e-12, "{d}");
    assert_eq!(ks_statistic(&[], &a), None);
}

#[test]
fn without_rows_the_candidates_are_drawn_over_the_best_ones_range() {
    let gamma = Arrival::Gamma {
        shape: 0.5,
        scale: 0.1,
    };
    let a = arrivals(
        &fit(
            vec![Arrival::Exponential { rate: 20.0 }, gamma.clone()],
            "gamma",
        ),
        None,
        "1/3",
    );
    assert!(a.run.is_empty());
    assert_eq!(a.gaps, 0);
    assert_eq!(
        a.notes,
        [
            "this run has no per-request rows (run `sluice load --detailed`): the candidates \
             are drawn without the run's gaps",
            "this file is shard 1/3: it holds one arrival in 3 of the schedule, so its gaps \
             are about 3 times the model's (merge the shards first)",
        ]
    );
    // From the best's 1st to its 99.9th percentile.
    let best = &a.candidates[1];
    assert!(best.best && best.ks_run.is_none());
    let (first, last) = (best.points[0], best.points[GRID - 1]);
    assert!((first[1] - 0.01).abs() < 1e-9, "{first:?}");
    assert!((last[1] - 0.999).abs() < 1e-9, "{last:?}");
}

#[test]
fn the_traces_quantiles_are_drawn_in_ms_and_widen_the_grid() {
    let mut f = fit(vec![Arrival::Exponential { rate: RATE }], "exponential");
    // Its minimum is below the 1st percentile and is left off the grid.
    f.quantiles = Some(vec![
        [0.0, 0.000_001],
        [0.01, 0.0001],
        [0.5, 0.02],
        [1.0, 2.0],
    ]);
    let rows = poisson_rows(200, 3);
    let a = arrivals(&f, Some(&rows), "0/1");
    let trace = a.trace.as_deref().unwrap();
    let want = [[0.001, 0.0], [0.1, 0.01], [20.0, 0.5], [2000.0, 1.0]];
    assert_eq!(trace.len(), want.len());
    for (got, want) in trace.iter().zip(want) {
        assert!(
            (got[0] - want[0]).abs() < 1e-9 && got[1] == want[1],
            "{trace:?}"
        );
    }
    let x: Vec<f64> = a.candidates[0].points.iter().map(|p| p[0]).collect();
    assert!(
        (x[0] - 0.1).abs() < 1e-9 && (x[GRID - 1] - 2000.0).abs() < 1e-6,
        "{x:?}"
    );
    // Evenly spaced in log.
    let ratio = x[1] / x[0];
    assert!(x.windows(2).all(|w| (w[1] / w[0] - ratio).abs() < 1e-9));
}

/// A run file with `rows` as its `--detailed` requests and `arrival_fit`
/// when given.
fn run_file(rows: &[Row], arrival_fit: Option<&AttachedFit>) -> serde_json::Value {
    let requests: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({ "step": r.step, "index": r.index, "stage": 0,
                "intended_us": r.intended_us, "sent_us": r.sent_us, "end_us": r.end_us })
        })
        .collect();
    let mut v = serde_json::json!({
        "v": 1, "scenario": "fitplot", "started_at": "2026-12-05T23:00:00Z",
        "lineage": { "scenario_sha256": "ab", "target": "http://127.0.0.1:1",
                     "sluice_version": "0.1.0", "from_model": "model.yaml" },
        "summary": { "requests": rows.len(), "completed": rows.len(), "failed": 0,
                     "duration": 10.0 },
        "requests": requests,
    });
    if let Some(f) = arrival_fit {
        v["arrival_fit"] = serde_json::to_value(f).unwrap();
    }
    v
}

#[test]
fn a_run_with_arrival_fit_draws_the_plot_and_an_old_one_does_not() {
    use super::super::{build, render_html, Input, Options};
    let rows = poisson_rows(500, 5);
    let f = fit(
        vec![
            Arrival::Exponential { rate: RATE },
            Arrival::Gamma {
                shape: 0.5,
                scale: 0.05,
            },
        ],
        "exponential",
    );
    // An old run file (no `arrival_fit`) still reads, and has no plot.
    let old = Input::read(&run_file(&rows, None)).unwrap();
    assert_eq!(old.run().arrival_fit, None);
    let report = build(&old, None, &Options::default());
    assert!(report.arrivals.is_none());
    assert!(serde_json::to_value(&report)
        .unwrap()
        .get("arrivals")
        .is_none());
    assert!(!render_html(&report).contains("Inter-arrival"));
    // The run's own fit.
    let input = Input::read(&run_file(&rows, Some(&f))).unwrap();
    assert_eq!(input.run().arrival_fit.as_ref(), Some(&f));
    let report = build(&input, None, &Options::default());
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["arrivals"]["best"], "exponential");
    assert_eq!(json["arrivals"]["gaps"], 499);
    assert_eq!(json["arrivals"]["run"].as_array().unwrap().len(), GRID);
    assert_eq!(json["arrivals"]["candidates"][1]["kind"], "gamma");
    let page = render_html(&report);
    let svg = page
        .split("<svg")
        .find(|s| s.contains("Inter-arrival CDF"))
        .unwrap();
    let svg = svg.split("</svg>").next().unwrap();
    // Two candidates and the run: one path each, the best drawn bold.
    assert_eq!(svg.matches("<path class=\"mark").count(), 3, "{svg}");
    assert_eq!(
        svg.matches("class=\"mark line c1 best\"").count(),
        1,
        "{svg}"
    );
    assert_eq!(
        svg.matches("class=\"mark line c2 dashed\"").count(),
        1,
        "{svg}"
    );
    assert!(svg.contains("this run (499 gaps)") && svg.contains("exponential (best)"));
    // A log axis: ticks at 1, 2 and 5 of each decade.
    assert!(
        svg.contains(">10</text>") && svg.contains(">100</text>"),
        "{svg}"
    );
    // `--fit` replaces the run's own.
    let other = fit(vec![Arrival::Exponential { rate: 1.0 }], "exponential");
    let options = Options {
        fit: Some(other),
        ..Options::default()
    };
    let report = build(&input, None, &options);
    let given = report.arrivals.unwrap();
    assert_eq!(given.candidates.len(), 1);
    // … and says so when the run's model is none of its candidates.
    assert_eq!(
        given.notes,
        [
            "the run's model (fit.json: exponential rate=40/s) is none of the candidates of \
          fit.json: they may come from different traces, or the model was edited"
        ]
    );
    let same = Options {
        fit: Some(f.clone()),
        ..Options::default()
    };
    assert!(build(&input, None, &same)
        .arrivals
        .unwrap()
        .notes
        .is_empty());
    // A bad `arrival_fit` is named where it is bad.
    let mut bad = run_file(&rows, Some(&f));
    bad["arrival_fit"]["candidates"][1]["params"]["shape"] = serde_json::json!(0);
    assert_eq!(
        Input::read(&bad).unwrap_err(),
        "arrival_fit.candidates[1].params.shape: must be a finite number > 0, found 0"
    );
}
