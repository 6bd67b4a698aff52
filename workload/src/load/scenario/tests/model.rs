//! Fitted models in scenarios: `from_model` with its rate curve, its
//! sessions and its token lengths, and the distributions they bring:
//! quantiles, truncated lognormals and the copula joining two lengths.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

const MODEL: &str = "v: 1
arrival:
  kind: weibull
  shape: 0.5
  scale: 0.1
  rate_curve: {window_s: 10, rates: [2.0, 0.0, 8.0]}
source: {trace: t.jsonl, sha256: 0000000000000000000000000000000000000000000000000000000000000000, requests: 9, fitted_at: 2026-01-01T00:00:00Z}
";

#[test]
fn a_fitted_model_drops_in_with_its_rate_curve() {
    let dir = std::env::temp_dir().join(format!("sluice-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.yaml"), MODEL).unwrap();
    let text = GOOD
        .replace(
            "arrival: { kind: gamma, rate: 20, burstiness: 0.5 }",
            "from_model: model.yaml\n  duration: 40s",
        )
        .replace("warmup: 30s", "warmup: 1s")
        .replace(
            "  stages: [ { rate: 10, for: 1m }, { rate: 40, ramp: 2m } ]\n",
            "",
        );
    let s = Scenario::from_yaml(&text, &dir, &env).unwrap();
    assert_eq!(s.from_model.as_deref(), Some("model.yaml"));
    assert_eq!(
        s.plan.process,
        Process::Renewal(Arrival::Weibull {
            shape: 0.5,
            scale: 0.1
        })
    );
    // The curve, repeated to fill the 40 s.
    let rates: Vec<f64> = s.plan.segments.iter().map(|x| x.from).collect();
    assert_eq!(rates, [2.0, 0.0, 8.0, 2.0]);
    let bad = MODEL.replace("shape: 0.5", "shape: -1");
    std::fs::write(dir.join("model.yaml"), bad).unwrap();
    let e = Scenario::from_yaml(&text, &dir, &env).unwrap_err();
    assert_eq!(
        e.to_string(),
        "workload.from_model: model.yaml: arrival.shape: must be a finite number > 0, found -1"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quantiles_are_drawn_linearly_between_them() {
    use rand::SeedableRng;
    let q = [1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0];
    let d = Dist::Quantiles(q);
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let draws: Vec<f64> = (0..100_000).map(|_| d.sample(&mut rng)).collect();
    assert!(draws.iter().all(|x| (1.0..=34.0).contains(x)));
    // The share under each quantile is its probability, within 1%.
    for (value, p) in q.iter().zip(QUANTILE_PROBS).skip(1).take(6) {
        let share = draws.iter().filter(|x| *x < value).count() as f64 / 1e5;
        assert!((share - p).abs() < 0.01, "under {value}: {share}, want {p}");
    }
}

#[test]
fn the_docs_model_with_sessions_drops_in_unchanged() {
    let docs = include_str!("../../../../../docs/workload.md");
    let after = docs.split("### The model file").nth(1).unwrap();
    let model = after.split("```yaml\n").nth(1).unwrap();
    let model = model.split("```").next().unwrap();
    let dir = std::env::temp_dir().join(format!("sluice-docs-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.yaml"), model).unwrap();
    let text = GOOD
        .replace(
            "arrival: { kind: gamma, rate: 20, burstiness: 0.5 }",
            "from_model: model.yaml",
        )
        .replace("warmup: 30s", "warmup: 10s")
        .replace(
            "  stages: [ { rate: 10, for: 1m }, { rate: 40, ramp: 2m } ]\n",
            "",
        )
        .replace(
            "sessions: { turns: { lognormal: { median: 3, sigma: 0.6 } }, think_time: 2s-8s }\n",
            "",
        )
        .replace("max_tokens: 256, ", "");
    let s = Scenario::from_yaml(&text, &dir, &env).unwrap();
    // The llm step without max_tokens takes the model's output lengths.
    assert_eq!(
        s.steps[1].max_tokens,
        Some(Dist::Lengths {
            mu: 4.0,
            sigma: 1.0,
            min: 1.0,
            max: 1024.0,
            cap: 1024.0,
            cap_share: 0.05
        })
    );
    // And its input lengths, both joined by its copula.
    assert_eq!(
        s.steps[1].input_tokens,
        Some(Dist::Lengths {
            mu: 6.0,
            sigma: 0.8,
            min: 1.0,
            max: 8192.0,
            cap: 8192.0,
            cap_share: 0.0
        })
    );
    assert_eq!(s.steps[1].token_rho, Some(0.4375));
    // A step's own max_tokens wins, and then the lengths are independent.
    let own = text.replace("timeout: 30s", "max_tokens: 64, timeout: 30s");
    let s = Scenario::from_yaml(&own, &dir, &env).unwrap();
    assert_eq!(s.steps[1].max_tokens, Some(Dist::Fixed(64.0)));
    assert!(s.steps[1].input_tokens.is_some());
    assert_eq!(s.steps[1].token_rho, None);
    let s = Scenario::from_yaml(&text, &dir, &env).unwrap();
    // Its arrivals are session starts; turns and think time come from it.
    let sessions = s.sessions.unwrap();
    assert_eq!(
        sessions.turns,
        Dist::Quantiles([1.0, 1.0, 1.0, 2.0, 3.0, 5.0, 9.0, 12.0])
    );
    assert_eq!(
        sessions.think_time,
        Dist::Lognormal {
            mu: 1.2,
            sigma: 0.6
        }
    );
    // The rate curve's three windows of 60 s, one pass.
    let rates: Vec<f64> = s.plan.segments.iter().map(|x| x.from).collect();
    assert_eq!(rates, [10.5, 12.0, 11.2]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn token_lengths_are_a_truncated_lognormal_with_the_cap_as_a_point_mass() {
    use rand::SeedableRng;
    let d = Dist::Lengths {
        mu: 4.0,
        sigma: 1.0,
        min: 1.0,
        max: 200.0,
        cap: 200.0,
        cap_share: 0.1,
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut draws: Vec<f64> = (0..100_000).map(|_| d.sample(&mut rng)).collect();
    assert!(draws.iter().all(|x| (1.0..=200.0).contains(x)));
    let at_cap = draws.iter().filter(|x| **x == 200.0).count() as f64 / 1e5;
    assert!((at_cap - 0.1).abs() < 0.005, "{at_cap}");
    // The rest: P(X < e^4 | 1 <= X <= 200) for a lognormal(4, 1) is
    // 0.5 / (Φ(ln 200 − 4) − Φ(−4)) = 0.5 / 0.9029 = 0.5538.
    draws.retain(|x| *x < 200.0);
    let under = draws.iter().filter(|x| **x < 4f64.exp()).count() as f64 / draws.len() as f64;
    let want = 0.5 / 0.9029;
    assert!((under - want).abs() < 0.01, "{under} for {want}");
}

/// Sample Spearman correlation (no ties among continuous draws).
fn spearman(pairs: &[(f64, f64)]) -> f64 {
    let ranks = |key: &dyn Fn(&(f64, f64)) -> f64| {
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        order.sort_by(|a, b| key(&pairs[*a]).total_cmp(&key(&pairs[*b])));
        let mut r = vec![0.0; pairs.len()];
        for (rank, i) in order.into_iter().enumerate() {
            r[i] = rank as f64;
        }
        r
    };
    let (x, y) = (ranks(&|p| p.0), ranks(&|p| p.1));
    let n = pairs.len() as f64;
    let mean = (n - 1.0) / 2.0;
    let cov: f64 = x.iter().zip(&y).map(|(a, b)| (a - mean) * (b - mean)).sum();
    let var: f64 = x.iter().map(|a| (a - mean) * (a - mean)).sum();
    cov / var
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn the_copula_keeps_the_spearman_correlation_and_the_marginals() {
    use rand::SeedableRng;
    let input = Dist::Lognormal {
        mu: 900f64.ln(),
        sigma: 1.0,
    };
    // Untruncated in effect (bounds 10 sigma away): its median is e^4.
    let output = Dist::Lengths {
        mu: 4.0,
        sigma: 0.8,
        min: 1.0,
        max: 1e6,
        cap: 1e6,
        cap_share: 0.0,
    };
    for rho in [0.4375, 0.9, -0.6, 0.0] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let pairs: Vec<(f64, f64)> = (0..20_000)
            .map(|_| correlated_pair(&input, &output, rho, &mut rng))
            .collect();
        // The Gaussian copula's Spearman correlation is (6/π) asin(ρ/2);
        // its sample value has a standard error of at most 1/√n = 0.007:
        // within 0.03 is over four of them.
        let want = 6.0 / std::f64::consts::PI * (rho / 2.0).asin();
        let got = spearman(&pairs);
        assert!((got - want).abs() < 0.03, "rho {rho}: {got} for {want}");
        let m_in = median(pairs.iter().map(|p| p.0).collect());
        let m_out = median(pairs.iter().map(|p| p.1).collect());
        assert!(
            (m_in / 900.0 - 1.0).abs() < 0.03,
            "rho {rho}: input median {m_in}"
        );
        assert!(
            (m_out / 4f64.exp() - 1.0).abs() < 0.03,
            "rho {rho}: output median {m_out}"
        );
    }
}

#[test]
fn a_quantile_is_the_inverse_of_each_marginal() {
    let d = Dist::Lengths {
        mu: 4.0,
        sigma: 1.0,
        min: 1.0,
        max: 200.0,
        cap: 200.0,
        cap_share: 0.1,
    };
    // The cap takes the top 10%; below, P(X < e^4 | 1..200) = 0.5538 (see
    // above), so u = 0.9 * 0.5538 is the lognormal's median.
    assert_eq!(d.quantile(0.95), 200.0);
    assert!((d.quantile(0.9 * 0.5 / 0.9029) - 4f64.exp()).abs() < 0.1);
    assert!((d.quantile(0.0) - 1.0).abs() < 1e-6);
    let l = Dist::Lognormal {
        mu: 0.0,
        sigma: 1.0,
    };
    // Φ(1) = 0.841345: e^1.
    assert!((l.quantile(0.841_345) - 1f64.exp()).abs() < 1e-4);
    let q = Dist::Quantiles([1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0]);
    assert_eq!(q.quantile(0.5), 5.0);
    assert_eq!(q.quantile(0.625), 6.5);
    assert_eq!(Dist::Uniform { lo: 2.0, hi: 4.0 }.quantile(0.25), 2.5);
}
