//! The PromQL that fleet mode reads the gates with. Pure: from a rollout
//! to query strings. Each gate has a generated query over sluice's own
//! metric names, summed over every instance Prometheus scrapes and taken
//! over the rollout's `window`; `source.prometheus.queries` replaces any of
//! them. Queries are written with placeholders, filled in here:
//!
//! | placeholder | value |
//! |---|---|
//! | `$route` | the rollout's route |
//! | `$cluster` | the canary cluster (stable's, in stable's `requests`) |
//! | `$stable` | the stable cluster |
//! | `$window` | the window in seconds, e.g. `30s` |
//! | `$source` | `,source="user"` with `gates.exclude_load`, else empty: inside a selector's braces, it leaves load traffic out |
//!
//! A query must come back with one series (or a scalar). Time gates are
//! read in seconds, Prometheus's unit, and shown in milliseconds;
//! `error_rate`, `gpu_memory_max` and `grpc_success_rate_min` in percent; relative gates as the
//! ratio; `upstream_queue_max` in requests; `cost_per_1k_max` in USD;
//! `requests` as a count. The mirror's gates (`embedding_similarity_p10_min`,
//! `embedding_drift_kl_max`, `answer_dispersion_max`) as their figures, with
//! their own samples: the pairs (prompts) the route's mirror scored in the
//! window, not the canary's requests.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_filters::{
    GrpcCodes, Price, StatusClass, ANSWER_DISPERSION_METRIC, COST_METRIC, COST_TOKENS_METRIC,
    EMBEDDING_KL_METRIC, EMBEDDING_SIMILARITY_METRIC, GAP_METRIC, GRPC_REQUESTS_METRIC,
    REQUESTS_METRIC, REQUEST_DURATION_METRIC, STATUS_CLASS_LABEL, TOKEN_USAGE_METRIC, TPOT_METRIC,
    TTFT_METRIC,
};

use crate::config::{Gate, QueryKey, RolloutConfig, Unit};
use crate::gpu::{MEMORY_TOTAL_METRIC, MEMORY_USED_METRIC};
use crate::upstream_metrics::WAITING_METRIC;

/// What one evaluation asks Prometheus, with the placeholders filled in.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Queries {
    /// Every configured gate, in [`Gate::ALL`] order.
    pub gates: Vec<(Gate, String)>,
    /// The canary's requests in the window: every gate's samples.
    pub canary_requests: String,
    /// Stable's requests, asked only for relative gates.
    pub stable_requests: Option<String>,
    /// The samples of the gates that read the mirror (pairs or prompts
    /// scored in the window), by gate.
    pub mirror_samples: Vec<(Gate, String)>,
}

/// The queries of `c`'s gates; `overrides` replace the generated ones.
pub(crate) fn queries(c: &RolloutConfig, overrides: &BTreeMap<QueryKey, String>) -> Queries {
    let fill = |template: &str, cluster: &str| expand(template, c, cluster);
    let pick = |key: QueryKey, generated: String| overrides.get(&key).cloned().unwrap_or(generated);
    let requests = pick(QueryKey::Requests, template_requests());
    let gates: Vec<(Gate, String)> = c
        .gates
        .bounds()
        .into_iter()
        .map(|(gate, _)| {
            let template = pick(
                QueryKey::Gate(gate),
                template(
                    gate,
                    c.canary_price.as_ref(),
                    c.window,
                    c.gates.grpc_failures,
                ),
            );
            (gate, fill(&template, &c.canary))
        })
        .collect();
    let relative = gates.iter().any(|(g, _)| g.is_relative());
    let mirror_samples = gates
        .iter()
        .filter_map(|(g, _)| Some((*g, fill(&mirror_samples(*g)?, &c.canary))))
        .collect();
    Queries {
        gates,
        canary_requests: fill(&requests, &c.canary),
        stable_requests: relative.then(|| fill(&requests, &c.stable)),
        mirror_samples,
    }
}

