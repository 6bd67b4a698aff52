//! The control plane as one thing that starts and stops: [`ControlPlane::start`]
//! builds the store and its shared parts, binds the admin API, and runs every
//! control task (stats aggregator, GPU watcher, upstream scraper, rollouts,
//! shedding, fault loop, recorder, rate limit store sync, config file
//! reload, token file rotation, audit file, admin API, stop requests and
//! signals) on a current-thread runtime
//! of its own, on thread `sluice-control`, so that neither a busy data plane
//! nor a caller's runtime can starve it. The returned handle gives out the
//! parts and ends the tasks on drop.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

use crate::api::{
    load_tokens, serve_admin, tls_acceptor, watch_token_files, AdminApi, Auth, Readiness,
};
use crate::audit_file::{audit_file, AuditWriter};
use crate::config::Config;
use crate::fault::run_fault_loop;
use crate::feedback::{self, run_feedback};
use crate::lifecycle::{DataPlane, Stop, Stopper};
use crate::limits::run_limit_sync;
use crate::observers::Observers;
use crate::recorder::run_recorder;
use crate::reload::watch_config_file;
use crate::rollout::Rollouts;
use crate::shared::Shared;
use crate::shedding::run_shedding;
use crate::state::{self, Loaded};
use crate::store::SnapshotStore;
use crate::toxiproxy::{serve_toxiproxy, TcpListeners, Toxiproxy};

/// What the control plane does besides its fixed tasks.
#[derive(Default)]
pub struct ControlOptions {
    /// The file the config came from: watched for changes and reloaded on
    /// SIGHUP.
    pub config_path: Option<PathBuf>,
    /// Handle SIGTERM (drain), SIGINT (fast stop) and SIGQUIT (hand the
    /// sockets to a new process, then drain).
    pub handle_signals: bool,
    /// The admin API's socket, already listening on `admin.listen` (taken
    /// over from the process this one upgrades); bound here when `None`.
    pub admin_listener: Option<TcpListener>,
    /// The data plane's run-time tcp listeners: with them and
    /// `admin.toxiproxy`, Toxiproxy's API is served.
    pub tcp_listeners: Option<Arc<dyn TcpListeners>>,
}

impl std::fmt::Debug for ControlOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlOptions")
            .field("config_path", &self.config_path)
            .field("handle_signals", &self.handle_signals)
            .field("admin_listener", &self.admin_listener)
            .field("tcp_listeners", &self.tcp_listeners.is_some())
            .finish()
    }
}

