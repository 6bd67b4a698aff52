//! The demo's client of the control API, and the parts of its answers the
//! demo reads (`GET /v1/rollouts/{name}`, `GET /v1/stats`, the request
//! counters of `/metrics`). Unknown fields are ignored, so the API can grow
//! without breaking the demo.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

/// A control-API call that takes longer than this is a failure: the
/// control plane runs on its own thread and answers in milliseconds.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

pub(super) struct Admin {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    token: String,
}

/// `GET /v1/rollouts/{name}`.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct RolloutView {
    pub name: String,
    pub state: String,
    pub step: usize,
    pub steps: Vec<u32>,
    pub weight: u32,
    #[serde(default)]
    pub gates: BTreeMap<String, GateView>,
    #[serde(default)]
    pub events: Vec<EventView>,
}

/// One gate reading: the evidence behind a decision.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct GateView {
    /// Set in events' evidence; in `gates` the map key names the gate.
    #[serde(default)]
    pub gate: String,
    pub value: Option<f64>,
    pub bound: f64,
    #[serde(default)]
    pub unit: String,
    pub samples: u64,
    pub ok: Option<bool>,
}

/// One transition of a rollout.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct EventView {
    /// Wall clock, milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub from: String,
    pub to: String,
    pub step: usize,
    pub weight: u32,
    pub reason: String,
    #[serde(default)]
    pub evidence: Vec<GateView>,
}

#[derive(Deserialize)]
struct StatsBody {
    stats: Vec<StatsView>,
}

/// One row of `GET /v1/stats` (the last 10 s of one route and cluster).
#[derive(Clone, Debug, Deserialize)]
pub(super) struct StatsView {
    pub route: String,
    pub version: String,
    /// A share, 0..=1.
    pub error_rate: f64,
    pub ttft_ms: Option<Quantiles>,
}

#[derive(Clone, Debug, Deserialize)]
pub(super) struct Quantiles {
    pub p95: f64,
}

impl GateView {
    /// `ttft_p95 412 ms > 150 ms (63 samples)`; `name` for readings that
    /// do not carry their own.
    pub(super) fn describe(&self, name: &str) -> String {
        let name = if self.gate.is_empty() {
            name
        } else {
            &self.gate
        };
        let unit = match self.unit.as_str() {
            "ms" => " ms",
            "%" => "%",
            _ => "",
        };
        let value = self
            .value
            .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0}{unit}"));
        let cmp = match self.ok {
            Some(true) => "<=",
            Some(false) => ">",
            None => "vs",
        };
        let judged = match self.ok {
            Some(_) => "",
            None => ", not judged",
        };
        format!(
            "{name} {value} {cmp} {:.0}{unit} ({} samples{judged})",
            self.bound, self.samples
        )
    }
}

impl Admin {
    pub(super) fn new(addr: SocketAddr, token: String) -> Admin {
        Admin {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: format!("http://{addr}"),
            token,
        }
    }

    pub(super) async fn rollout(&self, name: &str) -> anyhow::Result<RolloutView> {
        let body = self
            .expect("GET", &format!("/v1/rollouts/{name}"), None, StatusCode::OK)
            .await?;
        serde_json::from_slice(&body).context("rollout status")
    }

    /// `POST /v1/rollouts` with one rollout (YAML); 201 expected.
    pub(super) async fn start_rollout(&self, yaml: String) -> anyhow::Result<RolloutView> {
        let body = self
            .expect("POST", "/v1/rollouts", Some(yaml), StatusCode::CREATED)
            .await?;
        serde_json::from_slice(&body).context("rollout status")
    }

    pub(super) async fn delete_rollout(&self, name: &str) -> anyhow::Result<()> {
        let path = format!("/v1/rollouts/{name}");
        self.expect("DELETE", &path, None, StatusCode::OK).await?;
        Ok(())
    }

    pub(super) async fn stats(&self) -> anyhow::Result<Vec<StatsView>> {
        let body = self
            .expect("GET", "/v1/stats", None, StatusCode::OK)
            .await?;
        let parsed: StatsBody = serde_json::from_slice(&body).context("stats")?;
        Ok(parsed.stats)
    }

