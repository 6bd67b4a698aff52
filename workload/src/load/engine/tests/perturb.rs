//! A step's `perturb:` rewords the user text it sends, marks the request
//! `x-sluice-perturbed: <rate>`, and leaves every other step's as it was;
//! the same seed rewords the same words.

use std::path::Path;

use serde_json::Value;

use super::replay::{recorder, Got};
use super::*;

/// Fifteen words, ten of them not stopwords (`which`, `through`, `the`
/// and `before` are): rate 0.5 changes five.
const QUESTION: &str =
    "Which rivers flow north through the old city before reaching the cold grey northern sea";

fn scenario(addr: SocketAddr, perturb: &str) -> Scenario {
    let text = format!(
        "scenario: perturb\n\
         target: {{ base_url: 'http://{addr}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 50 }}, duration: 100ms, seed: 3 }}\n\
         steps:\n\
         - {{ name: plain, service: llm, prompt: '{QUESTION}', stream: false }}\n\
         - {{ name: reworded, service: llm, prompt: '{QUESTION}', stream: false, \
              depends_on: plain, perturb: {perturb} }}\n\
         - {{ name: own_body, service: llm, depends_on: reworded, perturb: {perturb}, \
              body: {{ model: m, messages: [ {{ role: system, content: '{QUESTION}' }}, \
                                             {{ role: user, content: '{QUESTION}' }} ] }} }}\n"
    );
    Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap()
}

/// Each request's (user text, system text or "", the perturbed header),
/// by step: the paths are all the same, so by order within a journey.
fn sent(got: &[Got]) -> Vec<(String, String, Option<String>)> {
    got.iter()
        .map(|(_, body, _, perturbed)| {
            let v: Value = serde_json::from_slice(body).unwrap();
            let messages = v["messages"].as_array().unwrap();
            let text = |role: &str| {
                messages
                    .iter()
                    .find(|m| m["role"] == role)
                    .map_or("", |m| m["content"].as_str().unwrap())
                    .to_owned()
            };
            (text("user"), text("system"), perturbed.clone())
        })
        .collect()
}

fn run_once(perturb: &str) -> Vec<(String, String, Option<String>)> {
    let server = recorder();
    let s = scenario(server.addr, perturb);
    let out = run(
        &s,
        &s.plan.schedule().unwrap(),
        &options(None),
        Arc::new(Live::default()),
    )
    .unwrap();
    assert!(out.outcomes.iter().all(|o| o.failure.is_none()));
    let got = server.got.lock().unwrap().clone();
    assert_eq!(got.len(), out.outcomes.len());
    sent(&got)
}

#[test]
fn a_perturbed_step_masks_its_user_text_and_is_marked() {
    let sent = run_once("{ rate: 0.5, mode: mask, seed: 9 }");
    let masks = |t: &str| t.matches("[MASK]").count();
    let plain: Vec<_> = sent.iter().filter(|s| s.2.is_none()).collect();
    let marked: Vec<_> = sent.iter().filter(|s| s.2.is_some()).collect();
    assert!(!plain.is_empty());
    assert_eq!(marked.len(), 2 * plain.len(), "{sent:?}");
    for (user, _, _) in &plain {
        assert_eq!(user, QUESTION);
    }
    for (user, system, header) in &marked {
        assert_eq!(header.as_deref(), Some("0.5"));
        assert_eq!(masks(user), 5, "{user}");
        assert_eq!(user.split(' ').count(), 15, "{user}");
        // Only user text: the system prompt goes as written.
        assert!(system.is_empty() || system == QUESTION, "{system}");
    }
    // Journeys salt the choice: the same question loses other words.
    let reworded: std::collections::BTreeSet<&String> = marked.iter().map(|(u, _, _)| u).collect();
    assert!(reworded.len() > 1, "{reworded:?}");
}

#[test]
fn drop_mode_removes_the_words_and_a_seed_repeats_them() {
    let first = run_once("{ rate: 0.25, mode: drop, seed: 4 }");
    let again = run_once("{ rate: 0.25, mode: drop, seed: 4 }");
    let key = |v: &[(String, String, Option<String>)]| {
        let mut k: Vec<String> = v.iter().map(|s| s.0.clone()).collect();
        k.sort();
        k
    };
    assert_eq!(key(&first), key(&again));
    for (user, _, header) in first.iter().filter(|s| s.2.is_some()) {
        assert_eq!(header.as_deref(), Some("0.25"));
        // round(0.25 × 10) = 3 eligible words dropped.
        assert_eq!(user.split(' ').count(), 12, "{user}");
    }
}
