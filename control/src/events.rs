//! The audit log: every attempted change, when, through which path (and
//! which token, for the API), and whether it was applied. A bounded ring;
//! the oldest entries fall off. With `admin.audit_file`, every entry is
//! also appended there (see `audit_file`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::audit_file::AuditFile;

const CAPACITY: usize = 1000;

#[derive(Clone, Debug, Serialize)]
pub struct Event {
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Which path made the change: `startup`, `api`, `file`, `sighup`.
    pub source: String,
    /// The name of the API token that made the change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
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
    /// The lineage ids of what made the change (a rollout's transition:
    /// `{"rollout": ID, "rollout_event": ID}`); see `docs/lineage.md`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineage: Option<serde_json::Value>,
}

/// Written by the control plane only; the request path never touches it.
#[derive(Default)]
pub struct EventLog {
    inner: Mutex<(u64, VecDeque<Event>)>,
    file: OnceLock<Arc<AuditFile>>,
}

thread_local! {
    /// The API request being served on this thread: its token's name, and
    /// the events it made so far. The handlers push their events from deep
    /// in the store and the rollouts; naming the caller here, around the
    /// one synchronous call that serves a request, spares a dozen signatures
    /// a parameter only the audit log reads.
    static ACTING: RefCell<Option<(String, Vec<Event>)>> = const { RefCell::new(None) };
    /// The lineage ids the events pushed on this thread carry (see
    /// [`with_lineage`]): for the same reason as `ACTING`, a rollout's
    /// transition names itself here rather than down every apply path.
    static LINEAGE: RefCell<Option<serde_json::Value>> = const { RefCell::new(None) };
}

/// Runs `work` with the events it pushes on this thread tagged `ids`.
pub(crate) fn with_lineage<T>(ids: Option<serde_json::Value>, work: impl FnOnce() -> T) -> T {
    struct Restore(Option<serde_json::Value>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            LINEAGE.with(|l| *l.borrow_mut() = outer);
        }
    }
    let outer = LINEAGE.with(|l| l.replace(ids));
    let _restore = Restore(outer);
    work()
}

/// Runs `work` on behalf of the token `token`: the events pushed meanwhile
/// on this thread carry its name, and are returned with the result (the
/// API writes them to the audit file with the request that made them).
pub(crate) fn acting_as<T>(token: &str, work: impl FnOnce() -> T) -> (T, Vec<Event>) {
    struct Restore(Option<(String, Vec<Event>)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            ACTING.with(|a| *a.borrow_mut() = outer);
        }
    }
    let outer = ACTING.with(|a| a.borrow_mut().replace((token.to_string(), Vec::new())));
    let restore = Restore(outer);
    let result = work();
    let made = ACTING.with(|a| a.borrow_mut().as_mut().map(|(_, e)| std::mem::take(e)));
    drop(restore);
    (result, made.unwrap_or_default())
}

impl EventLog {
    /// Appends every later entry to `file` too; the first call wins.
    pub(crate) fn set_audit_file(&self, file: Arc<AuditFile>) {
        let _ = self.file.set(file);
    }

    pub(crate) fn audit_file(&self) -> Option<&AuditFile> {
        self.file.get().map(Arc::as_ref)
    }

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
        let token = ACTING.with(|a| a.borrow().as_ref().map(|(name, _)| name.clone()));
        let lineage = LINEAGE.with(|l| l.borrow().clone());
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (seq, ring) = &mut *guard;
        *seq += 1;
        if ring.len() == CAPACITY {
            ring.pop_front();
        }
        let event = Event {
            seq: *seq,
            time_ms,
            source: source.to_string(),
            token,
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
            lineage,
        };
        ring.push_back(event.clone());
        drop(guard);
        // An API request's events go to the file with the request (see
        // `acting_as`); every other one on its own line.
        let attributed = ACTING.with(|a| match a.borrow_mut().as_mut() {
            Some((_, made)) => {
                made.push(event.clone());
                true
            }
            None => false,
        });
        if let (false, Some(file)) = (attributed, self.file.get()) {
            file.append_event(&event);
        }
    }

    /// Every kept event, oldest first.
    pub fn list(&self) -> Vec<Event> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.1.iter().cloned().collect()
    }
}
