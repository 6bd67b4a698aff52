//! `sluice load merge`: the result files of the n shards of one run into
//! one, exactly: counts are summed and the HDR histograms added, so the
//! merged percentiles are those of one run over all the requests (to the
//! histograms' precision), and the thresholds are judged again on them.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sluice_filters::Gate;

use super::group::Group;
use super::{gate_value, Shard};

/// The merged result, or why the files are not the shards of one run.
pub fn merge_runs(runs: &[Value]) -> Result<Value, String> {
    let first = runs.first().ok_or("no result files to merge")?;
    let text = |v: &Value, key: &str| v.pointer(key).and_then(Value::as_str).map(str::to_owned);
    let mut shards: Vec<Shard> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for key in ["/scenario", "/lineage/scenario_sha256", "/mode"] {
            if text(run, key) != text(first, key) {
                return Err(format!(
                    "file {i}: `{}` is {:?}, not {:?} as in file 0: not a shard of the same run",
                    key.trim_start_matches('/'),
                    text(run, key),
                    text(first, key)
                ));
            }
        }
        if run.get("seed") != first.get("seed") {
            return Err(format!("file {i}: another seed than file 0's"));
        }
        let shard: Shard = text(run, "/shard")
            .ok_or_else(|| format!("file {i}: no `shard`"))?
            .parse()
            .map_err(|e| format!("file {i}: {e}"))?;
        if shards.contains(&shard) {
            return Err(format!("file {i}: shard {shard} is given twice"));
        }
        shards.push(shard);
    }
    let count = shards[0].count;
    if shards.iter().any(|s| s.count != count) || shards.len() != count as usize {
        let given: Vec<String> = shards.iter().map(ToString::to_string).collect();
        return Err(format!(
            "shards {} given: a merge needs each of 0/{count} to {}/{count} once",
            given.join(", "),
            count.saturating_sub(1)
        ));
    }
    let duration = runs
        .iter()
        .filter_map(|r| r.pointer("/summary/duration").and_then(Value::as_f64))
        .fold(0.0, f64::max);
    let group = |v: Option<&Value>, what: &str| -> Result<Group, String> {
        Group::read(v.ok_or_else(|| format!("no `{what}`"))?).map_err(|e| format!("{what}: {e}"))
    };
    let mut run = Group::new();
    let mut steps: Vec<Group> = Vec::new();
    let mut stages: BTreeMap<u64, Group> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let at = |e: String| format!("file {i}: {e}");
        run.merge(&group(r.get("summary"), "summary").map_err(at)?)?;
        let list = r
            .get("steps")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (k, s) in list.iter().enumerate() {
            let g = group(Some(s), &format!("steps[{k}]")).map_err(at)?;
            match steps.get_mut(k) {
                Some(m) => m.merge(&g)?,
                None => steps.push(g),
            }
        }
        for (k, s) in r
            .get("stages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let stage = s.get("stage").and_then(Value::as_u64).unwrap_or(0);
            let g = group(Some(s), &format!("stages[{k}]")).map_err(at)?;
            match stages.get_mut(&stage) {
                Some(m) => m.merge(&g)?,
                None => {
                    stages.insert(stage, g);
                }
            }
        }
    }
    let mut out = first.clone();
    out["summary"] = json!(run.summary(duration));
    let names = first
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    out["steps"] = Value::Array(
        steps
            .iter()
            .zip(&names)
            .map(|(g, n)| {
                let mut v = json!(g.summary(duration));
                v["name"] = n.get("name").cloned().unwrap_or(Value::Null);
                v["service"] = n.get("service").cloned().unwrap_or(Value::Null);
                v
            })
            .collect(),
    );
    out["stages"] = Value::Array(
        stages
            .iter()
            .map(|(k, g)| {
                let mut v = json!(g.summary(duration));
                v["stage"] = json!(k);
                v
            })
            .collect(),
    );
    // A sweep is judged again on the merged stages.
    if let Some(c) = first.get("context_sweep") {
        let number = |key: &str| c.get(key).and_then(Value::as_u64);
        let (Some(from), Some(to), Some(steps)) = (number("from"), number("to"), number("steps"))
        else {
            return Err("context_sweep: `from`, `to` or `steps` is missing".to_owned());
        };
        let sweep = crate::load::ContextSweep {
            from,
            to,
            steps,
            to_auto: false,
        };
        out["context_sweep"] = json!(super::sweep::sweep_result(sweep, &stages));
    }
    let mut dispatch = serde_json::Map::new();
    for key in [
        "journeys",
        "queued",
        "cut_in_flight",
        "cut_waiting",
        "warmup_requests",
    ] {
        let sum: u64 = runs
            .iter()
            .filter_map(|r| {
                r.pointer(&format!("/dispatch/{key}"))
                    .and_then(Value::as_u64)
            })
            .sum();
        dispatch.insert(key.to_owned(), json!(sum));
    }
    out["dispatch"] = Value::Object(dispatch);
    out["seen"] = json!(merge_seen(runs)?);
    let mut thresholds = Vec::new();
    for t in first
        .get("thresholds")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
        let gate = Gate::parse(name).map_err(|e| format!("thresholds: {e}"))?;
        let bound = t.get("bound").and_then(Value::as_f64).unwrap_or(f64::NAN);
        // A step's threshold is judged on that step's merged requests.
        let step = t.get("step").and_then(Value::as_str);
        let group = match step {
            None => &run,
            Some(s) => names
                .iter()
                .position(|n| n.get("name").and_then(Value::as_str) == Some(s))
                .and_then(|i| steps.get(i))
                .ok_or_else(|| format!("thresholds: no step `{s}` in the summaries"))?,
        };
        let value = gate_value(group, gate);
        let mut judged = json!({
            "name": name, "bound": bound, "value": value,
            "passed": value.is_some_and(|v| v <= bound),
        });
        if let Some(s) = step {
            judged["step"] = json!(s);
        }
        thresholds.push(judged);
    }
    let passed = thresholds.iter().all(|t| t["passed"] == true);
    out["thresholds"] = Value::Array(thresholds);
    out["passed"] = json!(passed);
    out["interrupted"] = json!(runs.iter().any(|r| r["interrupted"] == true));
    out["shard"] = json!(format!("merged {count}"));
    out["run_id"] = Value::Array(runs.iter().map(|r| r["run_id"].clone()).collect());
    Ok(out)
}

/// The shards' `seen` lists, their counts summed per combination.
fn merge_seen(runs: &[Value]) -> Result<Vec<super::Seen>, String> {
    let mut counts: BTreeMap<super::Seen, u64> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let Some(list) = r.get("seen") else { continue };
        let list: Vec<super::Seen> =
            serde_json::from_value(list.clone()).map_err(|e| format!("file {i}: seen: {e}"))?;
        for mut s in list {
            let n = std::mem::take(&mut s.requests);
            *counts.entry(s).or_default() += n;
        }
    }
    Ok(counts
        .into_iter()
        .map(|(s, requests)| super::Seen { requests, ..s })
        .collect())
}
