#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn check(gate: Gate, value: f64, bound: f64) -> SlaCheck {
    SlaCheck {
        gate,
        value: Some(value),
        bound,
        passed: value <= bound,
    }
}

fn stage(rate: f64, excess: f64, ttft_p95: f64) -> StageSignals {
    StageSignals {
        rate,
        p99_excess_ms_per_token: Some(excess),
        cost_per_1k: Some(0.006),
        sla: vec![check(Gate::TtftP95, ttft_p95, 800.0)],
        early_stop: None,
    }
}

const BOUNDS: Bounds = Bounds {
    p99_excess_ms_per_token: 0.8,
    cost_per_1k_max: Some(0.012),
};

#[test]
fn profiles_and_custom_weights() {
    assert_eq!(
        Weights::parse("latency_critical"),
        Ok(Weights::LATENCY_CRITICAL)
    );
    assert_eq!(
        Weights::parse("generation"),
        Ok(Weights {
            p99: 0.25,
            knee: 0.5,
            cost: 0.25
        })
    );
    assert_eq!(
        Weights::parse("p99=1, knee=2"),
        Ok(Weights {
            p99: 1.0,
            knee: 2.0,
            cost: 0.0
        })
    );
    assert_eq!(
        Weights::parse("speed=1").unwrap_err(),
        "`speed=1`: unknown signal `speed` (expected p99, knee or cost)"
    );
    assert_eq!(
        Weights::parse("p99=-1").unwrap_err(),
        "`p99=-1`: `-1` is not a weight ≥ 0"
    );
    assert_eq!(
        Weights::parse("p99=0").unwrap_err(),
        "`p99=0`: the weights sum to 0"
    );
    assert_eq!(
        Weights::parse("fast").unwrap_err(),
        "`fast`: expected latency_critical, generation or weights like p99=0.5,knee=0.3,cost=0.2"
    );
}

#[test]
fn margins_and_the_score_by_hand() {
    assert_eq!(margin(0.8, 0.4), 0.5);
    assert_eq!(margin(0.8, 2.4), -1.0);
    assert_eq!(margin(0.8, -10.0), 1.0);
    // Each margin 0.5: the score is 0.5 whatever the weights.
    let s = score(
        &stage(10.0, 0.4, 500.0),
        20.0,
        &BOUNDS,
        &Weights::LATENCY_CRITICAL,
    );
    assert_eq!(
        (s.p99_margin, s.knee_margin, s.cost_margin),
        (Some(0.5), 0.5, Some(0.5))
    );
    assert!((s.score - 0.5).abs() < 1e-12, "{s:?}");
    // p99 −0.25, knee 0.5, cost 0.5: 0.55·−0.25 + 0.3·0.5 + 0.15·0.5 = 0.0875.
    let s = score(
        &stage(10.0, 1.0, 500.0),
        20.0,
        &BOUNDS,
        &Weights::LATENCY_CRITICAL,
    );
    assert!((s.score - 0.0875).abs() < 1e-12, "{s:?}");
    // No price table: the cost's weight goes to the others, pro rata:
    // (0.55·−0.25 + 0.3·0.5) / 0.85.
    let no_cost = Bounds {
        cost_per_1k_max: None,
        ..BOUNDS
    };
    let s = score(
        &stage(10.0, 1.0, 500.0),
        20.0,
        &no_cost,
        &Weights::LATENCY_CRITICAL,
    );
    assert_eq!(s.cost_margin, None);
    assert!((s.score - 0.0125 / 0.85).abs() < 1e-12, "{s:?}");
}

fn scored(stages: Vec<StageSignals>, knee: f64) -> Vec<(StageSignals, Scored)> {
    stages
        .into_iter()
        .map(|s| {
            let sc = score(&s, knee, &BOUNDS, &Weights::LATENCY_CRITICAL);
            (s, sc)
        })
        .collect()
}

#[test]
fn the_recommendation_names_what_binds_it() {
    // 30 req/s holds its SLA but load adds 2 ms a token to P99: its score
    // is below 0: 0.55·−1 (clipped) + 0.3·0.25 + 0.15·0.5 = −0.40.
    // 40 req/s misses the TTFT SLA.
    let stages = scored(
        vec![
            stage(10.0, 0.0, 300.0),
            stage(20.0, 0.2, 400.0),
            stage(30.0, 2.0, 700.0),
            stage(40.0, 3.0, 912.0),
        ],
        40.0,
    );
    let r = recommend(&stages, Some(40.0), &BOUNDS);
    assert_eq!(r.max_rate, Some(30.0));
    assert_eq!(r.recommended_rate, Some(20.0));
    assert_eq!(
        r.binding,
        "20.0 req/s is the highest that qualifies: at 30.0 req/s, load adds 2.00 ms per output \
         token to P99, over its 0.80 bound (score -0.40)"
    );
}

