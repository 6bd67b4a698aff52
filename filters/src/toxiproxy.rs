//! Toxiproxy's REST API as data: a toxic's JSON (`name`, `type`, `stream`,
//! `toxicity`, `attributes`) read into sluice's [`Toxic`] with Toxiproxy's
//! units and defaults, and a proxy's fields. Every error names the field it
//! is about, so that a client's 400 says what to fix.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::fault::{Direction, Toxic};

/// The toxic types Toxiproxy defines and sluice carries out.
pub const TOXIC_TYPES: [&str; 7] = [
    "latency",
    "bandwidth",
    "slicer",
    "slow_close",
    "timeout",
    "reset_peer",
    "limit_data",
];

/// What is wrong with a body, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// One toxic as Toxiproxy describes it, and the sluice toxic it maps to.
#[derive(Clone, Debug, PartialEq)]
pub struct ToxicSpec {
    pub name: String,
    /// One of [`TOXIC_TYPES`].
    pub kind: &'static str,
    /// `upstream`: the client's bytes, on their way to the server.
    pub stream: Direction,
    /// The share of new connections that get the toxic, 0..=1.
    pub toxicity: f64,
    /// Every attribute of the type, defaults filled in (what GET answers).
    pub attributes: Map<String, Value>,
    pub toxic: Toxic,
}

/// A proxy as `POST /proxies` and `POST /populate` take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxySpec {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
}

/// The fields `POST /proxies/{name}` may change; absent ones stay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyPatch {
    pub listen: Option<String>,
    pub upstream: Option<String>,
    pub enabled: Option<bool>,
}

/// The attributes of a type: name and default. Units are Toxiproxy's:
/// milliseconds, but microseconds for the slicer's `delay`, KB/s (1000
/// bytes) for `rate`, bytes for sizes.
fn attribute_names(kind: &str) -> &'static [&'static str] {
    match kind {
        "latency" => &["latency", "jitter"],
        "bandwidth" => &["rate"],
        "slicer" => &["average_size", "size_variation", "delay"],
        "slow_close" => &["delay"],
        "timeout" | "reset_peer" => &["timeout"],
        "limit_data" => &["bytes"],
        _ => &[],
    }
}

