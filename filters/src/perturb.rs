//! Prompt perturbation: a seeded share of the words of a request's user
//! text masked, dropped or swapped, to measure how much a model's answer
//! moves when its input is slightly reworded (the robustness score of
//! `mirror.perturb`). Pure and deterministic: the same policy, body and copy
//! number always give the same perturbed body.
//!
//! Only user text changes: `messages[]` whose `role` is `user` (a string
//! `content`, or its `{type: text}` parts, OpenAI's and Anthropic's shapes)
//! and a completion's `prompt` (a string or a list of strings). System
//! prompts, tool results and every other field are left as they are.

mod words;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hash::{hash_bytes, mix64};
use words::{Piece, Text};

/// The header a perturbed copy carries, with the policy's rate as its value.
pub const PERTURBED_HEADER: &str = "x-sluice-perturbed";

/// What happens to a chosen word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PerturbMode {
    /// Replaced by the mask token.
    Mask,
    /// Removed, with the space before it.
    Drop,
    /// Chosen words exchange places in pairs.
    Swap,
}

/// A perturbation policy as a config or scenario writes it
/// (`mirror.perturb`, a load step's `perturb`): one reading for both
/// halves, checked by [`PerturbSpec::policy`].
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PerturbSpec {
    /// Share of the non-stopword words changed, 0 (excluded) ..= 1.
    pub rate: f64,
    /// `mask`, `drop` or `swap` (default mask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PerturbMode>,
    /// Seed of the word choice (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// What `mask` puts in a word's place (default `[MASK]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_token: Option<String>,
}

/// The mask token when none is given.
pub const DEFAULT_MASK_TOKEN: &str = "[MASK]";

impl PerturbSpec {
    /// The policy, and what is wrong with the spec as (key, message) pairs,
    /// the key relative to the spec (`rate`, `mask_token`).
    pub fn policy(&self) -> (Perturbation, Vec<(&'static str, String)>) {
        let mut problems = Vec::new();
        if !(self.rate > 0.0 && self.rate <= 1.0) {
            problems.push((
                "rate",
                format!("{} is not within 0 (excluded) ..= 1", self.rate),
            ));
        }
        let mask_token = self
            .mask_token
            .clone()
            .unwrap_or_else(|| DEFAULT_MASK_TOKEN.to_owned());
        if mask_token.is_empty() {
            problems.push(("mask_token", "must not be empty".to_owned()));
        }
        let policy = Perturbation {
            rate: self.rate,
            mode: self.mode.unwrap_or(PerturbMode::Mask),
            seed: self.seed.unwrap_or(0),
            mask_token,
        };
        (policy, problems)
    }
}

/// A perturbation policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Perturbation {
    /// Share of the eligible (non-stopword) words perturbed, 0..=1.
    pub rate: f64,
    pub mode: PerturbMode,
    pub seed: u64,
    pub mask_token: String,
}

impl Perturbation {
    /// The body of copy `copy` with its user text perturbed; `None` when the
    /// body is not JSON with user text, or no word was chosen (the copy then
    /// goes unchanged). The words chosen depend on the seed, the body and the
    /// copy number, so two copies of one request differ from each other.
    pub fn apply(&self, body: &[u8], copy: u32) -> Option<Vec<u8>> {
        let mut doc: Value = serde_json::from_slice(body).ok()?;
        let mut slots = user_text(&mut doc);
        let mut texts: Vec<Text> = slots.iter().map(|s| Text::split(s)).collect();
        let seed = mix64(self.seed ^ hash_bytes(body) ^ u64::from(copy).rotate_left(32));
        if !self.perturb(&mut texts, seed) {
            return None;
        }
        for (slot, text) in slots.iter_mut().zip(&texts) {
            **slot = text.join();
        }
        serde_json::to_vec(&doc).ok()
    }

