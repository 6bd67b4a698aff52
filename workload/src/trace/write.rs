//! Writing a trace in any format, and converting one file into another.

use std::io::{self, Write};

use sluice_filters::TraceLine;

use super::read::{for_each_row, Refused, Skipped, TraceReader};
use super::{azure, burstgpt, mooncake, Format, TraceError};

/// Rows out, one per line; the CSV formats' header first.
pub struct TraceWriter<W: Write> {
    format: Format,
    out: W,
    header_written: bool,
    rows: u64,
}

#[derive(Debug)]
pub enum WriteError {
    /// The row lacks a field the format needs.
    Row(String),
    Io(io::Error),
}

impl<W: Write> TraceWriter<W> {
    pub fn new(format: Format, out: W) -> TraceWriter<W> {
        TraceWriter {
            format,
            out,
            header_written: false,
            rows: 0,
        }
    }

    pub fn write(&mut self, line: &TraceLine) -> Result<(), WriteError> {
        let text = self.encode(line)?;
        self.write_encoded(&text).map_err(WriteError::Io)
    }

    /// The row as this format writes it.
    fn encode(&self, line: &TraceLine) -> Result<String, WriteError> {
        match self.format {
            Format::Sluice => Ok(line.to_json()),
            Format::Mooncake => mooncake::encode(line),
            Format::Azure => azure::encode(line),
            Format::BurstGpt => burstgpt::encode(line),
        }
        .map_err(WriteError::Row)
    }

    fn write_encoded(&mut self, text: &str) -> io::Result<()> {
        self.header()?;
        writeln!(self.out, "{text}")?;
        self.rows += 1;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the header of an empty CSV trace, flushes, and gives the
    /// output back.
    pub fn finish(mut self) -> io::Result<W> {
        self.header()?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn header(&mut self) -> io::Result<()> {
        if self.header_written {
            return Ok(());
        }
        self.header_written = true;
        match self.format {
            Format::Sluice | Format::Mooncake => Ok(()),
            Format::Azure => writeln!(self.out, "{}", azure::HEADER),
            Format::BurstGpt => writeln!(self.out, "{}", burstgpt::HEADER),
        }
    }
}

/// What a conversion did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    pub from: Format,
    pub to: Format,
    pub rows: u64,
    pub skipped: Skipped,
}

/// Every row of `reader` into `writer` (named `out_name` in errors). Without
/// `skip_bad` the first bad row stops it with that row's `file:line: what`.
///
/// A sluice trace is in the order requests ended (the recorder writes a
/// line at the end); the public formats are in arrival order, so from a
/// sluice trace into one of them the encoded rows are sorted by arrival
/// before they are written.
pub fn convert<W: Write>(
    reader: &mut TraceReader,
    writer: TraceWriter<W>,
    out_name: &str,
    skip_bad: bool,
) -> Result<(Converted, W), TraceError> {
    let mut writer = writer;
    let io_error = |e: io::Error| TraceError::new(out_name, 0, e.to_string());
    let refused = |e: WriteError| match e {
        WriteError::Row(message) => Refused::Row(message),
        WriteError::Io(e) => Refused::Fatal(io_error(e)),
    };
    let sort = reader.format() == Format::Sluice && writer.format != Format::Sluice;
    let mut held: Vec<(u64, String)> = Vec::new();
    let skipped = for_each_row(reader, skip_bad, |line| {
        if sort {
            held.push((line.arrival_us, writer.encode(line).map_err(refused)?));
            Ok(())
        } else {
            writer.write(line).map_err(refused)
        }
    })?;
    held.sort_by_key(|(arrival, _)| *arrival);
    for (_, text) in &held {
        writer.write_encoded(text).map_err(io_error)?;
    }
    let converted = Converted {
        from: reader.format(),
        to: writer.format,
        rows: writer.rows,
        skipped,
    };
    let out = writer.finish().map_err(io_error)?;
    Ok((converted, out))
}
