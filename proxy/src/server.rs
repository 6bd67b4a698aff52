//! Assembles and runs sluice: the pingora server (one service per listener)
//! on its own thread, and the control plane (admin API, stats aggregator,
//! GPU watcher, upstream scraper, rollouts, config file watcher, signals) on a small
//! runtime of its own. `main` and the end-to-end tests both start sluice
//! through [`Sluice::start`].

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use pingora::apps::HttpServerOptions;
use pingora::listeners::tls::TlsSettings;
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, Server};
use pingora::services::listening::Service;
use sluice_control::{
    resolve_token, serve_admin, watch_config_file, AdminApi, Config, ListenerProtocol, Observers,
    Readiness, SnapshotStore, Stats,
};
use sluice_filters::Metrics;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::access_log::AccessLog;
use crate::http_proxy::{HttpProxy, Observability};
use crate::lifecycle::{Lifecycle, Stop};
use crate::mirror::{MirrorQueue, MirrorSender};
use crate::tcp_proxy::TcpProxy;
use crate::telemetry::Tracer;
use crate::upstream::UpstreamClient;

const READY_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Default)]
pub struct StartOptions {
    /// The file the config came from: watched for changes and reloaded on SIGHUP.
    pub config_path: Option<PathBuf>,
    /// Handle SIGTERM (drain), SIGINT (fast stop) and SIGHUP (reload).
    pub handle_signals: bool,
}

/// A running sluice. Dropping it stops it fast.
pub struct Sluice {
    pub admin_addr: SocketAddr,
    /// The bearer token of the control API.
    pub token: String,
    /// True when the token was generated at start (none configured).
    pub token_generated: bool,
    pub listeners: Vec<(String, SocketAddr)>,
    store: Arc<SnapshotStore>,
    lifecycle: Arc<Lifecycle>,
    grace: Duration,
    server: Option<JoinHandle<()>>,
    control: Option<JoinHandle<()>>,
    control_cancel: CancellationToken,
    mirror: Option<MirrorSender>,
}

impl Sluice {
    pub fn start(config: Config, options: StartOptions) -> anyhow::Result<Sluice> {
        match crate::fd_table::presize() {
            Some(size) => tracing::debug!(size, "fd table grown up front"),
            None => tracing::debug!("fd table left to grow on demand"),
        }
        let (token, token_generated) =
            resolve_token(&config.admin.token).with_context(|| "admin token")?;
        for l in &config.listeners {
            // pingora binds in its own thread and panics there on failure;
            // check first so the error reaches the caller with the listener's name.
            TcpListener::bind(l.listen)
                .with_context(|| format!("listener `{}` cannot bind {}", l.name, l.listen))?;
        }
        let admin_listener = TcpListener::bind(config.admin.listen)
            .with_context(|| format!("admin API cannot bind {}", config.admin.listen))?;
        admin_listener.set_nonblocking(true)?;
        let admin_addr = admin_listener.local_addr()?;

        let metrics = Metrics::new().map_err(|e| anyhow!("metrics: {e}"))?;
        let stats = Stats::new();
        let grace = config.runtime.grace_period;
        let listeners: Vec<(String, SocketAddr)> = config
            .listeners
            .iter()
            .map(|l| (l.name.clone(), l.listen))
            .collect();
        let server = build_server(&config)?;
        let store = SnapshotStore::new(config, metrics, stats);
        let observers = Observers::new(&store).map_err(|e| anyhow!("metrics: {e}"))?;
        let lifecycle = Lifecycle::new();
        let mirror_priority = store.load().config.runtime.mirror_priority;
        let (mirror, mirror_queue) =
            MirrorSender::start(store.clone(), mirror_priority).context("mirror sender")?;
        let server = add_services(server, &store, &lifecycle, mirror_queue)?;

        let watch = lifecycle.signal_watch();
        let server = std::thread::Builder::new()
            .name("sluice-data".into())
            .spawn(move || {
                server.run(RunArgs {
                    shutdown_signal: watch,
                })
            })?;

        let readiness = Arc::new(Readiness::default());
        let control_cancel = CancellationToken::new();
        let control = spawn_control(ControlPlane {
            admin_listener,
            api: AdminApi::with_observers(
                store.clone(),
                token.clone(),
                readiness.clone(),
                observers,
            ),
            store: store.clone(),
            lifecycle: lifecycle.clone(),
            readiness: readiness.clone(),
            options,
            grace,
            cancel: control_cancel.clone(),
        })?;

        let sluice = Sluice {
            admin_addr,
            token,
            token_generated,
            listeners,
            store,
            lifecycle,
            grace,
            server: Some(server),
            control: Some(control),
            control_cancel,
            mirror: Some(mirror),
        };
        for (name, addr) in &sluice.listeners {
            wait_listening(*addr)
                .with_context(|| format!("listener `{name}` on {addr} did not come up"))?;
        }
        readiness.set_ready(true);
        info!(admin = %admin_addr, listeners = sluice.listeners.len(), "sluice ready");
        Ok(sluice)
    }

