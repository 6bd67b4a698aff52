//! `admin`: the listener, the tokens and their scopes, TLS, the audit file
//! and the body bounds.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::super::raw::{RawAdminTls, RawAdminToken};
use super::super::typed::{AdminConfig, AdminTls, Scope, TokenSource};
use super::super::RawConfig;
use super::errors::Errors;

const DEFAULT_ADMIN: &str = "127.0.0.1:9901";
/// A forgotten toxic still ends: Toxiproxy's own toxics never do.
const DEFAULT_TOXIPROXY_TTL: Duration = Duration::from_secs(3600);
/// Large enough for `GET /v1/config` of a config at `max_experiments` to be
/// `PUT` back whole.
pub(crate) const DEFAULT_ADMIN_MAX_BODY: usize = 16 * 1024 * 1024;
const MAX_ADMIN_MAX_BODY: usize = 256 * 1024 * 1024;
const DEFAULT_ADMIN_MAX_DEPTH: usize = 64;
/// The name `token_env` and a bare `token_file` give their one token.
pub(crate) const DEFAULT_TOKEN_NAME: &str = "default";

pub(super) fn admin(raw: &RawConfig, max_fault_ttl: Duration, errs: &mut Errors) -> AdminConfig {
    let a = raw.admin.clone().unwrap_or_default();
    let listen_text = a.listen.as_deref().unwrap_or(DEFAULT_ADMIN);
    let listen = errs
        .socket_addr("admin.listen".into(), listen_text)
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9901)));
    let configured = a.token_env.is_some() || a.token_file.is_some() || !a.tokens.is_empty();
    let mut tokens = Vec::new();
    match (a.token_env.clone(), a.token_file.clone()) {
        (Some(_), Some(_)) => errs.push("admin", "set token_env or token_file, not both"),
        (Some(var), None) if var.is_empty() => {
            errs.push("admin.token_env", "must name an environment variable")
        }
        (Some(var), None) => tokens.push(TokenSource::Env {
            name: DEFAULT_TOKEN_NAME.into(),
            scope: Scope::Admin,
            var,
        }),
        (None, Some(file)) if file.is_empty() => errs.push("admin.token_file", "must name a file"),
        (None, Some(file)) => tokens.push(TokenSource::File(PathBuf::from(file))),
        (None, None) => {}
    }
    let mut seen = HashMap::new();
    for (i, t) in a.tokens.iter().enumerate() {
        if let Some(source) = named_token(&format!("admin.tokens[{i}]"), t, &mut seen, errs) {
            tokens.push(source);
        }
    }
    if !configured && !listen.ip().is_loopback() {
        errs.push(
            "admin",
            format!(
                "a token (token_env, token_file or tokens) is required to listen on non-loopback {listen}"
            ),
        );
    }
    let max_body = errs
        .size_within(
            "admin.max_body".into(),
            a.max_body.as_ref(),
            (1024, MAX_ADMIN_MAX_BODY as u64),
            "1KiB ..= 256MiB",
        )
        .map_or(DEFAULT_ADMIN_MAX_BODY, |n| n as usize);
    let max_body_depth = match a.max_body_depth {
        Some(n) if !(8..=1024).contains(&n) => {
            errs.push("admin.max_body_depth", "must be within 8 ..= 1024");
            DEFAULT_ADMIN_MAX_DEPTH
        }
        Some(n) => n,
        None => DEFAULT_ADMIN_MAX_DEPTH,
    };
    AdminConfig {
        listen,
        tokens,
        tls: a.tls.as_ref().map(|t| tls(t, errs)),
        audit_file: match a.audit_file {
            Some(f) if f.is_empty() => {
                errs.push("admin.audit_file", "must name a file");
                None
            }
            f => f.map(PathBuf::from),
        },
        max_body,
        max_body_depth,
        toxiproxy: a
            .toxiproxy
            .as_deref()
            .and_then(|text| toxiproxy(text, errs)),
        toxiproxy_default_ttl: toxiproxy_ttl(
            a.toxiproxy_default_ttl.as_deref(),
            max_fault_ttl,
            errs,
        ),
    }
}

/// `admin.toxiproxy`: an address, and a loopback one, because Toxiproxy's
/// API has no authentication for sluice to ask for.
fn toxiproxy(text: &str, errs: &mut Errors) -> Option<SocketAddr> {
    let addr = errs.socket_addr("admin.toxiproxy".into(), text)?;
    if !addr.ip().is_loopback() {
        errs.push(
            "admin.toxiproxy",
            format!("{text} is not a loopback address: Toxiproxy's API has no authentication"),
        );
        return None;
    }
    Some(addr)
}

/// `admin.toxiproxy_default_ttl`: more than zero (`duration` says so), at most
/// `runtime.max_fault_ttl` (each toxic is an experiment).
fn toxiproxy_ttl(text: Option<&str>, max: Duration, errs: &mut Errors) -> Duration {
    let path = "admin.toxiproxy_default_ttl";
    let default = DEFAULT_TOXIPROXY_TTL.min(max);
    let ttl = errs.duration(path.into(), text, default);
    if ttl > max {
        errs.push(
            path,
            format!(
                "`{}` is longer than the maximum {} (runtime.max_fault_ttl)",
                text.unwrap_or_default(),
                sluice_filters::format_duration(max)
            ),
        );
        return default;
    }
    ttl
}

/// One of `admin.tokens`: a valid, unique name, a known scope and exactly
/// one of `env` and `file`.
fn named_token<'a>(
    at: &str,
    t: &'a RawAdminToken,
    seen: &mut HashMap<&'a str, String>,
    errs: &mut Errors,
) -> Option<TokenSource> {
    errs.item_name(seen, at, "token", &t.name);
    let scope = match Scope::parse(&t.scope) {
        Ok(scope) => Some(scope),
        Err(e) => {
            errs.push(format!("{at}.scope"), e.to_string());
            None
        }
    };
    let name = t.name.clone();
    let source = match (&t.env, &t.file) {
        (Some(_), Some(_)) => {
            errs.push(at, "set env or file, not both");
            None
        }
        (None, None) => {
            errs.push(at, "set env or file: where the token's secret is");
            None
        }
        (Some(var), None) if var.is_empty() => {
            errs.push(format!("{at}.env"), "must name an environment variable");
            None
        }
        (None, Some(file)) if file.is_empty() => {
            errs.push(format!("{at}.file"), "must name a file");
            None
        }
        (Some(var), None) => Some((Some(var.clone()), None)),
        (None, Some(file)) => Some((None, Some(PathBuf::from(file)))),
    };
    match (scope, source) {
        (Some(scope), Some((Some(var), _))) => Some(TokenSource::Env { name, scope, var }),
        (Some(scope), Some((None, Some(path)))) => Some(TokenSource::Secret { name, scope, path }),
        _ => None,
    }
}

fn tls(t: &RawAdminTls, errs: &mut Errors) -> AdminTls {
    let mut path = |key: &str, value: &str| {
        if value.is_empty() {
            errs.push(format!("admin.tls.{key}"), "must name a PEM file");
        }
        PathBuf::from(value)
    };
    AdminTls {
        cert: path("cert", &t.cert),
        key: path("key", &t.key),
        client_ca: t.client_ca.as_deref().map(|ca| path("client_ca", ca)),
    }
}
