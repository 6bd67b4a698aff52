//! The summary `sluice load` prints: counts, rates, each measure's mean,
//! median and p99, and the thresholds.

use sluice_workload::{RunReport, LOAD_MEASURES};

pub(super) fn render(r: &RunReport) -> String {
    let m = |name: &str| {
        r.summary
            .metrics
            .get(name)
            .map_or("-".to_owned(), |v| format!("{v:.2}"))
    };
    let mut lines = vec![
        if r.interrupted {
            "INTERRUPTED: a partial result (Ctrl-C)".to_owned()
        } else {
            String::new()
        },
        format!(
            "{} ({}{}), shard {}, seed {}",
            r.scenario,
            r.mode,
            r.users.map_or(String::new(), |u| format!(", {u} users")),
            r.shard,
            r.seed
        ),
        format!(
            "requests {}  completed {}  failed {}  429 {}  timeouts {}  queued {}  late {}  cut {} in flight, {} waiting",
            r.summary.requests,
            r.summary.completed,
            r.summary.failed,
            r.summary.rate_limited,
            r.summary.timeouts,
            r.dispatch.queued,
            r.summary.late,
            r.dispatch.cut_in_flight,
            r.dispatch.cut_waiting
        ),
        format!(
            "request_throughput {} req/s  output_throughput {} tok/s  request_goodput {} req/s",
            m("request_throughput"),
            m("output_throughput"),
            m("request_goodput")
        ),
    ];
    for name in LOAD_MEASURES {
        lines.push(format!(
            "{name:<13} mean {:>9}  median {:>9}  p99 {:>9} ms",
            m(&format!("mean_{name}_ms")),
            m(&format!("median_{name}_ms")),
            m(&format!("p99_{name}_ms"))
        ));
    }
    for t in &r.thresholds {
        lines.push(format!(
            "threshold {} <= {}: {} ({})",
            t.name,
            t.bound,
            if t.passed { "pass" } else { "FAIL" },
            t.value
                .map_or("not measured".to_owned(), |v| format!("{v:.2}"))
        ));
    }
    lines.retain(|l| !l.is_empty());
    lines.join("\n")
}
