#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{json, Value};

use super::words::{Text, STOPWORDS};
use super::*;

fn policy(rate: f64, mode: PerturbMode) -> Perturbation {
    Perturbation {
        rate,
        mode,
        seed: 7,
        mask_token: "[MASK]".into(),
    }
}

fn chat(system: &str, user: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
            {"role": "assistant", "content": "an earlier answer stays"},
        ],
        "temperature": 0
    }))
    .unwrap()
}

fn user_of(body: &[u8]) -> String {
    let doc: Value = serde_json::from_slice(body).unwrap();
    doc["messages"][1]["content"].as_str().unwrap().to_string()
}

/// Nine eligible words among stopwords and punctuation.
const PROMPT: &str =
    "Explain the difference between TCP and UDP, with examples of protocols, ports, latency and loss.";

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric() && c != '[' && c != ']')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_stopword_list_is_sorted_for_its_binary_search() {
    assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn mask_replaces_the_rate_of_eligible_words_and_no_stopword() {
    let body = chat("You are terse.", PROMPT);
    let out = policy(0.5, PerturbMode::Mask).apply(&body, 1).unwrap();
    let user = user_of(&out);
    // 9 eligible words (Explain difference TCP UDP examples protocols ports
    // latency loss; "between" is a stopword): round(0.5 × 9) = 5.
    let eligible = Text::split(PROMPT).eligible().count();
    assert_eq!(eligible, 9);
    assert_eq!(user.matches("[MASK]").count(), 5, "{user}");
    for stop in ["the", "between", "and", "with", "of"] {
        assert!(
            words(&user).iter().any(|w| w == stop),
            "{stop} kept: {user}"
        );
    }
    // Punctuation and spacing survive: only words were replaced.
    assert_eq!(user.matches(',').count(), 3);
    assert!(user.ends_with('.'));
}

#[test]
fn only_the_user_text_changes() {
    let body = chat("You are terse and precise.", PROMPT);
    let out = policy(1.0, PerturbMode::Mask).apply(&body, 1).unwrap();
    let (before, after): (Value, Value) = (
        serde_json::from_slice(&body).unwrap(),
        serde_json::from_slice(&out).unwrap(),
    );
    assert_eq!(before["messages"][0], after["messages"][0]);
    assert_eq!(before["messages"][2], after["messages"][2]);
    assert_eq!(before["model"], after["model"]);
    assert_eq!(before["temperature"], after["temperature"]);
    assert_ne!(before["messages"][1], after["messages"][1]);
}

#[test]
fn content_parts_and_completion_prompts_are_user_text() {
    let parts = serde_json::to_vec(&json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Summarise quarterly revenue figures"},
        {"type": "image_url", "image_url": {"url": "http://127.0.0.1/x.png"}}
    ]}]}))
    .unwrap();
    let out: Value =
        serde_json::from_slice(&policy(1.0, PerturbMode::Mask).apply(&parts, 1).unwrap()).unwrap();
    assert_eq!(
        out["messages"][0]["content"][0]["text"],
        "[MASK] [MASK] [MASK] [MASK]"
    );
    assert_eq!(
        out["messages"][0]["content"][1]["image_url"]["url"],
        "http://127.0.0.1/x.png"
    );
    let prompt =
        serde_json::to_vec(&json!({"prompt": ["Name three rivers", "Name oceans"]})).unwrap();
    let out: Value =
        serde_json::from_slice(&policy(1.0, PerturbMode::Mask).apply(&prompt, 1).unwrap()).unwrap();
    assert_eq!(
        out["prompt"],
        json!(["[MASK] [MASK] [MASK]", "[MASK] [MASK]"])
    );
}

#[test]
fn drop_removes_words_with_their_space() {
    let p = policy(1.0, PerturbMode::Drop);
    let body = chat("", "Compare rust and go");
    assert_eq!(user_of(&p.apply(&body, 1).unwrap()), "and");
    let body = chat("", "the quick fox jumps over the dog.");
    assert_eq!(user_of(&p.apply(&body, 1).unwrap()), "the over the.");
    // Half of them: no double spaces are left behind.
    let half = policy(0.5, PerturbMode::Drop)
        .apply(&chat("", PROMPT), 3)
        .unwrap();
    let user = user_of(&half);
    assert!(!user.contains("  "), "{user}");
    assert_eq!(words(&user).len(), words(PROMPT).len() - 5, "{user}");
}