/// The samples of a gate that reads the mirror: its histogram's count in
/// the window. `None` for the gates whose samples are the canary's requests.
pub(crate) fn mirror_samples(gate: Gate) -> Option<String> {
    let count = |family: &str, selector: &str| {
        format!("sum(increase({family}_count{{{selector}}}[$window]))")
    };
    match gate {
        Gate::EmbeddingSimilarityP10Min | Gate::EmbeddingDriftKlMax => {
            Some(count(EMBEDDING_SIMILARITY_METRIC, "route=\"$route\""))
        }
        Gate::AnswerDispersionMax => Some(count(
            ANSWER_DISPERSION_METRIC,
            "route=\"$route\",cluster=\"$cluster\"",
        )),
        _ => None,
    }
}

/// What a gate's query answers is multiplied by to get the gate's unit:
/// time gates are queried in seconds and judged in milliseconds.
pub(crate) fn scale(gate: Gate) -> f64 {
    match gate.unit() {
        Unit::Ms => 1000.0,
        Unit::Percent | Unit::Ratio | Unit::Requests | Unit::Usd => 1.0,
    }
}

/// The generated query of one gate, placeholders unfilled. `price` (the
/// canary's table) and `window` shape `cost_per_1k_max` only, the failure
/// codes `grpc_success_rate_min` only.
pub(crate) fn template(
    gate: Gate,
    price: Option<&Price>,
    window: Duration,
    grpc_failures: GrpcCodes,
) -> String {
    match gate {
        Gate::TtftP95 => quantile(0.95, TTFT_METRIC, "$cluster"),
        Gate::TtftP99 => quantile(0.99, TTFT_METRIC, "$cluster"),
        Gate::GapP99 => quantile(0.99, GAP_METRIC, "$cluster"),
        Gate::TpotP95 => quantile(0.95, TPOT_METRIC, "$cluster"),
        Gate::LatencyP99 => quantile(0.99, REQUEST_DURATION_METRIC, "$cluster"),
        // The 5xx count may have no series yet: `or vector(0)` keeps the
        // rate at 0 rather than empty.
        Gate::ErrorRate => format!(
            "100 * (sum(increase({REQUESTS_METRIC}{{route=\"$route\",cluster=\"$cluster\"$source,{STATUS_CLASS_LABEL}=\"{}\"}}[$window])) or vector(0)) / {}",
            StatusClass::ServerError.label(),
            template_requests()
        ),
        Gate::P99VsStable => format!(
            "{} / {}",
            quantile(0.99, REQUEST_DURATION_METRIC, "$cluster"),
            quantile(0.99, REQUEST_DURATION_METRIC, "$stable")
        ),
        Gate::TtftVsStable => format!(
            "{} / {}",
            quantile(0.95, TTFT_METRIC, "$cluster"),
            quantile(0.95, TTFT_METRIC, "$stable")
        ),
        // Every instance exports its own GPUs: the fullest over the fleet.
        Gate::GpuMemoryMax => format!("max(100 * {MEMORY_USED_METRIC} / {MEMORY_TOTAL_METRIC})"),
        // Every instance scrapes the same model servers: one reading per
        // endpoint (the largest), then summed over the endpoints.
        Gate::UpstreamQueueMax => {
            format!("sum(max by (endpoint) ({WAITING_METRIC}{{cluster=\"$cluster\"}}))")
        }
        // The cost counters have no `source` label: load traffic counts
        // here whatever `exclude_load` says.
        Gate::CostPer1kMax => {
            let sum = |family: &str| {
                format!("sum(increase({family}{{route=\"$route\",cluster=\"$cluster\"}}[$window]))")
            };
            match price {
                // The canary's GPUs cost the same over the window however
                // many instances scrape them: a constant, not a sum, over
                // every token they served.
                Some(p @ Price::GpuHour { .. }) => {
                    let usage = sluice_filters::Usage {
                        model: "",
                        input_tokens: 0,
                        output_tokens: 0,
                        seconds: window.as_secs_f64(),
                    };
                    let usd = p.cost_usd(&usage).unwrap_or(0.0);
                    format!("1000 * {usd} / {}", sum(&format!("{TOKEN_USAGE_METRIC}_sum")))
                }
                Some(Price::PerToken(_)) | None => format!(
                    "1000 * {} / {}",
                    sum(COST_METRIC),
                    sum(COST_TOKENS_METRIC)
                ),
            }
        }
        // No `source` label on the gRPC family either. A call without a
        // status (`unknown`) fails where UNKNOWN (2) does, as in the
        // windows; with no gRPC call the division is empty: no reading.
        Gate::GrpcSuccessRateMin => {
            let mut failed: Vec<String> = grpc_failures.codes().map(|c| c.to_string()).collect();
            if grpc_failures.contains(2) {
                failed.push("unknown".into());
            }
            let calls = |extra: &str| {
                format!(
                    "sum(increase({GRPC_REQUESTS_METRIC}{{route=\"$route\",cluster=\"$cluster\"{extra}}}[$window]))"
                )
            };
            format!(
                "100 * (1 - ({} or vector(0)) / {})",
                calls(&format!(",grpc_status=~\"{}\"", failed.join("|"))),
                calls("")
            )
        }
        // The mirror's families carry no `source` label (copies are the
        // mirror's own traffic), and the similarity ones no cluster: the
        // route's shadow is the canary (validation sees to it where the
        // route is known).
        Gate::EmbeddingSimilarityP10Min => format!(
            "histogram_quantile(0.1, sum by (le) (rate({EMBEDDING_SIMILARITY_METRIC}_bucket{{route=\"$route\"}}[$window])))"
        ),
        // Each instance's KL is from its own baseline: the worst of them.
        Gate::EmbeddingDriftKlMax => format!("max({EMBEDDING_KL_METRIC}{{route=\"$route\"}})"),
        // The mean over the fleet's prompts in the window.
        Gate::AnswerDispersionMax => {
            let sum = |part: &str| {
                format!("sum(rate({ANSWER_DISPERSION_METRIC}_{part}{{route=\"$route\",cluster=\"$cluster\"}}[$window]))")
            };
            format!("{} / {}", sum("sum"), sum("count"))
        }
        // Validation refuses min_coverage in fleet mode (coverage is one
        // instance's); were it asked, the gauge of that instance.
        Gate::MinCoverage => "100 * max(sluice_rollout_coverage_ratio)".to_string(),
    }
}