    pub fn store(&self) -> &Arc<SnapshotStore> {
        &self.store
    }

    pub fn inflight(&self) -> usize {
        self.lifecycle.inflight()
    }

    /// Blocks until sluice stops (by a signal, when signals are handled).
    pub fn wait(mut self) {
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        self.stop_control();
    }

    /// Stops: `Drain` lets in-flight requests finish (up to the grace
    /// period) while new keep-alive requests are told to close; `Fast` cuts.
    pub fn stop(mut self, how: Stop) {
        if how == Stop::Drain {
            self.lifecycle.set_draining();
            let deadline = Instant::now() + self.grace;
            while self.lifecycle.inflight() > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.halt(how);
    }

    fn halt(&mut self, how: Stop) {
        self.lifecycle.stop_services(how);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        // Copies still queued or out are dropped: the primary is done.
        if let Some(mut mirror) = self.mirror.take() {
            mirror.stop();
        }
        self.stop_control();
    }

    fn stop_control(&mut self) {
        self.control_cancel.cancel();
        if let Some(control) = self.control.take() {
            let _ = control.join();
        }
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        self.halt(Stop::Fast);
    }
}

fn build_server(config: &Config) -> anyhow::Result<Server> {
    let mut conf = ServerConf {
        threads: config.runtime.threads,
        // Draining is done before pingora is told to stop (see `Sluice::stop`),
        // so pingora itself must not sleep a grace period of its own.
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut cas = config
        .clusters
        .iter()
        .filter_map(|c| c.tls.as_ref()?.ca.clone());
    if let Some(ca) = cas.next() {
        if cas.any(|other| other != ca) {
            bail!("clusters name different tls.ca files; sluice supports one CA file for all upstreams");
        }
        conf.ca_file = Some(ca.to_string_lossy().into_owned());
    }
    Ok(Server::new_with_opt_and_conf(None, conf))
}

fn add_services(
    mut server: Server,
    store: &Arc<SnapshotStore>,
    lifecycle: &Arc<Lifecycle>,
    mirror: MirrorQueue,
) -> anyhow::Result<Server> {
    let conf = server.configuration.clone();
    let snapshot = store.load();
    let access_log = match &snapshot.config.telemetry.access_log {
        Some(c) => Some(Arc::new(AccessLog::start(c).context("access log")?)),
        None => None,
    };
    let tracer = Tracer::start(&snapshot.config.telemetry).context("telemetry.otlp_endpoint")?;
    tracer
        .register_metrics(store.metrics.registry())
        .map_err(|e| anyhow!("trace metrics: {e}"))?;
    let observability = Observability {
        access_log,
        tracer,
        mirror: Some(mirror),
        upstream: UpstreamClient::new(&snapshot.config)?,
    };
    for (i, l) in snapshot.config.listeners.iter().enumerate() {
        let addr = l.listen.to_string();
        match &l.protocol {
            ListenerProtocol::Http { h2c } => {
                let app =
                    HttpProxy::new(i, store.clone(), lifecycle.clone(), observability.clone());
                let mut service = pingora::proxy::http_proxy_service_with_name(&conf, app, &l.name);
                service.add_tcp(&addr);
                if *h2c {
                    if let Some(logic) = service.app_logic_mut() {
                        let mut options = HttpServerOptions::default();
                        options.h2c = true;
                        logic.server_options = Some(options);
                    }
                }
                server.add_service(service);
            }
            ListenerProtocol::Https { cert, key } => {
                let app =
                    HttpProxy::new(i, store.clone(), lifecycle.clone(), observability.clone());
                let mut service = pingora::proxy::http_proxy_service_with_name(&conf, app, &l.name);
                // pingora reads these files only later, in its own thread, and
                // panics there: read them now so a bad file fails the start.
                check_tls_files(cert, key).with_context(|| format!("listener `{}`", l.name))?;
                let mut tls =
                    TlsSettings::intermediate(&cert.to_string_lossy(), &key.to_string_lossy())
                        .map_err(|e| anyhow!("listener `{}`: certificate or key: {e}", l.name))?;
                tls.enable_h2();
                service.add_tls_with_settings(&addr, None, tls);
                server.add_service(service);
            }
            ListenerProtocol::Tcp { cluster } => {
                let app = TcpProxy::new(
                    l.name.clone(),
                    cluster.clone(),
                    store.clone(),
                    lifecycle.clone(),
                );
                let mut service = Service::new(l.name.clone(), app);
                service.add_tcp(&addr);
                server.add_service(service);
            }
        }
    }
    Ok(server)
}

fn check_tls_files(cert: &std::path::Path, key: &std::path::Path) -> anyhow::Result<()> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow!("certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        bail!("certificate {}: no certificate in the file", cert.display());
    }
    PrivateKeyDer::from_pem_file(key).map_err(|e| anyhow!("key {}: {e}", key.display()))?;
    Ok(())
}

/// Polls until `addr` accepts a connection (pingora binds asynchronously).
fn wait_listening(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let target = match addr.ip().is_unspecified() {
        true => SocketAddr::from(([127, 0, 0, 1], addr.port())),
        false => addr,
    };
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    bail!("not accepting connections after {READY_TIMEOUT:?}")
}

struct ControlPlane {
    admin_listener: TcpListener,
    api: Arc<AdminApi>,
    store: Arc<SnapshotStore>,
    lifecycle: Arc<Lifecycle>,
    readiness: Arc<Readiness>,
    options: StartOptions,
    grace: Duration,
    cancel: CancellationToken,
}

/// The control plane's own runtime, on its own thread, so that neither a
/// busy data plane nor a test's runtime can starve it.
fn spawn_control(cp: ControlPlane) -> anyhow::Result<JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = std::thread::Builder::new()
        .name("sluice-control".into())
        .spawn(move || {
            runtime.block_on(run_control(cp));
        })?;
    Ok(handle)
}

