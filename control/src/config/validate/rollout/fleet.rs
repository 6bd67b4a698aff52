//! Validation of a rollout's fleet mode: `source.prometheus` (where the
//! gates are read), `targets` (whose control APIs take the weights) and
//! `target_token_env` (the token they are called with).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::super::super::raw::{RawRollout, RawRolloutSource};
use super::super::super::typed::{
    QueryKey, RolloutSource, DEFAULT_SCRAPE_INTERVAL, DEFAULT_TARGET_TOKEN_ENV,
};
use super::super::Errors;

/// The validated fleet fields of one rollout.
pub(super) struct Fleet {
    pub source: Option<RolloutSource>,
    pub targets: Vec<String>,
    pub token_env: String,
}

impl Fleet {
    /// Prometheus's scrape interval, when the gates are read there.
    pub(super) fn scrape_interval(&self) -> Option<Duration> {
        self.source.as_ref().map(|s| match s {
            RolloutSource::Prometheus {
                scrape_interval, ..
            } => *scrape_interval,
        })
    }
}

pub(super) fn fleet(at: &str, r: &RawRollout, errs: &mut Errors) -> Fleet {
    let source = r
        .source
        .as_ref()
        .map(|s| source(&format!("{at}.source"), s, errs));
    let mut seen = HashMap::new();
    let targets = r
        .targets
        .iter()
        .enumerate()
        .map(|(j, t)| {
            let path = format!("{at}.targets[{j}]");
            let url = url(errs, path.clone(), t, "http://sluice-2.internal:9901");
            errs.unique(&mut seen, path, "target", t.trim_end_matches('/'));
            url
        })
        .collect::<Vec<_>>();
    let token_env = match &r.target_token_env {
        None => DEFAULT_TARGET_TOKEN_ENV.to_string(),
        Some(name) => {
            let path = format!("{at}.target_token_env");
            if targets.is_empty() {
                errs.push(path, "is only read with `targets`");
            } else if !env_name(name) {
                errs.push(
                    path,
                    format!("`{name}` is not an environment variable name (letters, digits, `_`)"),
                );
            }
            name.clone()
        }
    };
    Fleet {
        source,
        targets,
        token_env,
    }
}

fn env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn source(at: &str, s: &RawRolloutSource, errs: &mut Errors) -> RolloutSource {
    let p = &s.prometheus;
    let at = format!("{at}.prometheus");
    let mut queries = BTreeMap::new();
    for (text, query) in &p.queries {
        let path = format!("{at}.queries.{text}");
        match QueryKey::parse(text) {
            Err(e) => errs.push(path, e.to_string()),
            Ok(_) if query.trim().is_empty() => errs.push(path, "must not be empty"),
            // `gap_p99` and its alias `itl_p99` are one gate.
            Ok(key) => {
                if queries.insert(key, query.clone()).is_some() {
                    errs.push(path, format!("`{}` is set twice", key.as_str()));
                }
            }
        }
    }
    RolloutSource::Prometheus {
        url: url(errs, format!("{at}.url"), &p.url, "http://127.0.0.1:9090"),
        scrape_interval: errs.duration(
            format!("{at}.scrape_interval"),
            p.scrape_interval.as_deref(),
            DEFAULT_SCRAPE_INTERVAL,
        ),
        queries,
    }
}

/// An `http` URL with a host; returned without a trailing `/`. The
/// control plane's client speaks plain HTTP only, so `https` is refused
/// here rather than failing on every call.
fn url(errs: &mut Errors, path: String, text: &str, example: &str) -> String {
    let uri = text.parse::<http::Uri>().ok();
    let scheme = uri.as_ref().and_then(|u| u.scheme_str());
    let host = uri
        .as_ref()
        .and_then(|u| u.host())
        .is_some_and(|h| !h.is_empty());
    match (scheme, host) {
        (Some("http"), true) => {}
        (Some("https"), true) => errs.push(
            path,
            format!("`{text}`: https is not supported here yet; use http:// (a trusted network, or a TLS proxy next to it)"),
        ),
        _ => errs.push(path, format!("`{text}` is not an http URL like {example}")),
    }
    text.trim_end_matches('/').to_string()
}
