//! The summary of a group of requests (a step, a stage, the run): counts,
//! HDR histograms in µs, and vLLM's field names in ms.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};
use hdrhistogram::Histogram;
use serde::Serialize;

use super::Goodput;
use crate::load::client::{Cache, Failure, Outcome};

/// The histograms' range: 1 µs to an hour, three significant digits.
const HIGHEST_US: u64 = 3_600_000_000;
const SIGFIG: u8 = 3;
/// A request sent more than this after its intended time is `late`.
pub(crate) const LATE_US: u64 = 1000;

/// The measures, by the name of their fields (`mean_ttft_ms`) and histograms
/// (`ttft_us`). `e2el` is the response time: end − intended.
pub const MEASURES: [&str; 7] = [
    "ttft",
    "ttft_sent",
    "tpot",
    "itl",
    "e2el",
    "service_time",
    "dispatch_lag",
];

#[derive(Clone, Debug)]
pub(crate) struct Group {
    hists: Vec<Histogram<u64>>,
    pub(crate) requests: u64,
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    pub(crate) rate_limited: u64,
    pub(crate) timeouts: u64,
    pub(crate) queued: u64,
    pub(crate) late: u64,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) output_tokens_estimated: bool,
    pub(crate) good: u64,
    pub(crate) cache_hits: u64,
    pub(crate) cache_misses: u64,
    /// Failed grpc calls by their `grpc-status`.
    pub(crate) grpc_errors: BTreeMap<u32, u64>,
    /// Answers cut by the model's context (see `Outcome::truncated`).
    pub(crate) truncated: u64,
    /// The KV-cache ratios the proxy reported: how many, their sum, the largest.
    pub(crate) kv_samples: u64,
    pub(crate) kv_sum: f64,
    pub(crate) kv_max: f64,
}

/// One group as written to the result file.
#[derive(Clone, Debug, Serialize)]
pub struct GroupSummary {
    pub requests: u64,
    pub completed: u64,
    /// Failed for any reason but 429.
    pub failed: u64,
    pub rate_limited: u64,
    pub timeouts: u64,
    pub queued: u64,
    /// Sent more than 1 ms after the intended time.
    pub late: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    /// Requests that met every goodput bound.
    pub good: u64,
    /// Redis replies that were not nil (a cache hit).
    pub cache_hits: u64,
    /// Redis replies that were nil (a cache miss).
    pub cache_misses: u64,
    /// grpc calls answered with a `grpc-status` other than 0, by that
    /// status (`{"14": 3}`); counted in `failed` (8 in `rate_limited`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_errors: BTreeMap<String, u64>,
    /// Answers cut by the model's context: `finish_reason: length` before
    /// `max_tokens`, or an error saying the prompt is past the context.
    pub truncated: u64,
    /// Requests whose answer carried the serving endpoint's KV-cache ratio
    /// (a sluice proxy's `x-sluice-kvcache-ratio`); their mean and largest
    /// are `mean_kvcache_ratio` and `max_kvcache_ratio`.
    #[serde(skip_serializing_if = "is_zero")]
    pub kvcache_ratio_samples: u64,
    /// The output counts are counted chunks for some answers (no usage).
    pub output_tokens_estimated: bool,
    /// `request_throughput`, `mean_ttft_ms`, `p99_itl_ms`, …
    #[serde(flatten)]
    pub metrics: BTreeMap<String, f64>,
    /// Base64 of each histogram in HdrHistogram's V2 format, µs.
    pub histograms: BTreeMap<String, String>,
}

impl Group {
    pub(crate) fn new() -> Group {
        // Fixed, valid bounds: the histograms are always made.
        Group {
            hists: MEASURES
                .iter()
                .filter_map(|_| Histogram::new_with_bounds(1, HIGHEST_US, SIGFIG).ok())
                .collect(),
            requests: 0,
            completed: 0,
            failed: 0,
            rate_limited: 0,
            timeouts: 0,
            queued: 0,
            late: 0,
            input_tokens: 0,
            output_tokens: 0,
            output_tokens_estimated: false,
            good: 0,
            cache_hits: 0,
            cache_misses: 0,
            grpc_errors: BTreeMap::new(),
            truncated: 0,
            kv_samples: 0,
            kv_sum: 0.0,
            kv_max: 0.0,
        }
    }

    fn record(&mut self, measure: usize, us: u64) {
        if let Some(h) = self.hists.get_mut(measure) {
            h.saturating_record(us.max(1));
        }
    }

