//! The fit a report draws the inter-arrival plot from: its candidates
//! (kind, parameters and, when `sluice fit` computed them, BIC, KS and KL),
//! the one it picked, and the fitted sample's quantiles when it kept them.
//! It comes from a `sluice fit --json` report, a model file, or the run
//! file's own `arrival_fit` (written by `sluice load` from the scenario's
//! `from_model:`); each is read here and checked, a bad one named where.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};
use sluice_filters::Arrival;

use crate::fit::WorkloadModel;

/// The version of a run file's `arrival_fit`.
pub const ARRIVAL_FIT_VERSION: u32 = 1;

/// A fitted candidate for the inter-arrival times.
#[derive(Clone, Debug, PartialEq)]
pub struct FitCandidate {
    pub arrival: Arrival,
    /// The fit's figures against its own sample; a model file has none.
    pub loglik: Option<f64>,
    pub aic: Option<f64>,
    pub bic: Option<f64>,
    pub ks: Option<f64>,
    pub kl: Option<f64>,
}

impl FitCandidate {
    /// A candidate with no figures (a model file's one kind).
    pub fn bare(arrival: Arrival) -> FitCandidate {
        FitCandidate {
            arrival,
            loglik: None,
            aic: None,
            bic: None,
            ks: None,
            kl: None,
        }
    }
}

/// A fit attached to a run.
#[derive(Clone, Debug, PartialEq)]
pub struct AttachedFit {
    /// Where it comes from: the file given, or the run's model file.
    pub source: String,
    /// What its arrivals are: `requests`, or `session starts`.
    pub of: &'static str,
    /// The kind it picked; one of the candidates'.
    pub best: String,
    /// The inter-arrival times it was fitted to.
    pub samples: Option<u64>,
    pub candidates: Vec<FitCandidate>,
    /// The fitted sample's quantiles, (q, seconds), ascending.
    pub quantiles: Option<Vec<[f64; 2]>>,
}

impl AttachedFit {
    /// What a model file holds: the one kind it keeps, without figures.
    pub fn from_model(source: &str, model: &WorkloadModel) -> AttachedFit {
        AttachedFit::of_arrival(
            source,
            model.arrival.process.clone(),
            model.sessions.is_some(),
        )
    }

    /// One kind without figures: a model's arrivals, of session starts
    /// when `sessions`.
    pub fn of_arrival(source: &str, arrival: Arrival, sessions: bool) -> AttachedFit {
        AttachedFit {
            source: source.to_owned(),
            of: if sessions { SESSION_STARTS } else { REQUESTS },
            best: arrival.kind().to_owned(),
            samples: None,
            candidates: vec![FitCandidate::bare(arrival)],
            quantiles: None,
        }
    }
}

const REQUESTS: &str = "requests";
const SESSION_STARTS: &str = "session starts";

/// `{"kind", "params": {…}}` and the figures it has, as `sluice fit --json`
/// writes a candidate.
impl Serialize for FitCandidate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut params = match serde_json::to_value(&self.arrival) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        params.remove("kind");
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("kind", self.arrival.kind())?;
        map.serialize_entry("params", &params)?;
        for (k, v) in [
            ("loglik", self.loglik),
            ("aic", self.aic),
            ("bic", self.bic),
            ("ks", self.ks),
            ("kl", self.kl),
        ] {
            if let Some(v) = v {
                map.serialize_entry(k, &v)?;
            }
        }
        map.end()
    }
}

/// A run file's `arrival_fit`: `{"v": 1, "source", "of", "best",
/// "samples"?, "candidates", "iat_quantiles"?}`.
impl Serialize for AttachedFit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("v", &ARRIVAL_FIT_VERSION)?;
        map.serialize_entry("source", &self.source)?;
        map.serialize_entry("of", self.of)?;
        map.serialize_entry("best", &self.best)?;
        if let Some(n) = self.samples {
            map.serialize_entry("samples", &n)?;
        }
        map.serialize_entry("candidates", &self.candidates)?;
        if let Some(q) = &self.quantiles {
            map.serialize_entry("iat_quantiles", q)?;
        }
        map.end()
    }
}