/// Why the control plane did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("admin tokens: {0}")]
    Token(String),
    #[error("{0}")]
    AdminTls(String),
    #[error("admin API cannot bind {addr}")]
    AdminBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("admin.toxiproxy: cannot bind {addr}")]
    ToxiproxyBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("metrics")]
    Metrics(#[from] prometheus::Error),
    #[error("control plane thread")]
    Thread(#[source] std::io::Error),
    #[error("feedback.dir: cannot create or write {path}: {source}")]
    FeedbackDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("runtime.state_dir: cannot create or write {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct ControlPlane;

/// A running control plane. Dropping it ends its tasks and joins its thread;
/// it does not stop the data plane (see [`ControlPlaneHandle::stop`]).
pub struct ControlPlaneHandle {
    admin_addr: SocketAddr,
    /// Where Toxiproxy's API listens, when it is served.
    toxiproxy_addr: Option<SocketAddr>,
    /// A second descriptor of the admin API's socket, for a hand-over.
    admin_socket: TcpListener,
    token: String,
    token_generated: bool,
    store: Arc<SnapshotStore>,
    shared: Shared,
    rollouts: Arc<Rollouts>,
    readiness: Arc<Readiness>,
    data_plane: Arc<dyn DataPlane>,
    stop_requests: watch::Sender<Option<Stop>>,
    cancel: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

/// Everything the control thread runs, moved onto it whole.
struct Tasks {
    admin_listener: TcpListener,
    /// Toxiproxy's API: its socket and its state.
    toxiproxy: Option<(TcpListener, Arc<Toxiproxy>)>,
    admin_tls: Option<TlsAcceptor>,
    api: Arc<AdminApi>,
    audit_writer: Option<AuditWriter>,
    store: Arc<SnapshotStore>,
    shared: Shared,
    observers: Observers,
    rollouts: Arc<Rollouts>,
    config_path: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    stopper: Stopper,
    /// Ends the admin API's accept loop: at the end, or once its socket is
    /// handed over.
    admin_accept: CancellationToken,
    stop_requests: watch::Receiver<Option<Stop>>,
    cancel: CancellationToken,
}

impl ControlPlane {
    /// Starts the control plane of `config`. `data_plane` is what a stop
    /// request or a signal drains and stops. The admin API serves at once;
    /// `/readyz` says ready only after [`ControlPlaneHandle::set_ready`].
    pub fn start(
        config: Config,
        options: ControlOptions,
        data_plane: Arc<dyn DataPlane>,
    ) -> Result<ControlPlaneHandle, StartError> {
        let token_sources = config.admin.tokens.clone();
        let (tokens, token_generated) = load_tokens(&token_sources).map_err(StartError::Token)?;
        let token = tokens.first_admin().unwrap_or_default().to_string();
        let admin_tls = match &config.admin.tls {
            Some(tls) => Some(tls_acceptor(tls).map_err(StartError::AdminTls)?),
            None => None,
        };
        let admin = config.admin.listen;
        let bind_error = |source| StartError::AdminBind {
            addr: admin,
            source,
        };
        let admin_listener = match options.admin_listener {
            Some(listener) => listener,
            None => TcpListener::bind(admin).map_err(bind_error)?,
        };
        admin_listener.set_nonblocking(true).map_err(bind_error)?;
        let admin_addr = admin_listener.local_addr().map_err(bind_error)?;
        let admin_socket = admin_listener.try_clone().map_err(bind_error)?;

        let config_toxiproxy = config
            .admin
            .toxiproxy
            .map(|addr| (addr, config.admin.toxiproxy_default_ttl));
        let grace = config.runtime.grace_period;
        let state_dir = config.runtime.state_dir.clone();
        if let Some(dir) = &state_dir {
            state::prepare_dir(dir).map_err(|source| StartError::StateDir {
                path: dir.clone(),
                source,
            })?;
        }
        // At start, not at the first breach: a breach is no time to learn
        // that its scenario has nowhere to go.
        if let Some(f) = &config.feedback {
            feedback::prepare(&f.dir).map_err(|source| StartError::FeedbackDir {
                path: f.dir.clone(),
                source,
            })?;
        }
        let shared = Shared::new()?;
        // Before the store, so that its first events reach the file too.
        let audit_writer = match &config.admin.audit_file {
            Some(path) => {
                let (file, writer) = audit_file(path.clone(), shared.metrics.registry())?;
                shared.events.set_audit_file(file);
                Some(writer)
            }
            None => None,
        };
        let auth = Arc::new(Auth::new(token_sources, tokens, shared.metrics.registry())?);
        let observers = Observers::new(
            config.gpu,
            shared.metrics.registry(),
            shared.kv_cache.clone(),
        )?;
        let (store, rollouts) = start_store(config, state_dir.as_deref(), &shared, &observers);
        let toxiproxy = match (config_toxiproxy, options.tcp_listeners) {
            (Some((addr, ttl)), Some(listeners)) => {
                let bind_error = |source| StartError::ToxiproxyBind { addr, source };
                let socket = TcpListener::bind(addr).map_err(bind_error)?;
                socket.set_nonblocking(true).map_err(bind_error)?;
                let api = Toxiproxy::new(listeners, store.clone(), shared.events.clone(), ttl);
                Some((socket, Arc::new(api)))
            }
            (Some((addr, _)), None) => {
                warn!(%addr, "admin.toxiproxy set, but this data plane opens no tcp listeners at run time");
                None
            }
            (None, _) => None,
        };
        let toxiproxy_addr = match &toxiproxy {
            Some((socket, _)) => {
                Some(
                    socket
                        .local_addr()
                        .map_err(|source| StartError::ToxiproxyBind {
                            addr: admin,
                            source,
                        })?,
                )
            }
            None => None,
        };
        let readiness = Arc::new(Readiness::new());
        let api = AdminApi::new(
            store.clone(),
            shared.clone(),
            rollouts.clone(),
            observers.clone(),
            readiness.clone(),
            auth,
        );
        let (stop_requests, stop_rx) = watch::channel(None);
        let cancel = CancellationToken::new();
        let admin_accept = cancel.child_token();
        let tasks = Tasks {
            admin_listener,
            toxiproxy,
            admin_tls,
            api,
            audit_writer,
            store: store.clone(),
            shared: shared.clone(),
            observers,
            rollouts: rollouts.clone(),
            config_path: options.config_path,
            state_dir,
            stopper: Stopper {
                data_plane: data_plane.clone(),
                readiness: readiness.clone(),
                grace,
                signals: options.handle_signals,
                admin_accept: admin_accept.clone(),
            },
            admin_accept,
            stop_requests: stop_rx,
            cancel: cancel.clone(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Thread)?;
        let thread = std::thread::Builder::new()
            .name("sluice-control".into())
            .spawn(move || runtime.block_on(tasks.run()))
            .map_err(StartError::Thread)?;
        Ok(ControlPlaneHandle {
            admin_addr,
            toxiproxy_addr,
            admin_socket,
            token,
            token_generated,
            store,
            shared,
            rollouts,
            readiness,
            data_plane,
            stop_requests,
            cancel,
            thread: Some(thread),
        })
    }
}

/// The store and the rollouts on `config`, with the state saved in
/// `state_dir` laid over it when there is one that fits (see `state`):
/// whole, or not at all and said so in the log and the audit log.
fn start_store(
    config: Config,
    state_dir: Option<&Path>,
    shared: &Shared,
    observers: &Observers,
) -> (Arc<SnapshotStore>, Arc<Rollouts>) {
    let loaded = match state_dir {
        Some(dir) => {
            shared.state.enable();
            state::load(dir, &config, state::wall_ms())
        }
        None => Loaded::None,
    };
    let (store, restored) = match loaded {
        Loaded::Restored(restored) => {
            let restored = *restored;
            let base = config.raw;
            let store = SnapshotStore::with_base(restored.config.clone(), base, shared);
            (store, Some(restored))
        }
        Loaded::None => (SnapshotStore::new(config, shared), None),
        Loaded::Refused(message) => {
            let store = SnapshotStore::new(config, shared);
            let action = format!("state file refused, started from the config alone: {message}");
            let version = store.load().version;
            shared.events.push("state", &action, version, vec![message]);
            (store, None)
        }
    };
    let rollouts = Rollouts::new(store.clone(), shared.clone(), observers.clone());
    if let Some(r) = restored {
        let snapshot = store.load();
        for f in &snapshot.faults {
            if r.halted.contains(&f.experiment.id) {
                f.halt();
            }
        }
        let mut notes = Vec::new();
        if r.file_changed {
            notes.push("the config file changed since the state was saved; the state wins".into());
        }
        notes.extend(
            r.expired
                .iter()
                .map(|id| format!("fault {id}: expired while down, dropped")),
        );
        notes.extend(r.forgotten.iter().map(|n| {
            format!("rollout {n}: finished, no longer fits the config, left out of the history")
        }));
        let action = format!(
            "state restored: {} rollout(s) at their saved step, {} finished, {} experiment(s)",
            r.controllers.len(),
            r.finished.len(),
            r.config.faults.len()
        );
        shared
            .events
            .push("state", &action, snapshot.version, notes);
        rollouts.restore(r.controllers, r.finished);
    }
    (store, rollouts)
}

impl Tasks {
    async fn run(self) {
        self.shared
            .runtimes
            .watch("control", tokio::runtime::Handle::current());
        let cancel = self.cancel;
        let tracker = TaskTracker::new();
        tracker.spawn(self.shared.stats.clone().run_aggregator(cancel.clone()));
        self.observers.spawn(&tracker, &self.store, &cancel);
        tracker.spawn(run_shedding(
            self.store.clone(),
            self.shared.clone(),
            self.observers.clone(),
            cancel.clone(),
        ));
        // The config's rollouts start now; later ones as the config gains them.
        tracker.spawn(self.rollouts.clone().run(cancel.clone()));
        tracker.spawn(run_fault_loop(
            self.store.clone(),
            self.shared.clone(),
            cancel.clone(),
        ));
        tracker.spawn(run_recorder(
            self.shared.recorder.clone(),
            self.store.clone(),
            self.shared.events.clone(),
            cancel.clone(),
        ));
        tracker.spawn(run_feedback(
            self.store.clone(),
            self.shared.clone(),
            cancel.clone(),
        ));
        // Fleet-wide rate limits settle their leases with their store.
        tracker.spawn(run_limit_sync(self.store.clone(), cancel.clone()));
        if let Some(writer) = self.audit_writer {
            tracker.spawn(writer.run(cancel.clone()));
        }
        tracker.spawn(watch_token_files(self.api.auth.clone(), cancel.clone()));
        match tokio::net::TcpListener::from_std(self.admin_listener) {
            Ok(listener) => {
                // `admin_accept` ends with a hand-over to a new process
                // (its child of `cancel`): this one stops accepting.
                tracker.spawn(serve_admin(
                    listener,
                    self.api,
                    self.admin_tls,
                    self.admin_accept,
                ));
            }
            Err(e) => warn!(error = %e, "admin API listener could not be registered"),
        }
        if let Some((socket, api)) = self.toxiproxy {
            match tokio::net::TcpListener::from_std(socket) {
                Ok(listener) => {
                    tracker.spawn(serve_toxiproxy(listener, api, cancel.clone()));
                }
                Err(e) => warn!(error = %e, "Toxiproxy API listener could not be registered"),
            }
        }
        if let Some(dir) = self.state_dir {
            tracker.spawn(state::run_writer(
                dir,
                self.store.clone(),
                self.rollouts.clone(),
                self.shared.state.clone(),
                cancel.clone(),
            ));
        }
        if let Some(path) = self.config_path {
            tracker.spawn(watch_config_file(self.store, path, cancel.clone()));
        }
        tracker.spawn(self.stopper.run(self.stop_requests, cancel.clone()));
        tracker.close();
        cancel.cancelled().await;
        tracker.wait().await;
    }
}

impl ControlPlaneHandle {
    /// Where the admin API listens (the bound address: port 0 resolved).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Where Toxiproxy's API listens (`admin.toxiproxy`, port 0 resolved).
    pub fn toxiproxy_addr(&self) -> Option<SocketAddr> {
        self.toxiproxy_addr
    }

    /// A new descriptor of the admin API's listening socket (the same
    /// socket), for handing it to the process that upgrades this one.
    pub fn admin_socket(&self) -> std::io::Result<TcpListener> {
        self.admin_socket.try_clone()
    }

    /// The bearer token of the control API.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// True when the token was generated at start (none configured).
    pub fn token_generated(&self) -> bool {
        self.token_generated
    }

    pub fn store(&self) -> &Arc<SnapshotStore> {
        &self.store
    }

    /// The parts the data plane records into.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    pub fn rollouts(&self) -> &Arc<Rollouts> {
        &self.rollouts
    }

    /// The data plane serves: `/readyz` says ready (until a drain begins).
    pub fn set_ready(&self) {
        self.readiness.set_ready(true);
    }

    /// Asks for the data plane to be stopped, after a drain for
    /// [`Stop::Drain`] (readiness 503 from its start). Returns at once; the
    /// data plane's own end says when it is done. A fast request during a
    /// drain cuts it short.
    pub fn stop(&self, how: Stop) {
        if self.stop_requests.receiver_count() == 0 {
            // The stop task is gone (a signal already stopped sluice, or
            // the control plane has ended): nothing is left to drain.
            self.data_plane.stop(how);
            return;
        }
        self.stop_requests.send_replace(Some(how));
    }

    /// Ends the control tasks and waits for them (the admin API lets open
    /// requests finish first). Idempotent.
    pub fn shutdown(&mut self) {
        self.cancel.cancel();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                warn!("the control plane thread panicked");
            }
        }
    }
}

impl Drop for ControlPlaneHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}
