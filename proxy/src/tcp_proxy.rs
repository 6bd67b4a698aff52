//! L4 pass-through for `tcp` listeners (Redis and any TCP service): one
//! upstream connection per client connection, bytes copied both ways, a
//! half-close on one side passed on to the other. For `kind: cache`
//! clusters the copy loop also feeds a RESP observer. The configured
//! listeners are pingora services; those Toxiproxy's API opens at run time
//! (`runtime_tcp`) hand their connections to the same [`TcpProxy::relay`].

mod pump;
mod resp_tap;
mod toxic;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use pingora::apps::ServerApp;
use pingora::protocols::Stream;
use pingora::server::ShutdownWatch;
use sluice_control::{ClusterKind, Shared, SnapshotStore};
use sluice_filters::RespHandles;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tracing::{debug, warn};

use crate::lifecycle::Lifecycle;
use crate::upstream::{Tried, EJECTION};
use pump::{pump, NoTap};
use resp_tap::RespTap;

/// How long a connection to a run-time proxy's upstream may take (a
/// cluster has its own `timeouts.connect`).
const ADDRESS_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a listener's connections go.
pub(crate) enum Upstream {
    /// A configured cluster's endpoints, with ejection.
    Cluster(String),
    /// One `host:port` (a proxy of Toxiproxy's API).
    Address(String),
}

pub(crate) struct TcpProxy {
    listener: String,
    upstream: Upstream,
    store: Arc<SnapshotStore>,
    /// The connection counters are recorded into its metrics.
    shared: Shared,
    lifecycle: Arc<Lifecycle>,
    /// Resolved on the first connection to a cache cluster.
    resp: OnceLock<Arc<RespHandles>>,
}

impl TcpProxy {
    pub(crate) fn new(
        listener: String,
        upstream: Upstream,
        store: Arc<SnapshotStore>,
        shared: Shared,
        lifecycle: Arc<Lifecycle>,
    ) -> Self {
        Self {
            listener,
            upstream,
            store,
            shared,
            lifecycle,
            resp: OnceLock::new(),
        }
    }

    /// The `cluster` label: the cluster's name, or the upstream address.
    fn cluster_label(&self) -> &str {
        match &self.upstream {
            Upstream::Cluster(name) | Upstream::Address(name) => name,
        }
    }

    /// The RESP observer's metric handles when the cluster is `kind: cache`.
    fn resp_handles(&self) -> Option<Arc<RespHandles>> {
        let Upstream::Cluster(name) = &self.upstream else {
            return None;
        };
        let snapshot = self.store.load();
        let cluster = snapshot.clusters.iter().find(|c| &c.config.name == name)?;
        if cluster.config.kind != ClusterKind::Cache {
            return None;
        }
        let handles = self
            .resp
            .get_or_init(|| self.shared.metrics.resp.handles(&self.listener, name));
        Some(Arc::clone(handles))
    }

    async fn connect(&self) -> Option<TcpStream> {
        match &self.upstream {
            Upstream::Cluster(name) => self.connect_cluster(name).await,
            Upstream::Address(addr) => {
                let connect =
                    tokio::time::timeout(ADDRESS_CONNECT_TIMEOUT, TcpStream::connect(addr));
                match connect.await {
                    Ok(Ok(stream)) => {
                        let _ = stream.set_nodelay(true);
                        Some(stream)
                    }
                    _ => {
                        warn!(listener = %self.listener, %addr, "tcp upstream connect failed");
                        None
                    }
                }
            }
        }
    }

    /// Connects to the cluster's endpoints in turn, ejecting those that fail.
    async fn connect_cluster(&self, name: &str) -> Option<TcpStream> {
        let snapshot = self.store.load();
        let cluster = snapshot.clusters.iter().find(|c| c.config.name == name)?;
        let mut tried = Tried::default();
        while let Some(i) = cluster
            .endpoints
            .pick(self.lifecycle.now_ms(), tried.bits())
        {
            tried.mark(i);
            let addr = cluster.config.endpoints[i].addr;
            let connect =
                tokio::time::timeout(cluster.config.timeouts.connect, TcpStream::connect(addr));
            match connect.await {
                Ok(Ok(stream)) => {
                    cluster.endpoints.restore(i);
                    let _ = stream.set_nodelay(true);
                    return Some(stream);
                }
                _ => {
                    warn!(listener = %self.listener, %addr, "tcp upstream connect failed");
                    cluster.endpoints.eject(
                        i,
                        self.lifecycle.now_ms(),
                        EJECTION.as_millis() as u64,
                    );
                    if i >= 64 {
                        return None;
                    }
                }
            }
        }
        None
    }
}

#[async_trait]
impl ServerApp for TcpProxy {
    async fn process_new(
        self: &Arc<Self>,
        downstream: Stream,
        _shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        self.relay(downstream).await;
        None
    }
}

impl TcpProxy {
    /// Serves one client connection to its end: upstream connection,
    /// toxic, copy loop, counters.
    pub(crate) async fn relay<C>(&self, downstream: C)
    where
        C: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let _inflight = self.lifecycle.enter();
        let metrics = &self.shared.metrics;
        let cluster = self.cluster_label();
        let labels = [self.listener.as_str(), cluster];
        metrics.tcp_connections.with_label_values(&labels).inc();
        let active = metrics
            .tcp_active_connections
            .with_label_values(&[self.listener.as_str()]);
        active.inc();
        if let Some(upstream) = self.connect().await {
            let snapshot = self.store.load();
            let faults = toxic::pick(&snapshot, &self.listener, cluster);
            let late = toxic::Late::new(self.store.clone(), &self.listener, cluster, snapshot);
            let (mut downstream, mut upstream) =
                toxic::wrap(downstream, upstream, faults, Some(late));
            // The pump shuts down each write side when its read side reaches
            // EOF, which is exactly the half-close a client expects.
            let pumped = match self.resp_handles() {
                Some(handles) => {
                    let mut tap = RespTap::new(handles);
                    pump(&mut downstream, &mut upstream, &mut tap).await
                }
                None => pump(&mut downstream, &mut upstream, &mut NoTap).await,
            };
            if let Some(e) = &pumped.error {
                debug!(listener = %self.listener, error = %e, "tcp connection ended with error");
            }
            let (to_upstream, to_downstream) = (pumped.to_upstream, pumped.to_downstream);
            let bytes = |dir: &str| {
                metrics
                    .tcp_bytes
                    .with_label_values(&[self.listener.as_str(), cluster, dir])
            };
            bytes("upstream").inc_by(to_upstream);
            bytes("downstream").inc_by(to_downstream);
            debug!(listener = %self.listener, to_upstream, to_downstream, "tcp connection closed");
        }
        active.dec();
    }
}
