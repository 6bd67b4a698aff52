//! Redaction of request bodies before they are written to a trace: every
//! secret or personal value found in a string is replaced by a keyed token,
//! `<kind:HMAC8>`, so that a value seen twice gives the same token in one
//! trace (the traffic stays joinable) while a dictionary attack on the tokens
//! needs the recorder's secret.
//!
//! Pure: the caller builds one [`Redactor`] per recording (patterns compiled
//! once) from a [`RedactionConfig`] and a [`Secret`], and passes bodies in.
//!
//! Lengths are kept: a replacement is as long, in characters, as what it
//! replaces (the hex part of the token goes on past its 8 digits with more of
//! the keyed digest), unless the original is shorter than the shortest token.
//! A replayed prompt then has about the size the user's had; the digest's hex
//! tokenizes at about the rate of the digits, hex and base64 it stands for.
//! Numbers of 9 or more digits stay numbers (keyed digits of the same count),
//! so a replayed body keeps its schema.

mod json;
mod patterns;

use std::borrow::Cow;
use std::fmt;

use hmac::{Hmac, Mac};
use regex::{Regex, RegexSet};
use sha2::Sha256;

use patterns::Pattern;

/// What a replaced value was, the `kind` of its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedactionKind {
    Email,
    Phone,
    Card,
    Iban,
    Ip,
    Jwt,
    ApiKey,
    Bearer,
    /// `password=...`, `api_key: ...` and the like: the value after the key.
    Credential,
    /// A long hex or base64 string that looks random.
    Secret,
    NationalId,
    /// A JSON number of 9 or more digits.
    Number,
    /// A match of one of `recorder.redaction.patterns`.
    Custom,
    /// The whole value of one of `recorder.redaction.drop_keys`.
    Dropped,
}

impl RedactionKind {
    pub const ALL: [RedactionKind; 14] = [
        RedactionKind::Email,
        RedactionKind::Phone,
        RedactionKind::Card,
        RedactionKind::Iban,
        RedactionKind::Ip,
        RedactionKind::Jwt,
        RedactionKind::ApiKey,
        RedactionKind::Bearer,
        RedactionKind::Credential,
        RedactionKind::Secret,
        RedactionKind::NationalId,
        RedactionKind::Number,
        RedactionKind::Custom,
        RedactionKind::Dropped,
    ];

    /// The `kind` written in a token.
    pub fn as_str(self) -> &'static str {
        match self {
            RedactionKind::Email => "email",
            RedactionKind::Phone => "phone",
            RedactionKind::Card => "card",
            RedactionKind::Iban => "iban",
            RedactionKind::Ip => "ip",
            RedactionKind::Jwt => "jwt",
            RedactionKind::ApiKey => "api_key",
            RedactionKind::Bearer => "bearer",
            RedactionKind::Credential => "credential",
            RedactionKind::Secret => "secret",
            RedactionKind::NationalId => "national_id",
            RedactionKind::Number => "number",
            RedactionKind::Custom => "custom",
            RedactionKind::Dropped => "dropped",
        }
    }
}

