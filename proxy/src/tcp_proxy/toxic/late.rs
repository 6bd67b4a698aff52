//! The experiments added while one connection is open: each is tried for
//! the connection once (its `percent` rolled once, Toxiproxy's `toxicity`)
//! and one that fires joins the end of its side's chain at that side's
//! next read, as Toxiproxy applies a toxic to the connections already open.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sluice_control::{FaultGuard, FaultRuntime, Snapshot, SnapshotStore};
use sluice_filters::{FaultAction, Toxic};

use super::{side_of, target, tcp_faults};

/// A toxic that fired for a connection, with the guard that holds its place.
pub(super) type Fired = (Toxic, FaultGuard);

/// Each side asks at every read; a new snapshot is looked through once.
pub(in crate::tcp_proxy) struct Late {
    store: Arc<SnapshotStore>,
    listener: String,
    cluster: String,
    /// The address of `state.seen` (held there, so never reused while
    /// equal) and whether a side has toxics waiting: a read with nothing
    /// new takes no lock and allocates nothing.
    seen_at: AtomicUsize,
    waiting: [AtomicBool; 2],
    state: Mutex<LateState>,
}

struct LateState {
    /// The snapshot last looked through.
    seen: Arc<Snapshot>,
    /// The experiments tried for this connection and still in the config
    /// (held, so that a new one cannot reuse an old one's address).
    tried: Vec<Arc<FaultRuntime>>,
    /// Toxics that fired, in the config's order, waiting for their side's
    /// next read.
    handed: [Vec<Fired>; 2],
}

impl Late {
    /// For a connection that opened on `at`: its experiments count as tried.
    pub(in crate::tcp_proxy) fn new(
        store: Arc<SnapshotStore>,
        listener: &str,
        cluster: &str,
        at: Arc<Snapshot>,
    ) -> Arc<Late> {
        let tried = tcp_faults(&at).cloned().collect();
        Arc::new(Late {
            store,
            listener: listener.to_owned(),
            cluster: cluster.to_owned(),
            seen_at: AtomicUsize::new(Arc::as_ptr(&at) as usize),
            waiting: [AtomicBool::new(false), AtomicBool::new(false)],
            state: Mutex::new(LateState {
                seen: at,
                tried,
                handed: [Vec::new(), Vec::new()],
            }),
        })
    }

    /// The toxics for `side` that fired since it last asked, in order.
    pub(super) fn take(&self, side: usize) -> Option<Vec<Fired>> {
        let now = self.store.load();
        let waiting = self.waiting.get(side)?;
        if Arc::as_ptr(&now) as usize == self.seen_at.load(Ordering::Acquire)
            && !waiting.load(Ordering::Acquire)
        {
            return None;
        }
        // Poisoned only by a panic in here: no late toxics then.
        let mut state = self.state.lock().ok()?;
        if !Arc::ptr_eq(&state.seen, &now) {
            let LateState { tried, handed, .. } = &mut *state;
            tried.retain(|t| tcp_faults(&now).any(|f| Arc::ptr_eq(f, t)));
            let target = target(&self.listener, &self.cluster);
            for f in tcp_faults(&now) {
                if tried.iter().any(|t| Arc::ptr_eq(t, f)) {
                    continue;
                }
                tried.push(f.clone());
                let Ok(guard) = f.try_fire(&target, rand::random::<u64>) else {
                    continue;
                };
                let FaultAction::Tcp(toxic) = guard.runtime().experiment.action.clone() else {
                    continue;
                };
                let to = side_of(&toxic);
                handed[to].push((toxic, guard));
                self.waiting[to].store(true, Ordering::Release);
            }
            self.seen_at
                .store(Arc::as_ptr(&now) as usize, Ordering::Release);
            state.seen = now;
        }
        waiting.store(false, Ordering::Release);
        let fired = std::mem::take(state.handed.get_mut(side)?);
        (!fired.is_empty()).then_some(fired)
    }
}