#[test]
fn an_sla_that_fails_at_the_next_rate_is_named_with_its_value() {
    let stages = scored(vec![stage(10.0, 0.0, 300.0), stage(20.0, 0.1, 912.0)], 20.0);
    let r = recommend(&stages, None, &BOUNDS);
    assert_eq!((r.max_rate, r.recommended_rate), (Some(10.0), Some(10.0)));
    assert_eq!(r.binding, "10.0 req/s is the highest that qualifies: at 20.0 req/s, ttft_p95 was 912 ms, over its 800 ms SLA");
}

#[test]
fn a_confirmation_that_fails_takes_its_rate_out() {
    // Probed at 20 and held; confirmed at 20 and missed.
    let stages = scored(
        vec![
            stage(10.0, 0.0, 300.0),
            stage(20.0, 0.1, 700.0),
            stage(20.0, 0.1, 850.0),
        ],
        40.0,
    );
    let r = recommend(&stages, None, &BOUNDS);
    assert_eq!((r.max_rate, r.recommended_rate), (Some(10.0), Some(10.0)));
}

#[test]
fn the_top_rate_and_no_rate_at_all() {
    let stages = scored(vec![stage(10.0, 0.0, 300.0), stage(20.0, 0.1, 400.0)], 20.0);
    let r = recommend(&stages, None, &BOUNDS);
    assert_eq!(r.recommended_rate, Some(20.0));
    assert_eq!(
        r.binding,
        "20.0 req/s is the highest rate probed, and it holds every SLA with a score ≥ 0"
    );

    let mut failing = stage(5.0, 0.0, 300.0);
    failing.sla.push(check(Gate::ErrorRate, 5.0, 1.0));
    let r = recommend(&scored(vec![failing], 20.0), None, &BOUNDS);
    assert_eq!((r.max_rate, r.recommended_rate), (None, None));
    assert_eq!(r.binding, "no probed rate qualifies: at the lowest, 5.0 req/s, error_rate was 5.00%, over its 1.00% SLA");
    assert_eq!(recommend(&[], None, &BOUNDS).binding, "nothing was probed");
}

#[test]
fn past_the_knee_is_said_as_a_share() {
    // Only the knee counts: 25 req/s is 25% past a knee at 20.
    let w = Weights {
        p99: 0.0,
        knee: 1.0,
        cost: 0.0,
    };
    let stages: Vec<(StageSignals, Scored)> = [10.0, 25.0]
        .into_iter()
        .map(|r| {
            let s = stage(r, 0.0, 300.0);
            let sc = score(&s, 20.0, &BOUNDS, &w);
            (s, sc)
        })
        .collect();
    let r = recommend(&stages, Some(20.0), &BOUNDS);
    assert_eq!(r.recommended_rate, Some(10.0));
    assert_eq!(r.binding, "10.0 req/s is the highest that qualifies: at 25.0 req/s, it is 25% past the throughput knee at 20.0 req/s (score -0.25)");
}

#[test]
fn a_stage_stopped_early_does_not_hold_whatever_its_slas_read() {
    // The llama.cpp bench's case: at 24.5 req/s the backlog grew and the
    // stage was cut short while its TTFT over the part that ran was still
    // under the bound.
    let mut cut = stage(24.5, 0.1, 790.0);
    cut.early_stop = Some("over_saturated");
    let stages = scored(vec![stage(20.0, 0.0, 600.0), cut], 40.0);
    let r = recommend(&stages, None, &BOUNDS);
    assert_eq!((r.max_rate, r.recommended_rate), (Some(20.0), Some(20.0)));
    assert_eq!(
        r.binding,
        "20.0 req/s is the highest that qualifies: at 24.5 req/s, the stage was stopped early \
         (over-saturated): its backlog grew without bound"
    );
}

#[test]
fn the_hard_cost_bound_takes_a_rate_out_of_max_rate() {
    // Every SLA holds at 20 req/s, but 1k tokens cost $0.02 there, over
    // the $0.012 bound given in --sla.
    let mut dear = stage(20.0, 0.0, 400.0);
    dear.cost_per_1k = Some(0.02);
    let stages = scored(vec![stage(10.0, 0.0, 300.0), dear], 40.0);
    let r = recommend(&stages, None, &BOUNDS);
    assert_eq!((r.max_rate, r.recommended_rate), (Some(10.0), Some(10.0)));
    assert_eq!(
        r.binding,
        "10.0 req/s is the highest that qualifies: at 20.0 req/s, 1k tokens cost $0.0200, over \
         its $0.0120 bound"
    );
}
