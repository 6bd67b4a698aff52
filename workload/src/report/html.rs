//! The page: one self-contained HTML file (inline CSS and SVG, no script,
//! font or URL), drawn from the [`Report`] that `--json` writes.

use std::fmt::Write as _;

use super::svg::{esc, num, render, Chart, Kind, Series};
use super::{Cdf, Health, MetricDiff, Report};

mod arrivals;
mod capacity;
mod stages;

use arrivals::arrivals;
use capacity::capacity;
use stages::stages;

const CSS: &str = include_str!("page.css");

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or("–".to_owned(), |v| format!("{}{unit}", num(v)))
}

fn line(name: &str, class: &str, kind: Kind, points: Vec<[f64; 2]>) -> Series {
    Series {
        name: name.to_owned(),
        points,
        class: class.to_owned(),
        kind,
    }
}

fn cdf_chart(title: &str, c: &Cdf) -> String {
    // To the 99.9th percentile of either, so that one outlier leaves the
    // body readable.
    let tail = |p: &[[f64; 2]]| {
        p.iter()
            .filter(|p| p[1] <= 0.999)
            .map(|p| p[0])
            .fold(0.0, f64::max)
    };
    let mut x_max = tail(&c.run);
    let mut series = vec![line("this run", "c0", Kind::Line, c.run.clone())];
    if let Some(b) = &c.baseline {
        x_max = x_max.max(tail(b));
        series.push(line("baseline", "base", Kind::Dashed, b.clone()));
    }
    render(&Chart {
        title: title.to_owned(),
        x_label: "ms (axis to the 99.9th percentile)".to_owned(),
        y_label: "share of requests ≤ x".to_owned(),
        series,
        x_max: Some((x_max * 1.05).max(0.001)),
        y_max: Some(1.0),
        ..Chart::default()
    })
}

fn figure(svg: String, caption: &str) -> String {
    format!(
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    )
}