/// Reads a fit file's text: a `sluice fit --json` report (with sessions,
/// its session starts' fit, as a model's arrivals are then session
/// starts), a run file with `arrival_fit`, or a model file (YAML or JSON).
/// Each error is `path: what is wrong`.
pub fn read_fit_text(text: &str, source: &str) -> Result<AttachedFit, Vec<String>> {
    if !text.trim_start().starts_with('{') {
        return read_model(text, source);
    }
    let v: Value = serde_json::from_str(text).map_err(|e| {
        vec![match e.classify() {
            serde_json::error::Category::Eof => format!(
                "the file ends early at line {} column {}: truncated",
                e.line(),
                e.column()
            ),
            _ => format!("not JSON: {e}"),
        }]
    })?;
    if let Some(s) = v.pointer("/sessions/arrival").filter(|s| !s.is_null()) {
        return read_fit(s, "sessions.arrival.", source, SESSION_STARTS).map_err(|e| vec![e]);
    }
    if v.get("candidates").is_some() {
        return read_fit(&v, "", source, REQUESTS).map_err(|e| vec![e]);
    }
    if let Some(f) = v.get("arrival_fit") {
        return read_arrival_fit(f, "arrival_fit.").map_err(|e| vec![e]);
    }
    if v.get("arrival").is_some() {
        return read_model(text, source);
    }
    Err(vec![
        "neither a `sluice fit --json` report (no `candidates`), a model file (no `arrival`) \
         nor a run file with `arrival_fit`"
            .to_owned(),
    ])
}

fn read_model(text: &str, source: &str) -> Result<AttachedFit, Vec<String>> {
    WorkloadModel::from_yaml(text)
        .map(|m| AttachedFit::from_model(source, &m))
        .map_err(|e| e.0.iter().map(ToString::to_string).collect())
}

/// A run file's `arrival_fit` at `at` (`arrival_fit.`): sluice's own
/// format, so an unknown key is refused (a `sluice fit --json` report has
/// many more, which are not read).
pub(crate) fn read_arrival_fit(v: &Value, at: &str) -> Result<AttachedFit, String> {
    const KEYS: [&str; 7] = [
        "v",
        "source",
        "of",
        "best",
        "samples",
        "candidates",
        "iat_quantiles",
    ];
    let obj = v.as_object().ok_or_else(|| {
        format!(
            "{}: expected an object, found {v}",
            at.trim_end_matches('.')
        )
    })?;
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "{at}{k}: unknown field (expected one of {})",
            KEYS.join(", ")
        ));
    }
    match v.get("v") {
        Some(n) if n.as_u64() == Some(u64::from(ARRIVAL_FIT_VERSION)) => {}
        Some(n) => {
            return Err(format!(
                "{at}v: unsupported version {n} (this sluice reads {ARRIVAL_FIT_VERSION})"
            ))
        }
        None => return Err(format!("{at}v: missing")),
    }
    let source = match v.get("source") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("{at}source: expected a string, found {other}")),
        None => return Err(format!("{at}source: missing")),
    };
    let of = match v.get("of").and_then(Value::as_str) {
        Some(SESSION_STARTS) => SESSION_STARTS,
        Some(REQUESTS) | None => REQUESTS,
        Some(other) => {
            return Err(format!(
                "{at}of: `{other}` is neither `{REQUESTS}` nor `{SESSION_STARTS}`"
            ))
        }
    };
    read_fit(v, at, &source, of)
}

