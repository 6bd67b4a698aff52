//! Reads the gates from Prometheus's HTTP API (`GET /api/v1/query`), one
//! instant query per gate and one or two for the request counts, all at
//! once, each bounded by [`QUERY_TIMEOUT`]. A query that fails, or comes
//! back empty or `NaN` (no traffic in the window), leaves its gate unjudged.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{ACCEPT, USER_AGENT};
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::Value;
use tokio::task::JoinSet;
use tracing::debug;

use super::{Gathered, ObservationSource};
use crate::config::{Gate, QueryKey, RolloutConfig, RolloutSource};
use crate::http_client::{excerpt, HttpClient};
use crate::rollout::controller::Env;
use crate::rollout::gates::{Figure, Figures};
use crate::rollout::promql::{queries, scale};

/// Bounds one query: connect, answer and body together.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// An instant query answering one series is a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

pub(crate) struct PrometheusSource {
    client: HttpClient,
}

impl PrometheusSource {
    pub(crate) fn new() -> PrometheusSource {
        PrometheusSource {
            client: HttpClient::new(QUERY_TIMEOUT, MAX_ANSWER_BYTES),
        }
    }
}

/// What a query is for.
#[derive(Clone, Copy, Debug)]
enum Key {
    Gate(Gate),
    CanaryRequests,
    StableRequests,
    /// A mirror gate's own samples.
    Samples(Gate),
}

impl Key {
    fn name(self) -> &'static str {
        match self {
            Key::Gate(g) => g.as_str(),
            Key::CanaryRequests => QueryKey::Requests.as_str(),
            Key::StableRequests => "stable_requests",
            Key::Samples(_) => "mirror_samples",
        }
    }
}

#[async_trait]
impl ObservationSource for PrometheusSource {
    async fn gather(&self, _env: &Env, config: &RolloutConfig) -> Gathered {
        let Some(RolloutSource::Prometheus {
            url, queries: q, ..
        }) = &config.source
        else {
            return Gathered::Figures {
                figures: Figures::new(),
                errors: BTreeMap::new(),
            };
        };
        let plan = queries(config, q);
        let mut asked = vec![(Key::CanaryRequests, plan.canary_requests)];
        if let Some(s) = plan.stable_requests {
            asked.push((Key::StableRequests, s));
        }
        asked.extend(plan.gates.into_iter().map(|(g, q)| (Key::Gate(g), q)));
        asked.extend(
            plan.mirror_samples
                .into_iter()
                .map(|(g, q)| (Key::Samples(g), q)),
        );

        let mut calls = JoinSet::new();
        for (key, promql) in asked {
            let (client, url) = (self.client.clone(), url.clone());
            calls.spawn(async move { (key, query(&client, &url, &promql).await) });
        }
        let mut values: Vec<(Key, Option<f64>)> = Vec::new();
        let mut errors = BTreeMap::new();
        while let Some(joined) = calls.join_next().await {
            match joined {
                Ok((key, Ok(v))) => values.push((key, v)),
                Ok((key, Err(e))) => {
                    debug!(rollout = %config.name, query = key.name(), error = %e, "prometheus query failed");
                    errors.insert(key.name().to_string(), e);
                }
                Err(e) => {
                    debug!(rollout = %config.name, error = %e, "prometheus query task failed")
                }
            }
        }
        Gathered::Figures {
            figures: figures(&values),
            errors,
        }
    }
}

/// Every gate's figure: its value in the gate's unit, and the request
/// counts as samples (stable's for relative gates; a mirror gate's own
/// count for it). `increase()` extrapolates, so counts are rounded.
fn figures(values: &[(Key, Option<f64>)]) -> Figures {
    let count = |want: &dyn Fn(&Key) -> bool| {
        values
            .iter()
            .find(|(k, _)| want(k))
            .and_then(|(_, v)| *v)
            .map_or(0, |v| v.max(0.0).round() as u64)
    };
    let canary = count(&|k| matches!(k, Key::CanaryRequests));
    let stable = count(&|k| matches!(k, Key::StableRequests));
    values
        .iter()
        .filter_map(|(k, v)| match k {
            Key::Gate(g) => Some((
                *g,
                Figure {
                    value: v.map(|v| v * scale(*g)),
                    samples: if g.reads_the_mirror() {
                        count(&|k| matches!(k, Key::Samples(s) if s == g))
                    } else {
                        canary
                    },
                    stable_samples: g.is_relative().then_some(stable),
                },
            )),
            Key::CanaryRequests | Key::StableRequests | Key::Samples(_) => None,
        })
        .collect()
}

async fn query(client: &HttpClient, base: &str, promql: &str) -> Result<Option<f64>, String> {
    let uri = format!("{base}/api/v1/query?query={}", encode(promql));
    let req = Request::get(uri)
        .header(USER_AGENT, "sluice")
        .header(ACCEPT, "application/json")
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let answer = client.send(req).await?;
    parse(answer.status, &answer.body)
}

