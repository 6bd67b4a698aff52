//! What the proxy reads from a request itself: the fault headers, the JSON
//! body (model, stream, temperature, the model rewrite) and the head limits.

use std::time::Duration;

use serde_json::{Map, Value};

use super::{ensure, Framed, Verdict};
use crate::fault::{header_faults, HEADER_ABORT, HEADER_DELAY, HEADER_TOKEN_DELAY};
use crate::head_limits::{HeadLimits, HeadScan, HeadVerdict};
use crate::matcher::RequestView;
use crate::request_scan::{scan_request, with_model};

/// A request with raw header values, which need not be UTF-8.
struct Headers<'a>(Vec<(&'static str, &'a [u8])>);

impl RequestView for Headers<'_> {
    fn path(&self) -> &str {
        "/"
    }
    fn host(&self) -> Option<&str> {
        None
    }
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

/// The body's lines are the values of the delay, abort and token-delay
/// headers, in that order.
pub fn fault_headers(data: &[u8]) -> Verdict {
    let names = [HEADER_DELAY, HEADER_ABORT, HEADER_TOKEN_DELAY];
    let values: Vec<(&'static str, &[u8])> =
        names.into_iter().zip(data.split(|b| *b == b'\n')).collect();
    let fault = header_faults(&Headers(values.clone()));
    let value = |name: &str| values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);

    for (name, got) in [
        (HEADER_DELAY, fault.delay),
        (HEADER_TOKEN_DELAY, fault.token_delay),
    ] {
        ensure(got.is_none_or(|d| d <= Duration::from_secs(60)), || {
            format!("{name}: {got:?} is past the minute a header may ask for")
        })?;
        if let Some(expected) = value(name).and_then(whole_duration) {
            ensure(got == expected, || {
                format!(
                    "{name}: {:?} read as {got:?}, expected {expected:?}",
                    value(name)
                )
            })?;
        }
    }
    let expected_abort = value(HEADER_ABORT).and_then(status);
    ensure(fault.abort == expected_abort, || {
        format!(
            "{HEADER_ABORT}: {:?} read as {:?}, expected {expected_abort:?}",
            value(HEADER_ABORT),
            fault.abort
        )
    })?;
    // Whitespace around a value changes nothing.
    let padded: Vec<Vec<u8>> = values
        .iter()
        .map(|(_, v)| [b" \t", *v, b" "].concat())
        .collect();
    let padded = Headers(
        names
            .into_iter()
            .zip(padded.iter().map(Vec::as_slice))
            .collect(),
    );
    let again = header_faults(&padded);
    ensure(again == fault, || {
        format!("padded values read as {again:?}, not {fault:?}")
    })
}

/// A value that is a whole number of milliseconds (`250`, `250ms`) or
/// seconds (`2s`), computed without floats: `Some(None)` past a minute.
fn whole_duration(value: &[u8]) -> Option<Option<Duration>> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (digits, per_unit) = match text.strip_suffix("ms") {
        Some(n) => (n, 1),
        None => match text.strip_suffix('s') {
            Some(n) => (n, 1000),
            None => (text, 1),
        },
    };
    if digits.is_empty() || digits.len() > 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let millis = digits
        .bytes()
        .fold(0u64, |n, b| n * 10 + u64::from(b - b'0'))
        * per_unit;
    Some((millis <= 60_000).then(|| Duration::from_millis(millis)))
}

/// The status a valid abort value asks for, computed apart from the parser.
fn status(value: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = digits.bytes().try_fold(0u32, |n, b| {
        n.checked_mul(10)?
            .checked_add(u32::from(b - b'0'))
            .filter(|n| *n <= 65_535)
    })?;
    u16::try_from(n).ok().filter(|s| (200..=599).contains(s))
}

/// The model names a rewrite puts in, picked by the selector: plain, and
/// ones that need escaping.
const MODELS: [&str; 3] = ["fuzz-model", "a\"b\\c", "modèle\u{1}"];

