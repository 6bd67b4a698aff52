//! Byte-level reads of single JSON fields for the hot path: no parse, no
//! allocation. Each read finds a key with a precompiled `memmem` finder and
//! looks at the value that follows it.
//!
//! In valid JSON the bytes `"key"` followed by `:` only occur as an object
//! key: a quote inside a string is escaped, so `"key"` cannot appear there.
//! The reads therefore need no parser state, only the value's first bytes.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// A JSON object key, searched for with its quotes: `"name"`.
pub(super) struct Key {
    quoted: Finder<'static>,
}

impl Key {
    fn new(quoted: &'static str) -> Self {
        Self {
            quoted: Finder::new(quoted.as_bytes()),
        }
    }

    /// Offsets of the value of each occurrence of this key in `hay`.
    fn values<'h>(&'h self, hay: &'h [u8]) -> impl Iterator<Item = usize> + 'h {
        let len = self.quoted.needle().len();
        self.quoted
            .find_iter(hay)
            .filter_map(move |at| after_colon(hay, at + len))
    }

    /// The raw (still escaped) bytes of the first string value of this key.
    pub(super) fn first_str<'h>(&self, hay: &'h [u8]) -> Option<&'h [u8]> {
        self.values(hay).find_map(|at| str_at(hay, at))
    }

    /// Each string value of this key, in order (several choices, blocks).
    pub(super) fn strs<'h>(&'h self, hay: &'h [u8]) -> impl Iterator<Item = &'h [u8]> + 'h {
        self.values(hay).filter_map(move |at| str_at(hay, at))
    }

    /// Whether some value of this key is a string with at least one byte.
    pub(super) fn has_text(&self, hay: &[u8]) -> bool {
        self.strs(hay).any(|s| !s.is_empty())
    }

    /// Whether some value of this key is an array with at least one element.
    pub(super) fn has_items(&self, hay: &[u8]) -> bool {
        self.values(hay).any(|at| {
            hay.get(at) == Some(&b'[')
                && skip_ws(hay, at + 1).is_some_and(|i| hay.get(i) != Some(&b']'))
        })
    }

    /// Whether the first value of this key is the literal `true`.
    pub(super) fn is_true(&self, hay: &[u8]) -> bool {
        self.values(hay)
            .next()
            .is_some_and(|at| hay[at..].starts_with(b"true"))
    }

    /// The first value of this key that is an object, braces included.
    pub(super) fn first_object<'h>(&self, hay: &'h [u8]) -> Option<&'h [u8]> {
        self.values(hay).find_map(|at| object_at(hay, at))
    }
}

/// Index of the value after `:` (whitespace allowed around it), if the byte
/// run at `at` is `\s*:\s*value`.
fn after_colon(hay: &[u8], at: usize) -> Option<usize> {
    let colon = skip_ws(hay, at)?;
    if hay[colon] != b':' {
        return None;
    }
    skip_ws(hay, colon + 1)
}

/// First index at or after `at` that is not JSON whitespace.
fn skip_ws(hay: &[u8], at: usize) -> Option<usize> {
    let rest = hay.get(at..)?;
    let n = rest
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    Some(at + n)
}

/// The raw contents of the string starting at `at` (quotes excluded), or
/// `None` when the value is not a string or the string does not end.
fn str_at(hay: &[u8], at: usize) -> Option<&[u8]> {
    if hay.get(at) != Some(&b'"') {
        return None;
    }
    let end = string_end(hay, at + 1)?;
    Some(&hay[at + 1..end])
}

/// Index of the closing quote of a string whose contents start at `from`.
fn string_end(hay: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        i += memchr::memchr2(b'"', b'\\', hay.get(i..)?)?;
        if hay[i] == b'"' {
            return Some(i);
        }
        i += 2;
    }
}

/// The object starting at `at`, from `{` to its matching `}`.
fn object_at(hay: &[u8], at: usize) -> Option<&[u8]> {
    if hay.get(at) != Some(&b'{') {
        return None;
    }
    let mut depth = 0usize;
    let mut i = at;
    loop {
        i += memchr::memchr3(b'{', b'}', b'"', hay.get(i..)?)?;
        match hay[i] {
            b'"' => i = string_end(hay, i + 1)?,
            b'{' => depth += 1,
            _ => {
                depth -= 1;
                if depth == 0 {
                    return Some(&hay[at..=i]);
                }
            }
        }
        i += 1;
    }
}

/// Whether `data` has the shape of a JSON object: the cheap check that
/// decides an event is malformed without parsing it.
pub(super) fn is_object(data: &[u8]) -> bool {
    data.first() == Some(&b'{') && data.last() == Some(&b'}')
}

/// A JSON string's raw contents as an owned string, unescaped. Called once
/// per stream per field (model, finish reason), never per chunk.
pub(super) fn decode(raw: &[u8]) -> Option<String> {
    if memchr::memchr(b'\\', raw).is_none() {
        return std::str::from_utf8(raw).ok().map(str::to_owned);
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice(&quoted).ok()
}

/// Replaces `slot` with `raw` decoded, allocating only when the value
/// changed: finish reasons repeat on every choice of every last chunk.
pub(super) fn set_decoded(slot: &mut Option<String>, raw: &[u8]) {
    if slot.as_deref().map(str::as_bytes) != Some(raw) {
        if let Some(s) = decode(raw) {
            *slot = Some(s);
        }
    }
}

macro_rules! keys {
    ($($name:ident = $text:literal),* $(,)?) => {
        $(pub(super) static $name: LazyLock<Key> =
            LazyLock::new(|| Key::new(concat!("\"", $text, "\"")));)*
    };
}

// The keys the dialect scanners read, compiled once per process.
keys! {
    CHOICES = "choices",
    CONTENT = "content",
    DETAILS = "details",
    DONE = "done",
    FINISH_REASON = "finish_reason",
    GENERATED_TEXT = "generated_text",
    MODEL = "model",
    PARTIAL_JSON = "partial_json",
    REASONING = "reasoning",
    REASONING_CONTENT = "reasoning_content",
    REFUSAL = "refusal",
    RESPONSE = "response",
    SPECIAL = "special",
    TEXT = "text",
    THINKING = "thinking",
    TIMINGS = "timings",
    TOKEN = "token",
    TOOL_CALLS = "tool_calls",
    TYPE = "type",
    USAGE = "usage",
}