impl ToxicSpec {
    /// Reads a toxic from the body of `POST /proxies/{proxy}/toxics`.
    pub fn parse(body: &Value) -> Result<ToxicSpec, FieldError> {
        let object = body
            .as_object()
            .ok_or_else(|| FieldError::new("body", "must be a JSON object"))?;
        for key in object.keys() {
            if !["name", "type", "stream", "toxicity", "attributes"].contains(&key.as_str()) {
                return Err(FieldError::new(
                    key.as_str(),
                    "unknown field (name, type, stream, toxicity, attributes)",
                ));
            }
        }
        let kind = match object.get("type") {
            Some(Value::String(t)) => TOXIC_TYPES
                .iter()
                .find(|known| *known == t)
                .copied()
                .ok_or_else(|| {
                    FieldError::new(
                        "type",
                        format!("unknown toxic type `{t}` ({})", TOXIC_TYPES.join(", ")),
                    )
                })?,
            Some(_) => return Err(FieldError::new("type", "must be a string")),
            None => return Err(FieldError::new("type", "required")),
        };
        let stream = match object.get("stream") {
            None | Some(Value::Null) => Direction::Downstream,
            Some(Value::String(s)) if s == "downstream" => Direction::Downstream,
            Some(Value::String(s)) if s == "upstream" => Direction::Upstream,
            Some(other) => {
                return Err(FieldError::new(
                    "stream",
                    format!("must be `upstream` or `downstream`, found {other}"),
                ))
            }
        };
        let toxicity = match object.get("toxicity") {
            None | Some(Value::Null) => 1.0,
            Some(v) => match v.as_f64() {
                Some(t) if (0.0..=1.0).contains(&t) => t,
                _ => {
                    return Err(FieldError::new(
                        "toxicity",
                        format!("must be a number from 0 to 1, found {v}"),
                    ))
                }
            },
        };
        let name = match object.get("name") {
            None | Some(Value::Null) => format!("{kind}_{}", stream_name(stream)),
            Some(Value::String(n)) if n.is_empty() => format!("{kind}_{}", stream_name(stream)),
            Some(Value::String(n)) => {
                check_name("name", n)?;
                n.clone()
            }
            Some(_) => return Err(FieldError::new("name", "must be a string")),
        };
        let given = match object.get("attributes") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(a)) => a.clone(),
            Some(_) => return Err(FieldError::new("attributes", "must be a JSON object")),
        };
        let names = attribute_names(kind);
        if let Some(unknown) = given.keys().find(|k| !names.contains(&k.as_str())) {
            return Err(FieldError::new(
                format!("attributes.{unknown}"),
                format!("not an attribute of {kind} ({})", names.join(", ")),
            ));
        }
        let mut attributes = Map::new();
        for name in names {
            let value = match given.get(*name) {
                None | Some(Value::Null) => 0,
                Some(v) => v.as_u64().ok_or_else(|| {
                    FieldError::new(
                        format!("attributes.{name}"),
                        format!("must be a whole number of at least 0, found {v}"),
                    )
                })?,
            };
            attributes.insert((*name).to_string(), json!(value));
        }
        let toxic = toxic(kind, stream, &attributes)?;
        Ok(ToxicSpec {
            name,
            kind,
            stream,
            toxicity,
            attributes,
            toxic,
        })
    }

    /// This toxic with the `attributes` and `toxicity` of an update body
    /// (`POST /proxies/{proxy}/toxics/{toxic}`); name, type and stream stay.
    pub fn updated(&self, patch: &Value) -> Result<ToxicSpec, FieldError> {
        let patch = patch
            .as_object()
            .ok_or_else(|| FieldError::new("body", "must be a JSON object"))?;
        let mut next = self.to_json();
        if let Some(Value::Object(attributes)) = patch.get("attributes") {
            for (k, v) in attributes {
                next["attributes"][k] = v.clone();
            }
        } else if let Some(other) = patch.get("attributes").filter(|v| !v.is_null()) {
            return Err(FieldError::new(
                "attributes",
                format!("must be a JSON object, found {other}"),
            ));
        }
        if let Some(t) = patch.get("toxicity").filter(|v| !v.is_null()) {
            next["toxicity"] = t.clone();
        }
        ToxicSpec::parse(&next)
    }

    /// The toxic as Toxiproxy answers it.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "stream": stream_name(self.stream),
            "toxicity": self.toxicity,
            "attributes": self.attributes,
        })
    }

    /// The share of connections as sluice's `percent`.
    pub fn percent(&self) -> f64 {
        self.toxicity * 100.0
    }
}

fn stream_name(stream: Direction) -> &'static str {
    match stream {
        Direction::Upstream => "upstream",
        Direction::Downstream => "downstream",
    }
}

/// The attributes (all present, whole numbers) as a sluice toxic. Zero is
/// refused where sluice's own toxic needs more (a latency of 0 would be no
/// toxic at all).
fn toxic(kind: &str, stream: Direction, a: &Map<String, Value>) -> Result<Toxic, FieldError> {
    let get = |name: &str| a.get(name).and_then(Value::as_u64).unwrap_or(0);
    let at_least_one = |name: &str, unit: &str| {
        let value = get(name);
        if value == 0 {
            Err(FieldError::new(
                format!("attributes.{name}"),
                format!("must be at least 1 ({unit})"),
            ))
        } else {
            Ok(value)
        }
    };
    let ms = Duration::from_millis;
    Ok(match kind {
        "latency" => Toxic::Latency {
            latency: ms(at_least_one("latency", "milliseconds")?),
            jitter: ms(get("jitter")),
            direction: stream,
        },
        "bandwidth" => Toxic::Bandwidth {
            bytes_per_sec: at_least_one("rate", "KB/s")?.saturating_mul(1000),
            direction: stream,
        },
        "slicer" => {
            let average = at_least_one("average_size", "bytes")?;
            let variation = get("size_variation");
            if variation >= average {
                return Err(FieldError::new(
                    "attributes.size_variation",
                    format!("must be less than average_size ({average}), found {variation}"),
                ));
            }
            Toxic::Slicer {
                average_size: usize::try_from(average).unwrap_or(usize::MAX),
                size_variation: usize::try_from(variation).unwrap_or(usize::MAX),
                delay: Duration::from_micros(get("delay")),
                direction: stream,
            }
        }
        "slow_close" => Toxic::SlowClose {
            delay: ms(at_least_one("delay", "milliseconds")?),
        },
        "timeout" => Toxic::Timeout {
            timeout: ms(get("timeout")),
        },
        "reset_peer" => Toxic::ResetPeer {
            timeout: ms(get("timeout")),
        },
        _ => Toxic::LimitData {
            bytes: at_least_one("bytes", "bytes")?,
            direction: stream,
        },
    })
}

