//! `context_sweep:`: the prompt length grown stage by stage, to find where
//! a model server stops answering well (its context window). Pure: the
//! stage lengths, and the judgement of a run's stages.

use serde::{Deserialize, Serialize};

/// `context_sweep: { from, to, steps }`, validated: `from < to`, `steps >= 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextSweep {
    pub from: u64,
    /// 0 with `to_auto` until [`ContextSweep::resolve`] sets it.
    pub to: u64,
    pub steps: u64,
    /// `to: auto`: `to` is the model's context, asked of the target before
    /// the run ([`context_from_props`], [`context_from_models`]).
    pub to_auto: bool,
}

impl ContextSweep {
    /// The prompt length of `stage`: `from` to `to` in equal steps, the
    /// first stage `from` and the last `to` (rounded to a token).
    pub fn input_tokens(&self, stage: usize) -> u64 {
        let last = self.steps.saturating_sub(1).max(1);
        let i = (stage as u64).min(last);
        let span = self.to.saturating_sub(self.from) as f64;
        self.from + (span * i as f64 / last as f64).round() as u64
    }

    /// `to: auto` made whole: `to` is the model's `context` (in tokens),
    /// read from `source`; it must be above `from`.
    pub fn resolve(&mut self, context: u64, source: &str) -> Result<(), String> {
        if context <= self.from {
            return Err(format!(
                "context_sweep.to: auto: the model's context is {context} tokens ({source}), \
                 not above context_sweep.from ({})",
                self.from
            ));
        }
        self.to = context;
        Ok(())
    }
}

/// The context size in llama.cpp's `GET /props`:
/// `default_generation_settings.n_ctx` (a slot's context: what one request
/// may fill); `None` when absent or 0.
pub(crate) fn context_from_props(body: &[u8]) -> Option<u64> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    doc["default_generation_settings"]["n_ctx"]
        .as_u64()
        .filter(|n| *n > 0)
}

/// The context size in vLLM's `GET /v1/models`: `data[0].max_model_len`;
/// `None` when absent or 0.
pub(crate) fn context_from_models(body: &[u8]) -> Option<u64> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    doc["data"][0]["max_model_len"].as_u64().filter(|n| *n > 0)
}

/// A stage's TTFT p50 is a jump when its TTFT per input token is more
/// than this times the previous stage's (prefill grows with the prompt, so
/// a longer prompt alone is no jump: a server that starts to queue, swap or
/// recompute is)...
pub const TTFT_JUMP_FACTOR: f64 = 2.0;
/// ...and its TTFT p50 is more than this many ms above the previous one
/// (so that a 3 ms → 7 ms step on an idle server is no jump).
pub const TTFT_JUMP_MIN_MS: f64 = 100.0;

/// One stage of a sweep as measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepStage {
    pub stage: usize,
    /// The prompt length this stage sent.
    pub input_tokens: u64,
    pub requests: u64,
    /// Failed requests (429s apart).
    pub errors: u64,
    /// Answers cut by the context: `finish_reason: length` before
    /// `max_tokens`, or an error that says the prompt is past the context.
    pub truncations: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ttft_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95_ttft_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_itl_ms: Option<f64>,
}

/// Why a stage is the sweep's context limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitReason {
    Errors,
    Truncations,
    TtftJump,
}

impl LimitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitReason::Errors => "errors",
            LimitReason::Truncations => "truncations",
            LimitReason::TtftJump => "TTFT jump",
        }
    }
}

/// The first stage where the server stopped answering well.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextLimit {
    pub stage: usize,
    pub input_tokens: u64,
    pub reason: LimitReason,
}

/// `context_sweep` in a run's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    pub from: u64,
    pub to: u64,
    pub steps: u64,
    pub stages: Vec<SweepStage>,
    /// `None` when every stage answered well.
    pub context_limit: Option<ContextLimit>,
}

