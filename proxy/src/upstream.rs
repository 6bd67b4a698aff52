//! The data plane's own upstream client, for the requests sluice sends itself
//! instead of through pingora's proxy loop: a faulted stream (paced on its
//! own timer, see `http_proxy/stream_fault.rs`) and the mirror's copies (on
//! the sender's runtime). It goes the way an ordinary request goes:
//!
//! - the peer is the one `upstream_peer` builds ([`peer`]: TLS, SNI and
//!   verification from the cluster's `tls`, its timeouts, its connections
//!   counted under its `max_connections`);
//! - pingora's transport connector connects (TCP, TLS with the config's CA,
//!   rustls on ring) and keeps the idle connections; to a cluster whose
//!   `protocol` allows HTTP/2, pingora's HTTP/2 connector opens streams on
//!   shared connections instead (gRPC: trailers come back with the answer);
//! - the endpoint comes from the cluster's `EndpointSet`; one that refuses a
//!   connection is ejected for [`EJECTION`] and another untried one is tried;
//!   past the cluster's `max_connections` the request fails `overflow` at
//!   once (no endpoint is to blame);
//! - a failure on a reused pooled connection before any answer byte is sent
//!   again on a fresh connection (pingora's `ReusedOnly`, as
//!   `error_while_proxy` decides it);
//! - each attempt is a client span when the request is traced.
//!
//! Each [`UpstreamClient`] has a pool of its own: the proxy's serves faulted
//! streams, the mirror sender keeps another on its idle-priority runtime, so
//! that shadow copies never hold a connection a faulted stream waits for.

mod answer;
mod connections;
mod wire;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use pingora::connectors::http::v2::Connector as H2Connector;
use pingora::connectors::{ConnectorOptions, TransportConnector};
use pingora::http::RequestHeader;
use pingora::protocols::http::client::HttpSession as ClientSession;
use pingora::tls::RootCertStore;
use pingora::upstreams::peer::{HttpPeer, Peer};
use pingora::{Error, ErrorType};
use sluice_control::{ClusterRuntime, Config, UpstreamProtocol};
use sluice_filters::{EndpointSet, Failure, Metrics, HOP_BY_HOP};

use crate::http_proxy::classify;
use crate::telemetry::{Attempt, RequestTrace};
pub(crate) use answer::{Answer, Part};
pub(crate) use connections::{is_overflow, Connector};
use wire::Wire;

/// How long an endpoint that refused a connection is skipped, by the proxy
/// and the L4 listener alike.
pub(crate) const EJECTION: Duration = Duration::from_secs(10);

/// Attempts one request may make in all, as pingora's default `max_retries`.
const MAX_ATTEMPTS: usize = 16;

/// Idle connections kept per client, as pingora's default pool size.
const POOL_SIZE: usize = 128;

/// The endpoints one request could not connect to, by index into its
/// cluster's endpoints (the first 64; beyond them none is remembered).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tried(u64);

impl Tried {
    pub(crate) fn mark(&mut self, endpoint: usize) {
        if endpoint < 64 {
            self.0 |= 1 << endpoint;
        }
    }

    /// The bit set `EndpointSet::pick` skips.
    pub(crate) fn bits(self) -> u64 {
        self.0
    }

    /// Whether some endpoint of `len` is still worth a try.
    pub(crate) fn any_left(self, len: usize) -> bool {
        (0..len).any(|k| k >= 64 || self.0 & (1 << k) == 0)
    }
}

