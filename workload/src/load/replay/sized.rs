//! A recorded LLM request without a body (a Mooncake, Azure or BurstGPT
//! trace, or a recording made with `bodies: none`) is replayed as a
//! streamed completion whose prompt is sized to its recorded
//! `input_tokens` with [`sized_prompt`]'s filler words and whose
//! `max_tokens` is its recorded `output_tokens`. The filler is seeded by
//! the run's seed and the row, so two runs with one seed send the same
//! bodies; a row's `hash_ids` blocks each draw their filler from the block
//! id, so rows that share leading blocks share that prefix, as Mooncake
//! traces mean them to (a prefix cache then hits as it did).

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use sluice_filters::{mix64, TraceLine};

use crate::load::prompt::sized_prompt;
use crate::load::scenario::Step;

/// Tokens of one `hash_ids` block: Mooncake's 512 (sluice's blocks of
/// 2048 bytes are about as many).
pub const HASH_BLOCK_TOKENS: u64 = 512;

/// Mixed into the seed of a block's filler and of a row's own filler, so
/// the two streams never coincide.
const BLOCK_FILLER: u64 = 0x0042_4c4f_434b; // "BLOCK"
const ROW_FILLER: u64 = 0x0052_4f57; // "ROW"

/// Which OpenAI API a bodiless row is sent as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlmApi {
    /// `messages: [{role: user, content: PROMPT}]`.
    Chat,
    /// `prompt: PROMPT` (the row's path or operation says completions).
    Completions,
}

/// What a bodiless LLM row's request is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizedPrompt {
    pub api: LlmApi,
    pub input_tokens: u64,
    /// `max_tokens` when known.
    pub output_tokens: Option<u64>,
    pub hash_ids: Vec<u64>,
    /// The recorded model, when the trace has it.
    pub model: Option<String>,
}

impl SizedPrompt {
    /// For a row without a body that has `input_tokens` and is an LLM
    /// request: its path ends in `/chat/completions` or `/completions`, or
    /// its operation is `chat` or `text_completion`, or it has neither path
    /// nor operation (the public traces record LLM requests alone). Any
    /// other row is sent as recorded.
    pub fn of(line: &TraceLine) -> Option<SizedPrompt> {
        if line.body.is_some() {
            return None;
        }
        let input_tokens = line.input_tokens?;
        let path = line
            .path
            .as_deref()
            .map(|p| p.split('?').next().unwrap_or(p));
        let api = match (path, line.operation.as_deref()) {
            (None, None) => LlmApi::Chat,
            (Some(p), _) if p.ends_with("/chat/completions") => LlmApi::Chat,
            (Some(p), _) if p.ends_with("/completions") => LlmApi::Completions,
            (_, Some("chat")) => LlmApi::Chat,
            (_, Some("text_completion")) => LlmApi::Completions,
            _ => return None,
        };
        Some(SizedPrompt {
            api,
            input_tokens,
            output_tokens: line.output_tokens,
            hash_ids: line.hash_ids.clone(),
            model: line.model.clone(),
        })
    }

    /// The prompt: `input_tokens` filler words (one token each), the
    /// first [`HASH_BLOCK_TOKENS`] of each hash block drawn from the block
    /// id, the rest (past the blocks) from the row (`row`, the request's
    /// index in the recording), each mixed with `seed`.
    pub fn prompt(&self, seed: u64, row: u64) -> String {
        let mut out = String::new();
        let mut left = self.input_tokens;
        for id in &self.hash_ids {
            if left == 0 {
                break;
            }
            let n = left.min(HASH_BLOCK_TOKENS);
            let mut rng = StdRng::seed_from_u64(mix64(seed ^ mix64(id ^ BLOCK_FILLER)));
            out.push_str(&sized_prompt("", n, &mut rng));
            left -= n;
        }
        if left > 0 {
            let mut rng = StdRng::seed_from_u64(mix64(seed ^ mix64(row ^ ROW_FILLER)));
            out.push_str(&sized_prompt("", left, &mut rng));
        }
        out
    }

    /// The request body, streamed with usage as an llm step's: the model is
    /// `replay_step.model`, else the recorded one, else `default`; with
    /// `replay_step.ignore_eos`, `"ignore_eos": true`.
    pub fn body(&self, step: &Step, seed: u64, row: u64) -> Vec<u8> {
        let model = step
            .model
            .as_deref()
            .or(self.model.as_deref())
            .unwrap_or("default");
        let prompt = self.prompt(seed, row);
        let mut body = match self.api {
            LlmApi::Chat => json!({
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
            }),
            LlmApi::Completions => json!({"model": model, "prompt": prompt}),
        };
        body["stream"] = Value::Bool(true);
        body["stream_options"] = json!({"include_usage": true});
        if let Some(n) = self.output_tokens {
            body["max_tokens"] = json!(n);
        }
        if step.ignore_eos {
            body["ignore_eos"] = Value::Bool(true);
        }
        body.to_string().into_bytes()
    }
}
