//! The invariants the `trace` and `scenario` fuzz targets in `fuzz/` check,
//! here so that the ordinary tests replay their corpus and regressions on
//! stable (see `sluice_filters::fuzzing`). Not API.

use std::io::Cursor;
use std::path::Path;

use sluice_filters::fuzzing::{ensure, Verdict};
use sluice_filters::TraceLine;

use crate::load::{parse_sla, Scenario};
use crate::trace::{Format, StatsBuilder, TraceReader, TraceWriter};

/// The selector byte picks the format the reader is told (`selector % 5`:
/// found from the first line, then sluice, Mooncake, Azure, BurstGPT); the
/// rest is the file. Every row read is written in every format that can
/// hold it: the writer never writes what its reader refuses, a second trip
/// writes the same text, and sluice JSONL keeps a row exactly.
pub fn trace(data: &[u8]) -> Verdict {
    let Some((&selector, body)) = data.split_first() else {
        return Ok(());
    };
    let from = match usize::from(selector) % 5 {
        0 => None,
        n => Format::ALL.get(n - 1).copied(),
    };
    let lines = body.split(|b| *b == b'\n').count();
    let mut reader = match TraceReader::new("fuzz", Cursor::new(body.to_vec()), from) {
        Ok(reader) => reader,
        Err(e) => {
            return ensure(e.line <= lines && !e.message.is_empty(), || {
                format!("a refusal at line {} of {lines}: {e}", e.line)
            })
        }
    };
    let format = reader.format();
    let mut stats = StatsBuilder::default();
    let mut last = 0;
    // Each row consumes a line at least: more rows than lines is a loop.
    for _ in 0..=lines {
        let Some(row) = reader.next() else {
            return stats
                .finish()
                .map(|_| ())
                .or_else(|e| ensure(!e.is_empty(), || "an empty stats error".to_owned()));
        };
        let at = reader.row_line();
        ensure(at > last && at <= lines, || {
            format!("row at line {at}, after line {last}, of {lines}")
        })?;
        last = at;
        match row {
            Ok(line) => {
                stats.add(&line);
                for to in Format::ALL {
                    round_trip(&line, format, to)?;
                }
            }
            Err(e) => ensure(e.line == at && !e.message.is_empty(), || {
                format!("row at line {at} refused as {e}")
            })?,
        }
    }
    Err(format!("more rows than the {lines} lines of the file"))
}

fn write(line: &TraceLine, to: Format) -> Option<Result<Vec<u8>, String>> {
    let mut writer = TraceWriter::new(to, Vec::new());
    if writer.write(line).is_err() {
        // A row without the fields `to` needs: refused, which is allowed.
        return None;
    }
    Some(writer.finish().map_err(|e| e.to_string()))
}

fn read_one(text: &[u8], to: Format) -> Result<TraceLine, String> {
    let shown = || String::from_utf8_lossy(text).into_owned();
    let mut reader = TraceReader::new("again", Cursor::new(text.to_vec()), Some(to))
        .map_err(|e| format!("{to} written as {:?} is refused: {e}", shown()))?;
    let row = reader
        .next()
        .ok_or_else(|| format!("{to} written as {:?} has no row", shown()))?
        .map_err(|e| format!("{to} written as {:?} is refused: {e}", shown()))?;
    ensure(reader.next().is_none(), || {
        format!("{to} written as {:?} has two rows", shown())
    })?;
    Ok(row)
}

fn round_trip(line: &TraceLine, from: Format, to: Format) -> Verdict {
    let Some(first) = write(line, to) else {
        return Ok(());
    };
    let first = first?;
    let again = read_one(&first, to)?;
    let second = write(&again, to)
        .ok_or_else(|| format!("{to}: a row read back from {first:?} cannot be written"))??;
    ensure(second == first, || {
        format!(
            "{from} row {line:?} written as {to}: {:?}, then {:?}",
            String::from_utf8_lossy(&first),
            String::from_utf8_lossy(&second)
        )
    })?;
    if to == Format::Sluice {
        ensure(&again == line, || {
            format!("sluice JSONL changed the row {line:?} into {again:?}")
        })?;
    }
    Ok(())
}

/// A scenario, validated against a directory that does not exist and an
/// empty environment: never a panic; an error names what is wrong; the same
/// text validates to the same scenario (a NaN in it would not); and the
/// same holds for `--sla` read from the text.
pub fn scenario(data: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    // Files named by the scenario are read whole: the fuzzer is not to
    // find `/dev/zero`.
    if ["/dev", "/proc", "/sys"].iter().any(|p| text.contains(p)) {
        return Ok(());
    }
    let dir = Path::new("/nonexistent/sluice-fuzz");
    let env = |_: &str| None;
    match Scenario::from_yaml(text, dir, &env) {
        Ok(first) => {
            let second = Scenario::from_yaml(text, dir, &env);
            ensure(second.as_ref() == Ok(&first), || {
                format!("read twice: {first:?} then {second:?}")
            })?;
            ensure(first.max_in_flight > 0, || "max_in_flight 0".to_owned())?;
            ensure(first.thresholds.iter().all(|(_, b)| b.is_finite()), || {
                format!("thresholds {:?}", first.thresholds)
            })?;
        }
        Err(errors) => ensure(
            !errors.0.is_empty() && errors.0.iter().all(|e| !e.message.is_empty()),
            || format!("an error without a message: {errors:?}"),
        )?,
    }
    match parse_sla(text) {
        Ok(gates) => {
            let distinct = gates
                .iter()
                .enumerate()
                .all(|(i, (g, _))| gates.iter().take(i).all(|(h, _)| h != g));
            ensure(distinct && gates.iter().all(|(_, b)| b.is_finite()), || {
                format!("--sla read as {gates:?}")
            })
        }
        Err(errors) => ensure(!errors.is_empty(), || {
            "--sla refused without a reason".to_owned()
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
