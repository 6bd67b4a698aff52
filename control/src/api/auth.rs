//! Who may call the API: the tokens and their scopes (rotated by editing
//! their files), the per-peer limit on failed authentications, and the
//! counters of both. Health, readiness and metrics need none of it.

mod failures;
mod tokens;
mod watch;

#[cfg(test)]
pub(crate) use tokens::Token;
pub(crate) use tokens::{load as load_tokens, Tokens};
pub(crate) use watch::watch_token_files;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use arc_swap::ArcSwap;
use http::{HeaderMap, HeaderValue, StatusCode};
use parking_lot::Mutex;
use prometheus::{IntCounter, IntCounterVec, Registry};
use serde::Serialize;
use sluice_filters::register_family;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::respond::{self, ApiResponse};
use crate::config::{Scope, TokenSource};
use failures::{PeerFailures, FAILURE_LIMIT};
use tokens::Presented;

pub const AUTH_FAILURES_METRIC: &str = "sluice_admin_auth_failures_total";
pub const AUTH_REFUSALS_METRIC: &str = "sluice_admin_auth_refusals_total";
pub const TOKEN_RELOAD_ERRORS_METRIC: &str = "sluice_admin_token_reload_errors_total";

/// A request's caller, once its token is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub name: String,
    pub scope: Scope,
}

struct AuthMetrics {
    /// By reason: `missing_token`, `wrong_token` (401), `scope` (403),
    /// `tls_handshake` (a refused or failed handshake).
    failures: IntCounterVec,
    /// Requests answered 429: their peer failed too often.
    refusals: IntCounter,
    reload_errors: IntCounter,
}

pub struct Auth {
    sources: Vec<TokenSource>,
    tokens: ArcSwap<Tokens>,
    failures: Mutex<PeerFailures>,
    metrics: AuthMetrics,
}

#[derive(Serialize)]
struct Forbidden<'a> {
    error: &'a str,
    needed_scope: &'a str,
}

/// Why a request is refused before it reaches its endpoint.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// 429: the peer failed too often; the block has this long left.
    Blocked(Duration),
    /// 401: no token, or none of the known ones.
    Unauthorized,
    /// 403: a known token whose scope is too small.
    Forbidden { error: String, needed: Scope },
}

impl Refused {
    pub(crate) fn answer(&self) -> ApiResponse {
        match self {
            Refused::Blocked(left) => {
                let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
                let mut answer = respond::error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many failed authentications from this address",
                );
                answer
                    .headers_mut()
                    .insert("retry-after", HeaderValue::from(seconds));
                answer
            }
            Refused::Unauthorized => {
                respond::error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token")
            }
            Refused::Forbidden { error, needed } => respond::json(
                StatusCode::FORBIDDEN,
                &Forbidden {
                    error,
                    needed_scope: needed.as_str(),
                },
            ),
        }
    }
}

impl Auth {
    /// The tokens of `sources` as read now (generated when there are
    /// none), and the counters registered in `registry`.
    pub(crate) fn new(
        sources: Vec<TokenSource>,
        tokens: Tokens,
        registry: &Registry,
    ) -> Result<Auth, prometheus::Error> {
        let failures: IntCounterVec = register_family(
            registry,
            AUTH_FAILURES_METRIC,
            "Failed control API authentications, by reason.",
            &["reason"],
        )?;
        let refusals: IntCounterVec = register_family(
            registry,
            AUTH_REFUSALS_METRIC,
            "Control API requests refused (429) because their peer failed to authenticate too often.",
            &[],
        )?;
        let reload_errors: IntCounterVec = register_family(
            registry,
            TOKEN_RELOAD_ERRORS_METRIC,
            "Token file edits that could not be loaded (the last good tokens stay).",
            &[],
        )?;
        Ok(Auth {
            sources,
            tokens: ArcSwap::from_pointee(tokens),
            failures: Mutex::new(PeerFailures::new(FAILURE_LIMIT)),
            metrics: AuthMetrics {
                failures,
                refusals: refusals.with_label_values::<&str>(&[]),
                reload_errors: reload_errors.with_label_values::<&str>(&[]),
            },
        })
    }

    /// An `Auth` over fixed tokens `(name, scope, secret)`, for tests.
    #[cfg(test)]
    #[allow(clippy::expect_used)]
    pub(crate) fn fixed(
        tokens: &[(&str, Scope, &str)],
        registry: &Registry,
    ) -> std::sync::Arc<Auth> {
        let tokens = tokens
            .iter()
            .map(|(n, s, t)| Token::new(*n, *s, *t))
            .collect();
        let tokens = Tokens::new(tokens).expect("distinct test tokens");
        std::sync::Arc::new(Auth::new(Vec::new(), tokens, registry).expect("fresh registry"))
    }

    /// The caller of a `/v1/` request from `peer`, or why it is refused:
    /// blocked while the peer failed too often (even with a right token), or
    /// a missing or wrong token (which counts against the peer).
    pub(crate) fn admit(
        &self,
        peer: IpAddr,
        headers: &HeaderMap,
        now: Instant,
    ) -> Result<Caller, Refused> {
        if let Some(left) = self.failures.lock().blocked(peer, now) {
            self.metrics.refusals.inc();
            return Err(Refused::Blocked(left));
        }
        let tokens = self.tokens.load();
        let reason = match tokens.find(headers) {
            Presented::Known(name, scope) => {
                return Ok(Caller {
                    name: name.to_string(),
                    scope,
                })
            }
            Presented::Missing => "missing_token",
            Presented::Wrong => "wrong_token",
        };
        self.metrics.failures.with_label_values(&[reason]).inc();
        if self.failures.lock().fail(peer, now) {
            warn!(%peer, "control API: too many failed authentications; peer blocked");
        }
        Err(Refused::Unauthorized)
    }

    /// Refused unless `caller`'s scope covers `needed`, the scope `what`
    /// (`METHOD /template`) needs.
    pub(crate) fn permit(&self, caller: &Caller, needed: Scope, what: &str) -> Result<(), Refused> {
        if caller.scope.allows(needed) {
            return Ok(());
        }
        self.metrics.failures.with_label_values(&["scope"]).inc();
        Err(Refused::Forbidden {
            error: format!(
                "token `{}` has scope {}; {what} needs scope {needed}",
                caller.name, caller.scope
            ),
            needed,
        })
    }

    /// Counts a TLS handshake that failed (a client certificate missing or
    /// not signed by `client_ca` included).
    pub(crate) fn handshake_failed(&self) {
        self.metrics
            .failures
            .with_label_values(&["tls_handshake"])
            .inc();
    }

    /// The files whose edits rotate the tokens.
    fn files(&self) -> Vec<PathBuf> {
        self.sources
            .iter()
            .filter_map(|s| match s {
                TokenSource::Env { .. } => None,
                TokenSource::Secret { path, .. } | TokenSource::File(path) => Some(path.clone()),
            })
            .collect()
    }

    /// Reads every source again; the new set replaces the old whole, or,
    /// when any source fails, the old set stays whole. `quietly`: the
    /// watcher's first look, most likely what the start just read.
    fn reload(&self, quietly: bool) {
        match tokens::load(&self.sources) {
            Ok((tokens, _)) => {
                match quietly {
                    true => debug!(tokens = ?tokens.names(), "admin tokens read again"),
                    false => info!(tokens = ?tokens.names(), "admin tokens reloaded"),
                }
                self.tokens.store(tokens.into());
            }
            Err(e) => {
                self.metrics.reload_errors.inc();
                warn!(error = %e, "admin tokens not reloaded; the last good ones stay");
            }
        }
    }
}

#[cfg(test)]
mod tests;
