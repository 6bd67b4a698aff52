//! Assembles and runs sluice: the control plane (started by
//! [`ControlPlane::start`], on a thread of its own) and the pingora server
//! (one service per listener) on thread `sluice-data`. `main` and the
//! end-to-end tests both start sluice through [`Sluice::start`].

mod bound;
mod handover;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use pingora::apps::HttpServerOptions;
use pingora::listeners::tls::TlsSettings;
use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, Server};
use pingora::services::listening::Service;
use sluice_control::{
    Config, ControlOptions, ControlPlane, ControlPlaneHandle, ListenerProtocol, SnapshotStore, Stop,
};
use tracing::info;

use crate::access_log::AccessLog;
use crate::http_proxy::{HttpProxy, Observability};
use crate::lifecycle::Lifecycle;
use crate::listener_limits::{LimitFamilies, Limited};
use crate::mirror::{MirrorQueue, MirrorSender};
use crate::runtime_tcp::RuntimeListeners;
use crate::tcp_proxy::{TcpProxy, Upstream};
use crate::telemetry::Tracer;
use crate::upstream::UpstreamClient;
use bound::{BoundListener, PreBound, Started};
pub(crate) use handover::Handover;
use handover::{Inherited, ADMIN_KEY};

/// How long pingora may take to start every listener's service.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// How long `sluice run --upgrade` waits for the running sluice's sockets.
const UPGRADE_WAIT: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct StartOptions {
    /// The file the config came from: watched for changes and reloaded on SIGHUP.
    pub config_path: Option<PathBuf>,
    /// Handle SIGTERM (drain), SIGINT (fast stop), SIGHUP (reload) and
    /// SIGQUIT (hand the listening sockets to a new process, then drain).
    pub handle_signals: bool,
    /// Take the listening sockets over from the running sluice (it sends
    /// them on SIGQUIT over `runtime.upgrade_sock`) instead of binding.
    pub upgrade: bool,
}

/// A running sluice. Dropping it stops it fast.
pub struct Sluice {
    pub admin_addr: SocketAddr,
    /// The bearer token of the control API.
    pub token: String,
    /// True when the token was generated at start (none configured).
    pub token_generated: bool,
    /// Each listener's name and the address it is bound to (a configured
    /// port 0 resolved).
    pub listeners: Vec<(String, SocketAddr)>,
    /// Where Toxiproxy's API listens (`admin.toxiproxy`, port 0 resolved).
    pub toxiproxy_addr: Option<SocketAddr>,
    /// The tcp listeners Toxiproxy's API opened.
    runtime_listeners: Arc<RuntimeListeners>,
    lifecycle: Arc<Lifecycle>,
    server: Option<JoinHandle<()>>,
    control: ControlPlaneHandle,
    mirror: Option<MirrorSender>,
}

impl Sluice {
    pub fn start(config: Config, options: StartOptions) -> anyhow::Result<Sluice> {
        match crate::fd_table::presize() {
            Some(size) => tracing::debug!(size, "fd table grown up front"),
            None => tracing::debug!("fd table left to grow on demand"),
        }
        let mut inherited = if options.upgrade {
            Inherited::receive(&config.runtime.upgrade_sock, UPGRADE_WAIT)?
        } else {
            Inherited::default()
        };
        let bound = bound::bind_all(&config, &mut inherited)?;
        let admin_listener = inherited.take_admin(config.admin.listen);
        inherited.close_rest();
        let listeners: Vec<(String, SocketAddr)> =
            bound.iter().map(|l| (l.name.clone(), l.addr)).collect();
        let handover = Handover::new(config.runtime.upgrade_sock.clone());
        for l in &bound {
            handover.add(l.addr.to_string(), l.dup().context("listening socket")?);
        }
        let lifecycle = Lifecycle::new(handover);
        let runtime_listeners = Arc::new(RuntimeListeners::default());
        let control = ControlPlane::start(
            config,
            ControlOptions {
                config_path: options.config_path,
                handle_signals: options.handle_signals,
                admin_listener,
                tcp_listeners: Some(runtime_listeners.clone()),
            },
            lifecycle.clone(),
        )?;
        runtime_listeners.set_parts(
            control.store().clone(),
            control.shared().clone(),
            lifecycle.clone(),
        );
        let admin_socket = control.admin_socket().context("admin API socket")?;
        lifecycle
            .handover()
            .add(ADMIN_KEY.into(), admin_socket.into());
        let store = control.store().clone();
        let config = store.load().config.clone();
        let server = build_server(&config)?;
        let (mirror, mirror_queue) = MirrorSender::start(
            &config,
            control.shared().mirror_diffs.clone(),
            control.shared().events.clone(),
            config.runtime.mirror_priority,
            &control.shared().runtimes,
            control.shared().metrics.clone(),
        )
        .context("mirror sender")?;
        let started = Started::new();
        let server = add_services(server, &control, &lifecycle, mirror_queue, bound, &started)?;

        let watch = lifecycle.signal_watch();
        let server = std::thread::Builder::new()
            .name("sluice-data".into())
            .spawn(move || {
                server.run(RunArgs {
                    shutdown_signal: watch,
                })
            })?;
        let sluice = Sluice {
            admin_addr: control.admin_addr(),
            token: control.token().to_string(),
            token_generated: control.token_generated(),
            listeners,
            toxiproxy_addr: control.toxiproxy_addr(),
            runtime_listeners,
            lifecycle,
            server: Some(server),
            control,
            mirror: Some(mirror),
        };
        let missing = started.wait(&sluice.listeners, READY_TIMEOUT);
        if !missing.is_empty() {
            bail!(
                "listener(s) {} did not start within {READY_TIMEOUT:?}",
                missing.join(", ")
            );
        }
        sluice.control.set_ready();
        sluice.lifecycle.handover().arm();
        info!(admin = %sluice.admin_addr, listeners = sluice.listeners.len(), "sluice ready");
        Ok(sluice)
    }

