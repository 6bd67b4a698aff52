//! The capacity section: the recommendation, achieved throughput against
//! the offered rate with the knee, P99 against output tokens with each
//! stage's slope, and the stages' table.

use std::fmt::Write as _;

use super::super::svg::{esc, num, render, Chart, Kind};
use super::super::sweep::Stage;
use super::super::Capacity;
use super::{figure, line, opt};
use crate::capacity::SLOPE_MIN_REQUESTS;

pub(super) fn capacity(s: &mut String, c: &Capacity) {
    s.push_str("<h2>Capacity</h2>");
    let _ = write!(
        s,
        r#"<div class="banner good">Recommended {} req/s · highest rate within every SLA {} req/s. {}</div>"#,
        opt(c.recommended_rate, ""),
        opt(c.max_rate, ""),
        esc(&c.binding)
    );
    let achieved = throughput_chart(c);
    let slope = slope_chart(c);
    let _ = write!(
        s,
        r#"<div class="plots">{}{}</div>"#,
        figure(achieved, "What each stage got done against what it offered: output tokens a second (requests a second when no step is a model's). The dashed line is the lowest stage's yield per arrival carried up, where a server with room would stay; the knee (red) is where the curve bends away from it most."),
        figure(slope, &slope_caption(c))
    );
    s.push_str("<table><tr><th>stage</th><th>offered</th><th>achieved</th><th>tok/s</th><th>slope ms/tok (90%)</th><th>excess ms/tok</th><th>$/1k tok</th><th>score</th><th>SLAs</th></tr>");
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
        let verdict = match &st.early_stop {
            Some(why) => format!("stopped early ({}); ", why.replace('_', "-")),
            None => String::new(),
        };
        let _ = write!(
            s,
            "<tr><td>{i} · {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(&st.purpose),
            num(st.rate),
            num(st.achieved_rate),
            opt(st.token_throughput, ""),
            slope_cell(st),
            opt(st.p99_excess_ms_per_token, ""),
            opt(st.cost_per_1k, ""),
            opt(st.score, ""),
            esc(&format!("{verdict}{}", sla.join(", ")))
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

/// Achieved throughput (output tokens a second, or requests a second
/// without model steps) against the offered rate, with the knee.
fn throughput_chart(c: &Capacity) -> String {
    let tokens = c.stages.iter().all(|x| x.token_throughput.is_some());
    let got = |x: &Stage| {
        if tokens {
            x.token_throughput.unwrap_or(0.0)
        } else {
            x.achieved_rate
        }
    };
    let pts = |purpose: &str| -> Vec<[f64; 2]> {
        c.stages
            .iter()
            .filter(|x| x.purpose == purpose)
            .map(|x| [x.rate, got(x)])
            .collect()
    };
    let x_top = c.stages.iter().map(|x| x.rate).fold(0.0, f64::max) * 1.08;
    // The yield per arrival at the lowest stage, where nothing queues.
    let lowest = c
        .stages
        .iter()
        .filter(|x| x.rate > 0.0)
        .min_by(|a, b| a.rate.total_cmp(&b.rate));
    let per_arrival = lowest.map_or(0.0, |x| got(x) / x.rate);
    let y_top = c.stages.iter().map(got).fold(0.0, f64::max) * 1.15;
    // Ended where it leaves the plot: a point past the top would be drawn
    // clamped to it, and the line's slope with it.
    let x_end = if per_arrival > 0.0 {
        x_top.min(y_top / per_arrival)
    } else {
        x_top
    };
    let mut series = vec![
        line(
            "lowest stage's yield carried up",
            "base",
            Kind::Dashed,
            vec![[0.0, 0.0], [x_end, x_end * per_arrival]],
        ),
        line("probe", "c0", Kind::Dots, pts("probe")),
    ];
    let confirm = pts("confirm");
    if !confirm.is_empty() {
        series.push(line("confirm", "c1", Kind::Dots, confirm));
    }
    let mut verticals = Vec::new();
    if let Some(k) = c.knee.as_ref().and_then(|k| k.rate) {
        verticals.push((k, format!("knee {} req/s", num(k))));
    }
    render(&Chart {
        title: "Achieved throughput against offered rate".to_owned(),
        x_label: "offered rate, req/s".to_owned(),
        y_label: if tokens {
            "output tokens/s".to_owned()
        } else {
            "achieved rate, req/s".to_owned()
        },
        series,
        verticals,
        x_max: Some(x_top.max(1.0)),
        y_max: Some(y_top.max(1.0)),
        ..Chart::default()
    })
}

/// Each stage's P99 bins and fitted line, by rate; the legend names the
/// lines (rate and slope), the dots share their line's colour.
fn slope_chart(c: &Capacity) -> String {
    let mut stages: Vec<&Stage> = c
        .stages
        .iter()
        .filter(|x| !x.token_bins.is_empty())
        .collect();
    stages.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let mut series = Vec::new();
    for (i, st) in stages.iter().enumerate() {
        let class = format!("c{}", i % 8);
        series.push(line(
            "",
            &class,
            Kind::Dots,
            st.token_bins.iter().map(|b| [b.tokens, b.p99_ms]).collect(),
        ));
        if let (Some(m), Some(b0)) = (st.p99_slope_ms_per_token, st.intercept_ms) {
            let xmax = st.token_bins.iter().map(|b| b.tokens).fold(0.0, f64::max);
            let confirm = if st.purpose == "confirm" {
                " confirm"
            } else {
                ""
            };
            series.push(line(
                &format!("{} req/s{confirm}: {} ms/tok", num(st.rate), num(m)),
                &class,
                Kind::Line,
                vec![[0.0, b0], [xmax, b0 + m * xmax]],
            ));
        }
    }
    render(&Chart {
        title: "P99 end-to-end against output tokens".to_owned(),
        x_label: "output tokens".to_owned(),
        y_label: "P99 E2E, ms".to_owned(),
        series,
        ..Chart::default()
    })
}

fn slope_caption(c: &Capacity) -> String {
    if c.stages.iter().all(|x| x.token_bins.is_empty()) {
        return format!(
            "No stage had the {SLOPE_MIN_REQUESTS} answered model requests a slope needs (three \
             output-length bins of 20): longer stages, or a faster server, give it."
        );
    }
    "Each stage's P99 per output-token bin (dots) with its fitted slope (Theil–Sen). The raw \
     slope is the model's time per token; its growth over the lowest rate's is what load adds to \
     each token's cost."
        .to_owned()
}

/// `6.02 (5.71–6.40)`: the slope and its 90% interval.
fn slope_cell(st: &Stage) -> String {
    match (st.p99_slope_ms_per_token, st.p99_slope_interval) {
        (Some(m), Some([low, high])) => format!("{} ({}–{})", num(m), num(low), num(high)),
        (m, _) => opt(m, ""),
    }
}
