//! The RESP observer as a [`Tap`] on the copy loop of a `kind: cache`
//! cluster: it reads the slices the loop already holds, records each
//! request/reply exchange, and on anything it cannot follow stops for that
//! connection (counted once) while the bytes keep flowing unchanged.

use std::sync::Arc;
use std::time::Instant;

use sluice_filters::{RespFallback, RespHandles, RespSession};
use tracing::debug;

use super::pump::Tap;

pub(super) struct RespTap {
    session: RespSession,
    handles: Arc<RespHandles>,
    /// Exchange latencies are differences of nanoseconds since this instant.
    origin: Instant,
}

impl RespTap {
    pub(super) fn new(handles: Arc<RespHandles>) -> Self {
        Self {
            session: RespSession::default(),
            handles,
            origin: Instant::now(),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn stopped(&self, reason: RespFallback) {
        debug!(
            reason = reason.reason(),
            "resp observation stopped; copying only"
        );
        self.handles.fallback(reason);
    }
}

impl Tap for RespTap {
    fn sent_to_upstream(&mut self, bytes: &[u8]) {
        if !self.session.observing() {
            return;
        }
        let now = self.now_ns();
        if let Err(reason) = self.session.requests_sent(bytes, now) {
            self.stopped(reason);
        }
    }

    fn read_from_upstream(&mut self, bytes: &[u8]) {
        if !self.session.observing() {
            return;
        }
        let now = self.now_ns();
        let handles = &self.handles;
        let result = self
            .session
            .replies_received(bytes, now, &mut |exchange| handles.record(&exchange));
        if let Err(reason) = result {
            self.stopped(reason);
        }
    }
}
