//! State across restarts (`runtime.state_dir`): what was changed at run
//! time — splits set through the API or by rollouts, fault experiments with
//! their absolute expiry, rollouts posted through the API, and every
//! rollout controller's state — kept in one file, rewritten on every
//! change by one writer task on the control thread, and laid over the
//! config file at start (see `docs/reliability.md`). `file` is the format,
//! `overlay` the pure merge; this module holds the writer and the start.

mod file;
mod overlay;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::Config;
use crate::rollout::Rollouts;
use crate::store::SnapshotStore;

pub(crate) use file::{
    prepare_dir, write_atomic, SavedController, StateFile, FILE_NAME, REFUSED_NAME,
};
pub(crate) use overlay::{capture, overlay, Restored};

/// How long an API change waits for the state to be on disk before it is
/// answered anyway (a failing disk must not hang the API).
pub(crate) const SAVE_WAIT: Duration = Duration::from_secs(2);
/// After a failed write, the next try.
const RETRY: Duration = Duration::from_secs(1);

/// Tells the writer that something changed, and the API when its change is
/// on disk. Inert (nothing waits) without `runtime.state_dir`.
#[derive(Debug)]
pub(crate) struct StateSignal {
    enabled: AtomicBool,
    /// Changes asked to be saved so far.
    asked: AtomicU64,
    wake: Notify,
    /// The last `asked` count a finished write covered.
    written: watch::Sender<u64>,
}

impl Default for StateSignal {
    fn default() -> Self {
        StateSignal {
            enabled: AtomicBool::new(false),
            asked: AtomicU64::new(0),
            wake: Notify::new(),
            written: watch::Sender::new(0),
        }
    }
}

impl StateSignal {
    /// From start on, with a state directory: API changes wait for the
    /// writer (which may not have run yet).
    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    /// Asks for a write of the state as it is from now on; returns the
    /// ticket [`StateSignal::saved`] waits for. A change during a write
    /// causes one more write, of the latest state.
    pub(crate) fn changed(&self) -> u64 {
        if !self.enabled.load(Ordering::Acquire) {
            return 0;
        }
        let ticket = self.asked.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake.notify_one();
        ticket
    }

    /// Waits until a write covered `ticket`, at most `within`; false when
    /// it did not.
    pub(crate) async fn saved(&self, ticket: u64, within: Duration) -> bool {
        if ticket == 0 {
            return true;
        }
        let mut written = self.written.subscribe();
        let done = tokio::time::timeout(within, written.wait_for(|w| *w >= ticket))
            .await
            .is_ok_and(|r| r.is_ok());
        done
    }
}

/// Wall clock, milliseconds since the Unix epoch.
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What start made of the state directory.
#[derive(Debug)]
pub(crate) enum Loaded {
    /// No state file: the config alone.
    None,
    Restored(Box<Restored>),
    /// The file could not be used (the message names it and says why); it
    /// was moved aside and sluice starts from the config alone.
    Refused(String),
}

/// Reads `dir`'s state file and lays it over `file` at `now_ms`, whole or
/// not at all. A refused file is moved to `state.json.refused`.
pub(crate) fn load(dir: &Path, file: &Config, now_ms: u64) -> Loaded {
    let path = dir.join(FILE_NAME);
    let refused = |message: String| {
        let aside = dir.join(REFUSED_NAME);
        let message = match std::fs::rename(&path, &aside) {
            Ok(()) => format!("{message} (moved to {})", aside.display()),
            Err(_) => message,
        };
        error!(path = %path.display(), error = %message, "state file refused; starting from the config alone");
        Loaded::Refused(message)
    };
    let state = match StateFile::read(dir) {
        Ok(None) => return Loaded::None,
        Ok(Some(state)) => state,
        Err(e) => return refused(e.to_string()),
    };
    match overlay(&file.raw, &state, now_ms) {
        Ok(restored) => {
            info!(
                path = %path.display(),
                rollouts = restored.controllers.len(),
                finished = restored.finished.len(),
                faults = restored.config.faults.len(),
                expired = restored.expired.len(),
                "state restored"
            );
            if restored.file_changed {
                warn!(path = %path.display(), "the config file changed since the state was saved; the state wins (reload the file to drop it)");
            }
            Loaded::Restored(Box::new(restored))
        }
        Err(errors) => {
            let lines: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
            refused(format!(
                "{}: does not fit the config: {}",
                path.display(),
                lines.join("; ")
            ))
        }
    }
}

/// The one writer: rewrites `dir/state.json` after every applied change of
/// the store and every change the rollouts or the API signal, until
/// `cancel`, and once more then. Writes run on a blocking worker, so
/// neither the data plane nor the control thread waits on the disk.
pub(crate) async fn run_writer(
    dir: PathBuf,
    store: Arc<SnapshotStore>,
    rollouts: Arc<Rollouts>,
    signal: Arc<StateSignal>,
    cancel: CancellationToken,
) {
    signal.enable();
    let mut changes = store.subscribe();
    // The state as started (expired experiments dropped, a refused file
    // replaced) is written at once.
    let mut due = true;
    loop {
        if !due {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = signal.wake.notified() => {}
                changed = changes.changed() => {
                    if changed.is_err() {
                        cancel.cancelled().await;
                        break;
                    }
                }
            }
        }
        due = false;
        if !save(&dir, &store, &rollouts, &signal).await {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(RETRY) => due = true,
            }
        }
    }
    save(&dir, &store, &rollouts, &signal).await;
}

/// One write of the state as it is now; false when it failed (logged).
async fn save(
    dir: &Path,
    store: &SnapshotStore,
    rollouts: &Rollouts,
    signal: &StateSignal,
) -> bool {
    let ticket = signal.asked.load(Ordering::Acquire);
    let state = capture(
        &store.load(),
        &store.base(),
        rollouts.saved(),
        tokio::time::Instant::now().into_std(),
        wall_ms(),
    );
    let target = dir.to_path_buf();
    match tokio::task::spawn_blocking(move || state.write(&target)).await {
        Ok(Ok(())) => {
            signal.written.send_modify(|w| *w = (*w).max(ticket));
            true
        }
        Ok(Err(e)) => {
            warn!(path = %dir.join(FILE_NAME).display(), error = %e, "state not saved; retrying");
            false
        }
        Err(e) => {
            warn!(error = %e, "state writer's worker failed; retrying");
            false
        }
    }
}

#[cfg(test)]
mod tests;