    pub fn store(&self) -> &Arc<SnapshotStore> {
        self.control.store()
    }

    /// The running control plane: its shared parts and rollouts.
    pub fn control(&self) -> &ControlPlaneHandle {
        &self.control
    }

    pub fn inflight(&self) -> usize {
        self.lifecycle.inflight()
    }

    /// Blocks until sluice stops (by a signal, when signals are handled).
    pub fn wait(mut self) {
        self.join_data_plane();
        self.stop_rest();
    }

    /// Stops: `Drain` turns `/readyz` to 503 and lets in-flight requests
    /// finish (up to the grace period) while new keep-alive requests are
    /// told to close; `Fast` cuts. The drain is the control plane's, the
    /// same one SIGTERM runs.
    pub fn stop(mut self, how: Stop) {
        self.control.stop(how);
        self.join_data_plane();
        self.stop_rest();
    }

    fn join_data_plane(&mut self) {
        if let Some(server) = self.server.take() {
            if server.join().is_err() {
                tracing::warn!("the data plane thread panicked");
            }
        }
    }

    /// What is left once the data plane has stopped.
    fn stop_rest(&mut self) {
        self.runtime_listeners.shutdown();
        // Copies still queued or out are dropped: the primary is done.
        if let Some(mut mirror) = self.mirror.take() {
            mirror.stop();
        }
        self.control.shutdown();
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        if self.server.is_some() {
            self.lifecycle.stop_services(Stop::Fast);
            self.join_data_plane();
        }
        self.stop_rest();
    }
}

