//! The one splitter of streamed answers into events, whatever the chunk
//! boundaries: SSE events (end at a blank line, `\n` or `\r\n` line ends,
//! mixed too), NDJSON lines, or the whole body. The token meter, stream
//! faults, the mirror's answer reader and the tests all cut with it.
//!
//! An event that lies inside one chunk is read in place. Only an event split
//! across chunks is copied, into one carry-over buffer reused for the whole
//! stream; multi-line `data:` is joined into a second reused buffer.

/// The largest SSE event or NDJSON line kept; a longer one is dropped and
/// counted, so a broken upstream cannot grow the carry-over without bound.
pub const MAX_EVENT: usize = 1 << 20;

/// The largest non-streaming body buffered for reading at the end.
pub(super) const MAX_WHOLE: usize = 4 << 20;

/// How a body is cut into events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events: `field: value` lines, events end at a blank line.
    Sse,
    /// Newline-delimited JSON: one event per line.
    Lines,
    /// One JSON document: buffered, read at the end.
    Whole,
    /// Nothing to read.
    Off,
}

/// One event as it came, and its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamEvent<'a> {
    /// The event's bytes as they arrived, its terminator (blank line or
    /// newline) included; for the last event of a body that has none, the
    /// bytes up to the end. A proxy forwards exactly these.
    pub raw: &'a [u8],
    /// The SSE `event:` name; empty when absent or not SSE.
    pub name: &'a [u8],
    /// The SSE data (multi-line data joined by `\n`), or the NDJSON line
    /// trimmed. `None` for an event without data (an SSE comment or
    /// keep-alive, a blank line): readers skip it, a proxy still forwards it.
    pub data: Option<&'a [u8]>,
}

/// A [`StreamEvent`] with its bytes owned: what the framer's tests and its
/// fuzz check compare events cut from different chunks by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OwnedEvent {
    pub(crate) raw: Vec<u8>,
    pub(crate) name: Vec<u8>,
    pub(crate) data: Option<Vec<u8>>,
}

impl OwnedEvent {
    pub(crate) fn of(e: StreamEvent<'_>) -> OwnedEvent {
        OwnedEvent {
            raw: e.raw.to_vec(),
            name: e.name.to_vec(),
            data: e.data.map(<[u8]>::to_vec),
        }
    }
}

/// Cuts one body into [`StreamEvent`]s; one per stream.
#[derive(Debug)]
pub struct Framer {
    framing: Framing,
    /// Bytes of the event not yet complete (or, for `Whole`, the body).
    carry: Vec<u8>,
    /// Multi-line `data:` joined.
    join: Vec<u8>,
    /// The current event outgrew its limit: drop bytes up to its end. The
    /// carry then keeps only the last two bytes, to find an end split
    /// across chunks.
    skipping: bool,
    /// Events dropped for their size.
    oversized: u32,
}