impl SweepResult {
    /// The stages as a text table against input tokens, the limit marked
    /// (`sluice report` says it on stderr).
    pub fn table(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}"));
        let mut out = format!(
            "{:>5}  {:>12}  {:>8}  {:>6}  {:>11}  {:>11}  {:>11}  {:>11}\n",
            "stage",
            "input tokens",
            "requests",
            "errors",
            "truncations",
            "TTFT p50 ms",
            "TTFT p95 ms",
            "gap p99 ms"
        );
        for st in &self.stages {
            let mark = match &self.context_limit {
                Some(l) if l.stage == st.stage => "  <- context limit",
                _ => "",
            };
            out += &format!(
                "{:>5}  {:>12}  {:>8}  {:>6}  {:>11}  {:>11}  {:>11}  {:>11}{mark}\n",
                st.stage,
                st.input_tokens,
                st.requests,
                st.errors,
                st.truncations,
                ms(st.p50_ttft_ms),
                ms(st.p95_ttft_ms),
                ms(st.p99_itl_ms)
            );
        }
        out += &match &self.context_limit {
            Some(l) => format!(
                "context limit: {} input tokens (stage {}: {})\n",
                l.input_tokens,
                l.stage,
                l.reason.as_str()
            ),
            None => format!(
                "no context limit from {} to {} input tokens\n",
                self.from, self.to
            ),
        };
        out
    }
}