fn template_requests() -> String {
    format!(
        "sum(increase({REQUESTS_METRIC}{{route=\"$route\",cluster=\"$cluster\"$source}}[$window]))"
    )
}

/// `q`'s quantile of a histogram over every instance: rates per bucket
/// summed across instances (and models), then interpolated. `family` is
/// the histogram's name; its `_bucket` series are read.
fn quantile(q: f64, family: &str, cluster: &str) -> String {
    format!(
        "histogram_quantile({q}, sum by (le) (rate({family}_bucket{{route=\"$route\",cluster=\"{cluster}\"$source}}[$window])))"
    )
}

/// Fills the placeholders of `template` for `c`, with `$cluster` bound to
/// `cluster`. Names go inside PromQL double quotes, so `\` and `"` are
/// escaped (validation allows neither, but a query must never break).
pub(crate) fn expand(template: &str, c: &RolloutConfig, cluster: &str) -> String {
    template
        .replace("$window", &window(c.window))
        .replace("$route", &escape(&c.route))
        .replace("$cluster", &escape(cluster))
        .replace("$stable", &escape(&c.stable))
        .replace("$source", source(c))
}

/// The `$source` matcher: users' traffic only, with `gates.exclude_load`.
fn source(c: &RolloutConfig) -> &'static str {
    if c.gates.exclude_load {
        SOURCE_USER
    } else {
        ""
    }
}

/// The matcher of users' traffic, inside a selector's braces.
const SOURCE_USER: &str = ",source=\"user\"";

/// A PromQL range in whole seconds, at least one.
fn window(w: Duration) -> String {
    let secs = w.as_secs() + u64::from(w.subsec_nanos() > 0);
    format!("{}s", secs.max(1))
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests;