/// Names go into URLs, metric labels and experiment ids: sluice's name
/// alphabet.
fn check_name(field: &str, name: &str) -> Result<(), FieldError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("`{name}` is not a valid name (letters, digits, `-`, `_`, `.`)"),
        ))
    }
}

fn required_string(object: &Map<String, Value>, field: &str) -> Result<String, FieldError> {
    match object.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err(FieldError::new(field, "required"))
        }
        Some(other) => Err(FieldError::new(
            field,
            format!("must be a string, found {other}"),
        )),
    }
}

fn optional_string(object: &Map<String, Value>, field: &str) -> Result<Option<String>, FieldError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(FieldError::new(
            field,
            format!("must be a string, found {other}"),
        )),
    }
}

fn optional_bool(object: &Map<String, Value>, field: &str) -> Result<Option<bool>, FieldError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(FieldError::new(
            field,
            format!("must be true or false, found {other}"),
        )),
    }
}

/// `host:port`, as Toxiproxy takes `listen` and `upstream`.
fn check_host_port(field: &str, text: &str) -> Result<(), FieldError> {
    let port = text
        .rsplit_once(':')
        .filter(|(host, _)| !host.is_empty())
        .and_then(|(_, port)| port.parse::<u16>().ok());
    match port {
        Some(_) => Ok(()),
        None => Err(FieldError::new(field, format!("`{text}` is not host:port"))),
    }
}

impl ProxySpec {
    /// Reads a proxy from the body of `POST /proxies` (or one item of
    /// `POST /populate`); `listen` defaults to `127.0.0.1:0`, `enabled` to
    /// true.
    pub fn parse(body: &Value) -> Result<ProxySpec, FieldError> {
        let object = body
            .as_object()
            .ok_or_else(|| FieldError::new("body", "must be a JSON object"))?;
        let name = required_string(object, "name")?;
        check_name("name", &name)?;
        // Toxiproxy's own default: any free port, on loopback here.
        let listen = optional_string(object, "listen")?.unwrap_or_else(|| "127.0.0.1:0".into());
        check_host_port("listen", &listen)?;
        let upstream = required_string(object, "upstream")?;
        check_host_port("upstream", &upstream)?;
        let enabled = optional_bool(object, "enabled")?.unwrap_or(true);
        Ok(ProxySpec {
            name,
            listen,
            upstream,
            enabled,
        })
    }
}

impl ProxyPatch {
    /// Reads the body of `POST /proxies/{name}`; `name` and `toxics`, which
    /// clients send back as they got them, are ignored.
    pub fn parse(body: &Value) -> Result<ProxyPatch, FieldError> {
        let object = body
            .as_object()
            .ok_or_else(|| FieldError::new("body", "must be a JSON object"))?;
        let listen = optional_string(object, "listen")?;
        if let Some(l) = &listen {
            check_host_port("listen", l)?;
        }
        let upstream = optional_string(object, "upstream")?;
        if let Some(u) = &upstream {
            check_host_port("upstream", u)?;
        }
        Ok(ProxyPatch {
            listen,
            upstream,
            enabled: optional_bool(object, "enabled")?,
        })
    }
}

#[cfg(test)]
mod tests;
