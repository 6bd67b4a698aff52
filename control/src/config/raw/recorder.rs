//! `recorder:` as written, which is also the body of `PUT /v1/recorder`.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::{RawPercent, RawSize};
use crate::config::typed::SidePriority;

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRecorder {
    /// The trace file (JSON lines); rotated files are `PATH.1`, `PATH.2`, ...
    pub path: String,
    /// Start a new file when the current one reaches this size (default 64MiB).
    pub rotate_bytes: Option<RawSize>,
    /// Stop writing when the recording reaches this size, all files together (default 1GiB).
    pub max_bytes: Option<RawSize>,
    /// Share of sessions (or of requests without one) recorded, 0..=100 (default 100).
    pub percent: Option<RawPercent>,
    /// The header that names a session (default: the route's sticky header, else `x-session-id`).
    pub session_header: Option<String>,
    /// The routes recorded (default: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<String>,
    /// What of the request body is kept (default `redacted`).
    pub bodies: Option<RawBodies>,
    /// Required for `bodies: full`.
    pub allow_unredacted: Option<bool>,
    pub redaction: Option<RawRedaction>,
    /// The writer thread's CPU priority (default `idle`: it never takes CPU
    /// the data plane wants, and drops lines, counted, when it cannot keep up).
    pub priority: Option<SidePriority>,
    /// How long the recording runs; required by `PUT /v1/recorder`.
    pub ttl: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawBodies {
    None,
    Redacted,
    Full,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedaction {
    /// Extra regexes; a match (or its first group) is replaced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<String>,
    /// JSON keys whose values are removed whole, at any depth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop_keys: Vec<String>,
    /// The environment variable holding the token key, so that tokens stay
    /// the same across recordings (default: a random key per recording).
    pub key_env: Option<String>,
}

impl RawRecorder {
    /// A recorder as `PUT /v1/recorder` takes it, YAML or JSON; paths in
    /// errors are relative to it.
    pub fn from_yaml(text: &str) -> Result<RawRecorder, super::ConfigErrors> {
        super::parse_item(text, "a recorder", "`recorder`")
    }
}
