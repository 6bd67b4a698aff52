//! The HTTP/1.1 keep-alive pool of the load client: idle connections per
//! origin, taken last-in first-out, each a hyper `http1` connection whose
//! driver runs as its own task.
//!
//! Why not hyper-util's pool: when no connection is idle it starts a
//! connect and races it against a connection coming back, so under an
//! open loop a fifth of requests opened a TCP connection they did not need
//! (4,505 connects for 20,000 requests at 10,000/s) and the target paid for
//! the accepts. Here a request takes an idle connection when one is there
//! and connects otherwise; the run's `max_in_flight` bounds how many exist.
//!
//! With `target.max_connections` a request that finds none idle and the
//! origin at its cap waits, first come first served, for the next
//! connection given back (or for a slot when one closes), as wrk's and
//! oha's fixed connections do: past the target's pace the load queues on
//! its connections instead of opening one per waiting request.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::{handshake, SendRequest};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::sync::oneshot;
use tower_service::Service;

/// One origin's sender: a request goes out on it, its answer comes back.
pub(crate) type Sender = SendRequest<Full<Bytes>>;

/// Idle connections by origin (`scheme://authority`).
pub(crate) struct Pool {
    connector: HttpsConnector<HttpConnector>,
    /// Connections per origin at most; `None`: one per request in flight.
    max_connections: Option<usize>,
    origins: Mutex<HashMap<String, Origin>>,
}

#[derive(Default)]
struct Origin {
    idle: Vec<Sender>,
    /// Open or being opened: counted from the reservation until the
    /// connection's driver ends.
    open: usize,
    /// Requests waiting at the cap, in arrival order.
    waiting: VecDeque<oneshot::Sender<Handoff>>,
}

/// What a request gets from the pool: a connection, or a slot to open one
/// with [`Pool::dial`].
pub(crate) enum Taken {
    Idle(Sender),
    Dial,
}

/// What a waiting request is handed.
enum Handoff {
    /// A connection given back, its answer read to the end.
    Idle(Sender),
    /// A slot freed by a closed connection: open a new one.
    Open,
}

/// What a request gets from the pool at once.
enum Grant {
    Idle(Sender),
    Open,
    Wait(oneshot::Receiver<Handoff>),
}

/// Idle connections kept per origin at most: beyond it one coming back is
/// closed (a burst's connections are not all kept for ever).
const MAX_IDLE: usize = 4096;
/// Turns of one [`Pool::take`] at most: every idle connection may be found
/// closed (a server's keep-alive timeout closes them together), and each
/// turn drops one, so this drains a full idle list and then some.
const MAX_TAKES: usize = MAX_IDLE + 64;

impl Pool {
    pub(crate) fn new(
        connector: HttpsConnector<HttpConnector>,
        max_connections: Option<usize>,
    ) -> Pool {
        Pool {
            connector,
            max_connections,
            origins: Mutex::new(HashMap::new()),
        }
    }

    /// An idle connection to `origin` that is still open, or a slot to
    /// open one; at the origin's cap, the first connection given back or
    /// slot freed. Errors only if the pool is gone or every idle
    /// connection found was closed.
    pub(crate) async fn take(&self, origin: &str) -> Result<Taken, ()> {
        // Bounded: each turn returns, or drops a connection found closed.
        for _ in 0..MAX_TAKES {
            let handoff = match self.grant(origin)? {
                Grant::Idle(sender) => Handoff::Idle(sender),
                Grant::Open => Handoff::Open,
                Grant::Wait(rx) => rx.await.map_err(|_| ())?,
            };
            match handoff {
                Handoff::Idle(mut sender) => {
                    if sender.ready().await.is_ok() {
                        return Ok(Taken::Idle(sender));
                    }
                    // Closed: dropped here, counted out by its driver.
                }
                Handoff::Open => return Ok(Taken::Dial),
            }
        }
        Err(())
    }

