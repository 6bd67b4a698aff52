//! Plots as inline SVG, drawn here: linear axes with round ticks (or a
//! log-scaled x axis with ticks at 1, 2 and 5 of each decade), lines,
//! dots, shaded bands and marked verticals. Data marks carry the class
//! `mark` (the browser test counts them); colours come from the page's CSS.

use std::fmt::Write as _;

const W: f64 = 560.0;
const H: f64 = 300.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 16.0;
/// Room above the plot for the title (y 20) and, below it, the legend's row
/// (y 36): on one row a wide legend ran into the title.
const TOP: f64 = 48.0;
const BOTTOM: f64 = 46.0;
/// A legend row's height, for legends wider than the plot.
const LEGEND_ROW: f64 = 16.0;

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    Line,
    /// Dashed: the baseline's.
    Dashed,
    Dots,
}

/// One series: its legend, points and colour (`c0`…`c7`, or `base`).
#[derive(Clone, Debug)]
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<[f64; 2]>,
    pub class: String,
    pub kind: Kind,
}

/// A plot.
#[derive(Clone, Debug, Default)]
pub(crate) struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Shaded x ranges with a label (stages).
    pub bands: Vec<(f64, f64, String)>,
    /// Marked x positions with a label (the knee).
    pub verticals: Vec<(f64, String)>,
    /// Forced ranges; else from the data, from 0.
    pub x_max: Option<f64>,
    pub y_max: Option<f64>,
    /// A log10 x axis from `x_min` (else the smallest x > 0) to `x_max`:
    /// values ≤ 0 are left out.
    pub log_x: bool,
    pub x_min: Option<f64>,
    /// The page's whole width.
    pub wide: bool,
}

/// Text for an SVG or HTML text node or attribute.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A round step giving about `n` ticks over `span`.
fn tick_step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// A tick label: no trailing zeros, thousands as `k`.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{}k", trim(v / 1000.0, 1))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(v, 2)
    } else {
        trim(v, 4)
    }
}

fn trim(v: f64, places: usize) -> String {
    let s = format!("{v:.places$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

fn upper(c: &Chart, axis: usize) -> f64 {
    let data = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(move |p| p[axis]))
        .chain(if axis == 0 {
            c.bands
                .iter()
                .map(|b| b.1)
                .chain(c.verticals.iter().map(|v| v.0))
                .collect()
        } else {
            Vec::new()
        })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let max = if axis == 0 { c.x_max } else { c.y_max }.unwrap_or(data * 1.05);
    if max > 0.0 {
        max
    } else {
        1.0
    }
}

/// How x values map to the plot's width.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    /// From 0 to the bound.
    Linear(f64),
    /// log10 of the value, between two values > 0.
    Log(f64, f64),
}

impl Scale {
    fn of(c: &Chart) -> Scale {
        let hi = upper(c, 0);
        if !c.log_x {
            return Scale::Linear(hi);
        }
        let lo = c.x_min.filter(|v| *v > 0.0).unwrap_or_else(|| {
            c.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p[0]))
                .filter(|v| v.is_finite() && *v > 0.0)
                .fold(f64::INFINITY, f64::min)
        });
        // One decade at least, so that a single value still has an axis.
        let lo = if lo.is_finite() && lo < hi { lo } else { hi };
        Scale::Log(lo.min(hi / 10.0), hi)
    }

    /// Where `v` falls, from 0 (left) to 1 (right); `None` for a value a
    /// log axis cannot show.
    fn frac(self, v: f64) -> Option<f64> {
        match self {
            Scale::Linear(m) => Some(v / m),
            Scale::Log(_, _) if v <= 0.0 => None,
            Scale::Log(lo, hi) => Some((v / lo).log10() / (hi / lo).log10()),
        }
        .map(|f| f.clamp(0.0, 1.0))
    }

    /// Round ticks: multiples of a round step, or 1, 2 and 5 of each
    /// decade (1 alone past four decades, so that the labels do not
    /// crowd).
    fn ticks(self) -> Vec<f64> {
        match self {
            Scale::Linear(m) => {
                let step = tick_step(m, 6.0);
                (0..=((m / step).floor() as usize).min(50))
                    .map(|i| i as f64 * step)
                    .collect()
            }
            Scale::Log(lo, hi) => {
                let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
                let steps: &[f64] = if b - a > 4 { &[1.0] } else { &[1.0, 2.0, 5.0] };
                (a..=b)
                    .flat_map(|k| steps.iter().map(move |m| m * 10f64.powi(k)))
                    .filter(|v| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9))
                    .collect()
            }
        }
    }
}

