//! `prompt.input_tokens` and `prompt.prefix`: read as a count
//! distribution, every bad value named by its path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

const PROMPT: &str = r#"prompt: { template: "Question: {{query}} ({{query_hash}})" }"#;

fn with_prompt(prompt: &str) -> String {
    GOOD.replace(PROMPT, prompt)
}

#[test]
fn input_tokens_take_a_number_a_range_or_a_lognormal() {
    let read = |v: &str| {
        let text = with_prompt(&format!(
            r#"prompt: {{ template: "Context: {{{{query}}}} Question: {{{{query}}}}", input_tokens: {v} }}"#
        ));
        parse(&text).unwrap().steps[1].clone()
    };
    assert_eq!(read("512").input_tokens, Some(Dist::Fixed(512.0)));
    assert_eq!(
        read("200-900").input_tokens,
        Some(Dist::Uniform {
            lo: 200.0,
            hi: 900.0
        })
    );
    let step = read("{ lognormal: { median: 900, sigma: 1.0 } }");
    assert_eq!(
        step.input_tokens,
        Some(Dist::Lognormal {
            mu: 900f64.ln(),
            sigma: 1.0
        })
    );
    assert!(!step.shared_prefix);
    assert_eq!(step.token_rho, None);
    let shared =
        with_prompt(r#"prompt: { template: "Q: {{query}}", input_tokens: 64, prefix: shared }"#);
    assert!(parse(&shared).unwrap().steps[1].shared_prefix);
    // Without input_tokens a step sends its prompt as written.
    assert_eq!(parse(GOOD).unwrap().steps[1].input_tokens, None);
}

#[test]
fn bad_input_tokens_and_prefixes_are_named_by_their_path() {
    let bad = |p: &str| errors(&with_prompt(p));
    assert_eq!(
        bad(r#"prompt: { template: "Q", input_tokens: 0 }"#),
        ["steps[1].prompt.input_tokens: `0` is not a number >= 1"]
    );
    assert_eq!(
        bad(r#"prompt: { template: "Q", input_tokens: 900-200 }"#),
        ["steps[1].prompt.input_tokens: `900-200`: the range's low end is above its high end"]
    );
    assert_eq!(
        bad(r#"prompt: { template: "Q", input_tokens: lots }"#),
        ["steps[1].prompt.input_tokens: `lots` is not a number >= 1"]
    );
    assert_eq!(
        bad(
            r#"prompt: { template: "Q", input_tokens: { lognormal: { median: 900, sigma: -1 } } }"#
        ),
        ["steps[1].prompt.input_tokens: lognormal.sigma: must be a finite number > 0, found -1"]
    );
    assert_eq!(
        bad(r#"prompt: { template: "Q", input_tokens: 64, prefix: common }"#),
        ["steps[1].prompt.prefix: must be `unique` or `shared`, found `common`"]
    );
    assert_eq!(
        bad(r#"prompt: { template: "Q", prefix: shared }"#),
        ["steps[1].prompt.prefix: needs `input_tokens` (it names the filler's)"]
    );
}

#[test]
fn perturb_is_read_as_mirror_perturb_is_and_only_on_llm_steps() {
    let answer = r#"max_tokens: 256, timeout: 30s }"#;
    let with = |perturb: &str| {
        GOOD.replace(
            answer,
            &format!("max_tokens: 256, timeout: 30s, perturb: {perturb} }}"),
        )
    };
    let step = parse(&with("{ rate: 0.15, mode: swap, seed: 5 }"))
        .unwrap()
        .steps[1]
        .clone();
    assert_eq!(
        step.perturb,
        Some(sluice_filters::Perturbation {
            rate: 0.15,
            mode: sluice_filters::PerturbMode::Swap,
            seed: 5,
            mask_token: "[MASK]".to_owned(),
        })
    );
    assert_eq!(parse(GOOD).unwrap().steps[1].perturb, None);
    assert_eq!(
        errors(&with("{ rate: 1.5, mask_token: '' }")),
        [
            "steps[1].perturb.rate: 1.5 is not within 0 (excluded) ..= 1",
            "steps[1].perturb.mask_token: must not be empty",
        ]
    );
    assert!(errors(&with("{ rate: 0.2, mode: shuffle }"))[0].starts_with("steps"));
    let on_http = GOOD.replace(
        "n_results: 3 } }",
        "n_results: 3 }, perturb: { rate: 0.2 } }",
    );
    assert_eq!(errors(&on_http), ["steps[0].perturb: is for llm steps"]);
}