/// The peer for endpoint `endpoint` of `cluster`, as the proxy connects to
/// it: new connections through the cluster's [`Connector`].
pub(crate) fn peer(
    cluster: &ClusterRuntime,
    endpoint: usize,
    metrics: &Metrics,
) -> Option<HttpPeer> {
    let config = &cluster.config;
    let e = config.endpoints.get(endpoint)?;
    let tls = config.tls.as_ref();
    let sni = tls
        .and_then(|t| t.sni.clone())
        .unwrap_or_else(|| e.host.clone());
    let mut peer = HttpPeer::new(e.addr, tls.is_some(), sni);
    let t = &config.timeouts;
    peer.options.connection_timeout = Some(t.connect);
    peer.options.read_timeout = Some(t.first_byte);
    peer.options.idle_timeout = Some(t.idle);
    if let Some(tls) = tls {
        peer.options.verify_cert = tls.verify;
        peer.options.verify_hostname = tls.verify;
    }
    match config.protocol {
        UpstreamProtocol::Http1 => {}
        // Prior knowledge on plain TCP, ALPN `h2` only on TLS.
        UpstreamProtocol::H2c | UpstreamProtocol::H2 => peer.options.set_http_version(2, 2),
        UpstreamProtocol::Auto if tls.is_some() => peer.options.set_http_version(2, 1),
        UpstreamProtocol::Auto => {}
    }
    // pingora opens one stream per connection unless told more; the
    // server's SETTINGS_MAX_CONCURRENT_STREAMS still caps each connection.
    peer.options.max_h2_streams = H2_MAX_STREAMS;
    if let Some(connector) = Connector::of(cluster, metrics) {
        connector.limit(&mut peer);
    }
    Some(peer)
}

/// Streams sluice opens on one HTTP/2 upstream connection before it opens
/// another, when the server allows that many.
pub(crate) const H2_MAX_STREAMS: usize = 1000;

/// Where the caller differs from the proxy: the mirror's shorter timeouts,
/// its own ejections, and its rule that a down shadow costs no syscall.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// How long an endpoint that refused a connection is skipped.
    pub ejection: Duration,
    /// When every untried endpoint is ejected: try the one ejected longest
    /// ago (the proxy: better than failing unseen), or fail at once.
    pub try_ejected: bool,
    /// Replaces the cluster's `timeouts.connect`.
    pub connect_timeout: Option<Duration>,
    /// Replaces the cluster's `timeouts.idle` for pooled connections.
    pub idle_timeout: Option<Duration>,
}

impl Policy {
    /// The proxy's own rules, every timeout from the cluster.
    pub(crate) const PROXY: Policy = Policy {
        ejection: EJECTION,
        try_ejected: true,
        connect_timeout: None,
        idle_timeout: None,
    };
}

/// Where one request goes.
pub(crate) struct Target<'a> {
    pub cluster: &'a ClusterRuntime,
    /// Chooses the endpoint and keeps the ejections (the cluster's, or the
    /// mirror's own).
    pub endpoints: &'a EndpointSet,
    /// The clock `endpoints` is kept on, in milliseconds.
    pub now_ms: &'a (dyn Fn() -> u64 + Sync),
    pub policy: Policy,
}

/// The traced request's state: each attempt gets a span and a `traceparent`.
pub(crate) struct Traced<'a> {
    pub trace: &'a mut RequestTrace,
    pub attempts: &'a mut Vec<Attempt>,
}

/// Why no answer came, and from which endpoint (the last one tried).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Failed {
    pub failure: Failure,
    pub endpoint: Option<usize>,
}

/// A request head to send: the client's, without its hop-by-hop headers
/// (but `te: trailers`), with the length of `body`. `Host` stays the client's (as the
/// proxy forwards it), or comes from the URI's authority (an h2 client).
pub(crate) fn request_head(
    method: &http::Method,
    path_and_query: &str,
    headers: &http::HeaderMap,
    authority: Option<&str>,
    body_len: usize,
) -> Option<RequestHeader> {
    let mut head = RequestHeader::build(method.clone(), path_and_query.as_bytes(), None).ok()?;
    for (name, value) in headers {
        // `te: trailers` is the one hop-by-hop header HTTP/2 allows, and
        // gRPC servers ask for it.
        let trailers = name == http::header::TE && value.as_bytes() == b"trailers";
        if trailers || !HOP_BY_HOP.contains(&name.as_str()) {
            head.append_header(name.clone(), value.clone()).ok()?;
        }
    }
    if !head.headers.contains_key(http::header::HOST) {
        if let Some(authority) = authority {
            head.insert_header(http::header::HOST, authority).ok()?;
        }
    }
    let bodiless = matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::DELETE | http::Method::OPTIONS
    );
    if body_len > 0 || !bodiless {
        head.insert_header(http::header::CONTENT_LENGTH, body_len)
            .ok()?;
    }
    Some(head)
}

