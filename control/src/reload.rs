//! Reloading the config file: at once on SIGHUP, and whenever its content
//! changes (polled every second). A file that cannot be read or parsed is
//! rejected like any other change: logged, written to the audit log, and the
//! old config keeps serving.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{ConfigError, ConfigErrors, RawConfig};
use crate::store::SnapshotStore;

const POLL_EVERY: Duration = Duration::from_secs(1);
const ACTION: &str = "reload config file";

/// Reads, parses and applies the file at `path`; returns the new version.
/// Every outcome, a read or parse error included, lands in the audit log.
pub fn reload_from_file(
    store: &SnapshotStore,
    path: &Path,
    source: &str,
) -> Result<u64, ConfigErrors> {
    apply_read(store, path, source, std::fs::read(path))
}

fn apply_read(
    store: &SnapshotStore,
    path: &Path,
    source: &str,
    read: std::io::Result<Vec<u8>>,
) -> Result<u64, ConfigErrors> {
    let parsed = match read {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => RawConfig::from_yaml(&text),
            Err(e) => Err(file_error(path, format!("not UTF-8: {e}"))),
        },
        Err(e) => Err(file_error(path, format!("cannot read: {e}"))),
    };
    // Parse errors go through the store too, so that they are counted and
    // logged exactly like validation errors.
    let result = store.apply(source, ACTION, move |raw| {
        *raw = parsed?;
        Ok(())
    });
    store.count_reload(source, result.is_ok());
    Ok(result?.version)
}

fn file_error(path: &Path, message: String) -> ConfigErrors {
    ConfigErrors(vec![ConfigError::new(path.display().to_string(), message)])
}

/// What the last look at the file found; a change of it triggers a reload.
#[derive(PartialEq, Eq)]
enum Seen {
    Content(Vec<u8>),
    Unreadable(std::io::ErrorKind),
}

impl Seen {
    fn of(read: &std::io::Result<Vec<u8>>) -> Seen {
        match read {
            Ok(bytes) => Seen::Content(bytes.clone()),
            Err(e) => Seen::Unreadable(e.kind()),
        }
    }
}

/// Watches `path` until `cancel`. The content found when the watch starts is
/// taken as the one already loaded.
pub(crate) async fn watch_config_file(
    store: Arc<SnapshotStore>,
    path: PathBuf,
    cancel: CancellationToken,
) {
    let mut hangup = hangup_signal();
    let mut seen = Seen::of(&std::fs::read(&path));
    let mut poll = tokio::time::interval(POLL_EVERY);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    poll.tick().await;
    info!(path = %path.display(), "watching the config file");
    loop {
        let source = tokio::select! {
            () = cancel.cancelled() => break,
            () = next_hangup(&mut hangup) => "sighup",
            _ = poll.tick() => "file",
        };
        let read = std::fs::read(&path);
        let now = Seen::of(&read);
        if source == "file" && now == seen {
            continue;
        }
        seen = now;
        match apply_read(&store, &path, source, read) {
            Ok(version) => info!(source, version, path = %path.display(), "config file reloaded"),
            Err(errors) => warn!(
                source,
                path = %path.display(),
                errors = %errors,
                "config file rejected; the old config keeps serving"
            ),
        }
    }
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = Option<()>;

#[cfg(unix)]
fn hangup_signal() -> Hangup {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGHUP; the config file is still polled");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangup_signal() -> Hangup {
    None
}

/// Resolves on the next SIGHUP; never when there is no handler.
#[cfg(unix)]
async fn next_hangup(hangup: &mut Hangup) {
    match hangup {
        Some(s) => {
            if s.recv().await.is_none() {
                // The signal stream ended: stop listening, keep polling.
                *hangup = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangup) {
    std::future::pending().await
}

#[cfg(test)]
mod tests;