    pub(crate) fn add(&mut self, o: &Outcome, goodput: &Goodput) {
        self.requests += 1;
        self.queued += u64::from(o.queued);
        let lag = o.sent_us.saturating_sub(o.intended_us);
        self.late += u64::from(lag > LATE_US);
        self.record(6, lag);
        self.truncated += u64::from(o.truncated);
        if let Some(r) = o.kvcache_ratio {
            self.kv_samples += 1;
            self.kv_sum += r;
            self.kv_max = self.kv_max.max(r);
        }
        match o.failure {
            Some(Failure::RateLimited) => self.rate_limited += 1,
            Some(f) => {
                self.failed += 1;
                self.timeouts += u64::from(f == Failure::Timeout);
            }
            None => {}
        }
        if o.failure.is_some() {
            if let Some(code) = o.grpc.as_ref().and_then(|g| g.status).filter(|c| *c != 0) {
                *self.grpc_errors.entry(code).or_insert(0) += 1;
            }
            return;
        }
        self.completed += 1;
        self.cache_hits += u64::from(o.cache == Some(Cache::Hit));
        self.cache_misses += u64::from(o.cache == Some(Cache::Miss));
        self.input_tokens += o.input_tokens.unwrap_or(0);
        self.output_tokens += o.output_tokens.unwrap_or(0);
        self.output_tokens_estimated |= o.output_tokens_estimated;
        let e2el = o.e2el_us();
        self.record(4, e2el);
        self.record(5, o.end_us.saturating_sub(o.sent_us));
        let ttft = o.ttft_us();
        let tpot = o.tpot_us();
        if let (Some(t), Some(f)) = (ttft, o.first_content_us) {
            self.record(0, t);
            self.record(1, f.saturating_sub(o.sent_us));
        }
        if let Some(t) = tpot {
            self.record(2, t);
        }
        for g in &o.gaps_us {
            self.record(3, *g);
        }
        let ms = |us: u64| us as f64 / 1000.0;
        let meets = |bound: Option<f64>, value: Option<u64>| match (bound, value) {
            (None, _) => true,
            (Some(b), Some(v)) => ms(v) <= b,
            // A bound on a measure the request lacks (no tokens) holds.
            (Some(_), None) => true,
        };
        if meets(goodput.ttft_ms, ttft)
            && meets(goodput.tpot_ms, tpot)
            && meets(goodput.e2el_ms, Some(e2el))
        {
            self.good += 1;
        }
    }

