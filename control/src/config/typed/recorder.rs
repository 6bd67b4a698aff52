//! The validated `recorder:`: what one recording writes, and where.

use std::path::PathBuf;
use std::time::Duration;

use sluice_filters::{Bodies, RedactionConfig};

use super::SidePriority;

pub(crate) const DEFAULT_ROTATE_BYTES: u64 = 64 * 1024 * 1024;
pub(crate) const DEFAULT_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// The session header of a route without a sticky header.
pub(super) const DEFAULT_SESSION_HEADER: &str = "x-session-id";

#[derive(Clone, Debug, PartialEq)]
pub struct RecorderConfig {
    pub path: PathBuf,
    /// A file is rotated when the next line would take it past this.
    pub rotate_bytes: u64,
    /// The recording stops writing when the next line would take all its
    /// files together past this.
    pub max_bytes: u64,
    /// 0..=100.
    pub percent: f64,
    /// Lower-case; `None`: the route's sticky header, else
    /// [`DEFAULT_SESSION_HEADER`].
    pub session_header: Option<String>,
    /// Empty: every route.
    pub routes: Vec<String>,
    pub bodies: Bodies,
    pub redaction: RedactionConfig,
    /// The environment variable of the token key; `None`: a random key.
    pub key_env: Option<String>,
    /// `None`: until stopped or the config drops it.
    pub ttl: Option<Duration>,
    /// The writer thread's CPU priority.
    pub priority: SidePriority,
}

impl RecorderConfig {
    /// Whether requests of `route` are recorded.
    pub fn records(&self, route: &str) -> bool {
        self.routes.is_empty() || self.routes.iter().any(|r| r == route)
    }

    /// The header that names a session on a route whose sticky header is
    /// `sticky`.
    pub fn session_header<'a>(&'a self, sticky: Option<&'a str>) -> &'a str {
        self.session_header
            .as_deref()
            .or(sticky)
            .unwrap_or(DEFAULT_SESSION_HEADER)
    }
}