fn build_server(config: &Config) -> anyhow::Result<Server> {
    let mut conf = ServerConf {
        threads: config.runtime.threads,
        // Draining is done before pingora is told to stop (see `Sluice::stop`),
        // so pingora itself must not sleep a grace period of its own.
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        // Unused by sluice's own hand-over (see `handover`), set so that
        // pingora's idea of the path never differs from sluice's.
        upgrade_sock: config.runtime.upgrade_sock.to_string_lossy().into_owned(),
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
    control: &ControlPlaneHandle,
    lifecycle: &Arc<Lifecycle>,
    mirror: MirrorQueue,
    bound: Vec<BoundListener>,
    started: &Started,
) -> anyhow::Result<Server> {
    let conf = server.configuration.clone();
    let store = control.store();
    let shared = control.shared();
    let snapshot = store.load();
    let access_log = match &snapshot.config.telemetry.access_log {
        Some(c) => Some(Arc::new(AccessLog::start(c).context("access log")?)),
        None => None,
    };
    let tracer = Tracer::start(&snapshot.config.telemetry).context("telemetry.otlp_endpoint")?;
    tracer
        .register_metrics(shared.metrics.registry())
        .map_err(|e| anyhow!("trace metrics: {e}"))?;
    let observability = Observability {
        shared: shared.clone(),
        access_log,
        tracer,
        mirror: Some(mirror),
        upstream: UpstreamClient::new(&snapshot.config, shared.metrics.clone())?,
    };
    let handed_over = lifecycle.handover().handed_over();
    let families = LimitFamilies::register(shared.metrics.registry())
        .map_err(|e| anyhow!("listener limit metrics: {e}"))?;
    // `bind_all` bound the listeners in config order.
    for (i, (l, socket)) in snapshot.config.listeners.iter().zip(bound).enumerate() {
        match &l.protocol {
            ListenerProtocol::Http { h2c } => {
                let service = PreBound::new(socket, started, handed_over.clone(), |addr| {
                    let app =
                        HttpProxy::new(i, store.clone(), lifecycle.clone(), observability.clone());
                    let mut proxy = pingora::proxy::http_proxy(&conf, app);
                    if *h2c {
                        let mut options = HttpServerOptions::default();
                        options.h2c = true;
                        proxy.server_options = Some(options);
                    }
                    proxy.h2_options = Some(client_h2_options(&l.limits.head));
                    let app = Limited::new(
                        proxy,
                        &l.name,
                        l.limits,
                        *h2c,
                        &families,
                        shared.runtimes.clone(),
                        lifecycle.clone(),
                    );
                    let mut service = Service::new(l.name.clone(), app);
                    service.add_listener(client_listener(addr));
                    Ok(service)
                })?;
                server.add_service(service);
            }
            ListenerProtocol::Https { cert, key } => {
                // pingora reads these files only later, in its own thread, and
                // panics there: read them now so a bad file fails the start.
                check_tls_files(cert, key).with_context(|| format!("listener `{}`", l.name))?;
                let service = PreBound::new(socket, started, handed_over.clone(), |addr| {
                    let app =
                        HttpProxy::new(i, store.clone(), lifecycle.clone(), observability.clone());
                    let mut proxy = pingora::proxy::http_proxy(&conf, app);
                    proxy.h2_options = Some(client_h2_options(&l.limits.head));
                    let app = Limited::new(
                        proxy,
                        &l.name,
                        l.limits,
                        false,
                        &families,
                        shared.runtimes.clone(),
                        lifecycle.clone(),
                    );
                    let mut service = Service::new(l.name.clone(), app);
                    let mut tls =
                        TlsSettings::intermediate(&cert.to_string_lossy(), &key.to_string_lossy())
                            .map_err(|e| {
                                anyhow!("listener `{}`: certificate or key: {e}", l.name)
                            })?;
                    tls.enable_h2();
                    service.add_listener(client_listener(addr).tls(tls));
                    Ok(service)
                })?;
                server.add_service(service);
            }
            ListenerProtocol::Tcp { cluster } => {
                let service = PreBound::new(socket, started, handed_over.clone(), |addr| {
                    let app = TcpProxy::new(
                        l.name.clone(),
                        Upstream::Cluster(cluster.clone()),
                        store.clone(),
                        shared.clone(),
                        lifecycle.clone(),
                    );
                    let mut service = Service::new(l.name.clone(), app);
                    service.add_listener(client_listener(addr));
                    Ok(service)
                })?;
                server.add_service(service);
            }
        }
    }
    Ok(server)
}

/// A client listener on `addr` without pingora's 64 KiB read buffer per
/// accepted connection: every reader above it brings its own (the head
/// scanner's 4 KiB, pingora's request and body buffers, rustls's), so the
/// buffer only cost memory, some 64 KiB of RSS per idle keep-alive
/// connection. Writes keep pingora's small buffer.
fn client_listener(addr: &str) -> ListenerConfig {
    ListenerConfig::tcp(addr).l4_buffer(L4BufferSettings::default().read(0))
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

/// A client's HTTP/2 connection: what it may send before sluice reads it,
/// per stream and for the whole connection, and the largest request head.
/// h2's default windows (64 KiB for both) let one upload that sluice does
/// not read yet (held by a delay fault, or waiting for its upstream) fill
/// the connection's window, and every other upload on the connection
/// stalls behind it. The windows only bound what may be buffered; nothing
/// is allocated up front. The head is the listener's `max_header_bytes`
/// as HTTP/2 counts a header list (each field's name and value plus 32
/// bytes): h2 answers a larger one 431 itself. pingora's bound on
/// concurrent streams is kept.
fn client_h2_options(
    head: &sluice_filters::HeadLimits,
) -> pingora::protocols::http::v2::server::H2Options {
    const STREAM_WINDOW: u32 = 1 << 20;
    const CONNECTION_WINDOW: u32 = 16 << 20;
    let mut options = pingora::protocols::http::v2::server::default_h2_options();
    options.initial_window_size(STREAM_WINDOW);
    options.initial_connection_window_size(CONNECTION_WINDOW);
    options.max_header_list_size(u32::try_from(head.max_header_bytes).unwrap_or(u32::MAX));
    options
}
