//! `data:`, the dictionaries a journey draws its variables from: `values`
//! as written, a `file` of one value a line, or the prompts of a `trace`'s
//! recorded (redacted) bodies, read by the same strict reader as a replay
//! and `sluice trace stats`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde_json::Value;

use super::super::raw::{RawData, RawScenario};
use super::super::{Data, TraceData};
use super::Errors;
use crate::trace::{prompt_of, PromptField, TraceReader};

pub(super) fn data(raw: &RawScenario, dir: &Path, e: &mut Errors) -> BTreeMap<String, Data> {
    let mut out = BTreeMap::new();
    for (name, d) in &raw.data {
        let path = format!("data.{name}");
        let word = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !word {
            e.add(&path, "a variable name is letters, digits and `_`");
            continue;
        }
        if let Some((values, from_trace)) = values(d, &path, dir, e) {
            if values.is_empty() {
                e.add(&path, "has no values");
                continue;
            }
            let sequential = match d.order.as_deref() {
                None | Some("random") => false,
                Some("sequential") => true,
                Some(other) => {
                    e.add(
                        format!("{path}.order"),
                        format!("must be `random` or `sequential`, found `{other}`"),
                    );
                    false
                }
            };
            out.insert(
                name.clone(),
                Data {
                    values,
                    sequential,
                    from_trace,
                },
            );
        }
    }
    out
}

/// The values of one variable from the one source it names.
fn values(
    d: &RawData,
    path: &str,
    dir: &Path,
    e: &mut Errors,
) -> Option<(Vec<String>, Option<TraceData>)> {
    let field = match (&d.field, &d.trace) {
        (None, _) => PromptField::default(),
        (Some(f), Some(_)) => e.check(&format!("{path}.field"), PromptField::from_name(f))?,
        (Some(_), None) => {
            e.add(
                format!("{path}.field"),
                "is for `trace` (which prompt of its bodies)",
            );
            return None;
        }
    };
    match (&d.file, &d.values, &d.trace) {
        (Some(file), None, None) => match std::fs::read_to_string(dir.join(file)) {
            Ok(text) => Some((
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect(),
                None,
            )),
            Err(err) => {
                e.add(format!("{path}.file"), format!("{file}: {err}"));
                None
            }
        },
        (None, Some(values), None) => Some((values.clone(), None)),
        (None, None, Some(trace)) => {
            let read = prompts(trace, field, dir);
            let (values, counts) = e.check(&format!("{path}.trace"), read)?;
            Some((values, Some(counts)))
        }
        (file, values, trace) => {
            let given: Vec<&str> = [
                ("file", file.is_some()),
                ("values", values.is_some()),
                ("trace", trace.is_some()),
            ]
            .into_iter()
            .filter_map(|(n, g)| g.then_some(n))
            .collect();
            let found = match given.is_empty() {
                true => "none".to_owned(),
                false => given.join(", "),
            };
            e.add(
                path,
                format!("needs exactly one of `file`, `values` and `trace`, found {found}"),
            );
            None
        }
    }
}

/// The prompts of every line of `file` (relative to `dir`) in file order,
/// and the count of the lines that gave none; an error when none did.
fn prompts(file: &str, field: PromptField, dir: &Path) -> Result<(Vec<String>, TraceData), String> {
    let opened = File::open(dir.join(file)).map_err(|err| format!("{file}: {err}"))?;
    let reader = TraceReader::new(file, BufReader::new(opened), None).map_err(|e| e.to_string())?;
    let mut counts = TraceData {
        file: file.to_owned(),
        field,
        lines: 0,
        without_body: 0,
        without_prompt: 0,
    };
    let mut values = Vec::new();
    for line in reader {
        let line = line.map_err(|e| e.to_string())?;
        counts.lines += 1;
        let Some(body) = line.body else {
            counts.without_body += 1;
            continue;
        };
        let prompt = serde_json::from_str::<Value>(body.0.get())
            .ok()
            .and_then(|b| prompt_of(&b, field));
        match prompt {
            Some(p) => values.push(p),
            None => counts.without_prompt += 1,
        }
    }
    if values.is_empty() {
        return Err(format!(
            "{file}: no line has {} ({} lines, {})",
            field.wants(),
            grouped(counts.lines),
            counts.why()
        ));
    }
    Ok((values, counts))
}

impl TraceData {
    /// The lines that gave no value.
    pub fn skipped(&self) -> u64 {
        self.without_body + self.without_prompt
    }

    /// Why lines gave no value: `1,204 without a body, 3 with a body but
    /// no user prompt` (the parts that are not 0).
    fn why(&self) -> String {
        let what = match self.field {
            PromptField::Prompt => "prompt",
            PromptField::LastUser | PromptField::AllUser => "user prompt",
        };
        let parts = [
            (self.without_body, "without a body".to_owned()),
            (self.without_prompt, format!("with a body but no {what}")),
        ];
        parts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, why)| format!("{} {why}", grouped(*n)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The warning of variable `name` when some lines were skipped.
    pub(crate) fn warning(&self, name: &str) -> Option<String> {
        (self.skipped() > 0).then(|| {
            format!(
                "data.{name}: {} of {} lines of {} gave no value and were skipped ({})",
                grouped(self.skipped()),
                grouped(self.lines),
                self.file,
                self.why()
            )
        })
    }
}

/// `1204` as `1,204`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