/// The one value of an instant query's answer: `None` for no series or
/// `NaN` (a quantile of no traffic), `Err` for an error or several series.
pub(crate) fn parse(status: StatusCode, body: &[u8]) -> Result<Option<f64>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|_| {
        format!(
            "answered {status}: {}",
            excerpt(&String::from_utf8_lossy(body), 200)
        )
    })?;
    if v["status"] != "success" {
        let kind = v["errorType"].as_str().unwrap_or("error");
        let error = v["error"].as_str().unwrap_or("no error text");
        return Err(format!("answered {status}: {kind}: {error}"));
    }
    let data = &v["data"];
    let sample = match data["resultType"].as_str() {
        Some("scalar") => &data["result"],
        Some("vector") => match data["result"].as_array().map(Vec::as_slice) {
            Some([]) => return Ok(None),
            Some([one]) => &one["value"],
            Some(many) => {
                return Err(format!(
                "the query answered {} series; it must answer one (aggregate it with sum or max)",
                many.len()
            ))
            }
            None => return Err("the answer has no result list".to_string()),
        },
        other => {
            return Err(format!(
                "the query answered a {}; it must answer an instant vector or a scalar",
                other.unwrap_or("nothing")
            ))
        }
    };
    let text = sample[1]
        .as_str()
        .ok_or_else(|| "the answer has no sample value".to_string())?;
    // Prometheus writes `NaN`, `+Inf` and `-Inf`, which Rust reads too.
    let value: f64 = text
        .parse()
        .map_err(|_| format!("the sample value `{text}` is not a number"))?;
    Ok((!value.is_nan()).then_some(value))
}

/// Percent-encodes a query parameter: everything but RFC 3986's
/// unreserved characters.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn reads_one_value_or_none() {
        let vector = |result: &str| {
            format!(r#"{{"status":"success","data":{{"resultType":"vector","result":{result}}}}}"#)
        };
        let ok = StatusCode::OK;
        let one = vector(r#"[{"metric":{},"value":[1700000000.1,"0.4375"]}]"#);
        assert_eq!(parse(ok, one.as_bytes()), Ok(Some(0.4375)));
        assert_eq!(parse(ok, vector("[]").as_bytes()), Ok(None));
        let nan = vector(r#"[{"metric":{},"value":[1,"NaN"]}]"#);
        assert_eq!(parse(ok, nan.as_bytes()), Ok(None));
        let inf = vector(r#"[{"metric":{},"value":[1,"+Inf"]}]"#);
        assert_eq!(parse(ok, inf.as_bytes()), Ok(Some(f64::INFINITY)));
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#;
        assert_eq!(parse(ok, scalar.as_bytes()), Ok(Some(3.0)));
        let two = vector(
            r#"[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]}]"#,
        );
        assert_eq!(
            parse(ok, two.as_bytes()),
            Err(
                "the query answered 2 series; it must answer one (aggregate it with sum or max)"
                    .into()
            )
        );
    }

    #[test]
    fn says_why_a_query_failed() {
        let bad = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#;
        assert_eq!(
            parse(StatusCode::BAD_REQUEST, bad.as_bytes()),
            Err("answered 400 Bad Request: bad_data: parse error at char 5".into())
        );
        assert_eq!(
            parse(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>"),
            Err("answered 502 Bad Gateway: <html>bad gateway</html>".into())
        );
        let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert_eq!(
            parse(StatusCode::OK, matrix.as_bytes()),
            Err("the query answered a matrix; it must answer an instant vector or a scalar".into())
        );
    }

    #[test]
    fn encodes_a_query_parameter() {
        assert_eq!(
            encode(r#"sum(rate(x{route="a b"}[10s]))"#),
            "sum%28rate%28x%7Broute%3D%22a%20b%22%7D%5B10s%5D%29%29"
        );
        assert_eq!(encode("a-b_c.d~é"), "a-b_c.d~%C3%A9");
    }

    #[test]
    fn request_counts_are_every_gates_samples() {
        let values = [
            (Key::CanaryRequests, Some(41.6)),
            (Key::StableRequests, Some(300.2)),
            (Key::Gate(Gate::TtftP95), Some(0.4)),
            (Key::Gate(Gate::P99VsStable), Some(1.5)),
            (Key::Gate(Gate::ErrorRate), None),
        ];
        let f = figures(&values);
        assert_eq!(
            f[&Gate::TtftP95],
            Figure {
                value: Some(400.0),
                samples: 42,
                stable_samples: None
            }
        );
        assert_eq!(
            f[&Gate::P99VsStable],
            Figure {
                value: Some(1.5),
                samples: 42,
                stable_samples: Some(300)
            }
        );
        assert_eq!(f[&Gate::ErrorRate].value, None);
    }
    #[test]
    fn a_mirror_gate_counts_its_own_samples() {
        let values = [
            (Key::CanaryRequests, Some(500.0)),
            (Key::Gate(Gate::EmbeddingSimilarityP10Min), Some(0.91)),
            (Key::Samples(Gate::EmbeddingSimilarityP10Min), Some(23.7)),
            (Key::Gate(Gate::AnswerDispersionMax), Some(0.001)),
        ];
        let f = figures(&values);
        assert_eq!(f[&Gate::EmbeddingSimilarityP10Min].samples, 24);
        // Its count did not come back: no samples, so not judged.
        assert_eq!(f[&Gate::AnswerDispersionMax].samples, 0);
    }
}