/// The candidates, `best`, `samples` and `iat_quantiles` of `v`; other
/// keys (the rest of a `sluice fit --json` report) are not read.
fn read_fit(v: &Value, at: &str, source: &str, of: &'static str) -> Result<AttachedFit, String> {
    let list = match v.get("candidates") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => return Err(format!("{at}candidates: is empty")),
        Some(other) => return Err(format!("{at}candidates: expected a list, found {other}")),
        None => return Err(format!("{at}candidates: missing")),
    };
    let candidates = list
        .iter()
        .enumerate()
        .map(|(i, c)| candidate(c, &format!("{at}candidates[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let best = match v.get("best") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("{at}best: expected a kind, found {other}")),
        None => return Err(format!("{at}best: missing")),
    };
    if !candidates.iter().any(|c| c.arrival.kind() == best) {
        let kinds: Vec<&str> = candidates.iter().map(|c| c.arrival.kind()).collect();
        return Err(format!(
            "{at}best: `{best}` is not one of the candidates ({})",
            kinds.join(", ")
        ));
    }
    let samples = match v.get("samples") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            n.as_u64()
                .ok_or_else(|| format!("{at}samples: expected a count, found {n}"))?,
        ),
    };
    let quantiles = match v.get("iat_quantiles") {
        None | Some(Value::Null) => None,
        Some(q) => Some(quantiles(q, &format!("{at}iat_quantiles"))?),
    };
    Ok(AttachedFit {
        source: source.to_owned(),
        of,
        best,
        samples,
        candidates,
        quantiles,
    })
}

fn candidate(c: &Value, at: &str) -> Result<FitCandidate, String> {
    let obj = c
        .as_object()
        .ok_or_else(|| format!("{at}: expected an object, found {c}"))?;
    const KEYS: [&str; 7] = ["kind", "params", "loglik", "aic", "bic", "ks", "kl"];
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "{at}: unknown field `{k}` (expected one of {})",
            KEYS.join(", ")
        ));
    }
    let kind = match obj.get("kind") {
        Some(Value::String(k)) => k.clone(),
        Some(other) => return Err(format!("{at}.kind: expected a string, found {other}")),
        None => return Err(format!("{at}.kind: missing")),
    };
    if !Arrival::KINDS.contains(&kind.as_str()) {
        return Err(format!(
            "{at}.kind: unknown kind `{kind}` (expected one of {})",
            Arrival::KINDS.join(", ")
        ));
    }
    let mut fields = match obj.get("params") {
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(format!("{at}.params: expected an object, found {other}")),
        None => return Err(format!("{at}.params: missing")),
    };
    fields.insert("kind".to_owned(), Value::String(kind));
    let arrival: Arrival =
        serde_json::from_value(Value::Object(fields)).map_err(|e| format!("{at}.params: {e}"))?;
    if let Err(list) = arrival.validate() {
        let first = list.into_iter().next().unwrap_or_default();
        return Err(format!("{at}.params.{first}"));
    }
    let figure = |key: &str| -> Result<Option<f64>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(n) => n
                .as_f64()
                .map(Some)
                .ok_or_else(|| format!("{at}.{key}: expected a number, found {n}")),
        }
    };
    Ok(FitCandidate {
        arrival,
        loglik: figure("loglik")?,
        aic: figure("aic")?,
        bic: figure("bic")?,
        ks: figure("ks")?,
        kl: figure("kl")?,
    })
}

/// `[[q, seconds], …]`: q in [0, 1], both ascending, seconds ≥ 0.
fn quantiles(v: &Value, at: &str) -> Result<Vec<[f64; 2]>, String> {
    let list = v
        .as_array()
        .ok_or_else(|| format!("{at}: expected a list of [q, seconds], found {v}"))?;
    let mut out: Vec<[f64; 2]> = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let pair = p.as_array().and_then(|a| match a.as_slice() {
            [q, x] => Some([q.as_f64()?, x.as_f64()?]),
            _ => None,
        });
        let [q, x] = pair.ok_or_else(|| format!("{at}[{i}]: expected [q, seconds], found {p}"))?;
        if !((0.0..=1.0).contains(&q) && x.is_finite() && x >= 0.0) {
            return Err(format!(
                "{at}[{i}]: q must be in [0, 1] and seconds ≥ 0, found [{q}, {x}]"
            ));
        }
        if out.last().is_some_and(|l| l[0] > q || l[1] > x) {
            return Err(format!("{at}[{i}]: not ascending"));
        }
        out.push([q, x]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
