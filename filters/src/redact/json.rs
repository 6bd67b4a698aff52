//! The rewrite of a JSON body that [`Redactor::redact_json`] has already
//! checked to be valid: a copy, byte for byte, except for the strings that
//! held something to redact, the numbers of 9 or more digits and the values
//! of dropped keys. No tree is built, so key order and spacing survive and a
//! body with nothing to redact costs one scan and one copy.

use std::borrow::Cow;

use super::{RedactionKind, Redactor};

/// Integer digits from which a JSON number is redacted.
const NUMBER_DIGITS: usize = 9;

pub(super) fn rewrite(redactor: &Redactor, body: &[u8]) -> Vec<u8> {
    let mut walk = Walk {
        redactor,
        src: body,
        at: 0,
        out: Vec::with_capacity(body.len()),
    };
    walk.value();
    walk.space();
    walk.out
}

struct Walk<'r, 'b> {
    redactor: &'r Redactor,
    src: &'b [u8],
    at: usize,
    out: Vec<u8>,
}

impl<'b> Walk<'_, 'b> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.at).copied()
    }

    /// Copies one byte.
    fn take(&mut self) {
        if let Some(b) = self.peek() {
            self.out.push(b);
            self.at += 1;
        }
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.take();
        }
    }

    // Recursion is bounded: serde_json refused bodies nested deeper than 128.
    fn value(&mut self) {
        self.space();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => {
                let (start, end) = self.string_span();
                let text = self.decode(start, end);
                self.emit(start, end, &text);
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => {
                while self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
                    self.take();
                }
            }
            None => {}
        }
    }

    fn object(&mut self) {
        self.take();
        loop {
            self.space();
            match self.peek() {
                Some(b',') => self.take(),
                Some(b'"') => {
                    let (start, end) = self.string_span();
                    let key = self.decode(start, end);
                    self.emit(start, end, &key);
                    self.space();
                    self.take(); // ':'
                    if self.redactor.drops(&key) {
                        self.space();
                        self.dropped();
                    } else {
                        self.value();
                    }
                }
                // `}`, or the end of a body that was checked to be valid.
                Some(_) | None => {
                    self.take();
                    return;
                }
            }
        }
    }

    fn array(&mut self) {
        self.take();
        loop {
            self.space();
            match self.peek() {
                Some(b']') | None => {
                    self.take();
                    return;
                }
                Some(b',') => self.take(),
                Some(_) => self.value(),
            }
        }
    }

    /// The string at `at`, quotes included; moves past it.
    fn string_span(&mut self) -> (usize, usize) {
        let start = self.at;
        let mut i = start + 1;
        while let Some(found) = memchr::memchr2(b'"', b'\\', &self.src[i.min(self.src.len())..]) {
            i += found;
            if self.src[i] == b'\\' {
                i += 2;
            } else {
                i += 1;
                break;
            }
        }
        let end = i.min(self.src.len());
        self.at = end;
        (start, end)
    }

    fn decode(&self, start: usize, end: usize) -> Cow<'b, str> {
        let raw = &self.src[start..end];
        let inner = &raw[1.min(raw.len())..raw.len().saturating_sub(1).max(1)];
        if memchr::memchr(b'\\', inner).is_none() {
            if let Ok(text) = std::str::from_utf8(inner) {
                return Cow::Borrowed(text);
            }
        }
        match serde_json::from_slice::<String>(raw) {
            Ok(text) => Cow::Owned(text),
            Err(_) => String::from_utf8_lossy(inner),
        }
    }

    /// The string `start..end` of the source, redacted if it must be.
    fn emit(&mut self, start: usize, end: usize, text: &str) {
        match self.redactor.redact_str(text) {
            Cow::Borrowed(_) => self.out.extend_from_slice(&self.src[start..end]),
            Cow::Owned(redacted) => push_json_string(&mut self.out, &redacted),
        }
    }

    /// The value at `at`, replaced whole by a token of its JSON text.
    fn dropped(&mut self) {
        let start = self.at;
        self.skip_value();
        let raw = String::from_utf8_lossy(&self.src[start..self.at]);
        let mut token = String::new();
        let width = raw.chars().count().saturating_sub(2);
        self.redactor
            .push_token(&mut token, RedactionKind::Dropped, &raw, width);
        push_json_string(&mut self.out, &token);
    }

    fn skip_value(&mut self) {
        match self.peek() {
            Some(b'"') => {
                self.string_span();
            }
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while let Some(b) = self.peek() {
                    match b {
                        b'"' => {
                            self.string_span();
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                    self.at += 1;
                    if depth == 0 {
                        return;
                    }
                }
            }
            Some(_) | None => {
                while self.peek().is_some_and(|b| {
                    !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                }) {
                    self.at += 1;
                }
            }
        }
    }

    /// A number of 9 or more integer digits gets keyed digits of the same
    /// count; its sign, fraction and exponent are kept.
    fn number(&mut self) {
        if self.peek() == Some(b'-') {
            self.take();
        }
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        let digits = &self.src[start..self.at];
        if digits.len() >= NUMBER_DIGITS {
            let text = String::from_utf8_lossy(digits);
            self.redactor.push_number(&mut self.out, &text);
        } else {
            self.out.extend_from_slice(digits);
        }
        while self
            .peek()
            .is_some_and(|b| matches!(b, b'.' | b'e' | b'E' | b'+' | b'-' | b'0'..=b'9'))
        {
            self.take();
        }
    }
}

/// `text` as a JSON string: quotes, backslashes and control characters
/// escaped, everything else as is.
fn push_json_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for c in text.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if u32::from(c) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", u32::from(c)).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}