/// One pooled upstream client; see the module docs.
pub(crate) struct UpstreamClient {
    /// HTTP/1.1 connections.
    transport: TransportConnector,
    /// HTTP/2 connections, each shared by as many streams as its server
    /// allows (up to [`H2_MAX_STREAMS`]).
    h2: H2Connector,
    /// Where a refusal past `max_connections` is counted.
    metrics: Arc<Metrics>,
}

/// The config names a CA file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("tls.ca `{path}`: {reason}")]
pub(crate) struct CaError {
    path: String,
    reason: String,
}

impl UpstreamClient {
    /// A client trusting what pingora's own connector trusts: the config's
    /// one `tls.ca` file (sluice allows one for every cluster) or, without
    /// one, the platform's roots.
    pub(crate) fn new(
        config: &Config,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<UpstreamClient>, CaError> {
        let mut options = ConnectorOptions::new(POOL_SIZE);
        let ca = config
            .clusters
            .iter()
            .find_map(|c| c.tls.as_ref()?.ca.as_ref());
        if let Some(ca) = ca {
            let path = ca.to_string_lossy().into_owned();
            // pingora's connector panics on a file it cannot load: check first.
            pingora::tls::load_ca_file_into_store(&path, &mut RootCertStore::empty()).map_err(
                |e| CaError {
                    path: path.clone(),
                    reason: e.to_string(),
                },
            )?;
            options.ca_file = Some(path);
        }
        Ok(Arc::new(UpstreamClient {
            h2: H2Connector::new(Some(options.clone())),
            transport: TransportConnector::new(Some(options)),
            metrics,
        }))
    }

    /// Sends `head` and `body` to `target` and reads the answer's head,
    /// retrying as the module docs say.
    pub(crate) async fn send(
        self: &Arc<Self>,
        target: &Target<'_>,
        head: &RequestHeader,
        body: &Bytes,
        mut traced: Option<Traced<'_>>,
    ) -> Result<Answer, Failed> {
        let endpoints = target.endpoints;
        let mut tried = Tried::default();
        let mut failed = Failed {
            failure: Failure::ConnectError,
            endpoint: None,
        };
        // Set after a reused connection failed: the next try connects anew.
        let mut fresh_on: Option<usize> = None;
        for _ in 0..MAX_ATTEMPTS {
            let fresh = fresh_on.take();
            let i = match fresh {
                Some(i) => i,
                None => {
                    let Some(i) = endpoints.pick((target.now_ms)(), tried.bits()) else {
                        return Err(failed);
                    };
                    if !target.policy.try_ejected && endpoints.is_ejected(i, (target.now_ms)()) {
                        return Err(Failed {
                            failure: Failure::ConnectError,
                            endpoint: Some(i),
                        });
                    }
                    i
                }
            };
            failed.endpoint = Some(i);
            let Some(peer) = self.peer(target, i) else {
                return Err(failed);
            };
            let mut head = head.clone();
            begin_attempt(traced.as_mut(), &mut head, &peer);
            let (mut wire, reused) = match self.open(&peer, fresh.is_some()).await {
                Ok(opened) => opened,
                Err(e) if is_overflow(&e) => {
                    end_attempt(traced.as_mut(), Some(&e));
                    failed.failure = Failure::Overflow;
                    return Err(failed);
                }
                Err(e) => {
                    end_attempt(traced.as_mut(), Some(&e));
                    tried.mark(i);
                    endpoints.eject(i, (target.now_ms)(), ms(target.policy.ejection));
                    failed.failure = classify(&e).unwrap_or(Failure::ConnectError);
                    continue;
                }
            };
            if matches!(wire, Wire::H2(_))
                && head.uri.authority().is_none()
                && !head.headers.contains_key(http::header::HOST)
            {
                // HTTP/2 needs an authority: a request sluice makes itself (an
                // embedding call) has no client's, so the endpoint's.
                let _ = head.insert_header(http::header::HOST, peer.address().to_string());
            }
            // Marked as the upstream's, as pingora marks errors of its upstream session.
            match wire.exchange(head, body).await.map_err(|e| e.into_up()) {
                Ok(()) => {
                    end_attempt(traced.as_mut(), None);
                    endpoints.restore(i);
                    return Answer::new(self.clone(), wire, peer, i, reused);
                }
                Err(mut e) => {
                    end_attempt(traced.as_mut(), Some(&e));
                    failed.failure = classify(&e).unwrap_or(Failure::UpstreamError);
                    e.retry.decide_reuse(reused);
                    if !e.retry() {
                        return Err(failed);
                    }
                    fresh_on = Some(i);
                }
            }
        }
        Err(failed)
    }

    fn peer(&self, target: &Target<'_>, i: usize) -> Option<HttpPeer> {
        let mut peer = peer(target.cluster, i, &self.metrics)?;
        if let Some(t) = target.policy.connect_timeout {
            peer.options.connection_timeout = Some(t);
            // The connector applies the timeout (pingora does not around a
            // custom connect): the mirror's copies pay for one of their own.
            if let Some(connector) = Connector::of(target.cluster, &self.metrics) {
                connector.with_timeout(t).limit(&mut peer);
            }
        }
        if let Some(t) = target.policy.idle_timeout {
            peer.options.idle_timeout = Some(t);
        }
        Some(peer)
    }

    /// A pooled connection to `peer` (unless `fresh`), else a new one; over
    /// HTTP/2, a new stream on an open connection that has room for one.
    async fn open(&self, peer: &HttpPeer, fresh: bool) -> pingora::Result<(Wire, bool)> {
        if peer.options.alpn.get_max_http_version() == 2 {
            if !fresh {
                if let Some(stream) = self.h2.reused_http_session(peer).await? {
                    return Ok((Wire::h2(stream, peer), true));
                }
                // `auto` over TLS may have settled on HTTP/1.1 before; those
                // connections are pooled with the others.
                if peer.options.alpn.get_min_http_version() == 1 {
                    if let Some(stream) = self.transport.reused_stream(peer).await {
                        return Ok((Wire::h1(stream, peer), true));
                    }
                }
            }
            // TLS may settle on HTTP/1.1 (`auto`): that connection is used as one.
            let wire = match self.h2.new_http_session::<_, ()>(peer).await? {
                ClientSession::H2(stream) => Wire::h2(stream, peer),
                ClientSession::H1(session) => Wire::h1_session(session, peer),
                ClientSession::Custom(()) => {
                    return Error::e_explain(ErrorType::InternalError, "no custom protocol")
                }
            };
            return Ok((wire, false));
        }
        if !fresh {
            if let Some(stream) = self.transport.reused_stream(peer).await {
                return Ok((Wire::h1(stream, peer), true));
            }
        }
        Ok((
            Wire::h1(self.transport.new_stream(peer).await?, peer),
            false,
        ))
    }

    /// Gives a connection whose answer was read whole back to the pool (an
    /// HTTP/2 stream's place back to its connection).
    async fn release(&self, wire: Wire, peer: &HttpPeer) {
        match wire {
            Wire::H1(mut session) => {
                session.respect_keepalive();
                if let Some(stream) = session.reuse().await {
                    self.transport.release_stream(
                        stream,
                        peer.reuse_hash(),
                        peer.options.idle_timeout,
                    );
                }
            }
            Wire::H2(stream) => {
                self.h2
                    .release_http_session(*stream, peer, peer.options.idle_timeout)
            }
        }
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Opens an attempt's span and puts its context on the request.
fn begin_attempt(traced: Option<&mut Traced<'_>>, head: &mut RequestHeader, peer: &HttpPeer) {
    let Some(t) = traced else { return };
    let attempt = t.trace.next_attempt();
    let _ = head.insert_header("traceparent", attempt.traceparent.as_str());
    if let Some(state) = &t.trace.tracestate {
        let _ = head.insert_header("tracestate", state.as_str());
    }
    let now = SystemTime::now();
    t.attempts.push(Attempt {
        span_id: attempt.span_id,
        start: now,
        end: now,
        address: peer.address().as_inet().copied(),
        error: None,
    });
}

/// Closes the current attempt's span, with why it failed.
fn end_attempt(traced: Option<&mut Traced<'_>>, error: Option<&Error>) {
    let Some(a) = traced.and_then(|t| t.attempts.last_mut()) else {
        return;
    };
    a.end = SystemTime::now();
    a.error = error.map(|e| e.etype().as_str().to_string());
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
