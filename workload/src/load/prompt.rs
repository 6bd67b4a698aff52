//! Prompts of a set size without a tokenizer: the text counted by the
//! trace schema's estimate (characters / 4, rounded up), and a seeded
//! filler of common English words that BPE tokenizers (GPT-2's, SmolLM2's,
//! Llama's) keep as one token each, so a word counts as one token.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_filters::mix64;

use super::scenario::{correlated_pair, Step};

/// Words that are one token each, with or without the space before them,
/// in the GPT-2 and SmolLM2 vocabularies.
pub const FILLER_WORDS: [&str; 64] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "time", "new", "people",
    "first", "year", "work", "water", "city", "world", "day", "house", "light", "music", "river",
    "road", "school",
];

/// The tokens of `text` by the estimate the trace schema writes when a
/// server gave no usage: characters / 4, rounded up.
pub fn estimated_tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(4) as u64
}

/// `text` sized to `target_tokens`: with filler words before it when it
/// is shorter (each word one token, `text` counted by
/// [`estimated_tokens`]), or cut to its first `4 * target_tokens`
/// characters when it is longer. The filler comes first so that the
/// request's own text (the question) ends the prompt, as in a RAG prompt
/// whose context comes before the question; whether prompts share a
/// prefix is then the filler's RNG's choice: one seeded per journey gives
/// none, one seeded the same for every request gives a shared one.
pub fn sized_prompt(text: &str, target_tokens: u64, rng: &mut impl Rng) -> String {
    let own = estimated_tokens(text);
    if own >= target_tokens {
        let keep = usize::try_from(target_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
        return text.chars().take(keep).collect();
    }
    let words = target_tokens - own;
    let mut out = String::with_capacity(text.len() + 6 * words as usize);
    for _ in 0..words {
        let w = FILLER_WORDS[rng.random_range(0..FILLER_WORDS.len())];
        out.push_str(w);
        out.push(' ');
    }
    out.push_str(text);
    out
}

/// Mixed into the seed of the filler that `prefix: shared` draws the same
/// for every request.
const SHARED_FILLER: u64 = 0x5348_4152_4544; // "SHARED"

/// One request's sizes: its prompt's tokens and its `max_tokens`, drawn
/// jointly through the step's copula when it has one.
pub(crate) fn draw_lengths(step: &Step, rng: &mut impl Rng) -> (Option<u64>, Option<u64>) {
    let count = |x: f64| x.round().max(1.0) as u64;
    match (&step.input_tokens, &step.max_tokens, step.token_rho) {
        (Some(i), Some(o), Some(rho)) => {
            let (i, o) = correlated_pair(i, o, rho, rng);
            (Some(count(i)), Some(count(o)))
        }
        (i, o, _) => (
            i.as_ref().map(|d| count(d.sample(rng))),
            o.as_ref().map(|d| count(d.sample(rng))),
        ),
    }
}

/// The user message of an llm prompt step: `text` sized to `tokens` when
/// the step sizes its prompt, the filler drawn from the journey's `rng` or,
/// with `prefix: shared`, from one stream seeded by the run's `seed`.
pub(crate) fn step_prompt(
    step: &Step,
    text: String,
    tokens: Option<u64>,
    seed: u64,
    rng: &mut StdRng,
) -> String {
    match tokens {
        None => text,
        Some(n) if step.shared_prefix => sized_prompt(
            &text,
            n,
            &mut StdRng::seed_from_u64(mix64(seed ^ SHARED_FILLER)),
        ),
        Some(n) => sized_prompt(&text, n, rng),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;
    use crate::load::scenario::{Dist, Scenario};

    /// Filler words plus the text's estimate, the rule `sized_prompt` sizes by.
    fn counted(prompt: &str, text: &str) -> u64 {
        let filler = prompt.strip_suffix(text).expect("the text ends the prompt");
        filler.split_whitespace().count() as u64 + estimated_tokens(text)
    }

    #[test]
    fn pads_to_the_target_exactly_by_the_rule() {
        let text = "Context: 42 Question: what is the capital of France?";
        assert_eq!(estimated_tokens(text), 13);
        let mut rng = StdRng::seed_from_u64(7);
        for target in [14, 100, 900, 4096] {
            let p = sized_prompt(text, target, &mut rng);
            assert_eq!(counted(&p, text), target, "target {target}");
            assert!(p
                .split_whitespace()
                .take((target - 13) as usize)
                .all(|w| FILLER_WORDS.contains(&w)));
        }
    }

    #[test]
    fn cuts_a_longer_text_to_the_target() {
        let text = "é".repeat(50);
        let mut rng = StdRng::seed_from_u64(1);
        let p = sized_prompt(&text, 5, &mut rng);
        assert_eq!(p, "é".repeat(20));
        assert_eq!(estimated_tokens(&p), 5);
        // Exactly the text's own size: the text unchanged.
        assert_eq!(sized_prompt(&text, 13, &mut rng), text);
    }

    #[test]
    fn the_same_seed_gives_the_same_prompt_and_a_shared_prefix() {
        let draw = |seed, n| sized_prompt("q?", n, &mut StdRng::seed_from_u64(seed));
        assert_eq!(draw(3, 200), draw(3, 200));
        assert_ne!(draw(3, 200), draw(4, 200));
        // One stream: the shorter filler is the longer one's start.
        let (short, long) = (draw(3, 50), draw(3, 200));
        let stem = short.strip_suffix("q?").unwrap();
        assert!(long.starts_with(stem));
    }

    fn step(prompt: &str) -> Step {
        let text = format!(
            "scenario: s\ntarget: {{ base_url: \"http://127.0.0.1:1\" }}\n\
             workload: {{ arrival: {{ kind: constant, rate: 1 }}, duration: 1s, seed: 3 }}\n\
             steps: [ {{ name: a, service: llm, prompt: {prompt}, max_tokens: 10-500 }} ]\n"
        );
        let s = Scenario::from_yaml(&text, std::path::Path::new("."), &|_| None).unwrap();
        s.steps[0].clone()
    }

    #[test]
    fn a_step_sizes_its_prompt_from_its_own_or_the_shared_stream() {
        let unique = step(r#"{ template: "Q?", input_tokens: 300 }"#);
        let shared = step(r#"{ template: "Q?", input_tokens: 300, prefix: shared }"#);
        let (mut r1, mut r2) = (StdRng::seed_from_u64(1), StdRng::seed_from_u64(2));
        let (tokens, max_tokens) = draw_lengths(&unique, &mut r1);
        assert_eq!(tokens, Some(300));
        assert!(max_tokens.is_some_and(|m| (10..=500).contains(&m)));
        let prompt = |s: &Step, rng: &mut StdRng| step_prompt(s, "Q?".into(), tokens, 3, rng);
        let (a, b) = (prompt(&unique, &mut r1), prompt(&unique, &mut r2));
        assert_ne!(a, b, "each journey its own filler");
        assert_eq!(counted(&a, "Q?"), 300);
        let (a, b) = (prompt(&shared, &mut r1), prompt(&shared, &mut r2));
        assert_eq!(a, b, "one filler for every request");
        assert_eq!(counted(&a, "Q?"), 300);
        // A step that sizes nothing sends its text as it is.
        assert_eq!(step_prompt(&unique, "Q?".into(), None, 3, &mut r1), "Q?");
    }

    #[test]
    fn with_a_copula_both_lengths_come_from_one_seeded_draw() {
        let mut s =
            step(r#"{ template: "Q?", input_tokens: { lognormal: { median: 900, sigma: 1.0 } } }"#);
        s.token_rho = Some(0.99);
        let draws = |s: &Step, seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..200)
                .map(|_| draw_lengths(s, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            draws(&s, 8),
            draws(&s, 8),
            "the same seed, the same requests"
        );
        // At rho 0.99 a prompt above its median (900) nearly always has
        // max_tokens above the uniform's (255).
        let pairs = draws(&s, 8);
        let agree = pairs
            .iter()
            .filter(|(i, o)| (i.unwrap() > 900) == (o.unwrap() > 255))
            .count();
        assert!(agree >= 180, "{agree} of 200 agree");
        s.max_tokens = Some(Dist::Fixed(64.0));
        assert!(draws(&s, 8).iter().all(|(_, o)| *o == Some(64)));
    }
}
