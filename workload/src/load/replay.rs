//! Replay from a trace, the pure part: the recorded requests (sorted by
//! `arrival_us`), a window of them (`--from` / `--to`), whole-session
//! sampling (`--sample`) and the speed (`--speed`), made into one up-front
//! [`Schedule`] whose arrival k is the k-th journey: a session (its
//! requests in recorded order, each at its recorded offset) or one request
//! without a `session_id`. Shards then take journey k mod n as for any
//! schedule, so a session is never split between shards.
//!
//! Pure: the caller passes the trace's rows and the seed.

use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use sluice_filters::{mix64, parse_wall_clock, TraceLine};

use super::schedule::{Intended, Schedule};
use crate::trace::{prompt_of, quantised_warning, PromptField};

mod sized;

pub use sized::{LlmApi, SizedPrompt, HASH_BLOCK_TOKENS};

/// One recorded request, as the replay sends it.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// µs from the start of the recording.
    pub arrival_us: u64,
    /// The arrival's wall clock, µs since the epoch, when the trace has it.
    pub wall_us: Option<i64>,
    pub session: Option<String>,
    pub method: String,
    pub path: String,
    /// The recorded (redacted) body, with `max_tokens` set from the
    /// recorded `output_tokens` where known.
    pub body: Option<Vec<u8>>,
    /// The scenario's step it is measured as: 0 ([`crate::REPLAY_STEP`])
    /// for the trace's own requests, another for a feedback scenario mixed
    /// in (see `crate::feedback`).
    pub step: usize,
    /// An LLM request recorded without a body: sent with a prompt of its
    /// recorded size, built when it is sent.
    pub sized: Option<SizedPrompt>,
}

/// A trace ready to replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// By `arrival_us`, ties in file order.
    pub requests: Vec<Recorded>,
    /// [`quantised_warning`], when it applies.
    pub warnings: Vec<String>,
}

/// Where a window of the trace begins or ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// From the first recorded arrival.
    Offset(Duration),
    /// A wall-clock time (µs since the epoch): the trace needs `arrival`.
    Wall(i64),
}

impl Bound {
    /// `30s` (an offset) or an RFC 3339 time.
    pub fn parse(text: &str) -> Result<Bound, String> {
        if text.as_bytes().get(4) == Some(&b'-') {
            return parse_wall_clock(text).map(Bound::Wall);
        }
        sluice_filters::parse_duration(text)
            .map(Bound::Offset)
            .map_err(|e| format!("`{text}` is neither an offset like 30s nor RFC 3339 ({e})"))
    }
}

/// `--speed`, `--from`, `--to`, `--sample`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayOptions {
    /// 2: twice as fast (every gap halved).
    pub speed: f64,
    pub from: Option<Bound>,
    pub to: Option<Bound>,
    /// The share of sessions kept (requests without a session one by one).
    pub sample: Option<f64>,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            speed: 1.0,
            from: None,
            to: None,
            sample: None,
        }
    }
}

/// One request of a journey: which recorded request, and when (µs from the
/// run's start, after the window and the speed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    pub request: usize,
    pub at_us: u64,
}

/// What the engine runs: the schedule (one arrival per journey) and each
/// journey's requests, journey k for arrival index k.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    pub schedule: Schedule,
    pub journeys: Vec<Vec<Planned>>,
}

impl Replay {
    /// The journeys that start within the first `warmup` of the replay are
    /// sent and kept out of every summary.
    pub fn with_warmup(mut self, warmup: Duration) -> Replay {
        let warmup_us = u64::try_from(warmup.as_micros()).unwrap_or(u64::MAX);
        for a in &mut self.schedule.arrivals {
            a.warmup = a.at_us < warmup_us;
        }
        self
    }
}

impl Recording {
    /// From the rows of a trace, in any order.
    pub fn from_lines(lines: Vec<TraceLine>) -> Result<Recording, String> {
        if lines.is_empty() {
            return Err("has no requests".to_owned());
        }
        let mut requests: Vec<Recorded> = lines.into_iter().map(recorded).collect();
        requests.sort_by_key(|r| r.arrival_us);
        let times: Vec<u64> = requests.iter().map(|r| r.arrival_us).collect();
        Ok(Recording {
            requests,
            warnings: quantised_warning(&times).into_iter().collect(),
        })
    }