/// The body is a request body; the selector picks a model to rewrite it to.
pub fn request_scan(data: &[u8]) -> Verdict {
    let Some((&selector, body)) = data.split_first() else {
        return Ok(());
    };
    let info = scan_request(body);
    let object = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    };
    match &info.prompt_fingerprint {
        Some(fp) => ensure(
            fp.len() == 64 && fp.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            || format!("fingerprint {fp:?} is not hex SHA-256"),
        )?,
        None => ensure(
            info.input_chars == 0 && info.temperature.is_none() && info.max_tokens.is_none(),
            || format!("an unparsed body read as {info:?}"),
        )?,
    }
    if let (Some(map), Some(_)) = (&object, &info.prompt_fingerprint) {
        let field = |k: &str| map.get(k);
        ensure(
            info.model.as_deref() == field("model").and_then(Value::as_str),
            || format!("model {:?}, the body says {:?}", info.model, field("model")),
        )?;
        ensure(
            info.stream == (field("stream") == Some(&Value::Bool(true))),
            || {
                format!(
                    "stream {}, the body says {:?}",
                    info.stream,
                    field("stream")
                )
            },
        )?;
        ensure(
            info.temperature == field("temperature").and_then(Value::as_f64),
            || {
                format!(
                    "temperature {:?}, the body says {:?}",
                    info.temperature,
                    field("temperature")
                )
            },
        )?;
        let max = field("max_completion_tokens")
            .or(field("max_tokens"))
            .and_then(Value::as_u64);
        ensure(info.max_tokens == max, || {
            format!("max_tokens {:?}, the body says {max:?}", info.max_tokens)
        })?;
    }
    ensure(info.temperature.is_none_or(f64::is_finite), || {
        format!("temperature {:?}", info.temperature)
    })?;

    let model = MODELS[usize::from(selector) % MODELS.len()];
    let rewritten = with_model(body, model);
    if object.is_some() {
        ensure(rewritten.is_some(), || {
            "a JSON object was not rewritten".to_owned()
        })?;
    }
    if let (Some(out), Some(mut map)) = (&rewritten, object) {
        let out_map = serde_json::from_slice::<Map<String, Value>>(out).map_err(|e| {
            format!(
                "the rewrite {:?} is not a JSON object: {e}",
                String::from_utf8_lossy(out)
            )
        })?;
        map.insert("model".to_owned(), Value::String(model.to_owned()));
        ensure(out_map == map, || {
            format!(
                "the rewrite {:?} changed more than the model",
                String::from_utf8_lossy(out)
            )
        })?;
    }
    Ok(())
}

/// Small limits picked by the selector, so the fuzzer reaches them with
/// short inputs; the defaults for a selector under 16.
fn limits(selector: u8) -> HeadLimits {
    if selector < 16 {
        return HeadLimits::default();
    }
    HeadLimits {
        max_uri_bytes: usize::from(selector % 8) * 3,
        max_header_bytes: usize::from(selector >> 3) * 3,
        max_headers: usize::from(selector % 5),
    }
}

/// `HeadScan` is fed the whole buffer so far on each call: the verdict of
/// the prefixes ending at the cuts (stopping at the first final one), and
/// of one byte more at a time, is the verdict of the whole.
pub fn head_scan(data: &[u8]) -> Verdict {
    let input = Framed::read(data);
    let limits = limits(input.selector);
    let body = input.body;
    let whole = HeadScan::new(limits).feed(body);
    let fed = |ends: &mut dyn Iterator<Item = usize>| {
        let mut scan = HeadScan::new(limits);
        for end in ends {
            let v = scan.feed(body.get(..end).unwrap_or_default());
            if v != HeadVerdict::Partial {
                return (v, end);
            }
        }
        (HeadVerdict::Partial, body.len())
    };
    let (split, at) = fed(&mut input.cuts.iter().copied().chain([body.len()]));
    ensure(split == whole, || {
        format!(
            "{limits:?}: fed up to {:?} then whole: {split:?} at {at}, whole: {whole:?}",
            input.cuts
        )
    })?;
    let (trickled, at) = fed(&mut (0..=body.len()));
    ensure(trickled == whole, || {
        format!("{limits:?}: fed a byte at a time: {trickled:?} after {at} bytes, whole: {whole:?}")
    })?;
    if let HeadVerdict::Complete(end) = whole {
        let head = body.get(..end).unwrap_or_default();
        ensure(end <= body.len() && head.ends_with(b"\n"), || {
            format!("complete at {end}, which is no line end")
        })?;
        let alone = HeadScan::new(limits).feed(head);
        ensure(alone == whole, || {
            format!("the head alone reads as {alone:?}")
        })?;
    }
    Ok(())
}
