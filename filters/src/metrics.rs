//! Prometheus metric families and the per-(route, cluster) handles the data
//! plane records into. Handles are resolved when a snapshot is built, so the
//! request path touches only atomics.

use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Registry, TextEncoder,
};

use crate::cost::CostMetrics;
use crate::failure::Failure;
use crate::fault::FaultMetrics;
use crate::genai::GenAiMetrics;
use crate::limit::LimitMetrics;
use crate::load::{Source, Stripped};
use crate::mirror::MirrorMetrics;
use crate::shedding::SheddingMetrics;

mod family;
mod resp;
pub use family::{register_family, register_gauge, register_histogram, LabelledFamily};
pub use resp::{RespHandles, RespMetrics};

/// Requests answered: the family name the proxy exports and the fleet
/// rollouts' PromQL reads.
pub const REQUESTS_METRIC: &str = "sluice_requests_total";
/// gRPC calls, by method and `grpc-status`.
pub const GRPC_REQUESTS_METRIC: &str = "sluice_grpc_requests_total";
/// Request duration, arrival to last byte, seconds.
pub const REQUEST_DURATION_METRIC: &str = "sluice_request_duration_seconds";
/// The label of [`REQUESTS_METRIC`] that holds a [`StatusClass`].
pub const STATUS_CLASS_LABEL: &str = "status_class";

/// Request duration buckets (seconds): OpenTelemetry's HTTP boundaries,
/// extended to two minutes because LLM answers stream for that long.
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0,
    120.0,
];

/// Status class of an answer, as the `status_class` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusClass {
    /// No answer was sent: the client went away before one was ready
    /// (status 0 in the proxy's record). Not an informational answer.
    ClientClosed,
    Informational,
    Success,
    Redirect,
    ClientError,
    ServerError,
}

impl StatusClass {
    const ALL: [StatusClass; 6] = [
        StatusClass::ClientClosed,
        StatusClass::Informational,
        StatusClass::Success,
        StatusClass::Redirect,
        StatusClass::ClientError,
        StatusClass::ServerError,
    ];

    pub fn of(status: u16) -> Self {
        match status {
            0 => StatusClass::ClientClosed,
            1..=199 => StatusClass::Informational,
            200..=299 => StatusClass::Success,
            300..=399 => StatusClass::Redirect,
            400..=499 => StatusClass::ClientError,
            _ => StatusClass::ServerError,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            StatusClass::ClientClosed => "client_closed",
            StatusClass::Informational => "1xx",
            StatusClass::Success => "2xx",
            StatusClass::Redirect => "3xx",
            StatusClass::ClientError => "4xx",
            StatusClass::ServerError => "5xx",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Every metric family sluice exports, registered in one registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    duration: HistogramVec,
    proxy_errors: IntCounterVec,
    pub tcp_connections: IntCounterVec,
    pub tcp_active_connections: IntGaugeVec,
    pub tcp_bytes: IntCounterVec,
    pub config_changes: IntCounterVec,
    pub snapshot_version: IntGauge,
    pub genai: GenAiMetrics,
    /// `sluice_cost_usd_total`, by the clusters' `cost:` tables.
    pub cost: CostMetrics,
    pub rollout: RolloutMetrics,
    /// The RESP observer's families (`sluice_resp_*`), for `kind: cache` clusters.
    pub resp: RespMetrics,
    pub faults: FaultMetrics,
    pub mirror: MirrorMetrics,
    /// `sluice_load_header_stripped_total{reason}`.
    pub load_stripped: LoadStrippedMetrics,
    /// `sluice_ratelimit_*`.
    pub limits: LimitMetrics,
    /// `sluice_shedding_level`, `sluice_shed_requests_total`.
    pub shedding: SheddingMetrics,
    /// `sluice_grpc_requests_total{route,cluster,version,grpc_method,grpc_status}`.
    grpc_requests: IntCounterVec,
    /// `sluice_outlier_ejections_total{cluster,endpoint}`.
    pub outlier_ejections: IntCounterVec,
    /// `sluice_circuit_breaker_overflow_total{cluster,breaker}`.
    pub breaker_overflow: IntCounterVec,
}

/// `x-sluice-load` headers removed before forwarding, by [`Stripped`]
/// reason; resolved once.
#[derive(Clone)]
pub struct LoadStrippedMetrics([IntCounter; Stripped::ALL.len()]);

impl LoadStrippedMetrics {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let family: IntCounterVec = register_family(
            registry,
            "sluice_load_header_stripped_total",
            "x-sluice-load headers removed before forwarding: from a peer outside load.trusted_peers, or not a run id.",
            &["reason"],
        )?;
        Ok(Self(
            Stripped::ALL.map(|r| family.with_label_values(&[r.reason()])),
        ))
    }

    pub fn inc(&self, reason: Stripped) {
        self.0[reason as usize].inc();
    }
}

/// The rollout controllers' families, one series per rollout. Written by the
/// control plane only.
#[derive(Clone)]
pub struct RolloutMetrics {
    /// `sluice_rollout_weight{rollout}`: the canary weight the rollout set.
    pub weight: IntGaugeVec,
    /// `sluice_rollout_state{rollout,state}`: 1 for the current state, else 0.
    pub state: IntGaugeVec,
    /// `sluice_rollout_rollbacks_total{rollout}`.
    pub rollbacks: IntCounterVec,
    /// `sluice_fleet_drift_total{rollout}`: fleet targets found with a
    /// split other than the rollout's, and set back.
    pub drift: IntCounterVec,
    /// `sluice_rollout_coverage_ratio{rollout}`: prompt clusters the
    /// canary touched at the current step over every cluster seen, 0..=1.
    pub coverage: GaugeVec,
}

impl RolloutMetrics {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            weight: register_family(
                registry,
                "sluice_rollout_weight",
                "Canary weight (percent) the rollout has set on its route.",
                &["rollout"],
            )?,
            state: register_family(
                registry,
                "sluice_rollout_state",
                "1 for the rollout's current state, 0 for the others.",
                &["rollout", "state"],
            )?,
            rollbacks: register_family(
                registry,
                "sluice_rollout_rollbacks_total",
                "Automatic rollbacks: a gate breached for `consecutive` evaluations.",
                &["rollout"],
            )?,
            drift: register_family(
                registry,
                "sluice_fleet_drift_total",
                "Fleet targets found by the reconcile loop with a split other than the rollout's, and set back.",
                &["rollout"],
            )?,
            coverage: register_family(
                registry,
                "sluice_rollout_coverage_ratio",
                "Prompt clusters the canary touched at the current step over every cluster seen since the rollout started.",
                &["rollout"],
            )?,
        })
    }
}

