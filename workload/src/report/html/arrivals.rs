//! The inter-arrival section: the run's gaps (and the fitted trace's) as
//! an empirical CDF against each candidate's CDF on a log axis, the best
//! drawn bold, and the candidates' figures beside it.

use std::fmt::Write as _;

use super::super::svg::{esc, num, render, Chart, Kind};
use super::super::Arrivals;
use super::{figure, line, opt};

/// A kind's colour, the same in every report.
fn colour(kind: &str) -> &'static str {
    match kind {
        "exponential" => "c1",
        "gamma" => "c2",
        "weibull" => "c3",
        "lognormal" => "c4",
        _ => "c5",
    }
}

/// Every fifth of the trace's percentiles is drawn as a dot: 21 dots
/// show its shape without hiding the curves under them.
const TRACE_DOT_EVERY: usize = 5;

pub(super) fn arrivals(s: &mut String, a: &Arrivals) {
    s.push_str("<h2>Inter-arrival times against the fit</h2>");
    let mut series = Vec::new();
    for c in &a.candidates {
        let (name, kind, class) = if c.best {
            (
                format!("{} (best)", c.kind),
                Kind::Line,
                format!("{} best", colour(c.kind)),
            )
        } else {
            (c.kind.to_owned(), Kind::Dashed, colour(c.kind).to_owned())
        };
        series.push(line(&name, &class, kind, c.points.clone()));
    }
    // The axis is the grid's: every curve is drawn on it.
    let grid = a.candidates.first().map_or(&a.run, |c| &c.points);
    let (x_min, x_max) = match (grid.first(), grid.last()) {
        (Some(f), Some(l)) => (f[0], l[0]),
        _ => (0.001, 1.0),
    };
    if let Some(t) = &a.trace {
        // A dot beyond the axis would be pinned to its edge: left off.
        let dots = t
            .iter()
            .step_by(TRACE_DOT_EVERY)
            .filter(|p| p[0] >= x_min * (1.0 - 1e-9) && p[0] <= x_max * (1.0 + 1e-9))
            .copied()
            .collect();
        series.push(line("trace (fitted)", "base", Kind::Dots, dots));
    }
    if !a.run.is_empty() {
        series.push(line(
            &format!("this run ({} gaps)", a.gaps),
            "ink",
            Kind::Line,
            a.run.clone(),
        ));
    }
    let chart = render(&Chart {
        title: "Inter-arrival CDF".to_owned(),
        x_label: "time between arrivals, ms (log scale)".to_owned(),
        y_label: "share of gaps ≤ x".to_owned(),
        series,
        x_max: Some(x_max),
        x_min: Some(x_min),
        y_max: Some(1.0),
        log_x: true,
        ..Chart::default()
    });
    let caption = format!(
        "The run's gaps between the intended starts of its journeys ({} above 0{}), against \
         the fit of {} from {}.",
        a.gaps,
        if a.zero_gaps > 0 {
            format!(", {} of 0 left out", a.zero_gaps)
        } else {
            String::new()
        },
        a.of,
        a.source
    );
    let _ = write!(s, r#"<div class="plots">{}"#, figure(chart, &caption));
    s.push_str("<div><table><tr><th>candidate</th><th class=\"l\">parameters</th><th>BIC</th><th>KS</th><th>KL</th><th>KS vs this run</th></tr>");
    for c in &a.candidates {
        let _ = write!(
            s,
            "<tr{}><td>{}{}</td><td class=\"l mono\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if c.best { " class=\"best\"" } else { "" },
            esc(c.kind),
            if c.best { " (best)" } else { "" },
            esc(&c.params),
            opt(c.bic, ""),
            opt(c.ks, ""),
            opt(c.kl, ""),
            c.ks_run.map_or("–".to_owned(), |d| format!("{d:.3}")),
        );
    }
    s.push_str("</table>");
    let _ = write!(
        s,
        r#"<p class="note">BIC, KS and KL are the fit's, against the trace it was fitted to (a model file keeps none); KS vs this run is sup |F_run − F| over the run's {} gaps: under {} a sample of that size would pass a 5% KS test.</p>"#,
        a.gaps,
        if a.gaps > 0 {
            num(1.358 / (a.gaps as f64).sqrt())
        } else {
            "–".to_owned()
        }
    );
    for n in &a.notes {
        let _ = write!(s, r#"<p class="note">{}</p>"#, esc(n));
    }
    s.push_str("</div></div>");
}