    /// `text` (one user message) perturbed, `salt` standing for the copy
    /// number: `None` when no word was chosen. The words chosen depend on
    /// the seed, the text and the salt.
    pub fn apply_text(&self, text: &str, salt: u64) -> Option<String> {
        let mut texts = [Text::split(text)];
        let seed = mix64(self.seed ^ hash_bytes(text.as_bytes()) ^ salt.rotate_left(32));
        self.perturb(&mut texts, seed).then(|| texts[0].join())
    }

    /// Perturbs the chosen words of `texts` in place; false when none was
    /// chosen.
    fn perturb(&self, texts: &mut [Text], seed: u64) -> bool {
        // Every eligible word, as (text, piece) indices, in reading order.
        let eligible: Vec<(usize, usize)> = texts
            .iter()
            .enumerate()
            .flat_map(|(t, text)| text.eligible().map(move |p| (t, p)))
            .collect();
        let chosen = choose(eligible.len(), self.rate, seed);
        if chosen.is_empty() {
            return false;
        }
        match self.mode {
            PerturbMode::Mask => {
                for &i in &chosen {
                    let (t, p) = eligible[i];
                    texts[t].pieces[p] = Piece::Word(self.mask_token.clone());
                }
            }
            PerturbMode::Drop => {
                for &i in &chosen {
                    let (t, p) = eligible[i];
                    texts[t].pieces[p] = Piece::Dropped;
                }
            }
            PerturbMode::Swap => {
                for pair in swap_pairs(&chosen, eligible.len()) {
                    let (a, b) = (eligible[pair.0], eligible[pair.1]);
                    let word_a = texts[a.0].pieces[a.1].clone();
                    let word_b = std::mem::replace(&mut texts[b.0].pieces[b.1], word_a);
                    texts[a.0].pieces[a.1] = word_b;
                }
            }
        }
        true
    }
}

/// `round(rate × n)` distinct indices below `n`, in ascending order, drawn by
/// a partial Fisher–Yates shuffle on a SplitMix64 stream.
fn choose(n: usize, rate: f64, seed: u64) -> Vec<usize> {
    let k = ((rate.clamp(0.0, 1.0) * n as f64).round() as usize).min(n);
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = seed;
    for i in 0..k {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let span = (n - i) as u64;
        let j = i + (mix64(state) % span) as usize;
        order.swap(i, j);
    }
    let mut chosen = order[..k].to_vec();
    chosen.sort_unstable();
    chosen
}

/// The chosen words paired in order (1st with 2nd, 3rd with 4th, …). An odd
/// one out pairs with its nearest unchosen neighbour, so every chosen word
/// moves; with a single eligible word there is nothing to swap with.
fn swap_pairs(chosen: &[usize], n: usize) -> Vec<(usize, usize)> {
    let mut pairs: Vec<(usize, usize)> = chosen.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    if let [.., last] = chosen {
        if chosen.len() % 2 == 1 {
            let neighbour = (last + 1..n)
                .chain((0..*last).rev())
                .find(|i| chosen.binary_search(i).is_err());
            if let Some(other) = neighbour {
                pairs.push((*last, other));
            }
        }
    }
    pairs
}

/// The user text of a chat or completion request, as mutable strings.
fn user_text(doc: &mut Value) -> Vec<&mut String> {
    let mut out = Vec::new();
    let Value::Object(fields) = doc else {
        return out;
    };
    for (key, value) in fields.iter_mut() {
        match (key.as_str(), value) {
            ("prompt", Value::String(s)) => out.push(s),
            ("prompt", Value::Array(items)) => out.extend(items.iter_mut().filter_map(as_string)),
            ("messages", Value::Array(messages)) => {
                for m in messages.iter_mut().filter(|m| m["role"] == "user") {
                    match m.get_mut("content") {
                        Some(Value::String(s)) => out.push(s),
                        Some(Value::Array(parts)) => {
                            for part in parts.iter_mut().filter(|p| p["type"] == "text") {
                                if let Some(Value::String(s)) = part.get_mut("text") {
                                    out.push(s);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn as_string(v: &mut Value) -> Option<&mut String> {
    match v {
        Value::String(s) => Some(s),
        _ => None,
    }
}
