//! The control API: health, readiness, metrics and the web console's static
//! files without a token; config,
//! routes, stats, the audit log, GPUs, upstream load, rollouts, faults, the recorder and
//! the load runs `sluice load --report-to` pushes under
//! `/v1/` behind bearer tokens with scopes (`auth`). HTTP/1.1
//! with JSON bodies, served on its own listener beside the data plane,
//! over TLS (with client certificates) when `admin.tls` says so.

mod auth;
mod console;
mod depth;
mod endpoints;
mod faults;
mod lineage;
mod load_runs;
mod mirror;
mod openapi;
mod recorder;
mod respond;
mod rollouts;
mod serve;
mod tls;
mod v1;

pub(crate) use auth::{load_tokens, watch_token_files};
pub use auth::{Auth, AUTH_FAILURES_METRIC, AUTH_REFUSALS_METRIC, TOKEN_RELOAD_ERRORS_METRIC};
pub use endpoints::ApiEndpoint;
pub use load_runs::{LoadRuns, MAX_LOAD_RUNS};
pub use respond::MAX_BODY_BYTES;
pub(crate) use serve::serve_admin;
pub(crate) use tls::acceptor as tls_acceptor;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, StatusCode};
use hyper::body::Body;
use serde::Serialize;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::audit_file::ChangeLine;
use crate::events::{acting_as, Event};
use crate::observers::Observers;
use crate::rollout::Rollouts;
use crate::shared::Shared;
use crate::store::SnapshotStore;
use auth::Caller;
use endpoints::Resolved;
use respond::ApiResponse;

/// What `GET /readyz` answers: ready once the data plane listens, and not
/// ready again from the moment a drain begins, so that balancers stop
/// sending before the listeners close.
#[derive(Debug, Default)]
pub struct Readiness {
    ready: AtomicBool,
    draining: AtomicBool,
}

impl Readiness {
    pub fn new() -> Readiness {
        Readiness::default()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && !self.is_draining()
    }
}

/// The API over the control plane's parts. It runs none of them: the
/// rollout registry and the watchers are started by the control plane (see
/// [`crate::ControlPlane::start`]) and only read and commanded here.
pub struct AdminApi {
    pub store: Arc<SnapshotStore>,
    /// `/metrics`, `/v1/stats`, `/v1/events`, `/v1/mirror/diffs`.
    pub shared: Shared,
    /// `/v1/rollouts`.
    pub rollouts: Arc<Rollouts>,
    /// What `/v1/gpu` and `/v1/upstreams` read.
    pub observers: Observers,
    pub readiness: Arc<Readiness>,
    /// `/v1/load-runs`: what `sluice load --report-to` pushed.
    pub load_runs: LoadRuns,
    /// The tokens, their scopes and the failed-authentication limit.
    pub auth: Arc<Auth>,
}

/// The address of the peer that sent a request, put in its extensions by
/// the server (a request without one is treated as from 0.0.0.0).
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub IpAddr);

#[derive(Serialize)]
struct Status {
    status: &'static str,
}

impl AdminApi {
    /// `auth` decides who may call `/v1/` and with which scope.
    pub fn new(
        store: Arc<SnapshotStore>,
        shared: Shared,
        rollouts: Arc<Rollouts>,
        observers: Observers,
        readiness: Arc<Readiness>,
        auth: Arc<Auth>,
    ) -> Arc<Self> {
        Arc::new(AdminApi {
            store,
            shared,
            rollouts,
            observers,
            readiness,
            load_runs: LoadRuns::default(),
            auth,
        })
    }

