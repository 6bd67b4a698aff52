//! The audit log: every attempted change, when, through which path, and
//! whether it was applied. A bounded ring; the oldest entries fall off.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

const CAPACITY: usize = 1000;

#[derive(Clone, Debug, Serialize)]
pub struct Event {
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Which path made the change: `startup`, `api`, `file`, `sighup`.
    pub source: String,
    /// What was attempted, e.g. `set split of route chat`.
    pub action: String,
    /// `applied` or `rejected`.
    pub result: String,
    /// Snapshot version after the change (unchanged when rejected).
    pub version: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Written by the control plane only; the request path never touches it.
#[derive(Default)]
pub struct EventLog {
    inner: Mutex<(u64, VecDeque<Event>)>,
}

impl EventLog {
    pub fn push(&self, source: &str, action: &str, version: u64, errors: Vec<String>) {
        let time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (seq, ring) = &mut *guard;
        *seq += 1;
        if ring.len() == CAPACITY {
            ring.pop_front();
        }
        ring.push_back(Event {
            seq: *seq,
            time_ms,
            source: source.to_string(),
            action: action.to_string(),
            result: if errors.is_empty() {
                "applied"
            } else {
                "rejected"
            }
            .to_string(),
            version,
            errors,
        });
    }

    /// Every kept event, oldest first.
    pub fn list(&self) -> Vec<Event> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.1.iter().cloned().collect()
    }
}
