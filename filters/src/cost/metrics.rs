//! `sluice_cost_usd_total{route,cluster,version,model}`: what the metered
//! tokens cost by their cluster's per-token price table, and beside it
//! `sluice_cost_tokens_total` (the tokens priced), so that USD per 1k
//! tokens is one division over the same answers. A GPU-hour price
//! is paid by time, not by tokens, so it adds nothing here (the rollout
//! gate `cost_per_1k_max` prices the window's length instead): summed over
//! a fleet of sidecars, a counter every instance ticked by the hour would
//! count the same GPUs once per instance.

use prometheus::{Counter, CounterVec, IntCounter, IntCounterVec, Registry};

use super::{ModelPrice, Price};
use crate::metrics::register_family;

/// USD of metered tokens: the family name the proxy exports and the fleet
/// rollouts' PromQL reads.
pub const COST_METRIC: &str = "sluice_cost_usd_total";
/// Input and output tokens priced into [`COST_METRIC`].
pub const COST_TOKENS_METRIC: &str = "sluice_cost_tokens_total";

const LABELS: &[&str] = &["route", "cluster", "version", "model"];

#[derive(Clone)]
pub struct CostMetrics {
    usd: CounterVec,
    tokens: IntCounterVec,
}

impl CostMetrics {
    pub fn new(registry: &Registry) -> prometheus::Result<CostMetrics> {
        Ok(CostMetrics {
            usd: register_family(
                registry,
                COST_METRIC,
                "USD of the metered tokens (input and output) by the cluster's per-token `cost:` table; models the table lacks, and GPU-hour prices, add nothing.",
                LABELS,
            )?,
            tokens: register_family(
                registry,
                COST_TOKENS_METRIC,
                "Input and output tokens priced into sluice_cost_usd_total.",
                LABELS,
            )?,
        })
    }

    /// The meter of one (route, cluster, version): a counter per model of
    /// `price`, resolved now so that a request only scans a short list.
    /// Empty without a per-token table.
    pub fn meter(
        &self,
        route: &str,
        cluster: &str,
        version: &str,
        price: Option<&Price>,
    ) -> CostMeter {
        let models = match price {
            Some(Price::PerToken(models)) => models
                .iter()
                .map(|(model, p)| {
                    let labels = [route, cluster, version, model];
                    Priced {
                        model: model.as_str().into(),
                        price: *p,
                        usd: self.usd.with_label_values(&labels),
                        tokens: self.tokens.with_label_values(&labels),
                    }
                })
                .collect(),
            Some(Price::GpuHour { .. }) | None => Vec::new(),
        };
        CostMeter { models }
    }
}

/// The per-token prices of one (route, cluster, version), each with its
/// counter.
#[derive(Clone, Default)]
pub struct CostMeter {
    models: Vec<Priced>,
}

#[derive(Clone)]
struct Priced {
    model: Box<str>,
    price: ModelPrice,
    usd: Counter,
    tokens: IntCounter,
}

impl CostMeter {
    /// Adds what `input` and `output` tokens of `model` cost, and the
    /// tokens, to its counters, and returns the cost; `None` for a model
    /// without a price.
    pub fn charge(&self, model: &str, input: u64, output: u64) -> Option<f64> {
        let p = self.models.iter().find(|p| *p.model == *model)?;
        let usd = p.price.usd(input, output);
        if usd > 0.0 {
            p.usd.inc_by(usd);
        }
        p.tokens.inc_by(input + output);
        Some(usd)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::RawPrice;

    #[test]
    fn charges_add_up_per_model_and_gpu_hours_add_nothing() {
        let registry = Registry::new();
        let m = CostMetrics::new(&registry).unwrap();
        let price: RawPrice = serde_norway::from_str(
            "{models: {small: {input_per_1k: 0.0005, output_per_1k: 0.0015}, \
              big: {input_per_1k: 0.01, output_per_1k: 0.03}}}",
        )
        .unwrap();
        let meter = m.meter("chat", "a", "v2", Some(&price.validate("cost").unwrap()));
        // 7 input and 12 output tokens of `small`: (7 × 0.0005 + 12 × 0.0015) / 1000.
        let one = meter.charge("small", 7, 12).unwrap();
        assert!((one - 0.0000215).abs() < 1e-15, "{one}");
        meter.charge("small", 7, 12);
        // (1000 × 0.01 + 500 × 0.03) / 1000 = 0.025.
        assert_eq!(meter.charge("big", 1000, 500), Some(0.025));
        assert_eq!(meter.charge("unpriced", 1000, 500), None);
        let gpu = RawPrice {
            gpu_hour: Some(2.5),
            ..RawPrice::default()
        };
        let by_hour = m.meter("chat", "b", "v1", Some(&gpu.validate("cost").unwrap()));
        assert_eq!(by_hour.charge("small", 7, 12), None);
        assert_eq!(CostMeter::default().charge("small", 7, 12), None);

        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        let series = |model: &str| {
            let head = format!(
                "{COST_METRIC}{{cluster=\"a\",model=\"{model}\",route=\"chat\",version=\"v2\"}} "
            );
            let line = text.lines().find(|l| l.starts_with(&head)).unwrap();
            line[head.len()..].parse::<f64>().unwrap()
        };
        assert!((series("small") - 2.0 * 0.0000215).abs() < 1e-15);
        assert_eq!(series("big"), 0.025);
        assert!(text.contains(
            "sluice_cost_tokens_total{cluster=\"a\",model=\"small\",route=\"chat\",version=\"v2\"} 38"
        ));
        assert!(!text.contains("cluster=\"b\""), "{text}");
    }
}
