//! A `service: grpc` step: `method: package.Service/Method`, a raw
//! protobuf `message` (`base64:` or `hex:`), `metadata`, a `target` URL;
//! the HTTP and llm keys are refused.

use base64::Engine as _;

use super::super::dist::{read as read_dist, Kind};
use super::super::raw::{RawMessage, RawStep};
use super::super::{Body, Service, Step, Template};
use super::steps::{depends, refuse, timeout, when};
use super::Errors;

/// A grpc step, or `None` when its method or target is wrong.
pub(super) fn step(
    s: &RawStep,
    path: &str,
    all: &[RawStep],
    template: impl Fn(&str, &str, &mut Errors) -> Option<Template>,
    e: &mut Errors,
) -> Option<Step> {
    let at = |key: &str| format!("{path}.{key}");
    refuse(
        s,
        path,
        &[
            "path",
            "headers",
            "body",
            "body_file",
            "prompt",
            "model",
            "max_tokens",
            "stream",
            "ignore_eos",
            "command",
            "extract",
        ],
        "is not for grpc steps (they send `method`, `message` and `metadata`)",
        e,
    );
    let method = match s.method.as_deref() {
        None => {
            e.add(
                at("method"),
                "a grpc step needs a method like package.Service/Method",
            );
            None
        }
        Some(m) => e.check(&at("method"), check_method(m)),
    };
    let target = s.target.as_ref().and_then(|t| {
        let url = t.trim_end_matches('/');
        e.check(&at("target"), super::check_url(url))
            .map(|()| url.to_owned())
    });
    let message = match &s.message {
        None => Some(Vec::new()),
        Some(m) => e.check(&at("message"), message(m)),
    };
    let mut headers = Vec::new();
    for (name, value) in &s.metadata {
        let key = format!("metadata.{name}");
        if let Err(m) = check_metadata_name(name) {
            e.add(at(&key), m);
            continue;
        }
        if let Some(t) = template(&key, value, e) {
            headers.push((name.clone(), t));
        }
    }
    let delay = s
        .delay
        .as_ref()
        .and_then(|d| e.check(&at("delay"), read_dist(d, Kind::Duration)));
    let timeout = timeout(s, path, e);
    let thresholds = super::thresholds(&s.thresholds, &at("thresholds"), e);
    let when = when(s, all, &at("when"), e);
    let url_path = Template::parse(&format!("/{}", method?)).ok()?;
    Some(Step {
        name: s.name.clone(),
        service: Service::Grpc,
        method: "POST".to_owned(),
        path: url_path,
        headers,
        body: Body::Grpc(message?),
        depends_on: depends(s),
        delay,
        model: None,
        max_tokens: None,
        input_tokens: None,
        shared_prefix: false,
        token_rho: None,
        stream: false,
        timeout,
        thresholds,
        when,
        ignore_eos: false,
        extract: Vec::new(),
        target,
        command: Vec::new(),
        keep_text: false,
    })
}

/// `package.Service/Method`: one `/`, both parts non-empty, each made of
/// letters, digits, `_` and `.` (protobuf's names).
pub(crate) fn check_method(m: &str) -> Result<&str, String> {
    let name = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    };
    match m.split_once('/') {
        Some((service, method)) if name(service) && name(method) => Ok(m),
        _ => Err(format!(
            "must be package.Service/Method (one `/`, names of letters, digits, `_` and `.`), found `{m}`"
        )),
    }
}

/// A metadata key is a lowercase header name; `grpc-*` names are the
/// protocol's own (`grpc-timeout` comes from `timeout`).
fn check_metadata_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
    if !ok {
        return Err(format!(
            "a metadata key is lowercase letters, digits, `-`, `_` and `.`, found `{name}`"
        ));
    }
    if name.starts_with("grpc-") {
        return Err(format!(
            "`{name}`: grpc- keys are the protocol's own (set `timeout` for grpc-timeout)"
        ));
    }
    if name.ends_with("-bin") {
        return Err(format!("`{name}`: binary (-bin) metadata is not supported"));
    }
    Ok(())
}

/// The message's bytes from `base64:` or `hex:`.
pub(crate) fn message(m: &RawMessage) -> Result<Vec<u8>, String> {
    match (&m.base64, &m.hex) {
        (Some(b), None) => base64::engine::general_purpose::STANDARD
            .decode(b.trim())
            .map_err(|err| format!("base64: not base64: {err}")),
        (None, Some(h)) => hex(h),
        (Some(_), Some(_)) => Err("give one of `base64` and `hex`".to_owned()),
        (None, None) => Err("needs `base64` or `hex` (raw protobuf bytes)".to_owned()),
    }
}

/// Hex digits (any case, spaces between bytes allowed) to bytes.
fn hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 == 1 {
        return Err(format!(
            "hex: an odd number of digits ({}), found `{text}`",
            digits.len()
        ));
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Ok(d - b'0'),
        b'a'..=b'f' => Ok(d - b'a' + 10),
        b'A'..=b'F' => Ok(d - b'A' + 10),
        other => Err(format!(
            "hex: `{}` is not a hex digit",
            char::from(other).escape_default()
        )),
    };
    digits
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Ok(value(*hi)? << 4 | value(*lo)?),
            _ => Err("hex: an odd number of digits".to_owned()),
        })
        .collect()
}