    /// Answers one request. The whole API is this function: the server and
    /// the tests both call it.
    ///
    /// Health, readiness and metrics are answered here at once. Every other
    /// endpoint runs on a blocking worker after its body passed the size and
    /// nesting bounds: parsing and validating a body never holds the control
    /// thread, where the rollouts, the fault loop and the signals run.
    pub async fn handle<B>(self: &Arc<Self>, req: Request<B>) -> ApiResponse
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = req.into_parts();
        let peer = parts
            .extensions
            .get::<PeerAddr>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0);
        let path = parts.uri.path();
        // The token is checked before routing: without it, nothing under
        // /v1/ is told apart, not even which paths exist.
        let caller = match is_v1(path) {
            true => match self.auth.admit(peer, &parts.headers, Instant::now()) {
                Ok(caller) => Some(caller),
                Err(refused) => return refused.answer(),
            },
            false => None,
        };
        let (response, made) = self.route(&parts, body, caller.as_ref()).await;
        let is_change = !matches!(parts.method, Method::GET | Method::HEAD);
        // A change is answered once the state with it is on disk
        // (`runtime.state_dir`), so that what a client was told survives a
        // `kill -9` right after.
        if is_change && response.status().is_success() {
            let state = &self.shared.state;
            if !state.saved(state.changed(), crate::state::SAVE_WAIT).await {
                warn!(path, "state not saved in time; answering anyway");
            }
        }
        if let (true, Some(caller)) = (is_change, &caller) {
            self.audit(caller, peer, &parts, response.status(), &made);
        }
        debug!(
            method = %parts.method,
            path,
            token = caller.as_ref().map(|c| c.name.as_str()),
            status = response.status().as_u16(),
            "admin request"
        );
        response
    }

    /// The answer to an admitted request (`caller` is `None` off `/v1/`),
    /// and the audit events it made.
    async fn route<B>(
        self: &Arc<Self>,
        parts: &Parts,
        body: B,
        caller: Option<&Caller>,
    ) -> (ApiResponse, Vec<Event>)
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let path = parts.uri.path();
        let (endpoint, args) = match endpoints::resolve(parts.method.as_str(), path) {
            Resolved::Found(endpoint, args) => (endpoint, args),
            Resolved::WrongMethod(allow) => {
                return (respond::wrong_method(&parts.method, path, &allow), vec![])
            }
            Resolved::NotFound => return (respond::not_found(&parts.method, path), vec![]),
        };
        let caller = match (endpoint.scope(), caller) {
            (None, _) => return (self.call(endpoint, &args, &[]), vec![]),
            (Some(needed), Some(caller)) => {
                let what = format!("{} {}", parts.method, endpoint.template());
                if let Err(refused) = self.auth.permit(caller, needed, &what) {
                    return (refused.answer(), vec![]);
                }
                caller
            }
            // A scoped endpoint is under /v1/, where `handle` admitted a caller.
            (Some(_), None) => return (auth::Refused::Unauthorized.answer(), vec![]),
        };
        let limits = self.store.load().config.admin.clone();
        match respond::read_body(&parts.headers, body, limits.max_body).await {
            Ok(bytes) if depth::too_deep(&bytes, limits.max_body_depth) => (
                respond::error(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "body nests deeper than {} levels (admin.max_body_depth)",
                        limits.max_body_depth
                    ),
                ),
                vec![],
            ),
            Ok(bytes) if matches!(endpoint, ApiEndpoint::AddRollout) => {
                let parsed = tokio::task::spawn_blocking(move || rollouts::parse(&bytes)).await;
                match parsed {
                    Ok(Ok(raw)) => {
                        acting_as(&caller.name, || rollouts::add_parsed(&self.rollouts, raw))
                    }
                    Ok(Err(errors)) => (respond::config_errors(&errors), vec![]),
                    Err(e) => (worker_failed(&e), vec![]),
                }
            }
            // The other rollout endpoints act beside the
            // controllers, on the control thread (no body to parse).
            Ok(_) if is_rollout_command(endpoint) => {
                acting_as(&caller.name, || self.call(endpoint, &args, &[]))
            }
            Ok(bytes) => {
                self.call_on_worker(&caller.name, endpoint, &args, bytes)
                    .await
            }
            Err(answer) => (answer, vec![]),
        }
    }

    /// One line in `admin.audit_file` for a change `caller` asked for.
    fn audit(
        &self,
        caller: &Caller,
        peer: IpAddr,
        parts: &Parts,
        status: StatusCode,
        made: &[Event],
    ) {
        let Some(file) = self.shared.events.audit_file() else {
            return;
        };
        let summary = match made.is_empty() {
            true => format!(
                "no change: {}",
                status.canonical_reason().unwrap_or("refused")
            ),
            false => {
                let actions: Vec<&str> = made.iter().map(|e| e.action.as_str()).collect();
                actions.join("; ")
            }
        };
        let time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        file.append_change(&ChangeLine {
            time_ms,
            token: &caller.name,
            peer: peer.to_string(),
            method: parts.method.as_str(),
            path: parts.uri.path(),
            status: status.as_u16(),
            summary,
            events: made,
        });
    }

    async fn call_on_worker(
        self: &Arc<Self>,
        token: &str,
        endpoint: ApiEndpoint,
        args: &[&str],
        body: Bytes,
    ) -> (ApiResponse, Vec<Event>) {
        let api = self.clone();
        let token = token.to_string();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let work = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            acting_as(&token, || api.call(endpoint, &args, &body))
        });
        match work.await {
            Ok(answer) => answer,
            Err(e) => (worker_failed(&e), vec![]),
        }
    }

    fn readyz(&self) -> ApiResponse {
        if self.readiness.is_ready() {
            respond::json(StatusCode::OK, &Status { status: "ready" })
        } else {
            let status = if self.readiness.is_draining() {
                "draining"
            } else {
                "not ready"
            };
            respond::json(StatusCode::SERVICE_UNAVAILABLE, &Status { status })
        }
    }

    /// One endpoint, with its placeholders' values (`args`, in the
    /// template's order) and the request body (empty when none was sent).
    fn call(&self, endpoint: ApiEndpoint, args: &[&str], body: &[u8]) -> ApiResponse {
        let store = &self.store;
        let arg = |i: usize| args.get(i).copied().unwrap_or_default();
        match endpoint {
            ApiEndpoint::Healthz => respond::json(StatusCode::OK, &Status { status: "ok" }),
            ApiEndpoint::Readyz => self.readyz(),
            ApiEndpoint::Metrics => respond::with_type(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                Bytes::from(self.shared.metrics.encode()),
            ),
            ApiEndpoint::ConsolePage => console::page(),
            ApiEndpoint::ConsoleScript => console::script(),
            ApiEndpoint::ConsoleStyle => console::style(),
            ApiEndpoint::ConsoleIcon => console::icon(),
            ApiEndpoint::GetConfig => v1::get_config(store),
            ApiEndpoint::PutConfig => v1::put_config(store, body),
            ApiEndpoint::ListRoutes => v1::get_routes(store),
            ApiEndpoint::PutSplit => v1::put_split(store, arg(0), body),
            ApiEndpoint::PutMirror => mirror::put(store, arg(0), Some(body)),
            ApiEndpoint::DeleteMirror => mirror::put(store, arg(0), None),
            ApiEndpoint::MirrorBaseline => mirror::get_baseline(store, arg(0)),
            ApiEndpoint::MirrorDiffs => mirror::get_diffs(&self.shared.mirror_diffs),
            ApiEndpoint::Stats => v1::get_stats(&self.shared.stats),
            ApiEndpoint::Events => v1::get_events(&self.shared.events),
            ApiEndpoint::Gpu => v1::get_gpu(self.observers.gpu.as_deref()),
            ApiEndpoint::Upstreams => v1::get_upstreams(self.observers.upstreams.as_deref()),
            ApiEndpoint::ListFaults => faults::list(store),
            ApiEndpoint::AddFault => faults::add(store, body),
            ApiEndpoint::ShowFault => faults::show(store, arg(0)),
            ApiEndpoint::RemoveFault => faults::remove(store, arg(0)),
            ApiEndpoint::ListRollouts => rollouts::list(&self.rollouts),
            ApiEndpoint::AddRollout => rollouts::add(&self.rollouts, body),
            ApiEndpoint::ShowRollout => rollouts::show(&self.rollouts, arg(0)),
            ApiEndpoint::RemoveRollout => rollouts::remove(&self.rollouts, arg(0)),
            ApiEndpoint::RolloutCommand => rollouts::command(&self.rollouts, arg(0), arg(1)),
            ApiEndpoint::GetRecorder => recorder::get(&self.shared.recorder),
            ApiEndpoint::PutRecorder => {
                recorder::put(&self.shared.recorder, store, &self.shared.events, body)
            }
            ApiEndpoint::DeleteRecorder => {
                recorder::delete(&self.shared.recorder, store, &self.shared.events)
            }
            ApiEndpoint::ListLoadRuns => load_runs::list(&self.load_runs),
            ApiEndpoint::PutLoadRun => load_runs::put(&self.load_runs, body),
            ApiEndpoint::ShowLoadRun => load_runs::show(&self.load_runs, arg(0)),
            ApiEndpoint::ListLineage => lineage::list(store, &self.rollouts),
            ApiEndpoint::ShowLineage => lineage::show(store, &self.rollouts, arg(0)),
            ApiEndpoint::OpenApi => openapi::get(),
        }
    }
}

fn worker_failed(e: &tokio::task::JoinError) -> ApiResponse {
    warn!(error = %e, "an admin request's worker failed");
    respond::error(StatusCode::INTERNAL_SERVER_ERROR, "the request failed")
}

fn is_rollout_command(endpoint: ApiEndpoint) -> bool {
    matches!(
        endpoint,
        ApiEndpoint::ListRollouts
            | ApiEndpoint::ShowRollout
            | ApiEndpoint::RemoveRollout
            | ApiEndpoint::RolloutCommand
    )
}

fn is_v1(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/")
}

#[cfg(test)]
mod tests;
