//! Baselines as the SLO's history: each saved run is a copy of its result
//! file at `DIR/NAME/NNNN.json`, numbered in the order saved, so that the
//! newest is the highest number and `baseline list` reads the trend.

use std::path::{Path, PathBuf};

use super::diff::Metric;
use super::input::{parse_json, Run};
use super::svg::num;
use super::Input;

/// One saved run.
#[derive(Clone, Debug, PartialEq)]
pub struct Saved {
    pub name: String,
    pub seq: u32,
    pub path: PathBuf,
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--name `{name}`: a baseline's name is 1 to 64 of A-Z a-z 0-9 - _ . (not starting \
             with .)"
        ))
    }
}

/// The saved runs of `name`, oldest first (none when the directory is
/// absent).
pub fn saved(dir: &Path, name: &str) -> Result<Vec<Saved>, String> {
    check_name(name)?;
    let at = dir.join(name);
    let entries = match std::fs::read_dir(&at) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", at.display())),
    };
    let mut out: Vec<Saved> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let seq = file.strip_suffix(".json")?.parse().ok()?;
            Some(Saved {
                name: name.to_owned(),
                seq,
                path: e.path(),
            })
        })
        .collect();
    out.sort_by_key(|s| s.seq);
    Ok(out)
}

/// Saves a result file's text under `name`, after checking that it is
/// one.
pub fn save_baseline(dir: &Path, name: &str, text: &[u8]) -> Result<Saved, String> {
    check_name(name)?;
    Input::read(&parse_json(text)?)?;
    let seq = saved(dir, name)?.last().map_or(1, |s| s.seq + 1);
    let path = dir.join(name).join(format!("{seq:04}.json"));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    crate::write_atomically(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Saved {
        name: name.to_owned(),
        seq,
        path,
    })
}

/// The newest saved run of `name`.
pub fn newest_baseline(dir: &Path, name: &str) -> Result<Saved, String> {
    saved(dir, name)?.pop().ok_or_else(|| {
        format!(
            "no saved baseline `{name}` in {} (save one with `sluice baseline save RUN.json \
             --name {name}`)",
            dir.display()
        )
    })
}

/// Every baseline name in `dir` with its saved runs.
pub fn list_baselines(dir: &Path) -> Result<Vec<(String, Vec<Saved>)>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| check_name(n).is_ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| saved(dir, &n).map(|s| (n, s)))
        .collect()
}

/// Eight levels for the trend's sparkline.
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Each metric over the saved runs (oldest first): the values, the change
/// of the newest against the oldest, and a sparkline.
pub fn trend_table(name: &str, runs: &[(Saved, Run)], metrics: &[Metric]) -> String {
    let mut lines = vec![format!(
        "{name}: {} saved run{}",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    )];
    for (s, r) in runs {
        lines.push(format!(
            "  #{}  {}  {}  {}",
            s.seq,
            r.started_at,
            r.scenario,
            s.path.display()
        ));
    }
    let mut head = format!("  {:<28}", "metric");
    for (s, _) in runs {
        head.push_str(&format!(" {:>9}", format!("#{}", s.seq)));
    }
    head.push_str("     trend");
    lines.push(head);
    for m in metrics {
        let values: Vec<Option<f64>> = runs
            .iter()
            .map(|(_, r)| m.value(&r.summary, r.duration_s()))
            .collect();
        let mut line = format!("  {:<28}", format!("{} ({})", m.name(), m.unit()));
        for v in &values {
            line.push_str(&format!(" {:>9}", v.map_or("-".to_owned(), num)));
        }
        let known: Vec<f64> = values.iter().flatten().copied().collect();
        let (lo, hi) = known
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(*v), b.max(*v))
            });
        let spark: String = values
            .iter()
            .map(|v| match v {
                None => ' ',
                Some(v) if hi > lo => {
                    BARS[(((v - lo) / (hi - lo)) * 7.0).round().clamp(0.0, 7.0) as usize]
                }
                Some(_) => BARS[3],
            })
            .collect();
        let change = match (known.first(), known.last()) {
            (Some(a), Some(b)) if known.len() > 1 && *a != 0.0 => {
                format!("{:+.1}%", 100.0 * (b - a) / a)
            }
            _ => "-".to_owned(),
        };
        line.push_str(&format!("  {spark}  {change}"));
        lines.push(line);
    }
    lines.join("\n")
}