/// The recorder's key for redaction tokens and prefix block hashes. From
/// `recorder.redaction.key_env`, or random bytes per recording that the
/// caller draws (this crate has no RNG). Never printed.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(key: impl Into<Vec<u8>>) -> Secret {
        Secret(key.into())
    }

    /// HMAC-SHA256 of `parts`, each prefixed by its length so that no two
    /// different lists of parts hash the same bytes.
    pub(crate) fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        // An HMAC takes a key of any length: `new_from_slice` cannot fail.
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => return [0; 32],
        };
        for part in parts {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// `recorder.redaction`: what is redacted beyond the built-in kinds, which
/// are always on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedactionConfig {
    /// Extra regexes (the `regex` crate's syntax). A pattern with a capture
    /// group replaces only its first group, so `user=(\w+)` keeps `user=`.
    pub patterns: Vec<String>,
    /// JSON keys, at any depth, whose values are replaced whole
    /// (ASCII case-insensitive).
    pub drop_keys: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedactError {
    #[error("patterns[{index}]: {message}")]
    Pattern { index: usize, message: String },
    /// Each pattern compiles, but not all of them in one set.
    #[error("patterns: together too large: {0}")]
    TooLarge(String),
    #[error("the body is not JSON: {0}")]
    NotJson(String),
}

/// The compiled redaction of one recording.
pub struct Redactor {
    secret: Secret,
    /// Built-in patterns first, then the custom ones, in the order of `set`.
    patterns: Vec<Pattern>,
    set: RegexSet,
    drop_keys: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("patterns", &self.patterns.len())
            .field("drop_keys", &self.drop_keys)
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// Compiles the built-in patterns and `config`'s. A custom pattern that
    /// does not compile, or that matches the empty string, is an error.
    pub fn new(config: &RedactionConfig, secret: Secret) -> Result<Redactor, RedactError> {
        let mut patterns = patterns::built_in();
        for (index, source) in config.patterns.iter().enumerate() {
            let error = |message: String| RedactError::Pattern { index, message };
            let regex = Regex::new(source).map_err(|e| error(e.to_string()))?;
            if regex.is_match("") {
                return Err(error(format!("`{source}` matches the empty string")));
            }
            patterns.push(Pattern::custom(regex));
        }
        let set = RegexSet::new(patterns.iter().map(|p| p.regex.as_str()))
            .map_err(|e| RedactError::TooLarge(e.to_string()))?;
        Ok(Redactor {
            secret,
            patterns,
            set,
            drop_keys: config.drop_keys.clone(),
        })
    }

    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// `text` with every match replaced by its token; borrowed when nothing
    /// matched (the common case: one RegexSet pass).
    pub fn redact_str<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let hits = self.set.matches(text);
        if !hits.matched_any() {
            return Cow::Borrowed(text);
        }
        let mut spans: Vec<Span> = Vec::new();
        for index in hits.iter() {
            let pattern = &self.patterns[index];
            for found in pattern.find(text) {
                spans.push(found);
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for span in merge(spans) {
            out.push_str(&text[at..span.start]);
            let original = &text[span.start..span.end];
            self.push_token(&mut out, span.kind, original, original.chars().count());
            at = span.end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// A JSON body with every string (keys too) redacted, the values of
    /// `drop_keys` replaced whole, and numbers of 9 or more digits replaced by
    /// keyed digits. Everything else is kept byte for byte, key order and
    /// whitespace included.
    pub fn redact_json(&self, body: &[u8]) -> Result<Vec<u8>, RedactError> {
        serde_json::from_slice::<serde::de::IgnoredAny>(body)
            .map_err(|e| RedactError::NotJson(e.to_string()))?;
        Ok(json::rewrite(self, body))
    }

    fn drops(&self, key: &str) -> bool {
        self.drop_keys.iter().any(|k| k.eq_ignore_ascii_case(key))
    }

    /// Appends `<kind:HEX>` for `original`, `width` characters wide when that
    /// is more than the shortest token.
    fn push_token(&self, out: &mut String, kind: RedactionKind, original: &str, width: usize) {
        let digest = self
            .secret
            .mac(&[kind.as_str().as_bytes(), original.as_bytes()]);
        let name = kind.as_str();
        let hex_len = width.saturating_sub(name.len() + 3).max(TOKEN_HEX);
        out.push('<');
        out.push_str(name);
        out.push(':');
        push_hex(out, &digest, hex_len);
        out.push('>');
    }

    /// Keyed digits in place of a number's `digits` (ASCII digits only), with
    /// a non-zero first digit so that the result is still a JSON number.
    fn push_number(&self, out: &mut Vec<u8>, digits: &str) {
        let digest = self
            .secret
            .mac(&[RedactionKind::Number.as_str().as_bytes(), digits.as_bytes()]);
        for (i, byte) in digest.iter().cycle().take(digits.len()).enumerate() {
            let digit = if i == 0 { 1 + byte % 9 } else { byte % 10 };
            out.push(b'0' + digit);
        }
    }
}

/// The 8 hex digits that identify a value in its token (32 bits of HMAC).
const TOKEN_HEX: usize = 8;

/// The first `len` hex digits of `digest`, cycled past its 64.
fn push_hex(out: &mut String, digest: &[u8; 32], len: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in 0..len {
        let byte = digest[(i / 2) % digest.len()];
        let nibble = if i % 2 == 0 { byte >> 4 } else { byte & 0xf };
        out.push(char::from(HEX[usize::from(nibble)]));
    }
}

/// Headers whose values are never recorded: credentials and cookies. The
/// trace has no header field; the recorder checks its session header here.
pub fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "auth", "cookie", "token", "secret", "password", "api-key", "apikey",
    ]
    .iter()
    .any(|part| name.contains(part))
}

/// A match: byte range in the searched text and its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    kind: RedactionKind,
}

/// Overlapping matches become one span (the union, so that no part of
/// either survives) with the kind of the longest.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut merged: Vec<(Span, usize)> = Vec::with_capacity(spans.len());
    for span in spans {
        let len = span.end - span.start;
        match merged.last_mut() {
            Some((last, longest)) if span.start < last.end => {
                last.end = last.end.max(span.end);
                if len > *longest {
                    last.kind = span.kind;
                    *longest = len;
                }
            }
            _ => merged.push((span, len)),
        }
    }
    merged.into_iter().map(|(span, _)| span).collect()
}

#[cfg(test)]
mod corpus;
#[cfg(test)]
mod tests;
