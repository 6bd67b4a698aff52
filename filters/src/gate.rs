//! The names of the rollout gates, and the unit each is written in: one
//! table for the rollout's `gates:` (in `control`) and `sluice load`'s
//! `thresholds:` (in `workload`), so the two cannot spell a gate apart.

use serde::Serialize;

crate::name_table! {
    /// The name of one gate, as written in `gates:` and shown by the API.
    /// Every gate is an upper bound on one measure of the canary, except
    /// the lower bounds of [`Gate::is_lower_bound`].
    pub enum Gate: "gate" {
        TtftP95 = "ttft_p95",
        TtftP99 = "ttft_p99",
        /// Gap between content chunks (vLLM's "ITL"), also read as `itl_p99`.
        GapP99 = "gap_p99" | "itl_p99",
        TpotP95 = "tpot_p95",
        LatencyP99 = "latency_p99",
        /// Percent of requests answered 5xx, 0..=100.
        ErrorRate = "error_rate",
        /// Canary latency p99 over stable latency p99.
        P99VsStable = "p99_vs_stable",
        /// Canary TTFT p95 over stable TTFT p95.
        TtftVsStable = "ttft_vs_stable",
        /// Percent of GPU memory used, on the fullest device.
        GpuMemoryMax = "gpu_memory_max",
        /// Requests waiting in the canary model server's queue.
        UpstreamQueueMax = "upstream_queue_max",
        /// USD per 1k tokens (input and output) of the canary, by its
        /// cluster's `cost:` price table.
        CostPer1kMax = "cost_per_1k_max",
        /// Percent of the canary's gRPC calls whose `grpc-status` is not a
        /// failure code (`gates.grpc_failure_codes`), 0..=100: a lower bound.
        GrpcSuccessRateMin = "grpc_success_rate_min",
        /// The 10th percentile of the mirror's last `window` embedding
        /// similarities, shadow (the canary) against primary: a lower bound.
        EmbeddingSimilarityP10Min = "embedding_similarity_p10_min",
        /// KL divergence (nats) of the mirror's embedding-similarity window
        /// from its baseline window.
        EmbeddingDriftKlMax = "embedding_drift_kl_max",
        /// Mean answer dispersion (variance of each answer's similarity to
        /// the centroid) over the mirror's last `window` prompts
        /// (`mirror.stability`).
        AnswerDispersionMax = "answer_dispersion_max",
        /// Percent of the prompt clusters seen since the rollout started
        /// that the canary's traffic touched at this step: a lower bound
        /// that holds a step until met, never a breach.
        MinCoverage = "min_coverage",
    }
}

/// What a gate's bound is written in and judged in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateUnit {
    /// Written as a duration (`800ms`), judged in milliseconds.
    Ms,
    /// `1%` or a number, 0..=100.
    Percent,
    /// A number greater than 0.
    Ratio,
    /// A whole number of requests.
    Requests,
    /// A price in US dollars greater than 0: `0.012` or `$0.012`.
    Usd,
}

impl Serialize for GateUnit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Read back as written (a rollout's history in the saved state).
impl<'de> serde::Deserialize<'de> for GateUnit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        GateUnit::ALL
            .iter()
            .copied()
            .find(|u| u.as_str() == text)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown gate unit `{text}`, expected one of ms, %, ratio, requests, usd"
                ))
            })
    }
}

impl GateUnit {
    const ALL: [GateUnit; 5] = [
        GateUnit::Ms,
        GateUnit::Percent,
        GateUnit::Ratio,
        GateUnit::Requests,
        GateUnit::Usd,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GateUnit::Ms => "ms",
            GateUnit::Percent => "%",
            GateUnit::Ratio => "ratio",
            GateUnit::Requests => "requests",
            GateUnit::Usd => "usd",
        }
    }
}

impl Gate {
    /// The unit its value and bound are given in.
    pub fn unit(self) -> GateUnit {
        match self {
            Gate::TtftP95 | Gate::TtftP99 | Gate::GapP99 | Gate::TpotP95 | Gate::LatencyP99 => {
                GateUnit::Ms
            }
            Gate::ErrorRate | Gate::GpuMemoryMax | Gate::GrpcSuccessRateMin | Gate::MinCoverage => {
                GateUnit::Percent
            }
            Gate::P99VsStable
            | Gate::TtftVsStable
            | Gate::EmbeddingSimilarityP10Min
            | Gate::EmbeddingDriftKlMax
            | Gate::AnswerDispersionMax => GateUnit::Ratio,
            Gate::UpstreamQueueMax => GateUnit::Requests,
            Gate::CostPer1kMax => GateUnit::Usd,
        }
    }

    /// Relative gates compare the canary with stable in the same window.
    pub fn is_relative(self) -> bool {
        match self {
            Gate::P99VsStable | Gate::TtftVsStable => true,
            Gate::TtftP95
            | Gate::TtftP99
            | Gate::GapP99
            | Gate::TpotP95
            | Gate::LatencyP99
            | Gate::ErrorRate
            | Gate::GpuMemoryMax
            | Gate::UpstreamQueueMax
            | Gate::CostPer1kMax
            | Gate::GrpcSuccessRateMin
            | Gate::EmbeddingSimilarityP10Min
            | Gate::EmbeddingDriftKlMax
            | Gate::AnswerDispersionMax
            | Gate::MinCoverage => false,
        }
    }

    /// Read from the route's mirror (`compare.embeddings`), not from the
    /// canary's requests.
    pub fn reads_the_mirror(self) -> bool {
        matches!(
            self,
            Gate::EmbeddingSimilarityP10Min | Gate::EmbeddingDriftKlMax | Gate::AnswerDispersionMax
        )
    }

    /// The canary passes while its value is at least the bound (a success
    /// rate, a similarity), not at most.
    pub fn is_lower_bound(self) -> bool {
        matches!(
            self,
            Gate::GrpcSuccessRateMin | Gate::EmbeddingSimilarityP10Min | Gate::MinCoverage
        )
    }

    /// Whether `value` passes `bound`.
    pub fn passes(self, value: f64, bound: f64) -> bool {
        if self.is_lower_bound() {
            value >= bound
        } else {
            value <= bound
        }
    }
}

impl Gate {
    /// Measured by a load client from its own requests: not the relative
    /// gates (no stable to compare with) nor the server-side ones.
    pub fn measured_by_load(self) -> bool {
        match self {
            Gate::TtftP95
            | Gate::TtftP99
            | Gate::GapP99
            | Gate::TpotP95
            | Gate::LatencyP99
            | Gate::ErrorRate => true,
            // `sluice capacity` prices what a load measured by the
            // scenario's `cost:`, outside the gate table.
            Gate::P99VsStable
            | Gate::TtftVsStable
            | Gate::GpuMemoryMax
            | Gate::UpstreamQueueMax
            | Gate::CostPer1kMax
            | Gate::GrpcSuccessRateMin
            | Gate::EmbeddingSimilarityP10Min
            | Gate::EmbeddingDriftKlMax
            | Gate::AnswerDispersionMax
            | Gate::MinCoverage => false,
        }
    }

    /// Holds a step while below its bound instead of breaching: not enough
    /// evidence yet, as too few samples.
    pub fn holds_until_met(self) -> bool {
        self == Gate::MinCoverage
    }
}