impl Framer {
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            carry: Vec::new(),
            join: Vec::new(),
            skipping: false,
            oversized: 0,
        }
    }

    /// Cuts `chunk` into events, calling `on_event` for each one it
    /// completes, in order. An event longer than [`MAX_EVENT`] is dropped
    /// whole and counted in [`Framer::oversized`].
    pub fn feed(&mut self, chunk: &[u8], mut on_event: impl FnMut(StreamEvent<'_>)) {
        let mut rest = chunk;
        match self.framing {
            Framing::Off => return,
            Framing::Whole => {
                self.keep(chunk, MAX_WHOLE);
                return;
            }
            Framing::Sse | Framing::Lines => {}
        }
        if !self.carry.is_empty() || self.skipping {
            let Some(end) = self.end_across(rest) else {
                self.keep(rest, MAX_EVENT);
                return;
            };
            let (head, tail) = rest.split_at(end);
            if self.skipping {
                self.skipping = false;
            } else if self.carry.len() + head.len() > MAX_EVENT {
                self.oversize();
            } else {
                self.carry.extend_from_slice(head);
                emit(self.framing, &self.carry, &mut self.join, &mut on_event);
            }
            self.carry.clear();
            rest = tail;
        }
        while let Some(end) = find_end(self.framing, rest) {
            if end > MAX_EVENT {
                self.oversize();
            } else {
                emit(self.framing, &rest[..end], &mut self.join, &mut on_event);
            }
            rest = &rest[end..];
        }
        self.keep(rest, MAX_EVENT);
    }

    fn oversize(&mut self) {
        self.oversized = self.oversized.saturating_add(1);
        // Give a large buffer back rather than hold it for the stream.
        self.carry = Vec::new();
    }

    /// Ends the body: an event with no terminator is still read. Returns the
    /// whole body for `Whole` framing (`None` when it was too long).
    pub fn finish(&mut self, mut on_event: impl FnMut(StreamEvent<'_>)) -> Option<&[u8]> {
        if self.skipping {
            self.skipping = false;
            self.carry.clear();
            return None;
        }
        match self.framing {
            Framing::Whole => return Some(&self.carry),
            Framing::Sse | Framing::Lines if !self.carry.is_empty() => {
                emit(self.framing, &self.carry, &mut self.join, &mut on_event);
            }
            Framing::Sse | Framing::Lines | Framing::Off => {}
        }
        self.carry.clear();
        None
    }

    /// Events dropped so far for being longer than their limit.
    pub fn oversized(&self) -> u32 {
        self.oversized
    }

    /// Stores the incomplete tail of a chunk, unless the event it belongs to
    /// grows past `limit`.
    fn keep(&mut self, bytes: &[u8], limit: usize) {
        if !self.skipping && self.carry.len() + bytes.len() > limit {
            self.skipping = true;
            self.oversize();
        }
        if !self.skipping {
            self.carry.extend_from_slice(bytes);
        } else if let Some(last_two) = bytes.len().checked_sub(2).and_then(|i| bytes.get(i..)) {
            self.carry.clear();
            self.carry.extend_from_slice(last_two);
        } else {
            self.carry.extend_from_slice(bytes);
            let excess = self.carry.len().saturating_sub(2);
            self.carry.drain(..excess);
        }
    }

    /// Length of the prefix of `rest` that completes the carried event: the
    /// end found in `rest`, or one whose first bytes are still in the carry.
    fn end_across(&self, rest: &[u8]) -> Option<usize> {
        if self.framing == Framing::Sse {
            let c = &self.carry;
            if c.ends_with(b"\n") {
                if rest.starts_with(b"\n") {
                    return Some(1);
                }
                if rest.starts_with(b"\r\n") {
                    return Some(2);
                }
            }
            if c.ends_with(b"\n\r") && rest.starts_with(b"\n") {
                return Some(1);
            }
        }
        find_end(self.framing, rest)
    }
}

/// Length of the first complete event in `bytes`, its terminator included.
/// An SSE event ends at a blank line: `\n` then `\n` or `\r\n`.
fn find_end(framing: Framing, bytes: &[u8]) -> Option<usize> {
    if framing == Framing::Lines {
        return memchr::memchr(b'\n', bytes).map(|i| i + 1);
    }
    memchr::memchr_iter(b'\n', bytes).find_map(|i| match bytes.get(i + 1..) {
        Some([b'\n', ..]) => Some(i + 2),
        Some([b'\r', b'\n', ..]) => Some(i + 3),
        _ => None,
    })
}

/// Reads one complete raw event and hands it on.
fn emit(
    framing: Framing,
    raw: &[u8],
    join: &mut Vec<u8>,
    on_event: &mut impl FnMut(StreamEvent<'_>),
) {
    let event = match framing {
        Framing::Sse => sse_event(raw, join),
        Framing::Lines | Framing::Whole | Framing::Off => StreamEvent {
            raw,
            name: b"",
            data: Some(raw.trim_ascii()).filter(|line| !line.is_empty()),
        },
    };
    on_event(event);
}

/// The fields of one SSE event. `data` is `None` when it has no `data:`
/// line (a comment, a keep-alive, a blank line).
fn sse_event<'a>(raw: &'a [u8], join: &'a mut Vec<u8>) -> StreamEvent<'a> {
    let mut name: &[u8] = b"";
    let mut data: Option<&[u8]> = None;
    let mut data_lines = 0u32;
    for (field, value) in fields(raw) {
        match field {
            b"event" => name = value,
            b"data" => {
                data_lines += 1;
                data.get_or_insert(value);
            }
            _ => {}
        }
    }
    let Some(data) = data else {
        return StreamEvent {
            raw,
            name,
            data: None,
        };
    };
    if data_lines == 1 {
        return StreamEvent {
            raw,
            name,
            data: Some(data),
        };
    }
    join.clear();
    for (k, (_, value)) in fields(raw)
        .filter(|(field, _)| *field == b"data")
        .enumerate()
    {
        if k > 0 {
            join.push(b'\n');
        }
        join.extend_from_slice(value);
    }
    StreamEvent {
        raw,
        name,
        data: Some(join.as_slice()),
    }
}

/// `(field, value)` for each line of an event: `\r\n` or `\n` line ends,
/// comments (`:` first) and blank lines skipped, one space after the colon
/// removed.
fn fields(raw: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    raw.split(|b| *b == b'\n').filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line[0] == b':' {
            return None;
        }
        Some(match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        })
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