    /// The journeys of `options` (seeded sampling), as a schedule.
    pub fn plan(&self, options: &ReplayOptions, seed: u64) -> Result<Replay, String> {
        let speed = options.speed;
        if !(speed.is_finite() && speed > 0.0) {
            return Err(format!("--speed: must be a number > 0, found {speed}"));
        }
        if let Some(f) = options.sample.filter(|f| !(*f > 0.0 && *f <= 1.0)) {
            return Err(format!("--sample: must be within (0, 1], found {f}"));
        }
        let first = self.requests.first().map_or(0, |r| r.arrival_us);
        let from = self.offset(options.from, first, "--from")?.unwrap_or(0);
        let to = self.offset(options.to, first, "--to")?;
        if to.is_some_and(|t| t <= from) {
            return Err("--to: must be after --from".to_owned());
        }
        let scaled = |offset: u64| ((offset - from) as f64 / speed).round() as u64;
        let mut journeys: Vec<Vec<Planned>> = Vec::new();
        let mut session_of: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::new();
        for (i, r) in self.requests.iter().enumerate() {
            let offset = r.arrival_us - first;
            if offset < from || to.is_some_and(|t| offset >= t) {
                continue;
            }
            let key = match &r.session {
                Some(s) => format!("s{s}"),
                None => format!("r{i}"),
            };
            if let Some(share) = options.sample {
                if unit(seed, &key) >= share {
                    continue;
                }
            }
            let planned = Planned {
                request: i,
                at_us: scaled(offset),
            };
            match r.session.as_deref().and_then(|s| session_of.get(s)) {
                Some(&k) => journeys[k].push(planned),
                None => {
                    if let Some(s) = r.session.as_deref() {
                        session_of.insert(s, journeys.len());
                    }
                    journeys.push(vec![planned]);
                }
            }
        }
        if journeys.is_empty() {
            return Err("no recorded request is left in the window and the sample".to_owned());
        }
        // Journeys start in time order; ties in file order, as recorded.
        let last = journeys
            .iter()
            .flatten()
            .map(|p| p.at_us)
            .max()
            .unwrap_or(0);
        let span_us = to.map_or(last, |t| scaled(t).max(last));
        let arrivals = journeys
            .iter()
            .enumerate()
            .map(|(k, j)| Intended {
                index: k as u64,
                at_us: j.first().map_or(0, |p| p.at_us),
                stage: 0,
                warmup: false,
            })
            .collect();
        Ok(Replay {
            schedule: Schedule { arrivals, span_us },
            journeys,
        })
    }

    /// A bound as µs from the first arrival.
    fn offset(&self, bound: Option<Bound>, first: u64, flag: &str) -> Result<Option<u64>, String> {
        match bound {
            None => Ok(None),
            Some(Bound::Offset(d)) => Ok(Some(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))),
            Some(Bound::Wall(at)) => {
                let start = self
                    .requests
                    .first()
                    .and_then(|r| r.wall_us.map(|w| w - (r.arrival_us - first) as i64))
                    .ok_or_else(|| {
                        format!("{flag}: an RFC 3339 time needs `arrival` in the trace; give an offset like 30s")
                    })?;
                Ok(Some(u64::try_from(at - start).unwrap_or(0)))
            }
        }
    }
}

/// A uniform number in [0, 1) from the seed and a key: the same for every
/// request of a session, so sampling keeps a session whole or drops it.
pub(crate) fn unit(seed: u64, key: &str) -> f64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut word = [0u8; 8];
    word.copy_from_slice(&digest[..8]);
    let bits = mix64(seed ^ u64::from_le_bytes(word));
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

pub(crate) fn recorded(line: TraceLine) -> Recorded {
    let sized = SizedPrompt::of(&line);
    let body = line.body.as_ref().map(|b| {
        let text = b.0.get();
        match (serde_json::from_str::<Value>(text), line.output_tokens) {
            (Ok(Value::Object(mut o)), Some(n)) => {
                o.insert("max_tokens".to_owned(), Value::from(n));
                if o.contains_key("max_completion_tokens") {
                    o.insert("max_completion_tokens".to_owned(), Value::from(n));
                }
                Value::Object(o).to_string().into_bytes()
            }
            _ => text.as_bytes().to_vec(),
        }
    });
    Recorded {
        arrival_us: line.arrival_us,
        wall_us: line
            .arrival
            .as_deref()
            .and_then(|a| parse_wall_clock(a).ok()),
        session: line.session_id,
        method: line.method.unwrap_or_else(|| "POST".to_owned()),
        path: line
            .path
            .unwrap_or_else(|| "/v1/chat/completions".to_owned()),
        body,
        step: 0,
        sized,
    }
}

/// The prompts of a trace: of each request's (redacted) body, the last
/// user message of a chat, or the `prompt` of a completion.
pub fn prompts(recording: &Recording) -> Vec<String> {
    recording
        .requests
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(r.body.as_deref()?).ok())
        .filter_map(|body| prompt_of(&body, PromptField::LastUser))
        .collect()
}

#[cfg(test)]
mod tests;
