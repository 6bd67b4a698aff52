//! Reading a fit: what `sluice fit --json` prints, a model file, a run's
//! `arrival_fit`, and bad ones named where they are bad.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::*;
use crate::fit::fit_gaps;

fn errors(text: &str) -> Vec<String> {
    read_fit_text(text, "fit.json").unwrap_err()
}

#[test]
fn the_json_of_sluice_fit_reads_back_with_every_candidate() {
    let mut rng = StdRng::seed_from_u64(11);
    let gaps: Vec<f64> = (0..2000)
        .map(|_| -(1.0 - rng.random::<f64>()).ln() / 10.0)
        .collect();
    let fitted = fit_gaps(gaps).unwrap();
    let text = serde_json::to_string(&fitted).unwrap();
    let f = read_fit_text(&text, "fit.json").unwrap();
    assert_eq!(f.source, "fit.json");
    assert_eq!(f.of, "requests");
    assert_eq!(f.best, fitted.best.kind());
    assert_eq!(f.samples, Some(2000));
    assert_eq!(f.candidates.len(), fitted.candidates.len());
    for (got, want) in f.candidates.iter().zip(&fitted.candidates) {
        // The parameters as written; the figures as written (rounded).
        assert_eq!(got.arrival, want.arrival);
        assert!((got.bic.unwrap() - want.bic).abs() < 0.01);
        assert!((got.ks.unwrap() - want.ks).abs() < 1e-3 * want.ks.max(1e-3));
    }
    let q = f.quantiles.unwrap();
    assert_eq!(q.len(), 101);
    assert_eq!(q[0][0], 0.0);
    assert_eq!(q[100][0], 1.0);
    assert_eq!(q[50], fitted.quantiles[50]);
    // Written into a run file and read back as its `arrival_fit`.
    let run = json!({ "arrival_fit": serde_json::to_value(
        read_fit_text(&text, "fit.json").unwrap()
    ).unwrap() });
    let back = read_fit_text(&run.to_string(), "run.json").unwrap();
    assert_eq!(back.source, "fit.json");
    assert_eq!(
        back.candidates,
        read_fit_text(&text, "x").unwrap().candidates
    );
}

#[test]
fn a_fit_with_sessions_gives_its_session_starts() {
    let text = json!({
        "best": "exponential",
        "candidates": [{ "kind": "exponential", "params": { "rate": 3.0 } }],
        "sessions": { "sessions": 10, "arrival": {
            "best": "gamma", "samples": 9,
            "candidates": [{ "kind": "gamma", "params": { "shape": 0.5, "scale": 2.0 },
                             "loglik": -1.0, "aic": 6.0, "bic": 6.4, "ks": 0.1, "kl": null }]
        }}
    });
    let f = read_fit_text(&text.to_string(), "fit.json").unwrap();
    assert_eq!(
        (f.of, f.best.as_str(), f.samples),
        ("session starts", "gamma", Some(9))
    );
    assert_eq!(f.candidates[0].bic, Some(6.4));
    assert_eq!(f.candidates[0].kl, None);
}

#[test]
fn a_model_file_gives_its_one_kind_without_figures() {
    let yaml = format!(
        "v: 1\narrival: {{ kind: gamma, shape: 0.5, scale: 0.2 }}\n\
         source: {{ trace: t.jsonl, sha256: {}, requests: 10, fitted_at: '2026-01-01T00:00:00Z' }}\n",
        "a".repeat(64)
    );
    let f = read_fit_text(&yaml, "model.yaml").unwrap();
    assert_eq!(f.best, "gamma");
    assert_eq!(
        f.candidates,
        [FitCandidate::bare(Arrival::Gamma {
            shape: 0.5,
            scale: 0.2
        })]
    );
    assert_eq!(f.quantiles, None);
    // Its serialised form is what a run file carries.
    assert_eq!(
        serde_json::to_value(&f).unwrap(),
        json!({ "v": 1, "source": "model.yaml", "of": "requests", "best": "gamma",
                "candidates": [{ "kind": "gamma", "params": { "shape": 0.5, "scale": 0.2 } }] })
    );
    assert_eq!(
        read_fit_text(&yaml.replace("0.5", "-2"), "model.yaml").unwrap_err(),
        ["arrival.shape: must be a finite number > 0, found -2"]
    );
}

#[test]
fn bad_fits_are_named_where_they_are_bad() {
    let one =
        |c: serde_json::Value| errors(&json!({ "best": "gamma", "candidates": [c] }).to_string());
    assert_eq!(
        one(json!({ "kind": "gamma", "params": { "shape": -1, "scale": 0.2 } })),
        ["candidates[0].params.shape: must be a finite number > 0, found -1"]
    );
    assert_eq!(
        one(json!({ "kind": "gama", "params": {} })),
        [
            "candidates[0].kind: unknown kind `gama` (expected one of exponential, gamma, \
          weibull, lognormal, weibull_mixture)"
        ]
    );
    assert_eq!(
        one(json!({ "kind": "gamma", "params": { "shape": 1.0 } })),
        ["candidates[0].params: missing field `scale`"]
    );
    assert_eq!(
        one(json!({ "kind": "gamma", "params": { "shape": 1.0, "scale": 1.0 }, "bic": "low" })),
        ["candidates[0].bic: expected a number, found \"low\""]
    );
    assert_eq!(
        one(json!({ "kind": "gamma", "params": { "shape": 1.0, "scale": 1.0 }, "p": 1 })),
        [
            "candidates[0]: unknown field `p` (expected one of kind, params, loglik, aic, bic, \
          ks, kl)"
        ]
    );
    assert_eq!(
        errors(
            &json!({ "best": "weibull", "candidates": [
                { "kind": "exponential", "params": { "rate": 1.0 } },
                { "kind": "gamma", "params": { "shape": 1.0, "scale": 1.0 } }] })
            .to_string()
        ),
        ["best: `weibull` is not one of the candidates (exponential, gamma)"]
    );
    assert_eq!(
        errors(r#"{"best": "gamma", "candidates": []}"#),
        ["candidates: is empty"]
    );
    assert_eq!(
        errors(
            r#"{"best": "exponential", "candidates": [{"kind": "exponential", "params": {"rate": 1}}],
               "iat_quantiles": [[0, 0.5], [0.5, 0.2]]}"#
        ),
        ["iat_quantiles[1]: not ascending"]
    );
    assert_eq!(
        errors(r#"{"best": "gamma", "candi"#),
        ["the file ends early at line 1 column 24: truncated"]
    );
    assert_eq!(
        errors(r#"{"windows": []}"#),
        [
            "neither a `sluice fit --json` report (no `candidates`), a model file (no \
          `arrival`) nor a run file with `arrival_fit`"
        ]
    );
    assert_eq!(
        errors(r#"{"arrival_fit": {"v": 2}}"#),
        ["arrival_fit.v: unsupported version 2 (this sluice reads 1)"]
    );
    assert_eq!(
        errors(r#"{"arrival_fit": {"v": 1, "fitted": true}}"#),
        [
            "arrival_fit.fitted: unknown field (expected one of v, source, of, best, samples, \
          candidates, iat_quantiles)"
        ]
    );
    assert_eq!(
        errors(r#"{"arrival_fit": [1]}"#),
        ["arrival_fit: expected an object, found [1]"]
    );
}
