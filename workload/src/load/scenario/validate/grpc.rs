//! A `service: grpc` step: `method: package.Service/Method`, a `message`
//! (raw protobuf bytes as `base64:` or `hex:`, or `json:` encoded at load
//! through a `descriptor_set`), `metadata`, a `target` URL; the HTTP and
//! llm keys are refused.

use std::path::Path;

use base64::Engine as _;
use prost_reflect::{DescriptorPool, DynamicMessage};

use super::super::dist::{read as read_dist, Kind};
use super::super::raw::{RawMessage, RawStep};
use super::super::{Body, Service, Step, Template};
use super::steps::{depends, refuse, timeout, when};
use super::Errors;

/// A grpc step, or `None` when its method or target is wrong.
pub(super) fn step(
    s: &RawStep,
    path: &str,
    dir: &Path,
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
            "perturb",
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
        Some(m) => message(m, method, dir, path, e),
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
        perturb: None,
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

/// The message's bytes from `base64:`, `hex:` or `json:` (through the
/// descriptor set and `method`, when that one is right), each error at
/// its key under the step's `path`.
fn message(
    m: &RawMessage,
    method: Option<&str>,
    dir: &Path,
    path: &str,
    e: &mut Errors,
) -> Option<Vec<u8>> {
    let at = format!("{path}.message");
    let given = [m.base64.is_some(), m.hex.is_some(), m.json.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        e.add(&at, "give one of `base64`, `hex` and `json`");
        return None;
    }
    let bytes = match (&m.base64, &m.hex, &m.json, &m.descriptor_set) {
        (Some(b), ..) => base64::engine::general_purpose::STANDARD
            .decode(b.trim())
            .map_err(|err| format!("base64: not base64: {err}")),
        (_, Some(h), ..) => hex(h),
        (_, _, Some(_), None) => Err(
            "`json` needs `descriptor_set` (a FileDescriptorSet, as `protoc \
             --descriptor_set_out=F --include_imports` writes)"
                .to_owned(),
        ),
        (_, _, Some(json), Some(file)) => return encode(json, file, method, dir, path, e),
        (None, None, None, _) => Err(
            "needs `base64` or `hex` (raw protobuf bytes), or `json` with `descriptor_set`"
                .to_owned(),
        ),
    };
    if m.descriptor_set.is_some() && m.json.is_none() {
        e.add(format!("{at}.descriptor_set"), "is read only with `json`");
    }
    e.check(&at, bytes)
}

/// `json` encoded as `method`'s input type, found in the descriptor set
/// `file` (relative to `dir`). A wrong method is not looked up: its error
/// is already said.
fn encode(
    json: &serde_json::Value,
    file: &str,
    method: Option<&str>,
    dir: &Path,
    path: &str,
    e: &mut Errors,
) -> Option<Vec<u8>> {
    let pool = std::fs::read(dir.join(file))
        .map_err(|err| format!("{file}: {err}"))
        .and_then(|bytes| {
            DescriptorPool::decode(bytes.as_slice()).map_err(|err| format!("{file}: {err}"))
        });
    let pool = e.check(&format!("{path}.message.descriptor_set"), pool)?;
    let full = method?;
    let (service, name) = full.split_once('/')?;
    let Some(service) = pool.get_service_by_name(service) else {
        e.add(
            format!("{path}.method"),
            format!("{full}: no such service in {file}"),
        );
        return None;
    };
    let Some(rpc) = service.methods().find(|m| m.name() == name) else {
        let names: Vec<String> = service.methods().map(|m| m.name().to_owned()).collect();
        e.add(
            format!("{path}.method"),
            format!(
                "{full}: no such method in {file} ({} has {})",
                service.full_name(),
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ),
        );
        return None;
    };
    if rpc.is_client_streaming() {
        e.add(
            format!("{path}.method"),
            format!("{full}: client-streaming methods are not supported yet (one request message)"),
        );
        return None;
    }
    // The path of a bad value inside `json` goes into the error's path.
    let input = rpc.input();
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(json, &mut track);
    match DynamicMessage::deserialize(input.clone(), tracked) {
        Ok(m) => Some(prost_reflect::prost::Message::encode_to_vec(&m)),
        Err(err) => {
            let inner = track.path();
            let at = match inner.iter().next() {
                None => format!("{path}.message.json"),
                Some(_) => format!("{path}.message.json.{inner}"),
            };
            e.add(at, format!("{}: {err}", input.full_name()));
            None
        }
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
