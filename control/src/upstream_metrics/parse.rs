//! A small, tolerant reader of the Prometheus text format (and the
//! OpenMetrics text vLLM may serve): `name{labels} value [timestamp]` lines.
//! Comments and blank lines are skipped; a line it cannot read is skipped
//! too, since one odd family must not hide the gauges we want. Then the
//! mapping from vLLM's and llama.cpp's names to one [`EndpointLoad`].

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Sample<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, String)>,
    pub value: f64,
}

/// Every sample in `text` that reads cleanly.
pub(super) fn samples(text: &str) -> impl Iterator<Item = Sample<'_>> {
    text.lines().filter_map(sample)
}

/// Reads one line; `None` for comments, blanks and anything malformed.
pub(super) fn sample(line: &str) -> Option<Sample<'_>> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_ascii_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if !valid_name(name) {
        return None;
    }
    let mut rest = line[name_end..].trim_start();
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        let (parsed, after) = label_set(after_brace)?;
        labels = parsed;
        rest = after;
    }
    // The value, then an optional timestamp or OpenMetrics exemplar.
    let value = parse_value(rest.split_ascii_whitespace().next()?)?;
    Some(Sample {
        name,
        labels,
        value,
    })
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Reads `a="x",b="y\"z"}` (the opening brace already taken) and returns
/// the labels and the text after the closing brace.
fn label_set(mut s: &str) -> Option<(Vec<(&str, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        if !valid_name(key) {
            return None;
        }
        let after_eq = s[eq + 1..].trim_start().strip_prefix('"')?;
        let (value, after_value) = quoted(after_eq)?;
        labels.push((key, value));
        s = after_value.trim_start();
        if let Some(after_comma) = s.strip_prefix(',') {
            s = after_comma;
        } else if !s.starts_with('}') {
            return None;
        }
    }
}

/// Reads a label value up to its closing quote (the opening one already
/// taken), undoing `\\`, `\"` and `\n`.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &s[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// The load one model server reports. `None`: the server does not export it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub(super) struct EndpointLoad {
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// 0..1.
    pub kv_cache_usage: Option<f64>,
}

/// Reads the load out of a model server's metrics. Counts are summed over
/// label sets (models, engines); the KV-cache ratio is the largest of
/// them, since ratios of different caches do not add up. vLLM's newer
/// `kv_cache_usage_perc` wins over the older `gpu_cache_usage_perc` when a
/// server exports both. Both are ratios despite the name.
pub(super) fn endpoint_load(text: &str) -> EndpointLoad {
    let mut load = EndpointLoad::default();
    let mut old_kv = None;
    for s in samples(text) {
        if !s.value.is_finite() {
            continue;
        }
        match s.name {
            "vllm:num_requests_running" | "llamacpp:requests_processing" => {
                add(&mut load.running, s.value);
            }
            "vllm:num_requests_waiting" | "llamacpp:requests_deferred" => {
                add(&mut load.waiting, s.value);
            }
            "vllm:kv_cache_usage_perc" | "llamacpp:kv_cache_usage_ratio" => {
                max(&mut load.kv_cache_usage, s.value);
            }
            "vllm:gpu_cache_usage_perc" => max(&mut old_kv, s.value),
            _ => {}
        }
    }
    load.kv_cache_usage = load.kv_cache_usage.or(old_kv);
    load
}

fn add(slot: &mut Option<f64>, value: f64) {
    *slot = Some(slot.unwrap_or(0.0) + value);
}

fn max(slot: &mut Option<f64>, value: f64) {
    *slot = Some(slot.map_or(value, |v| v.max(value)));
}