    /// A group back from its summary in a result file: the counts, and the
    /// histograms decoded (exact: what was recorded).
    pub(crate) fn read(v: &serde_json::Value) -> Result<Group, String> {
        let mut g = Group::new();
        let count = |key: &str| {
            v.get(key)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("`{key}` is missing or not a count"))
        };
        g.requests = count("requests")?;
        g.completed = count("completed")?;
        g.failed = count("failed")?;
        g.rate_limited = count("rate_limited")?;
        g.timeouts = count("timeouts")?;
        g.queued = count("queued")?;
        g.late = count("late")?;
        g.input_tokens = count("total_input_tokens")?;
        g.output_tokens = count("total_output_tokens")?;
        g.output_tokens_estimated = v
            .get("output_tokens_estimated")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        // Absent from result files written before redis steps: 0.
        let optional = |key: &str| v.get(key).and_then(serde_json::Value::as_u64).unwrap_or(0);
        g.cache_hits = optional("cache_hits");
        g.cache_misses = optional("cache_misses");
        // Absent from result files written before them: none.
        g.truncated = optional("truncated");
        g.kv_samples = optional("kvcache_ratio_samples");
        let metric = |key: &str| v.get(key).and_then(serde_json::Value::as_f64);
        if g.kv_samples > 0 {
            g.kv_sum = metric("mean_kvcache_ratio").unwrap_or(0.0) * g.kv_samples as f64;
            g.kv_max = metric("max_kvcache_ratio").unwrap_or(0.0);
        }
        // Absent without grpc errors (and before grpc steps).
        if let Some(errors) = v.get("grpc_errors").and_then(serde_json::Value::as_object) {
            for (code, n) in errors {
                let read = (code.parse::<u32>().ok(), n.as_u64());
                let (Some(code), Some(n)) = read else {
                    return Err(format!("grpc_errors.{code}: not a status and a count"));
                };
                g.grpc_errors.insert(code, n);
            }
        }
        g.good = match v.get("good").and_then(serde_json::Value::as_u64) {
            Some(n) => n,
            None => return Err("`good` is missing or not a count".to_owned()),
        };
        let hists = v.get("histograms").and_then(serde_json::Value::as_object);
        for (name, h) in MEASURES.iter().zip(g.hists.iter_mut()) {
            let Some(text) = hists.and_then(|o| o.get(&format!("{name}_us"))) else {
                continue;
            };
            let bytes = text
                .as_str()
                .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
                .ok_or_else(|| format!("histograms.{name}_us: not base64"))?;
            let read: Histogram<u64> = Deserializer::new()
                .deserialize(&mut bytes.as_slice())
                .map_err(|e| format!("histograms.{name}_us: {e:?}"))?;
            h.add(&read)
                .map_err(|e| format!("histograms.{name}_us: {e:?}"))?;
        }
        Ok(g)
    }

    /// Adds `other`'s counts and histograms.
    pub(crate) fn merge(&mut self, other: &Group) -> Result<(), String> {
        for (h, o) in self.hists.iter_mut().zip(&other.hists) {
            h.add(o).map_err(|e| format!("{e:?}"))?;
        }
        self.requests += other.requests;
        self.completed += other.completed;
        self.failed += other.failed;
        self.rate_limited += other.rate_limited;
        self.timeouts += other.timeouts;
        self.queued += other.queued;
        self.late += other.late;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.output_tokens_estimated |= other.output_tokens_estimated;
        self.good += other.good;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
        self.truncated += other.truncated;
        self.kv_samples += other.kv_samples;
        self.kv_sum += other.kv_sum;
        self.kv_max = self.kv_max.max(other.kv_max);
        for (code, n) in &other.grpc_errors {
            *self.grpc_errors.entry(*code).or_insert(0) += n;
        }
        Ok(())
    }

    /// Quantile `q` of a measure in ms, `None` without samples.
    pub(crate) fn quantile_ms(&self, measure: &str, q: f64) -> Option<f64> {
        let i = MEASURES.iter().position(|m| *m == measure)?;
        let h = self.hists.get(i)?;
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
    }

    pub(crate) fn summary(&self, duration_s: f64) -> GroupSummary {
        let mut metrics = BTreeMap::new();
        let per_s = |x: u64| {
            if duration_s > 0.0 {
                x as f64 / duration_s
            } else {
                0.0
            }
        };
        metrics.insert("duration".to_owned(), duration_s);
        metrics.insert("request_throughput".to_owned(), per_s(self.completed));
        metrics.insert("request_goodput".to_owned(), per_s(self.good));
        metrics.insert("output_throughput".to_owned(), per_s(self.output_tokens));
        metrics.insert(
            "total_token_throughput".to_owned(),
            per_s(self.output_tokens + self.input_tokens),
        );
        if self.kv_samples > 0 {
            metrics.insert(
                "mean_kvcache_ratio".to_owned(),
                self.kv_sum / self.kv_samples as f64,
            );
            metrics.insert("max_kvcache_ratio".to_owned(), self.kv_max);
        }
        let mut histograms = BTreeMap::new();
        for (name, h) in MEASURES.iter().zip(&self.hists) {
            if h.is_empty() {
                continue;
            }
            let ms = |us: f64| us / 1000.0;
            metrics.insert(format!("mean_{name}_ms"), ms(h.mean()));
            metrics.insert(format!("std_{name}_ms"), ms(h.stdev()));
            metrics.insert(
                format!("median_{name}_ms"),
                ms(h.value_at_quantile(0.5) as f64),
            );
            for (p, q) in [("p90", 0.90), ("p95", 0.95), ("p99", 0.99)] {
                metrics.insert(format!("{p}_{name}_ms"), ms(h.value_at_quantile(q) as f64));
            }
            metrics.insert(format!("max_{name}_ms"), ms(h.max() as f64));
            let mut bytes = Vec::new();
            if V2Serializer::new().serialize(h, &mut bytes).is_ok() {
                histograms.insert(
                    format!("{name}_us"),
                    base64::engine::general_purpose::STANDARD.encode(&bytes),
                );
            }
        }
        GroupSummary {
            requests: self.requests,
            completed: self.completed,
            failed: self.failed,
            rate_limited: self.rate_limited,
            timeouts: self.timeouts,
            queued: self.queued,
            late: self.late,
            total_input_tokens: self.input_tokens,
            total_output_tokens: self.output_tokens,
            good: self.good,
            cache_hits: self.cache_hits,
            cache_misses: self.cache_misses,
            grpc_errors: self
                .grpc_errors
                .iter()
                .map(|(code, n)| (code.to_string(), *n))
                .collect(),
            truncated: self.truncated,
            kvcache_ratio_samples: self.kv_samples,
            output_tokens_estimated: self.output_tokens_estimated,
            metrics,
            histograms,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