/// The chart as an `<svg>` element.
pub(crate) fn render(c: &Chart) -> String {
    let (scale, ym) = (Scale::of(c), upper(c, 1));
    // A wide chart spans the page at the same type size.
    let w = if c.wide { 2.0 * W + 18.0 } else { W };
    let (pw, ph) = (w - LEFT - RIGHT, H - TOP - BOTTOM);
    // The legend's rows, each as wide as the plot at most; every row past
    // the first pushes the plot down and makes the chart taller.
    let rows = legend_rows(&c.series, pw);
    let extra = LEGEND_ROW * rows.len().saturating_sub(1) as f64;
    let (top, h) = (TOP + extra, H + extra);
    let x = |v: f64| LEFT + scale.frac(v).unwrap_or(0.0) * pw;
    let y = |v: f64| top + ph - (v / ym).clamp(0.0, 1.0) * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {w} {h}" role="img" aria-label="{t}"><text class="title" x="{LEFT}" y="20">{t}</text>"#,
        t = esc(&c.title)
    );
    for (a, b, label) in &c.bands {
        let _ = write!(
            s,
            r#"<rect class="band" x="{:.1}" y="{top}" width="{:.1}" height="{ph}"/><text class="band-label" x="{:.1}" y="{:.1}">{}</text>"#,
            x(*a),
            (x(*b) - x(*a)).max(1.0),
            x(*a) + 3.0,
            top + 12.0,
            esc(label)
        );
    }
    let ys = tick_step(ym, 5.0);
    for i in 0..=((ym / ys).floor() as usize).min(50) {
        let v = i as f64 * ys;
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT + pw,
            LEFT - 6.0,
            y(v) + 4.0,
            num(v),
            yy = y(v)
        );
    }
    for v in scale.ticks() {
        let _ = write!(
            s,
            r#"<line class="axis" x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}"/><text class="tick" x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            top + ph,
            top + ph + 4.0,
            top + ph + 17.0,
            num(v),
            xx = x(v)
        );
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{LEFT}" x2="{:.1}" y1="{b:.1}" y2="{b:.1}"/><line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{b:.1}"/><text class="label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="label" transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        LEFT + pw,
        LEFT + pw / 2.0,
        // Under the plot, which the legend's extra rows pushed down.
        h - 8.0,
        esc(&c.x_label),
        top + ph / 2.0,
        esc(&c.y_label),
        b = top + ph
    );
    for (v, label) in &c.verticals {
        let _ = write!(
            s,
            r#"<line class="mark vertical" x1="{xx:.1}" x2="{xx:.1}" y1="{top}" y2="{:.1}"/><text class="vertical-label" x="{:.1}" y="{:.1}">{}</text>"#,
            top + ph,
            x(*v) + 4.0,
            top + 24.0,
            esc(label),
            xx = x(*v)
        );
    }
    for sr in &c.series {
        let pts: Vec<&[f64; 2]> = sr
            .points
            .iter()
            .filter(|p| p[0].is_finite() && p[1].is_finite() && scale.frac(p[0]).is_some())
            .collect();
        if pts.is_empty() {
            continue;
        }
        match sr.kind {
            Kind::Dots => {
                for p in pts {
                    let _ = write!(
                        s,
                        r#"<circle class="mark {}" cx="{:.1}" cy="{:.1}" r="3.5"/>"#,
                        sr.class,
                        x(p[0]),
                        y(p[1])
                    );
                }
            }
            Kind::Line | Kind::Dashed => {
                let mut d = String::new();
                for (i, p) in pts.iter().enumerate() {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1}",
                        if i == 0 { "M" } else { "L" },
                        x(p[0]),
                        y(p[1])
                    );
                }
                let dash = if sr.kind == Kind::Dashed {
                    " dashed"
                } else {
                    ""
                };
                let _ = write!(s, r#"<path class="mark line {}{dash}" d="{d}"/>"#, sr.class);
            }
        }
    }
    // The legend, right-aligned in rows under the title.
    for (k, row) in rows.iter().enumerate() {
        let ky = 36.0 + LEGEND_ROW * k as f64;
        let mut lx = w - RIGHT;
        for sr in row.iter().rev() {
            lx -= key_width(sr);
            let _ = write!(
                s,
                r#"<rect class="key {}" x="{lx:.1}" y="{:.1}" width="12" height="4"/><text class="legend" x="{:.1}" y="{ky:.1}">{}</text>"#,
                sr.class,
                ky - 6.0,
                lx + 16.0,
                esc(&sr.name)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// A legend entry's width: its key and its name at about 7 px a letter.
fn key_width(s: &Series) -> f64 {
    7.0 * s.name.chars().count() as f64 + 24.0
}

/// The series in legend rows no wider than `width`, in order (one per row
/// when a single name is wider).
fn legend_rows(series: &[Series], width: f64) -> Vec<Vec<&Series>> {
    let mut rows: Vec<Vec<&Series>> = Vec::new();
    let mut used = f64::INFINITY;
    // A series without a name (dots sharing their line's colour) has no key.
    for s in series.iter().filter(|s| !s.name.is_empty()) {
        let w = key_width(s);
        if used + w > width {
            rows.push(Vec::new());
            used = 0.0;
        }
        used += w;
        if let Some(row) = rows.last_mut() {
            row.push(s);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn chart(points: Vec<[f64; 2]>, log_x: bool) -> Chart {
        Chart {
            series: vec![Series {
                name: "s".to_owned(),
                points,
                class: "c0".to_owned(),
                kind: Kind::Line,
            }],
            log_x,
            ..Chart::default()
        }
    }

    #[test]
    fn a_log_axis_puts_each_decade_the_same_width_apart() {
        let c = Chart {
            x_min: Some(1.0),
            x_max: Some(100.0),
            ..chart(vec![[1.0, 0.0], [100.0, 1.0]], true)
        };
        let s = Scale::of(&c);
        assert_eq!(s, Scale::Log(1.0, 100.0));
        assert_eq!(s.frac(10.0), Some(0.5));
        assert_eq!(s.frac(1000.0), Some(1.0));
        assert_eq!(s.frac(0.0), None);
        assert_eq!(s.ticks(), [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        // Past four decades, one tick a decade; the smallest x > 0 is the
        // start when none is given, and a point at 0 is not drawn.
        let wide = chart(vec![[0.0, 0.0], [0.03, 0.1], [700.0, 1.0]], true);
        let s = Scale::of(&Chart {
            x_max: Some(700.0),
            ..wide.clone()
        });
        assert_eq!(s, Scale::Log(0.03, 700.0));
        let ticks = s.ticks();
        assert_eq!(ticks.len(), 4, "{ticks:?}");
        for (t, want) in ticks.iter().zip([0.1, 1.0, 10.0, 100.0]) {
            assert!((t / want - 1.0).abs() < 1e-12, "{ticks:?}");
        }
        let svg = render(&wide);
        assert_eq!(svg.matches("<path class=\"mark").count(), 1);
        assert!(svg.contains(r#"d="M62.0,"#), "{svg}");
        // A linear axis is unchanged: from 0, round steps.
        assert_eq!(
            Scale::of(&chart(vec![[10.0, 1.0]], false)),
            Scale::Linear(10.5)
        );
    }
}