async fn run_control(cp: ControlPlane) {
    let cancel = cp.cancel.clone();
    let tracker = tokio_util::task::TaskTracker::new();
    tracker.spawn(cp.store.stats.clone().run_aggregator(cancel.clone()));
    cp.api.observers.spawn(&tracker, &cp.store, &cancel);
    // The config's rollouts start now; later ones as the config gains them.
    tracker.spawn(cp.api.rollouts.clone().run(cancel.clone()));
    tracker.spawn(sluice_control::run_fault_loop(
        cp.store.clone(),
        cancel.clone(),
    ));
    match tokio::net::TcpListener::from_std(cp.admin_listener) {
        Ok(listener) => {
            tracker.spawn(serve_admin(listener, cp.api.clone(), cancel.clone()));
        }
        Err(e) => warn!(error = %e, "admin API listener could not be registered"),
    }
    if let Some(path) = cp.options.config_path.clone() {
        tracker.spawn(watch_config_file(cp.store.clone(), path, cancel.clone()));
    }
    if cp.options.handle_signals {
        tracker.spawn(handle_stop_signals(
            cp.lifecycle.clone(),
            cp.readiness.clone(),
            cp.grace,
            cancel.clone(),
        ));
    }
    tracker.close();
    cancel.cancelled().await;
    tracker.wait().await;
}

/// SIGTERM drains then stops; SIGINT stops at once.
async fn handle_stop_signals(
    lifecycle: Arc<Lifecycle>,
    readiness: Arc<Readiness>,
    grace: Duration,
    cancel: CancellationToken,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        warn!("signal handlers could not be installed");
        return;
    };
    let how = tokio::select! {
        _ = cancel.cancelled() => return,
        _ = term.recv() => Stop::Drain,
        _ = int.recv() => Stop::Fast,
    };
    if how == Stop::Drain {
        info!(
            inflight = lifecycle.inflight(),
            grace_ms = grace.as_millis() as u64,
            "SIGTERM: draining"
        );
        lifecycle.set_draining();
        readiness.set_draining(true);
        let left = tokio::select! {
            left = lifecycle.wait_idle(grace) => left,
            // A SIGINT during the drain cuts it short.
            _ = int.recv() => lifecycle.inflight(),
        };
        info!(cut = left, "drain finished");
    } else {
        info!("SIGINT: stopping");
    }
    lifecycle.stop_services(how);
}
