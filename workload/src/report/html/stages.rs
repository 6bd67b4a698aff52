//! The stages section: each stage's TTFT beside the KV-cache pressure the
//! proxy reported, and a context sweep's stages against their prompt
//! length, the context limit marked.

use std::fmt::Write as _;

use super::super::svg::{esc, render, Chart, Kind};
use super::super::Report;
use super::{figure, line, opt};
use crate::load::SweepResult;

fn ratio(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |r| format!("{r:.3}"))
}

pub(super) fn stages(s: &mut String, r: &Report) {
    if let Some(c) = &r.context_sweep {
        sweep(s, c);
    }
    if r.stages.len() < 2 && r.stages.iter().all(|st| st.mean_kvcache_ratio.is_none()) {
        return;
    }
    s.push_str("<h2>Stages</h2><table><tr><th>stage</th><th>requests</th><th>failed</th><th>truncated</th><th>p50 TTFT ms</th><th>p95 TTFT ms</th><th>p99 gap ms</th><th>mean KV-cache ratio</th><th>max KV-cache ratio</th></tr>");
    for st in &r.stages {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            st.stage, st.requests, st.failed, st.truncated,
            opt(st.p50_ttft_ms, ""), opt(st.p95_ttft_ms, ""), opt(st.p99_itl_ms, ""),
            ratio(st.mean_kvcache_ratio), ratio(st.max_kvcache_ratio)
        );
    }
    s.push_str("</table><p class=\"note\">KV-cache ratio: the serving endpoint's usage as the sluice proxy's upstream scrape last read it (at most once a second), per request; – where the answers carried none.</p>");
}

fn sweep(s: &mut String, c: &SweepResult) {
    s.push_str("<h2>Context sweep</h2>");
    match &c.context_limit {
        Some(l) => {
            let _ = write!(
                s,
                r#"<div class="banner bad">Context limit: {} input tokens (stage {}): {}.</div>"#,
                l.input_tokens,
                l.stage,
                esc(l.reason.as_str())
            );
        }
        None => {
            let _ = write!(
                s,
                r#"<div class="banner good">No context limit from {} to {} input tokens: no errors, truncations or TTFT jump.</div>"#,
                c.from, c.to
            );
        }
    }
    let point = |f: fn(&crate::load::SweepStage) -> Option<f64>| {
        c.stages
            .iter()
            .filter_map(|st| Some([st.input_tokens as f64, f(st)?]))
            .collect::<Vec<_>>()
    };
    let chart = render(&Chart {
        title: "TTFT against input tokens".to_owned(),
        x_label: "input tokens".to_owned(),
        y_label: "ms".to_owned(),
        series: vec![
            line("TTFT p50", "c0", Kind::Line, point(|st| st.p50_ttft_ms)),
            line("TTFT p95", "c2", Kind::Line, point(|st| st.p95_ttft_ms)),
            line("gap p99", "c3", Kind::Dashed, point(|st| st.p99_itl_ms)),
        ],
        verticals: c
            .context_limit
            .iter()
            .map(|l| (l.input_tokens as f64, format!("limit {}", l.input_tokens)))
            .collect(),
        ..Chart::default()
    });
    let _ = write!(
        s,
        r#"<div class="plots">{}</div>"#,
        figure(chart, "Each stage's prompt length against its TTFT and gap; the first stage with errors, truncations or a TTFT p50 jump (over 2× the previous stage's and 100 ms more) is marked.")
    );
    s.push_str("<table><tr><th>stage</th><th>input tokens</th><th>requests</th><th>errors</th><th>truncations</th><th>p50 TTFT ms</th><th>p95 TTFT ms</th><th>p99 gap ms</th><th></th></tr>");
    for st in &c.stages {
        let mark = match &c.context_limit {
            Some(l) if l.stage == st.stage => "◀ limit",
            _ => "",
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            st.stage, st.input_tokens, st.requests, st.errors, st.truncations,
            opt(st.p50_ttft_ms, ""), opt(st.p95_ttft_ms, ""), opt(st.p99_itl_ms, ""), mark
        );
    }
    s.push_str("</table>");
}
