#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use rand::{Rng, SeedableRng};

use super::*;
use crate::capacity::stage::measure;
use crate::capacity::stage::tests::{report, run};
use crate::load::Outcome;

/// A model step (`m`, priced per token) and a cache step, or one step
/// priced by the GPU-hour.
fn scenario(cost: &str) -> Scenario {
    let text = format!(
        "scenario: s\ntarget: {{ base_url: 'http://127.0.0.1:1' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 20s }}\n\
         steps:\n\
         \x20 - {{ name: cache, service: redis, command: [GET, k], target: '127.0.0.1:1' }}\n\
         \x20 - {{ name: answer, service: llm, model: m, prompt: hi, depends_on: cache }}\n\
         cost: {cost}\n"
    );
    Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap()
}

const PER_TOKEN: &str = "{ models: { m: { input_per_1k: 0.5, output_per_1k: 1.5 } } }";

/// A model answer (step 1) of `tokens` output tokens taking 30 ms plus
/// `ms_per_token` a token, plus up to 2 ms of seeded noise.
fn answer(rng: &mut impl Rng, end_us: u64, tokens: u64, ms_per_token: f64) -> Answer {
    let ms = 30.0 + ms_per_token * tokens as f64 + rng.random_range(0.0..2.0);
    Answer {
        step: 1,
        end_us,
        ok: true,
        input_tokens: Some(20),
        output_tokens: Some(tokens),
        e2el_us: (ms * 1000.0) as u64,
    }
}

#[test]
fn the_model_signals_count_answered_model_requests_only() {
    let s = scenario(PER_TOKEN);
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut answers: Vec<Answer> = (0..200)
        .map(|i| answer(&mut rng, i * 50_000, 16 + (i % 8) * 16, 5.0))
        .collect();
    // A failed model request and a cache lookup: neither counts.
    answers.push(Answer {
        ok: false,
        ..answers[0]
    });
    answers.push(Answer {
        step: 0,
        ..answers[1]
    });
    let m = model_signals(&s, &answers, 10.0);
    assert_eq!(m.input_tokens, 200 * 20);
    // 25 of each length 16, 32, …, 128.
    let output: u64 = (1..=8).map(|k| 25 * 16 * k).sum();
    assert_eq!(m.output_tokens, output);
    // The true cost of a token is 5 ms; the noise is 2 ms wide.
    let slope = m.slope.unwrap().ms_per_token;
    assert!((slope - 5.0).abs() < 0.05, "{slope}");
    // $0.5 per 1k input and $1.5 per 1k output, over all tokens.
    let usd = (200.0 * 20.0 * 0.5 + output as f64 * 1.5) / 1000.0;
    let want = usd * 1000.0 / (200 * 20 + output) as f64;
    assert!((m.cost_per_1k.unwrap() - want).abs() < 1e-12);
}

#[test]
fn a_gpu_hour_is_paid_by_the_time_and_an_unpriced_model_gives_no_cost() {
    let s = scenario("{ gpu_hour: 3.6, gpus: 2 }");
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let answers: Vec<Answer> = (0..10).map(|i| answer(&mut rng, i, 100, 5.0)).collect();
    // $7.2 an hour for 10 s is $0.02, over 10 × 120 tokens.
    let m = model_signals(&s, &answers, 10.0);
    assert!((m.cost_per_1k.unwrap() - 0.02 * 1000.0 / 1200.0).abs() < 1e-12);
    // Too few requests for three bins of 20: no slope.
    assert_eq!(m.slope, None);
    let other = scenario("{ models: { other: { input_per_1k: 1, output_per_1k: 1 } } }");
    assert_eq!(model_signals(&other, &answers, 10.0).cost_per_1k, None);
}

/// Stage 3 at `rate`, 8 s into 20, with the requests that ended so far.
fn reading(s: &Scenario, answers: &[Answer], rate: f64, base: Option<(f64, f64)>) -> StageProgress {
    let base = base.map(|(ms_per_token, rate)| sluice_filters::SlopeAt { rate, ms_per_token });
    let mut p = StageProgress::at(3, rate, Purpose::Probe, 8.0);
    p.length_s = 20.0;
    p.backlog = 4;
    p.sla = vec![(Gate::TtftP95, Some(120.0))];
    p.read(s, answers, base);
    p
}

#[test]
fn a_reading_is_per_second_of_the_measured_part_with_the_excess_over_a_lower_stage() {
    let s = scenario(PER_TOKEN);
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    // Under load the token costs 6 ms; the lowest stage read 5.
    let answers: Vec<Answer> = (0..80)
        .map(|i| answer(&mut rng, i * 100_000, 10 * (i % 10 + 1), 6.0))
        .collect();
    let p = reading(&s, &answers, 10.0, Some((5.0, 4.0)));
    assert_eq!(p.request_rate, 10.0);
    assert_eq!(
        p.token_throughput,
        (8 * (10..=100).step_by(10).sum::<u64>()) as f64 / 8.0
    );
    let excess = p.p99_excess_ms_per_token.unwrap();
    assert!((excess - 1.0).abs() < 0.1, "{excess}");
    assert_eq!((p.index, p.backlog, p.length_s), (3, 4, 20.0));
    assert_eq!(p.sla, vec![(Gate::TtftP95, Some(120.0))]);
    // A base from a stage at this rate or above is no base: the lowest
    // rate's slope is the reference, and this stage may become it.
    assert_eq!(
        reading(&s, &answers, 10.0, Some((5.0, 12.0))).p99_excess_ms_per_token,
        None
    );
    let none = reading(&s, &[], 10.0, None);
    assert_eq!((none.request_rate, none.token_throughput), (0.0, 0.0));
    assert_eq!(
        (none.p99_slope_ms_per_token, none.cost_per_1k),
        (None, None)
    );
}

#[test]
fn the_last_reading_of_a_stage_agrees_with_its_result() {
    let s = scenario(PER_TOKEN);
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let outcomes: Vec<Outcome> = (0..200u64)
        .map(|i| {
            let a = answer(&mut rng, 0, 8 * (i % 12 + 1), 5.0);
            let intended = i * 100_000;
            Outcome {
                index: i,
                step: 1,
                intended_us: intended,
                sent_us: intended,
                first_content_us: Some(intended + 30_000),
                end_us: intended + a.e2el_us,
                status: Some(200),
                input_tokens: a.input_tokens,
                output_tokens: a.output_tokens,
                ..Outcome::default()
            }
        })
        .collect();
    let out = run(outcomes.clone(), 20_000_000);
    let result = measure(&s, 10.0, Purpose::Probe, &out, report(&s, &out), None);
    // What the tap would have handed the reader by the stage's end.
    let answers: Vec<Answer> = outcomes
        .iter()
        .filter(|o| o.end_us <= out.ran_us)
        .map(Answer::of)
        .collect();
    let mut last = StageProgress::at(0, 10.0, Purpose::Probe, result.duration_s);
    last.read(&s, &answers, None);
    assert_eq!(last.p99_slope_ms_per_token, result.p99_slope_ms_per_token);
    assert_eq!(last.cost_per_1k, result.cost_per_1k);
    assert_eq!(last.token_throughput, result.token_throughput);
    assert!(result.p99_slope_ms_per_token.is_some() && result.cost_per_1k.is_some());
}
