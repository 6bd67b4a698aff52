//! The capacity section: the recommendation, offered against achieved
//! rate with the knee, P99 against output tokens with each stage's slope,
//! and the stages' table.

use std::fmt::Write as _;

use super::super::svg::{esc, num, render, Chart, Kind};
use super::super::Capacity;
use super::{figure, line, opt};

pub(super) fn capacity(s: &mut String, c: &Capacity) {
    s.push_str("<h2>Capacity</h2>");
    let _ = write!(
        s,
        r#"<div class="banner good">Recommended {} req/s · highest rate within every SLA {} req/s. {}</div>"#,
        opt(c.recommended_rate, ""),
        opt(c.max_rate, ""),
        esc(&c.binding)
    );
    let pts = |purpose: &str| -> Vec<[f64; 2]> {
        c.stages
            .iter()
            .filter(|x| x.purpose == purpose)
            .map(|x| [x.rate, x.achieved_rate])
            .collect()
    };
    let top = c
        .stages
        .iter()
        .map(|x| x.rate.max(x.achieved_rate))
        .fold(0.0, f64::max)
        * 1.08;
    let mut verticals = Vec::new();
    if let Some(k) = c.knee.as_ref().and_then(|k| k.rate) {
        verticals.push((k, format!("knee {} req/s", num(k))));
    }
    let achieved = render(&Chart {
        title: "Achieved against offered rate".to_owned(),
        x_label: "offered rate, req/s".to_owned(),
        y_label: "achieved rate, req/s".to_owned(),
        series: vec![
            line(
                "offered = achieved",
                "base",
                Kind::Dashed,
                vec![[0.0, 0.0], [top, top]],
            ),
            line("probe", "c0", Kind::Dots, pts("probe")),
            line("confirm", "c1", Kind::Dots, pts("confirm")),
        ],
        verticals,
        x_max: Some(top.max(1.0)),
        y_max: Some(top.max(1.0)),
        ..Chart::default()
    });
    let mut series = Vec::new();
    for (i, st) in c.stages.iter().enumerate() {
        let class = format!("c{}", i % 6);
        let name = format!("{} req/s", num(st.rate));
        series.push(line(
            &name,
            &class,
            Kind::Dots,
            st.token_bins.iter().map(|b| [b.tokens, b.p99_ms]).collect(),
        ));
        if let (Some(m), Some(b0)) = (st.p99_slope_ms_per_token, st.intercept_ms) {
            let xmax = st.token_bins.iter().map(|b| b.tokens).fold(0.0, f64::max);
            let mut fit = line(
                "",
                &class,
                Kind::Line,
                vec![[0.0, b0], [xmax, b0 + m * xmax]],
            );
            fit.name = format!("{} ms/tok", num(m));
            series.push(fit);
        }
    }
    // Six entries at most in the legend: the fits carry the slope.
    series.retain(|x| x.kind == Kind::Line || c.stages.len() <= 3);
    let slope = render(&Chart {
        title: "P99 end-to-end against output tokens".to_owned(),
        x_label: "output tokens".to_owned(),
        y_label: "P99 E2E, ms".to_owned(),
        series,
        ..Chart::default()
    });
    let _ = write!(
        s,
        r#"<div class="plots">{}{}</div>"#,
        figure(achieved, "Each stage's offered against achieved request rate; the dashed line is where they are equal, the red line the throughput knee."),
        figure(slope, "Each stage's P99 per output-token bin with its fitted slope (Theil–Sen); the slope's growth over the lowest rate's is the load's latency cost per token.")
    );
    s.push_str("<table><tr><th>stage</th><th>offered</th><th>achieved</th><th>tok/s</th><th>slope ms/tok</th><th>excess ms/tok</th><th>$/1k tok</th><th>score</th><th>SLAs</th></tr>");
    for (i, st) in c.stages.iter().enumerate() {
        let sla: Vec<String> = st
            .sla
            .iter()
            .map(|g| {
                format!(
                    "{} {} {}",
                    g.gate,
                    if g.passed { "≤" } else { ">" },
                    num(g.bound)
                )
            })
            .collect();
        let _ = write!(
            s,
            "<tr><td>{i} · {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(&st.purpose),
            num(st.rate),
            num(st.achieved_rate),
            opt(st.token_throughput, ""),
            opt(st.p99_slope_ms_per_token, ""),
            opt(st.p99_excess_ms_per_token, ""),
            opt(st.cost_per_1k, ""),
            opt(st.score, ""),
            esc(&sla.join(", "))
        );
    }
    let _ = write!(
        s,
        "</table><p class=\"note\">The rest of this report shows stage {} ({}).</p>",
        c.shown_stage,
        esc(c
            .stages
            .get(c.shown_stage)
            .map_or("", |x| x.purpose.as_str()))
    );
}