    /// Requests answered so far on `route`, by version: the
    /// `sluice_requests_total` counters of `/metrics`, whose differences
    /// give a live rate (`/v1/stats` averages over ten seconds).
    pub(super) async fn requests_by_version(
        &self,
        route: &str,
    ) -> anyhow::Result<BTreeMap<String, f64>> {
        let body = self.expect("GET", "/metrics", None, StatusCode::OK).await?;
        let route = format!("route=\"{route}\"");
        let mut totals = BTreeMap::new();
        for line in String::from_utf8_lossy(&body).lines() {
            let Some(rest) = line.strip_prefix("sluice_requests_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let (Some(version), Ok(value)) = (label(labels, "version"), value.parse::<f64>())
            else {
                continue;
            };
            if labels.contains(&route) {
                *totals.entry(version.to_owned()).or_insert(0.0) += value;
            }
        }
        Ok(totals)
    }

    /// One call; any status but `want` is an error carrying the API's body.
    async fn expect(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
        want: StatusCode,
    ) -> anyhow::Result<Bytes> {
        let url = format!("{}{path}", self.base);
        let request = http::Request::builder()
            .method(method)
            .uri(&url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/yaml")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let call = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| anyhow::anyhow!("{method} {url}: no answer in {CALL_TIMEOUT:?}"))?
            .with_context(|| format!("{method} {url}"))?;
        if status != want {
            bail!(
                "{method} {url}: {status}: {}",
                String::from_utf8_lossy(&bytes).trim()
            );
        }
        Ok(bytes)
    }
}

/// `name="value"` in a Prometheus label set (sluice's own labels: no
/// escaped quotes in the values it reads here).
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let len = labels.get(start..)?.find('"')?;
    labels.get(start..start + len)
}

/// Requests a second per version over the last [`RATE_SPAN`], from
/// successive readings of the counters.
#[derive(Default)]
pub(super) struct Rates {
    readings: VecDeque<(Instant, BTreeMap<String, f64>)>,
}

/// Long enough to smooth a 250 ms poll, short enough to follow a step.
const RATE_SPAN: Duration = Duration::from_secs(2);

impl Rates {
    pub(super) fn push(&mut self, at: Instant, totals: BTreeMap<String, f64>) {
        self.readings.push_back((at, totals));
        // Keep one reading at least RATE_SPAN old as the base.
        while self.readings.len() > 2
            && self
                .readings
                .get(1)
                .is_some_and(|(t, _)| at.saturating_duration_since(*t) >= RATE_SPAN)
        {
            self.readings.pop_front();
        }
    }

    pub(super) fn per_second(&self) -> BTreeMap<String, f64> {
        let (Some((t0, first)), Some((t1, last))) = (self.readings.front(), self.readings.back())
        else {
            return BTreeMap::new();
        };
        let span = t1.saturating_duration_since(*t0).as_secs_f64();
        if span <= 0.0 {
            return BTreeMap::new();
        }
        last.iter()
            .map(|(v, n)| {
                let before = first.get(v).copied().unwrap_or(0.0);
                (v.clone(), (n - before).max(0.0) / span)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_read_by_name() {
        let labels = r#"cluster="llm-canary",route="chat",status_class="2xx",version="v2""#;
        assert_eq!(label(labels, "version"), Some("v2"));
        assert_eq!(label(labels, "route"), Some("chat"));
        assert_eq!(label(labels, "model"), None);
    }

    #[test]
    fn rates_come_from_counter_differences_over_the_span() {
        let t = Instant::now();
        let at = |ms| t + Duration::from_millis(ms);
        let totals = |v1: f64, v2: f64| BTreeMap::from([("v1".into(), v1), ("v2".into(), v2)]);
        let mut rates = Rates::default();
        assert!(rates.per_second().is_empty());
        rates.push(at(0), totals(0.0, 0.0));
        rates.push(at(1000), totals(90.0, 10.0));
        assert_eq!(rates.per_second(), totals(90.0, 10.0));
        rates.push(at(2000), totals(180.0, 20.0));
        rates.push(at(3000), totals(200.0, 100.0));
        // The base is now the reading at 1 s: (200-90)/2, (100-10)/2.
        assert_eq!(rates.per_second(), totals(55.0, 45.0));
    }
}
