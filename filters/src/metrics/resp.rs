//! The `sluice_resp_*` families: what the RESP observer of `kind: cache`
//! clusters saw, per (listener, cluster). Command handles are resolved on a
//! command's first use, so a listener exports series only for the commands
//! its clients send, and the label set stays bounded by the command table.

use std::sync::{Arc, OnceLock};

use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec, Registry};

use super::family::{register_family, register_histogram};

use crate::resp::{Command, Exchange, Fallback};

/// Redis answers in tens of microseconds on loopback and in milliseconds
/// across a network; blocking commands wait for seconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Clone)]
pub struct RespMetrics {
    duration: HistogramVec,
    commands: IntCounterVec,
    gets: IntCounterVec,
    fallbacks: IntCounterVec,
}

impl RespMetrics {
    pub(super) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            duration: register_histogram(
                registry,
                "sluice_resp_command_duration_seconds",
                "RESP command latency: request's last byte sent upstream to reply's last byte received.",
                LATENCY_BUCKETS,
                &["listener", "cluster", "command"],
            )?,
            commands: register_family(
                registry,
                "sluice_resp_commands_total",
                "RESP commands answered, by command and reply class (ok or error).",
                &["listener", "cluster", "command", "result"],
            )?,
            gets: register_family(
                registry,
                "sluice_resp_get_total",
                "GET replies: hit (a value) or miss (nil).",
                &["listener", "cluster", "result"],
            )?,
            fallbacks: register_family(
                registry,
                "sluice_resp_fallback_connections_total",
                "Connections no longer observed (bytes still copied), by reason.",
                &["listener", "cluster", "reason"],
            )?,
        })
    }

    /// The handles of one (listener, cluster). Called once per listener.
    pub fn handles(&self, listener: &str, cluster: &str) -> Arc<RespHandles> {
        let gets = |result| self.gets.with_label_values(&[listener, cluster, result]);
        Arc::new(RespHandles {
            families: self.clone(),
            listener: listener.to_owned(),
            cluster: cluster.to_owned(),
            commands: (0..Command::COUNT).map(|_| OnceLock::new()).collect(),
            get_hit: gets("hit"),
            get_miss: gets("miss"),
            fallbacks: Fallback::ALL.map(|f| {
                self.fallbacks
                    .with_label_values(&[listener, cluster, f.reason()])
            }),
        })
    }
}

/// One command's series.
struct CommandHandles {
    duration: Histogram,
    ok: IntCounter,
    error: IntCounter,
}

/// What one (listener, cluster) records into; shared by its connections.
pub struct RespHandles {
    families: RespMetrics,
    listener: String,
    cluster: String,
    commands: Box<[OnceLock<CommandHandles>]>,
    get_hit: IntCounter,
    get_miss: IntCounter,
    fallbacks: [IntCounter; Fallback::ALL.len()],
}

impl RespHandles {
    pub fn record(&self, exchange: &Exchange) {
        if let Some(command) = self.command(exchange.command) {
            command.duration.observe(exchange.latency_ns as f64 / 1e9);
            if exchange.error {
                command.error.inc();
            } else {
                command.ok.inc();
            }
        }
        match exchange.get_hit() {
            Some(true) => self.get_hit.inc(),
            Some(false) => self.get_miss.inc(),
            None => {}
        }
    }

    pub fn fallback(&self, reason: Fallback) {
        if let Some(counter) = self.fallbacks.get(reason.index()) {
            counter.inc();
        }
    }

    fn command(&self, command: Command) -> Option<&CommandHandles> {
        let slot = self.commands.get(command.index())?;
        Some(slot.get_or_init(|| {
            let labels = [
                self.listener.as_str(),
                self.cluster.as_str(),
                command.label(),
            ];
            let result = |r| {
                let [l, c, n] = labels;
                self.families.commands.with_label_values(&[l, c, n, r])
            };
            CommandHandles {
                duration: self.families.duration.with_label_values(&labels),
                ok: result("ok"),
                error: result("error"),
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchanges_and_fallbacks_show_up_in_text() {
        let m = crate::Metrics::new().unwrap_or_else(|e| unreachable!("{e}"));
        let h = m.resp.handles("cache", "redis");
        let get = Command::named("get");
        let ex = |error, null| Exchange {
            command: get,
            error,
            null,
            queued: false,
            latency_ns: 150_000,
        };
        h.record(&ex(false, false));
        h.record(&ex(false, true));
        h.record(&ex(true, false));
        h.record(&Exchange {
            command: Command::OTHER,
            ..ex(false, false)
        });
        h.fallback(Fallback::BadRequest);
        let text = m.encode();
        for line in [
            "sluice_resp_commands_total{cluster=\"redis\",command=\"get\",listener=\"cache\",result=\"ok\"} 2",
            "sluice_resp_commands_total{cluster=\"redis\",command=\"get\",listener=\"cache\",result=\"error\"} 1",
            "sluice_resp_commands_total{cluster=\"redis\",command=\"other\",listener=\"cache\",result=\"ok\"} 1",
            "sluice_resp_get_total{cluster=\"redis\",listener=\"cache\",result=\"hit\"} 1",
            "sluice_resp_get_total{cluster=\"redis\",listener=\"cache\",result=\"miss\"} 1",
            "sluice_resp_command_duration_seconds_bucket{cluster=\"redis\",command=\"get\",listener=\"cache\",le=\"0.00025\"} 3",
            "sluice_resp_command_duration_seconds_bucket{cluster=\"redis\",command=\"get\",listener=\"cache\",le=\"0.0001\"} 0",
            "sluice_resp_fallback_connections_total{cluster=\"redis\",listener=\"cache\",reason=\"bad_request\"} 1",
            "sluice_resp_fallback_connections_total{cluster=\"redis\",listener=\"cache\",reason=\"bad_reply\"} 0",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        // Commands never sent have no series.
        assert!(!text.contains("command=\"set\""), "{text}");
    }
}