    /// A new connection to `uri`'s origin beside the one that failed a
    /// request (that one's driver is ending and counts itself out).
    pub(crate) async fn connect(
        self: &Arc<Self>,
        origin: &str,
        uri: &http::Uri,
    ) -> Result<Sender, ()> {
        self.origin(origin, |o| o.open += 1)?;
        self.dial(origin, uri).await
    }

    /// Gives back a connection whose answer was read to its end: to the
    /// first request waiting for one, else to the idle list.
    pub(crate) fn give(&self, origin: &str, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let _ = self.origin(origin, |o| {
            let mut sender = sender;
            while let Some(w) = o.waiting.pop_front() {
                match w.send(Handoff::Idle(sender)) {
                    Ok(()) => return,
                    // That request gave up (its timeout): the next one.
                    Err(Handoff::Idle(back)) => sender = back,
                    Err(Handoff::Open) => return,
                }
            }
            if o.idle.len() < MAX_IDLE {
                o.idle.push(sender);
            }
        });
    }

    /// What a request gets now: an idle connection, a slot to open one, or
    /// a place in the queue at the cap.
    fn grant(&self, origin: &str) -> Result<Grant, ()> {
        let max = self.max_connections;
        self.origin(origin, |o| {
            if let Some(sender) = o.idle.pop() {
                Grant::Idle(sender)
            } else if max.is_none_or(|m| o.open < m) {
                o.open += 1;
                Grant::Open
            } else {
                let (tx, rx) = oneshot::channel();
                o.waiting.push_back(tx);
                Grant::Wait(rx)
            }
        })
    }

    /// Opens a connection for a slot already counted in `open` (a
    /// [`Taken::Dial`]); a failure gives the slot back.
    pub(crate) async fn dial(
        self: &Arc<Self>,
        origin: &str,
        uri: &http::Uri,
    ) -> Result<Sender, ()> {
        // Boxed: the connect and the handshake, a TLS stream inline, make a
        // future of kilobytes that every request's future would carry, and
        // copy at each step, though most requests take an idle connection.
        let opened = Box::pin(self.open(uri)).await;
        match opened {
            Ok((sender, connection)) => {
                let (pool, origin) = (self.clone(), origin.to_owned());
                // The driver ends when the connection closes or its sender
                // is dropped; an error there is the request's, seen by its
                // sender. Its end frees the slot.
                tokio::spawn(async move {
                    let _ = connection.await;
                    pool.closed(&origin);
                });
                Ok(sender)
            }
            Err(()) => {
                self.closed(origin);
                Err(())
            }
        }
    }

    async fn open(
        &self,
        uri: &http::Uri,
    ) -> Result<
        (
            Sender,
            impl std::future::Future<Output = ()> + Send + 'static,
        ),
        (),
    > {
        let mut connector = self.connector.clone();
        let stream = connector.call(uri.clone()).await.map_err(|_| ())?;
        let (sender, connection) = handshake(stream).await.map_err(|_| ())?;
        Ok((sender, async move {
            let _ = connection.await;
        }))
    }

    /// A connection of `origin` closed (or never opened): its slot goes to
    /// the first request waiting, which opens a new one.
    fn closed(&self, origin: &str) {
        let _ = self.origin(origin, |o| {
            o.open = o.open.saturating_sub(1);
            while let Some(w) = o.waiting.pop_front() {
                o.open += 1;
                if w.send(Handoff::Open).is_ok() {
                    return;
                }
                o.open -= 1;
            }
        });
    }

    /// Runs `f` on `origin`'s entry under the lock (made on first use; its
    /// key is allocated once, not at every request).
    fn origin<T>(&self, origin: &str, f: impl FnOnce(&mut Origin) -> T) -> Result<T, ()> {
        let mut origins = self.origins.lock().map_err(|_| ())?;
        if let Some(o) = origins.get_mut(origin) {
            return Ok(f(o));
        }
        Ok(f(origins.entry(origin.to_owned()).or_default()))
    }
}
