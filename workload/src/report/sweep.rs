//! The capacity view: a `sluice capacity` result's stages (offered against
//! achieved rate, the knee), each stage's P99 per output token with its
//! fitted slope, and the recommendation; the confirmation stage's run is
//! the load run the rest of the report shows.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::input::{read_run, Run};

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct TokenBin {
    pub tokens: f64,
    pub p99_ms: f64,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct SlaResult {
    pub gate: String,
    pub value: Option<f64>,
    pub bound: f64,
    pub passed: bool,
}

/// One stage as shown (its run is read apart).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Stage {
    pub rate: f64,
    pub achieved_rate: f64,
    pub purpose: String,
    #[serde(default)]
    pub token_throughput: Option<f64>,
    #[serde(default)]
    pub p99_slope_ms_per_token: Option<f64>,
    /// Its 90% bootstrap interval (files before it have none).
    #[serde(default)]
    pub p99_slope_interval: Option<[f64; 2]>,
    #[serde(default)]
    pub p99_excess_ms_per_token: Option<f64>,
    #[serde(default)]
    pub token_bins: Vec<TokenBin>,
    #[serde(default)]
    pub cost_per_1k: Option<f64>,
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub sla: Vec<SlaResult>,
    /// Why the stage was cut short (`over_saturated`): it did not hold.
    #[serde(default)]
    pub early_stop: Option<String>,
    /// The slope's line through the bins: the median of p99 − slope·tokens
    /// (Theil–Sen's intercept).
    #[serde(default, skip_deserializing)]
    pub intercept_ms: Option<f64>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct KneeView {
    pub rate: Option<f64>,
    #[serde(default)]
    pub bound: Option<f64>,
}

/// What the report shows of a capacity search.
#[derive(Clone, Debug, Serialize)]
pub struct Capacity {
    pub max_rate: Option<f64>,
    pub recommended_rate: Option<f64>,
    pub binding: String,
    pub knee: Option<KneeView>,
    pub stages: Vec<Stage>,
    /// The stage whose run the report shows (the confirmation, else the
    /// last).
    pub shown_stage: usize,
}

/// Whether a file is a capacity result.
pub fn is_capacity(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some("capacity")
}

fn intercept(s: &Stage) -> Option<f64> {
    let slope = s.p99_slope_ms_per_token?;
    let mut r: Vec<f64> = s
        .token_bins
        .iter()
        .map(|b| b.p99_ms - slope * b.tokens)
        .collect();
    r.sort_by(f64::total_cmp);
    let n = r.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            r[n / 2]
        } else {
            (r[n / 2 - 1] + r[n / 2]) / 2.0
        }
    })
}

/// A capacity file read, with the run of its shown stage.
pub(crate) fn read_capacity(v: &Value) -> Result<(Capacity, Run), String> {
    let rate = |key: &str| match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("{key}: expected a rate in requests per second, found {x}")),
    };
    let list = v
        .get("stages")
        .and_then(Value::as_array)
        .ok_or("stages: missing or not a list")?;
    let mut stages = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        let mut stage: Stage =
            serde_json::from_value(s.clone()).map_err(|e| format!("stages[{i}]: {e}"))?;
        stage.intercept_ms = intercept(&stage);
        stages.push(stage);
    }
    let shown = stages
        .iter()
        .rposition(|s| s.purpose == "confirm")
        .or_else(|| stages.len().checked_sub(1))
        .ok_or("stages: empty: a capacity search with no stage")?;
    let run = list
        .get(shown)
        .and_then(|s| s.get("run"))
        .ok_or_else(|| format!("stages[{shown}].run: missing"))?;
    let run = read_run(run).map_err(|e| format!("stages[{shown}].run.{e}"))?;
    let knee = match v.get("knee") {
        None | Some(Value::Null) => None,
        Some(k) => Some(serde_json::from_value(k.clone()).map_err(|e| format!("knee: {e}"))?),
    };
    Ok((
        Capacity {
            max_rate: rate("max_rate")?,
            recommended_rate: rate("recommended_rate")?,
            binding: v
                .get("binding")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            knee,
            stages,
            shown_stage: shown,
        },
        run,
    ))
}