/// The first stage with errors or truncations, or whose TTFT p50 jumped:
/// per input token more than [`TTFT_JUMP_FACTOR`] × the previous stage's,
/// and more than [`TTFT_JUMP_MIN_MS`] above it. Stages in order of their
/// length; one without a TTFT (nothing answered) is passed over.
pub fn context_limit(stages: &[SweepStage]) -> Option<ContextLimit> {
    // The previous stage's TTFT p50 and its input tokens.
    let mut previous: Option<(f64, u64)> = None;
    for s in stages {
        let jumped = match (previous, s.p50_ttft_ms) {
            (Some((before, tokens)), Some(now)) => {
                let per_token = |ms: f64, n: u64| ms / n.max(1) as f64;
                per_token(now, s.input_tokens) > TTFT_JUMP_FACTOR * per_token(before, tokens)
                    && now > before + TTFT_JUMP_MIN_MS
            }
            _ => false,
        };
        let reason = if s.truncations > 0 {
            Some(LimitReason::Truncations)
        } else if s.errors > 0 {
            Some(LimitReason::Errors)
        } else if jumped {
            Some(LimitReason::TtftJump)
        } else {
            None
        };
        if let Some(reason) = reason {
            return Some(ContextLimit {
                stage: s.stage,
                input_tokens: s.input_tokens,
                reason,
            });
        }
        if let Some(p50) = s.p50_ttft_ms {
            previous = Some((p50, s.input_tokens));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(i: usize, tokens: u64, errors: u64, truncations: u64, p50: f64) -> SweepStage {
        SweepStage {
            stage: i,
            input_tokens: tokens,
            requests: 4,
            errors,
            truncations,
            p50_ttft_ms: Some(p50),
            p95_ttft_ms: Some(p50 * 1.2),
            p99_itl_ms: Some(12.0),
        }
    }

    #[test]
    fn stage_lengths_run_from_from_to_to_in_equal_steps() {
        let s = ContextSweep {
            from: 128,
            to: 1024,
            steps: 4,
            to_auto: false,
        };
        let lengths: Vec<u64> = (0..4).map(|i| s.input_tokens(i)).collect();
        // 896 / 3 = 298.67 per step, rounded.
        assert_eq!(lengths, [128, 427, 725, 1024]);
        let s = ContextSweep {
            from: 256,
            to: 4096,
            steps: 8,
            to_auto: false,
        };
        let lengths: Vec<u64> = (0..8).map(|i| s.input_tokens(i)).collect();
        assert_eq!(lengths, [256, 805, 1353, 1902, 2450, 2999, 3547, 4096]);
    }

    #[test]
    fn the_first_stage_with_errors_is_the_limit() {
        let stages = [
            stage(0, 128, 0, 0, 40.0),
            stage(1, 427, 0, 0, 60.0),
            stage(2, 725, 4, 4, 0.5),
            stage(3, 1024, 4, 0, 0.5),
        ];
        assert_eq!(
            context_limit(&stages),
            Some(ContextLimit {
                stage: 2,
                input_tokens: 725,
                reason: LimitReason::Truncations
            })
        );
        // Errors without a context message: errors.
        let stages = [stage(0, 128, 0, 0, 40.0), stage(1, 427, 1, 0, 50.0)];
        assert_eq!(
            context_limit(&stages).map(|l| (l.stage, l.reason)),
            Some((1, LimitReason::Errors))
        );
    }

    #[test]
    fn a_ttft_jump_needs_twice_the_time_per_token_and_100_ms_more() {
        // Twice the prompt, twice the TTFT: prefill, no jump.
        let linear = [stage(0, 256, 0, 0, 400.0), stage(1, 512, 0, 0, 800.0)];
        assert_eq!(context_limit(&linear), None);
        // The same length, 40 → 90 ms: over twice per token, but only 50 ms
        // more: no jump.
        let small = [stage(0, 256, 0, 0, 40.0), stage(1, 256, 0, 0, 90.0)];
        assert_eq!(context_limit(&small), None);
        // 300 → 1000 ms for twice the prompt: 1.67× per token: no jump.
        let slow = [stage(0, 256, 0, 0, 300.0), stage(1, 512, 0, 0, 1000.0)];
        assert_eq!(context_limit(&slow), None);
        // 100 → 200 → 900 ms over 256, 512, 768 tokens: the third is 3× per
        // token and 700 ms more: the jump, at the third stage.
        let jump = [
            stage(0, 256, 0, 0, 100.0),
            stage(1, 512, 0, 0, 200.0),
            stage(2, 768, 0, 0, 900.0),
        ];
        assert_eq!(
            context_limit(&jump),
            Some(ContextLimit {
                stage: 2,
                input_tokens: 768,
                reason: LimitReason::TtftJump
            })
        );
        // A stage without a TTFT (nothing answered) is compared past: 900 ms
        // at 768 against 100 ms at 256 is 3× per token.
        let mut gap = jump.clone();
        gap[1].p50_ttft_ms = None;
        assert_eq!(context_limit(&gap).map(|l| l.stage), Some(2));
    }

    #[test]
    fn the_context_size_is_read_from_llama_cpp_props_or_vllm_models() {
        // llama.cpp's /props (trimmed; the real server's keys around it).
        let props =
            br#"{"default_generation_settings": {"n_ctx": 512, "params": {"n_predict": -1}},
            "total_slots": 1, "model_path": "smollm2.gguf"}"#;
        assert_eq!(context_from_props(props), Some(512));
        // vLLM's /v1/models.
        let models = br#"{"object": "list", "data": [{"id": "m", "object": "model",
            "max_model_len": 32768}, {"id": "lora", "max_model_len": 4096}]}"#;
        assert_eq!(context_from_models(models), Some(32768));
        // Neither one's shape, a 0, or not JSON: no size.
        assert_eq!(context_from_props(models), None);
        assert_eq!(context_from_models(props), None);
        assert_eq!(
            context_from_props(br#"{"default_generation_settings": {"n_ctx": 0}}"#),
            None
        );
        assert_eq!(context_from_models(br#"{"data": []}"#), None);
        assert_eq!(context_from_props(b"<html>"), None);
    }

    #[test]
    fn an_auto_sweep_takes_the_context_above_its_from() {
        let mut s = ContextSweep {
            from: 128,
            to: 0,
            steps: 4,
            to_auto: true,
        };
        assert_eq!(
            s.resolve(100, "GET /props"),
            Err(
                "context_sweep.to: auto: the model's context is 100 tokens (GET /props), \
                 not above context_sweep.from (128)"
                    .to_owned()
            )
        );
        assert_eq!(s.resolve(512, "GET /props"), Ok(()));
        let lengths: Vec<u64> = (0..4).map(|i| s.input_tokens(i)).collect();
        assert_eq!(lengths, [128, 256, 384, 512]);
    }
}