#[test]
fn swap_moves_the_chosen_words_and_keeps_every_word() {
    let out = policy(0.5, PerturbMode::Swap)
        .apply(&chat("", PROMPT), 1)
        .unwrap();
    let user = user_of(&out);
    let (mut a, mut b) = (words(PROMPT), words(&user));
    let moved = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    // 5 chosen: two pairs and one with an unchosen neighbour, 6 moved.
    assert_eq!(moved, 6, "{user}");
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn the_same_inputs_give_the_same_copy_and_copies_differ() {
    let body = chat("", PROMPT);
    let p = policy(0.3, PerturbMode::Mask);
    assert_eq!(p.apply(&body, 1), p.apply(&body, 1));
    assert_ne!(p.apply(&body, 1), p.apply(&body, 2));
    let other_seed = Perturbation {
        seed: 8,
        ..p.clone()
    };
    let differs = (1..=8).any(|copy| p.apply(&body, copy) != other_seed.apply(&body, copy));
    assert!(differs);
}

#[test]
fn nothing_to_perturb_gives_none() {
    let p = policy(0.15, PerturbMode::Mask);
    assert_eq!(p.apply(b"not json", 1), None);
    assert_eq!(p.apply(br#"{"input": "an embedding request"}"#, 1), None);
    assert_eq!(
        policy(0.0, PerturbMode::Mask).apply(&chat("", PROMPT), 1),
        None
    );
    // round(0.15 × 2) = 0: too short a prompt for this rate.
    assert_eq!(p.apply(&chat("", "hello world"), 1), None);
}

#[test]
fn every_eligible_word_is_chosen_about_rate_of_the_time() {
    // Over 4,000 seeds, each of 20 words is masked with probability 0.25:
    // 1,000 expected, standard deviation sqrt(4000·0.25·0.75) ≈ 27.4. A
    // bound of 5σ flags a biased chooser, not noise.
    let text: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
    let body = chat("", &text.join(" "));
    let mut counts = [0u32; 20];
    for seed in 0..4000 {
        let p = Perturbation {
            seed,
            ..policy(0.25, PerturbMode::Mask)
        };
        let user = user_of(&p.apply(&body, 1).unwrap());
        for (i, w) in user.split(' ').enumerate() {
            if w == "[MASK]" {
                counts[i] += 1;
            }
        }
    }
    for (i, c) in counts.iter().enumerate() {
        assert!((f64::from(*c) - 1000.0).abs() < 5.0 * 27.4, "word {i}: {c}");
    }
    assert_eq!(counts.iter().sum::<u32>(), 4000 * 5);
}

proptest! {
    #[test]
    fn splitting_and_joining_gives_the_text_back(s in "\\PC{0,80}") {
        prop_assert_eq!(Text::split(&s).join(), s);
    }
}

#[test]
fn one_text_is_reworded_as_the_same_text_inside_a_body() {
    let p = policy(0.5, PerturbMode::Mask);
    let text = "rivers flow north through the old city";
    let reworded = p.apply_text(text, 3).unwrap();
    // rivers, flow, north, old, city are eligible: round(2.5) = 3 masked.
    assert_eq!(reworded.matches("[MASK]").count(), 3, "{reworded}");
    assert_eq!(p.apply_text(text, 3).unwrap(), reworded);
    let salts: std::collections::BTreeSet<String> =
        (0..16).filter_map(|s| p.apply_text(text, s)).collect();
    assert!(salts.len() > 1);
    assert_eq!(p.apply_text("the and of", 3), None);
}

#[test]
fn a_spec_gives_its_policy_with_defaults_and_names_what_is_wrong() {
    let spec: PerturbSpec = serde_json::from_value(json!({"rate": 0.3})).unwrap();
    assert_eq!(
        spec.policy(),
        (
            Perturbation {
                rate: 0.3,
                mode: PerturbMode::Mask,
                seed: 0,
                mask_token: DEFAULT_MASK_TOKEN.to_owned(),
            },
            vec![]
        )
    );
    let bad: PerturbSpec =
        serde_json::from_value(json!({"rate": 0.0, "mode": "drop", "mask_token": ""})).unwrap();
    assert_eq!(
        bad.policy().1,
        [
            ("rate", "0 is not within 0 (excluded) ..= 1".to_owned()),
            ("mask_token", "must not be empty".to_owned()),
        ]
    );
    assert!(serde_json::from_value::<PerturbSpec>(json!({"rate": 0.3, "ratio": 1})).is_err());
    // Written back as read: absent keys stay absent.
    assert_eq!(serde_json::to_value(&spec).unwrap(), json!({"rate": 0.3}));
}