/// Pre-resolved handles for one (route, cluster) pair, per [`Source`].
#[derive(Clone)]
pub struct RouteClusterMetrics {
    requests: [[IntCounter; StatusClass::ALL.len()]; Source::ALL.len()],
    duration: [Histogram; Source::ALL.len()],
    proxy_errors: [IntCounter; Failure::ALL.len()],
}

impl RouteClusterMetrics {
    pub fn record(&self, status: u16, seconds: f64, source: Source) {
        self.requests[source.index()][StatusClass::of(status).index()].inc();
        self.duration[source.index()].observe(seconds);
    }

    pub fn record_failure(&self, failure: Failure) {
        if let Some(i) = Failure::ALL.iter().position(|f| *f == failure) {
            self.proxy_errors[i].inc();
        }
    }
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        Ok(Self {
            requests: register_family(
                &registry,
                REQUESTS_METRIC,
                "Requests answered, by route, cluster, status class and source (load: `sluice load` from a trusted peer).",
                &["route", "cluster", "version", STATUS_CLASS_LABEL, Source::LABEL],
            )?,
            duration: register_histogram(
                &registry,
                REQUEST_DURATION_METRIC,
                "Time from the request's arrival to the last byte of the answer.",
                DURATION_BUCKETS,
                &["route", "cluster", "version", Source::LABEL],
            )?,
            proxy_errors: register_family(
                &registry,
                "sluice_proxy_errors_total",
                "Errors the proxy answered itself, by reason.",
                &["route", "cluster", "reason"],
            )?,
            tcp_connections: register_family(
                &registry,
                "sluice_tcp_connections_total",
                "TCP connections accepted on tcp listeners.",
                &["listener", "cluster"],
            )?,
            tcp_active_connections: register_family(
                &registry,
                "sluice_tcp_active_connections",
                "TCP connections open on tcp listeners.",
                &["listener"],
            )?,
            tcp_bytes: register_family(
                &registry,
                "sluice_tcp_bytes_total",
                "Bytes copied by tcp listeners, by direction.",
                &["listener", "cluster", "direction"],
            )?,
            config_changes: register_family(
                &registry,
                "sluice_config_changes_total",
                "Attempted config changes, by source and result.",
                &["source", "result"],
            )?,
            snapshot_version: register_gauge(
                &registry,
                "sluice_snapshot_version",
                "Version of the live snapshot; rises by one per applied change.",
            )?,
            genai: GenAiMetrics::new(&registry)?,
            cost: CostMetrics::new(&registry)?,
            rollout: RolloutMetrics::new(&registry)?,
            resp: RespMetrics::new(&registry)?,
            faults: FaultMetrics::new(&registry)?,
            mirror: MirrorMetrics::new(&registry)?,
            load_stripped: LoadStrippedMetrics::new(&registry)?,
            limits: LimitMetrics::new(&registry)?,
            shedding: SheddingMetrics::new(&registry)?,
            grpc_requests: register_family(
                &registry,
                GRPC_REQUESTS_METRIC,
                "gRPC calls answered, by method and grpc-status (from trailers or a trailers-only answer; `unknown` when none came).",
                &["route", "cluster", "version", "grpc_method", "grpc_status"],
            )?,
            outlier_ejections: register_family(
                &registry,
                "sluice_outlier_ejections_total",
                "Endpoints ejected by their cluster's outlier_detection after answering 5xx (or failing after the connect) too many times in a row.",
                &["cluster", "endpoint"],
            )?,
            breaker_overflow: register_family(
                &registry,
                "sluice_circuit_breaker_overflow_total",
                "Requests refused (503) because a circuit breaker of their cluster was open (max_requests in flight, max_pending waiting for a connection, max_connections open upstream), and retries not made past its retry_budget.",
                &["cluster", "breaker"],
            )?,
            registry,
        })
    }

    /// Resolves the handles of one (route, cluster) pair. Called when a
    /// snapshot is built, never per request.
    pub fn route_cluster(&self, route: &str, cluster: &str, version: &str) -> RouteClusterMetrics {
        RouteClusterMetrics {
            requests: Source::ALL.map(|s| {
                StatusClass::ALL.map(|c| {
                    self.requests.with_label_values(&[
                        route,
                        cluster,
                        version,
                        c.label(),
                        s.label(),
                    ])
                })
            }),
            duration: Source::ALL.map(|s| {
                self.duration
                    .with_label_values(&[route, cluster, version, s.label()])
            }),
            proxy_errors: Failure::ALL.map(|f| {
                self.proxy_errors
                    .with_label_values(&[route, cluster, f.reason()])
            }),
        }
    }

    /// Counts one gRPC call. The method is the request's, so this handle is
    /// looked up per call (gRPC calls only): a service's methods are few.
    pub fn grpc_request(&self, labels: [&str; 3], method: &str, status: Option<u32>) {
        let code = status.map(|c| c.to_string());
        let [route, cluster, version] = labels;
        self.grpc_requests
            .with_label_values(&[
                route,
                cluster,
                version,
                method,
                code.as_deref().unwrap_or("unknown"),
            ])
            .inc();
    }

    /// The registry in Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = Vec::with_capacity(16 * 1024);
        // Encoding into a Vec cannot fail for the text format.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(out).unwrap_or_default()
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abandoned_request_is_client_closed_not_1xx() {
        // Status 0: the client left before an answer was written.
        assert_eq!(StatusClass::of(0), StatusClass::ClientClosed);
        assert_eq!(StatusClass::of(0).label(), "client_closed");
        assert_eq!(StatusClass::of(101).label(), "1xx");
        let m = Metrics::new().unwrap_or_else(|e| unreachable!("{e}"));
        m.route_cluster("chat", "stable", "v1")
            .record(0, 1.5, Source::User);
        let text = m.encode();
        assert!(text.contains(
            "sluice_requests_total{cluster=\"stable\",route=\"chat\",source=\"user\",status_class=\"client_closed\",version=\"v1\"} 1"
        ));
        assert!(text.contains(
            "sluice_requests_total{cluster=\"stable\",route=\"chat\",source=\"user\",status_class=\"1xx\",version=\"v1\"} 0"
        ));
    }

    #[test]
    fn records_show_up_in_text() {
        let m = Metrics::new().unwrap_or_else(|e| unreachable!("{e}"));
        let rc = m.route_cluster("chat", "stable", "v1");
        rc.record(200, 0.02, Source::User);
        rc.record(503, 0.5, Source::User);
        rc.record(200, 0.03, Source::Load);
        rc.record_failure(Failure::ConnectError);
        m.load_stripped.inc(Stripped::Untrusted);
        let text = m.encode();
        assert!(text.contains(
            "sluice_requests_total{cluster=\"stable\",route=\"chat\",source=\"user\",status_class=\"2xx\",version=\"v1\"} 1"
        ));
        assert!(text.contains(
            "sluice_requests_total{cluster=\"stable\",route=\"chat\",source=\"load\",status_class=\"2xx\",version=\"v1\"} 1"
        ));
        assert!(text.contains("sluice_load_header_stripped_total{reason=\"untrusted\"} 1"));
        assert!(text.contains(
            "sluice_requests_total{cluster=\"stable\",route=\"chat\",source=\"user\",status_class=\"client_closed\",version=\"v1\"} 0"
        ));
        assert!(text.contains("sluice_load_header_stripped_total{reason=\"invalid\"} 0"));
        assert!(text.contains(
            "sluice_proxy_errors_total{cluster=\"stable\",reason=\"connect_error\",route=\"chat\"} 1"
        ));
        assert!(text.contains("sluice_request_duration_seconds_count{cluster=\"stable\",route=\"chat\",source=\"user\",version=\"v1\"} 2"));
        assert!(text.contains("sluice_request_duration_seconds_count{cluster=\"stable\",route=\"chat\",source=\"load\",version=\"v1\"} 1"));
    }
}
