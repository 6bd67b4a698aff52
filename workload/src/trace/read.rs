//! Reading a trace row by row, in whichever format it is: told, or found
//! from its first line (a JSON object with `v` is sluice, one with
//! `input_length` Mooncake; a CSV header with `ContextTokens` is Azure, one
//! with `Request tokens` BurstGPT).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::{Map, Value};
use sluice_filters::{parse_line, TraceLine};

use super::azure::{self, Azure};
use super::burstgpt::{self, BurstGpt};
use super::{mooncake, Format, TraceError};

/// The rows of one trace file, each decoded into a [`TraceLine`] or the
/// error of its line. Blank lines are skipped.
pub struct TraceReader {
    name: String,
    lines: std::io::Lines<Box<dyn BufRead>>,
    /// The line number of the last line read.
    line: usize,
    /// Of the row last returned.
    row_line: usize,
    format: Format,
    decoder: Decoder,
    /// A first data line read while detecting a JSON format.
    pending: Option<(usize, String)>,
}

enum Decoder {
    Sluice,
    Mooncake,
    Azure(Azure),
    BurstGpt(BurstGpt),
}

impl TraceReader {
    pub fn open(path: &Path, from: Option<Format>) -> Result<TraceReader, TraceError> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| TraceError::new(&name, 0, e.to_string()))?;
        TraceReader::new(&name, BufReader::new(file), from)
    }

    /// `name` is what errors call the file.
    pub fn new(
        name: &str,
        input: impl BufRead + 'static,
        from: Option<Format>,
    ) -> Result<TraceReader, TraceError> {
        let boxed: Box<dyn BufRead> = Box::new(input);
        let mut reader = TraceReader {
            name: name.to_owned(),
            lines: boxed.lines(),
            line: 0,
            row_line: 0,
            format: Format::Sluice,
            decoder: Decoder::Sluice,
            pending: None,
        };
        let Some(first) = reader.next_line().transpose()? else {
            return Err(TraceError::new(name, 0, "empty: no header and no requests"));
        };
        let first = first.trim_start_matches('\u{feff}').to_owned();
        let at = reader.line;
        let error = |message: String| TraceError::new(name, at, message);
        let format = match from {
            Some(format) => format,
            None => detect(&first).map_err(error)?,
        };
        reader.format = format;
        reader.decoder = match format {
            Format::Sluice => Decoder::Sluice,
            Format::Mooncake => Decoder::Mooncake,
            Format::Azure => Decoder::Azure(Azure::new(&first).map_err(error)?),
            Format::BurstGpt => Decoder::BurstGpt(BurstGpt::new(&first).map_err(error)?),
        };
        if matches!(format, Format::Sluice | Format::Mooncake) {
            reader.pending = Some((at, first));
        }
        Ok(reader)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The line number of the row last returned by `next`.
    pub fn row_line(&self) -> usize {
        self.row_line
    }

    /// The next non-blank line.
    fn next_line(&mut self) -> Option<Result<String, TraceError>> {
        loop {
            let text = self.lines.next()?;
            self.line += 1;
            match text {
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => return Some(Ok(text)),
                Err(e) => return Some(Err(TraceError::new(&self.name, self.line, e.to_string()))),
            }
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceLine, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (at, text) = match self.pending.take() {
            Some(pending) => pending,
            None => match self.next_line()? {
                Ok(text) => (self.line, text),
                Err(e) => {
                    self.row_line = self.line;
                    return Some(Err(e));
                }
            },
        };
        self.row_line = at;
        let row = match &mut self.decoder {
            Decoder::Sluice => parse_line(&text),
            Decoder::Mooncake => mooncake::decode(&text, at),
            Decoder::Azure(azure) => azure.decode(&text, at),
            Decoder::BurstGpt(burst) => burst.decode(&text, at),
        };
        Some(row.map_err(|message| TraceError::new(&self.name, at, message)))
    }
}

/// The format of a trace from its first non-blank line.
fn detect(first: &str) -> Result<Format, String> {
    if first.trim_start().starts_with('{') {
        let object: Map<String, Value> =
            serde_json::from_str(first).map_err(|e| sluice_filters::json_error(&e))?;
        return if object.contains_key("v") {
            Ok(Format::Sluice)
        } else if object.contains_key("input_length") || object.contains_key("hash_ids") {
            Ok(Format::Mooncake)
        } else {
            Err(
                "a JSON line with neither `v` (sluice) nor `input_length` (Mooncake); \
                 pass --from"
                    .to_owned(),
            )
        };
    }
    let header = first.to_ascii_lowercase();
    if header.contains("contexttokens") {
        Ok(Format::Azure)
    } else if header.contains("request tokens") {
        Ok(Format::BurstGpt)
    } else {
        let shown: String = first.chars().take(80).collect();
        Err(format!(
            "cannot tell the format from `{shown}`: expected a sluice or Mooncake JSON line, \
             an Azure header ({}) or a BurstGPT header ({}); pass --from",
            azure::HEADER,
            burstgpt::HEADER
        ))
    }
}

/// Rows that `skip_bad` passed over: how many, and the first few errors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    pub count: u64,
    pub first: Vec<TraceError>,
}

/// Errors kept in [`Skipped::first`].
const FIRST_ERRORS: usize = 5;

/// Why the consumer of a row refused it.
#[derive(Debug)]
pub enum Refused {
    /// The row cannot be used (a field the output format needs is absent):
    /// an error of that input line, skippable.
    Row(String),
    /// Nothing more can be done (the output cannot be written).
    Fatal(TraceError),
}

/// Feeds every row of `reader` to `each`. A row that does not read, or that
/// `each` refuses, stops the loop with its error; with `skip_bad`, it is
/// counted and the loop goes on. A fatal refusal always stops it.
pub fn for_each_row(
    reader: &mut TraceReader,
    skip_bad: bool,
    mut each: impl FnMut(&TraceLine) -> Result<(), Refused>,
) -> Result<Skipped, TraceError> {
    let mut skipped = Skipped::default();
    while let Some(row) = reader.next() {
        let error = match row {
            Ok(line) => match each(&line) {
                Ok(()) => continue,
                Err(Refused::Row(message)) => {
                    TraceError::new(&reader.name, reader.row_line, message)
                }
                Err(Refused::Fatal(e)) => return Err(e),
            },
            Err(e) => e,
        };
        if !skip_bad {
            return Err(error);
        }
        skipped.count += 1;
        if skipped.first.len() < FIRST_ERRORS {
            skipped.first.push(error);
        }
    }
    Ok(skipped)
}
