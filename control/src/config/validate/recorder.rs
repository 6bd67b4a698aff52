//! Validation of `recorder:`, in the config and as the body of
//! `PUT /v1/recorder` (there with paths relative to the body).

use std::path::PathBuf;

use sluice_filters::{is_secret_header, Bodies, RedactError, RedactionConfig, Redactor, Secret};

use super::super::raw::{RawBodies, RawRecorder};
use super::super::typed::*;
use super::super::ConfigErrors;
use super::Errors;

/// A file smaller than this would rotate on every few lines.
const MIN_ROTATE_BYTES: u64 = 4096;

impl RawRecorder {
    /// The recorder of a config whose routes are `routes`; every problem,
    /// with paths relative to this item.
    pub fn validate(&self, routes: &[RouteConfig]) -> Result<RecorderConfig, ConfigErrors> {
        let mut errs = Errors::default();
        let config = recorder(self, "", routes, &mut errs);
        match errs.0.is_empty() {
            true => Ok(config),
            false => Err(ConfigErrors(errs.0)),
        }
    }
}

/// `at` is the item's path (`recorder`), or empty for an API body.
pub(super) fn recorder(
    raw: &RawRecorder,
    at: &str,
    routes: &[RouteConfig],
    errs: &mut Errors,
) -> RecorderConfig {
    let path_of = |field: &str| match at {
        "" => field.to_owned(),
        at => format!("{at}.{field}"),
    };
    if raw.path.trim().is_empty() {
        errs.push(path_of("path"), "must be a file path");
    }
    let rotate_bytes = errs
        .size(path_of("rotate_bytes"), raw.rotate_bytes.as_ref())
        .unwrap_or(DEFAULT_ROTATE_BYTES);
    if rotate_bytes < MIN_ROTATE_BYTES {
        errs.push(
            path_of("rotate_bytes"),
            format!("{rotate_bytes} bytes is less than the least, 4KiB"),
        );
    }
    let max_bytes = errs
        .size(path_of("max_bytes"), raw.max_bytes.as_ref())
        .unwrap_or(DEFAULT_MAX_BYTES);
    if max_bytes == 0 {
        errs.push(path_of("max_bytes"), "must be greater than 0");
    }
    let percent = errs
        .percent(path_of("percent"), raw.percent.as_ref())
        .unwrap_or(100.0);
    let session_header = raw.session_header.as_ref().map(|h| {
        let name = errs.header_name(path_of("session_header"), h);
        if is_secret_header(&name) {
            errs.push(
                path_of("session_header"),
                format!("`{name}` carries credentials, which are never recorded"),
            );
        }
        name
    });
    for (i, route) in raw.routes.iter().enumerate() {
        if !routes.iter().any(|r| &r.name == route) {
            errs.push(
                path_of(&format!("routes[{i}]")),
                format!("unknown route `{route}`"),
            );
        } else if raw.routes[..i].contains(route) {
            errs.push(
                path_of(&format!("routes[{i}]")),
                format!("route `{route}` is listed twice"),
            );
        }
    }
    let bodies = match raw.bodies {
        Some(RawBodies::None) => Bodies::None,
        Some(RawBodies::Redacted) | None => Bodies::Redacted,
        Some(RawBodies::Full) => {
            if raw.allow_unredacted != Some(true) {
                errs.push(
                    path_of("bodies"),
                    "`full` writes prompts with their secrets; set `allow_unredacted: true` to allow it",
                );
            }
            Bodies::Full
        }
    };
    let written = raw.redaction.clone().unwrap_or_default();
    let redaction = RedactionConfig {
        patterns: written.patterns,
        drop_keys: written.drop_keys,
    };
    let redaction_at = path_of("redaction");
    if let Err(e) = Redactor::new(&redaction, Secret::new(*b"validation")) {
        match e {
            RedactError::Pattern { index, message } => {
                errs.push(format!("{redaction_at}.patterns[{index}]"), message)
            }
            other => errs.push(format!("{redaction_at}.patterns"), other.to_string()),
        }
    }
    for (i, key) in redaction.drop_keys.iter().enumerate() {
        if key.is_empty() {
            errs.push(
                format!("{redaction_at}.drop_keys[{i}]"),
                "must be a JSON key",
            );
        }
    }
    if written.key_env.as_deref() == Some("") {
        errs.push(
            format!("{redaction_at}.key_env"),
            "must name an environment variable",
        );
    }
    let ttl = raw.ttl.as_deref().map(|t| {
        errs.duration(
            path_of("ttl"),
            Some(t),
            std::time::Duration::from_secs(3600),
        )
    });
    RecorderConfig {
        path: PathBuf::from(&raw.path),
        rotate_bytes,
        max_bytes,
        percent,
        session_header,
        routes: raw.routes.clone(),
        bodies,
        redaction,
        key_env: written.key_env,
        ttl,
        priority: raw.priority.unwrap_or_default(),
    }
}
