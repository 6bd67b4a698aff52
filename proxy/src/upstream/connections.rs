//! `circuit_breakers.max_connections`: a cluster's upstream connections,
//! counted as pingora opens and drops them. For every new connection (a
//! pooled one is reused without it) pingora calls the peer's `custom_l4`
//! connector instead of its own TCP connect, and right after that returns
//! puts the peer's `tracer` on the new stream, whose drop calls
//! `on_disconnected`. So a place is taken in [`Connector`]'s `connect` and
//! given back when the stream drops, however the connection ends: closed by
//! either side, evicted from the pool, a TLS handshake that failed, h1 or h2.
//!
//! One connector per cluster and snapshot, made on first use and kept in the
//! cluster's `data_plane` slot; the places are the cluster's `Breakers`,
//! shared by every snapshot, so a reload keeps the count. The peer's
//! `group_key` is the cluster's, so that two clusters on one address keep
//! pools apart (as Envoy's are per cluster): a connection one cluster
//! counts is never lent to another.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use pingora::connectors::L4Connect;
use pingora::protocols::l4::ext;
use pingora::protocols::l4::socket::SocketAddr;
use pingora::protocols::l4::stream::Stream;
use pingora::upstreams::peer::{HttpPeer, Tracer, Tracing};
use pingora::{Error, ErrorType};
use prometheus::{IntCounter, IntCounterVec};
use sluice_control::ClusterRuntime;
use sluice_filters::{hash_bytes, Breaker, Breakers, Metrics};

use crate::http_proxy::OVERFLOW;

/// Connects to a cluster's endpoints within its `max_connections`.
pub(crate) struct Connector {
    breakers: Arc<Breakers>,
    max: usize,
    /// The peer's connect timeout: pingora applies `connection_timeout`
    /// only to its own connect.
    timeout: Duration,
    cluster: String,
    /// The peer's `group_key`: pingora pools connections by it.
    group_key: u64,
    /// `sluice_circuit_breaker_overflow_total`, and this cluster's series of
    /// it, resolved at the first refusal (a cluster never refused shows none).
    family: IntCounterVec,
    overflow: OnceLock<IntCounter>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("cluster", &self.cluster)
            .field("max", &self.max)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// The cluster's connector, made on the first call for this snapshot.
    pub(crate) fn of(cluster: &ClusterRuntime, metrics: &Metrics) -> Option<Arc<Connector>> {
        let made = cluster.data_plane.get_or_init(|| {
            Arc::new(Connector {
                breakers: cluster.breakers.clone(),
                max: cluster.config.circuit_breakers.max_connections,
                timeout: cluster.config.timeouts.connect,
                cluster: cluster.config.name.clone(),
                group_key: hash_bytes(cluster.config.name.as_bytes()),
                family: metrics.breaker_overflow.clone(),
                overflow: OnceLock::new(),
            })
        });
        made.clone().downcast::<Connector>().ok()
    }

    /// The same limit and count with another connect timeout (the mirror's).
    pub(crate) fn with_timeout(&self, timeout: Duration) -> Arc<Connector> {
        Arc::new(Connector {
            breakers: self.breakers.clone(),
            max: self.max,
            timeout,
            cluster: self.cluster.clone(),
            group_key: self.group_key,
            family: self.family.clone(),
            overflow: self.overflow.clone(),
        })
    }

    /// Makes `peer` connect through this connector and give its place back
    /// when the connection drops: an `Arc` clone and one small `Box` per peer.
    pub(crate) fn limit(self: Arc<Self>, peer: &mut HttpPeer) {
        peer.group_key = self.group_key;
        peer.options.tracer = Some(Tracer(Box::new(Counted(self.breakers.clone()))));
        peer.options.custom_l4 = Some(self);
    }

    fn count_overflow(&self) {
        self.overflow
            .get_or_init(|| {
                self.family
                    .with_label_values(&[self.cluster.as_str(), Breaker::Connections.name()])
            })
            .inc();
    }
}

#[async_trait]
impl L4Connect for Connector {
    async fn connect(&self, addr: &SocketAddr) -> pingora::Result<Stream> {
        if !self.breakers.open_connection(self.max) {
            self.count_overflow();
            return Error::e_explain(
                ErrorType::Custom(OVERFLOW),
                format!(
                    "cluster `{}`: max_connections ({}) connections open",
                    self.cluster, self.max
                ),
            );
        }
        // Given back unless the stream is handed to pingora, which puts the
        // tracer on it before its next await: a failed or cancelled connect
        // gives the place back here, a made one when its stream drops.
        let place = Place(&self.breakers);
        let SocketAddr::Inet(inet) = addr else {
            return Error::e_explain(ErrorType::InternalError, "not a TCP address");
        };
        let socket = match tokio::time::timeout(self.timeout, ext::connect(inet, None)).await {
            Ok(Ok(socket)) => socket,
            Ok(Err(e)) => {
                // As pingora's own connect words and types its failures.
                let context = format!("Fail to connect to {addr}");
                return match e.etype() {
                    ErrorType::SocketError | ErrorType::BindError => {
                        Error::e_because(ErrorType::InternalError, context, e)
                    }
                    _ => Err(e.more_context(context)),
                };
            }
            Err(_) => {
                return Error::e_explain(
                    ErrorType::ConnectTimedout,
                    format!("timeout {:?} connecting to server {addr}", self.timeout),
                );
            }
        };
        std::mem::forget(place);
        Ok(socket.into())
    }
}

/// A place taken in `connect`, given back on drop until the stream is made.
struct Place<'a>(&'a Breakers);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.close_connection();
    }
}

/// The tracer on every stream the [`Connector`] made: the stream's drop
/// gives its place back. Its place was taken in `connect`, so nothing
/// happens on connect.
#[derive(Debug)]
struct Counted(Arc<Breakers>);

impl Tracing for Counted {
    fn on_connected(&self) {}

    fn on_disconnected(&self) {
        self.0.close_connection();
    }

    fn boxed_clone(&self) -> Box<dyn Tracing> {
        Box::new(Counted(self.0.clone()))
    }
}

/// Whether `e` is a breaker's refusal: no endpoint is to blame, none is
/// ejected and none tried in its place.
pub(crate) fn is_overflow(e: &Error) -> bool {
    *e.etype() == ErrorType::Custom(OVERFLOW)
}
