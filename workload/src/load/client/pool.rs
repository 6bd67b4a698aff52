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

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::{handshake, SendRequest};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

/// One origin's sender: a request goes out on it, its answer comes back.
pub(crate) type Sender = SendRequest<Full<Bytes>>;

/// Idle connections by origin (`scheme://authority`).
pub(crate) struct Pool {
    connector: HttpsConnector<HttpConnector>,
    idle: Mutex<HashMap<String, Vec<Sender>>>,
}

/// Idle connections kept per origin at most: beyond it one coming back is
/// closed (a burst's connections are not all kept for ever).
const MAX_IDLE: usize = 4096;

impl Pool {
    pub(crate) fn new(connector: HttpsConnector<HttpConnector>) -> Pool {
        Pool {
            connector,
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// An idle connection to `uri`'s origin that is still open (`true`:
    /// reused), or a new one. Errors are the connect's or the handshake's.
    pub(crate) async fn take(&self, origin: &str, uri: &http::Uri) -> Result<(Sender, bool), ()> {
        // Bounded: each turn removes one idle connection.
        while let Some(mut sender) = self.pop(origin) {
            if sender.ready().await.is_ok() {
                return Ok((sender, true));
            }
        }
        Ok((self.connect(uri).await?, false))
    }

    /// A new connection to `uri`'s origin. Boxed: the connect and the
    /// handshake, a TLS stream inline, make a future of kilobytes that
    /// every request's future would carry, and copy at each step, though
    /// most requests take an idle connection.
    pub(crate) async fn connect(&self, uri: &http::Uri) -> Result<Sender, ()> {
        Box::pin(self.open(uri)).await
    }

    async fn open(&self, uri: &http::Uri) -> Result<Sender, ()> {
        let mut connector = self.connector.clone();
        let stream = connector.call(uri.clone()).await.map_err(|_| ())?;
        let (sender, connection) = handshake(stream).await.map_err(|_| ())?;
        // The driver ends when the connection closes or its sender is
        // dropped; an error there is the request's, seen by its sender.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// Gives back a connection whose answer was read to its end.
    pub(crate) fn give(&self, origin: &str, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        // The origin's key is allocated once, not at every answer.
        match idle.get_mut(origin) {
            Some(list) if list.len() < MAX_IDLE => list.push(sender),
            Some(_) => {}
            None => {
                idle.insert(origin.to_owned(), vec![sender]);
            }
        }
    }

    fn pop(&self, origin: &str) -> Option<Sender> {
        self.idle.lock().ok()?.get_mut(origin)?.pop()
    }
}
