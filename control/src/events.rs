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
    /// What a change the control plane made by itself was decided on (a
    /// shedding level's signals, values and bounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<serde_json::Value>,
}

/// Written by the control plane only; the request path never touches it.
#[derive(Default)]
pub struct EventLog {
    inner: Mutex<(u64, VecDeque<Event>)>,
}

impl EventLog {
    pub fn push(&self, source: &str, action: &str, version: u64, errors: Vec<String>) {
        self.push_event(source, action, version, errors, None);
    }

    /// An applied change with the evidence it was decided on.
    pub fn push_with_evidence(
        &self,
        source: &str,
        action: &str,
        version: u64,
        evidence: serde_json::Value,
    ) {
        self.push_event(source, action, version, Vec::new(), Some(evidence));
    }

    fn push_event(
        &self,
        source: &str,
        action: &str,
        version: u64,
        errors: Vec<String>,
        evidence: Option<serde_json::Value>,
    ) {
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
            evidence,
        });
    }

    /// Every kept event, oldest first.
    pub fn list(&self) -> Vec<Event> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.1.iter().cloned().collect()
    }
}