fn verdict(d: &str) -> String {
    let class = match d {
        "regressed" => "v-regressed",
        "improved" => "v-improved",
        "small" => "v-small",
        "n/a" => "v-na",
        _ => "v-within",
    };
    format!(r#"<td class="{class}">{}</td>"#, esc(d))
}

fn diff_rows(s: &mut String, prefix: &str, diffs: &[MetricDiff]) {
    for d in diffs {
        let noise = match (&d.ci, d.p_value) {
            (Some(ci), _) => format!("95% CI [{}, {}]", num(ci.low), num(ci.high)),
            (None, Some(p)) => format!("p = {p:.3}"),
            _ => "–".to_owned(),
        };
        let _ = write!(
            s,
            "<tr><td>{prefix}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l mono\">{}</td>{}</tr>",
            esc(&d.metric),
            opt(d.baseline, ""),
            opt(d.run, ""),
            d.delta.map_or("–".to_owned(), |v| format!("{}{}", if v > 0.0 { "+" } else { "" }, num(v))),
            d.percent.map_or("–".to_owned(), |p| format!("{p:+.1}%")),
            esc(d.unit),
            esc(&format!("{} · {noise}", d.test)),
            verdict(d.verdict)
        );
    }
}

fn lineage(s: &mut String, r: &Report) {
    let l = &r.lineage;
    let seen = if l.seen.is_empty() {
        "none named (the answers carried no sluice headers or model)".to_owned()
    } else {
        l.seen.iter().map(seen_text).collect::<Vec<_>>().join("; ")
    };
    let ids = |ids: &[sluice_filters::ContentId]| match ids.is_empty() {
        true => "–".to_owned(),
        false => ids
            .iter()
            .map(|i| i.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    };
    let items = [
        (
            "report lineage id",
            r.id.as_ref().map_or("–".to_owned(), |i| i.to_string()),
        ),
        ("made from", ids(&r.parents)),
        (
            "run lineage id",
            l.id.clone().unwrap_or_else(|| "–".to_owned()),
        ),
        ("scenario sha256", l.scenario_sha256.clone()),
        ("target", l.target.clone()),
        ("sluice version", l.sluice_version.clone()),
        ("seed", l.seed.map_or("–".to_owned(), |s| s.to_string())),
        ("start", l.started_at.clone()),
        ("end", l.ended_at.clone().unwrap_or_else(|| "–".to_owned())),
        ("run id", l.run_id.clone()),
        ("mode · shard", format!("{} · {}", l.mode, l.shard)),
        ("versions / models seen", seen),
    ];
    s.push_str(r#"<dl class="lineage">"#);
    for (k, v) in items {
        let _ = write!(s, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(&v));
    }
    s.push_str("</dl>");
}

/// `answer: stable v1 · m × 120`.
fn seen_text(s: &crate::load::Seen) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &s.cluster {
        parts.push(match &s.version {
            Some(v) => format!("{c} {v}"),
            None => c.clone(),
        });
    } else if let Some(v) = &s.version {
        parts.push(v.clone());
    }
    if let Some(m) = &s.model {
        parts.push(m.clone());
    }
    format!("{}: {} × {}", s.step, parts.join(" · "), s.requests)
}

fn cards(s: &mut String, r: &Report) {
    let t = &r.totals;
    let ok = if t.passed { "good" } else { "bad" };
    let items = [
        ("requests", t.requests.to_string(), ""),
        (
            "error rate",
            opt(t.error_rate_pct, "%"),
            if t.failed > 0 { "bad" } else { "" },
        ),
        ("throughput", opt(t.request_throughput, " req/s"), ""),
        ("output tokens", opt(t.output_throughput, " tok/s"), ""),
        ("p99 TTFT", opt(t.p99_ttft_ms, " ms"), ""),
        (
            "thresholds",
            if t.passed { "passed" } else { "failed" }.to_owned(),
            ok,
        ),
    ];
    s.push_str(r#"<div class="cards">"#);
    for (k, v, class) in items {
        let _ = write!(
            s,
            r#"<div class="card {class}"><div class="v">{}</div><div class="k">{}</div></div>"#,
            esc(&v),
            esc(k)
        );
    }
    s.push_str("</div>");
}

fn baseline(s: &mut String, r: &Report) {
    let Some(b) = &r.baseline else { return };
    s.push_str("<h2>Against the baseline</h2>");
    let _ = write!(
        s,
        r#"<p class="note">Baseline: <span class="mono">{}</span>, started {}, scenario sha256 <span class="mono">{}</span>.</p>"#,
        esc(&b.lineage.run_id),
        esc(&b.lineage.started_at),
        esc(&b.lineage.scenario_sha256)
    );
    if b.regressions.is_empty() {
        s.push_str(r#"<div class="banner good">No regression beyond noise.</div>"#);
    } else {
        let _ = write!(
            s,
            r#"<div class="banner bad">Regressed: {}</div>"#,
            esc(&b.regressions.join(", "))
        );
    }
    s.push_str("<table><tr><th>metric</th><th>baseline</th><th>this run</th><th>delta</th><th>%</th><th>unit</th><th class=\"l\">test</th><th>verdict</th></tr>");
    diff_rows(s, "", &b.metrics);
    s.push_str("</table>");
}

fn layers(s: &mut String, r: &Report) {
    let a = &r.attribution;
    s.push_str("<h2>Attribution by layer</h2>");
    for h in a.layers.iter().filter_map(|l| l.health.as_ref()) {
        if !h.ok {
            let _ = write!(
                s,
                r#"<div class="banner bad">gRPC calls: {:.2}% ended OK, under {}%{}</div>"#,
                h.value_pct,
                h.min_pct,
                esc(&by_status(h))
            );
        }
    }
    s.push_str("<table><tr><th>layer</th><th class=\"l\">steps</th><th>deviation</th><th>status</th><th>confidence</th><th class=\"l\">health</th><th class=\"l\">worst requests (trace ids)</th></tr>");
    for l in &a.layers {
        let worst: Vec<String> = l
            .worst
            .iter()
            .map(|w| {
                let id = if w.trace_id.is_empty() {
                    format!("journey {}", w.journey)
                } else {
                    w.trace_id.clone()
                };
                format!("{} (+{} ms)", id, num(w.extra_ms))
            })
            .collect();
        let health = match &l.health {
            None => r#"<td class="l">–</td>"#.to_owned(),
            Some(h) => format!(
                r#"<td class="l {}">{:.2}% OK (min {}%){}</td>"#,
                if h.ok { "v-within" } else { "v-regressed" },
                h.value_pct,
                h.min_pct,
                esc(&by_status(h))
            ),
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td>{}<td>{}</td>{}<td class=\"l mono\">{}</td></tr>",
            esc(l.layer),
            esc(&l.steps.join(", ")),
            l.deviation_pct.map_or("–".to_owned(), |p| format!("{p:+.1}%")),
            verdict(l.status),
            l.confidence.map_or("–".to_owned(), |c| format!("{:.0}%", 100.0 * c)),
            health,
            esc(&worst.join(", "))
        );
    }
    s.push_str("</table>");
    let note = match &a.note {
        Some(n) => n.clone(),
        None => format!(
            "Confidence: of the {} slowest journeys (at or above the run's p90), the share whose largest extra time over {} is in the layer.",
            a.slow_journeys, a.reference
        ),
    };
    let _ = write!(s, r#"<p class="note">{}</p>"#, esc(&note));
}

/// The failed calls by status, ` · status 14 × 3, 4 × 1`; empty without any.
fn by_status(h: &Health) -> String {
    if h.not_ok_by_status.is_empty() {
        return String::new();
    }
    let codes: Vec<String> = h
        .not_ok_by_status
        .iter()
        .map(|(code, n)| format!("{code} × {n}"))
        .collect();
    format!(" · status {}", codes.join(", "))
}

/// The tests behind the verdicts: Mann–Whitney per distribution, and each
/// layer's metrics.
fn details(s: &mut String, r: &Report) {
    let Some(b) = &r.baseline else { return };
    s.push_str("<h2>Behind the verdicts</h2>");
    if !b.distributions.is_empty() {
        s.push_str("<table><tr><th>distribution (Mann–Whitney U)</th><th>U</th><th>z</th><th>p</th><th>P(run &gt; baseline)</th><th>beyond noise</th></tr>");
        for d in &b.distributions {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.4}</td><td>{:.3}</td><td>{}</td></tr>",
                d.measure, num(d.test.u), d.test.z, d.test.p, d.test.effect, if d.beyond_noise { "yes" } else { "no" }
            );
        }
        s.push_str("</table>");
    }
    s.push_str("<table style=\"margin-top:12px\"><tr><th>layer metric</th><th>baseline</th><th>this run</th><th>delta</th><th>%</th><th>unit</th><th class=\"l\">test</th><th>verdict</th></tr>");
    for l in &r.attribution.layers {
        diff_rows(s, &format!("{} · ", l.layer), &l.metrics);
    }
    s.push_str("</table>");
}

fn plots(s: &mut String, r: &Report) {
    s.push_str("<h2>Latency</h2><div class=\"plots\">");
    for c in &r.cdfs {
        let (title, caption) = match c.measure {
            "ttft" => (
                "TTFT CDF",
                "Time to first token, from the intended send time.",
            ),
            "itl" => ("Gap (ITL) CDF", "Gaps between content chunks."),
            _ => ("E2E CDF", "Response time: end − intended send time."),
        };
        s.push_str(&figure(cdf_chart(title, c), caption));
    }
    if let Some(c) = &r.dispatch_lag {
        s.push_str(&figure(
            cdf_chart("Dispatch lag CDF", c),
            "Sent − intended: how late the load generator sent.",
        ));
    }
    s.push_str("</div>");
    match &r.timeline {
        Some(t) => {
            let bands = t
                .stages
                .iter()
                .map(|x| (x.from_s, x.to_s + t.bin_s, format!("stage {}", x.stage)))
                .collect();
            let over = render(&Chart {
                title: "Latency over time".to_owned(),
                x_label: format!("s from the start (bins of {} s)", num(t.bin_s)),
                y_label: "ms".to_owned(),
                series: vec![
                    line("E2E p50", "c0", Kind::Line, t.e2el_p50.clone()),
                    line("E2E p99", "c4", Kind::Line, t.e2el_p99.clone()),
                    line("TTFT p99", "c2", Kind::Line, t.ttft_p99.clone()),
                    line("dispatch lag max", "c3", Kind::Dashed, t.lag_max.clone()),
                ],
                bands,
                wide: true,
                ..Chart::default()
            });
            let _ = write!(
                s,
                r#"<div class="plots one" style="margin-top:18px">{}</div>"#,
                figure(over, "Per bin of intended send time; the stages shaded.")
            );
        }
        None => {
            let _ = write!(
                s,
                r#"<p class="note">{}</p>"#,
                esc(r.timeline_note.as_deref().unwrap_or(""))
            );
        }
    }
}

fn tables(s: &mut String, r: &Report) {
    s.push_str("<h2>Steps</h2><table><tr><th>step</th><th>service</th><th>requests</th><th>failed</th><th>median service ms</th><th>p99 service ms</th><th>p99 TTFT ms</th><th>cache hits / misses</th></tr>");
    for st in &r.steps {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td></tr>",
            esc(&st.name), esc(&st.service), st.requests, st.failed,
            opt(st.median_service_time_ms, ""), opt(st.p99_service_time_ms, ""), opt(st.p99_ttft_ms, ""),
            st.cache_hits, st.cache_misses
        );
    }
    s.push_str("</table>");
    if !r.thresholds.is_empty() {
        s.push_str("<h2>Thresholds</h2><table><tr><th>threshold</th><th>step</th><th>bound</th><th>value</th><th>result</th></tr>");
        for t in &r.thresholds {
            let f = |k: &str| t.get(k).and_then(serde_json::Value::as_f64);
            let passed = t.get("passed").and_then(serde_json::Value::as_bool) == Some(true);
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
                esc(t
                    .get("name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")),
                esc(t
                    .get("step")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("run")),
                opt(f("bound"), ""),
                opt(f("value"), ""),
                verdict(if passed { "improved" } else { "regressed" })
                    .replace(">improved<", ">passed<")
                    .replace(">regressed<", ">failed<")
            );
        }
        s.push_str("</table>");
    }
}

/// The page.
pub fn render_page(r: &Report) -> String {
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>sluice report · {}</title><style>{CSS}</style></head><body><main>",
        esc(&r.lineage.scenario)
    );
    let kind = if r.kind == "capacity" {
        "capacity search"
    } else {
        "load run"
    };
    let _ = write!(
        s,
        r#"<header><h1>{}<span class="kind">{kind}</span></h1><p class="sub">{} · {} s measured · {} requests</p></header>"#,
        esc(&r.lineage.scenario),
        esc(&r.lineage.target),
        num(r.lineage.duration_s),
        r.totals.requests
    );
    for w in &r.warnings {
        let _ = write!(s, r#"<div class="warn">Warning: {}</div>"#, esc(w));
    }
    lineage(&mut s, r);
    cards(&mut s, r);
    if let Some(c) = &r.capacity {
        capacity(&mut s, c);
    }
    baseline(&mut s, r);
    layers(&mut s, r);
    plots(&mut s, r);
    if let Some(a) = &r.arrivals {
        arrivals(&mut s, a);
    }
    details(&mut s, r);
    stages(&mut s, r);
    tables(&mut s, r);
    let _ = writeln!(
        s,
        "<footer><strong>Statistics.</strong> {}</footer></main></body></html>",
        esc(r.statistics)
    );
    s
}
