//! Rotation: the token files are read every 250 ms, and any change of
//! their content reloads the whole set, so that an edit takes effect well
//! within a second and without a restart.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::Auth;

const POLL_EVERY: Duration = Duration::from_millis(250);

/// What a read of one file found. Content rather than mtime and length:
/// an edit within the same second to a secret of the same length changes
/// neither.
#[derive(PartialEq, Eq)]
enum Seen {
    Content(Vec<u8>),
    Unreadable(std::io::ErrorKind),
}

fn look(files: &[PathBuf]) -> Vec<Seen> {
    files
        .iter()
        .map(|f| match std::fs::read(f) {
            Ok(bytes) => Seen::Content(bytes),
            Err(e) => Seen::Unreadable(e.kind()),
        })
        .collect()
}

/// Watches `auth`'s token files until `cancel`; returns at once when
/// there are none. The first look reloads too: the files may have changed
/// between the start's read and this task's first turn.
pub(crate) async fn watch_token_files(auth: Arc<Auth>, cancel: CancellationToken) {
    let files = auth.files();
    if files.is_empty() {
        return;
    }
    let mut seen: Option<Vec<Seen>> = None;
    let mut poll = tokio::time::interval(POLL_EVERY);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = poll.tick() => {}
        }
        let now = look(&files);
        if seen.as_ref() == Some(&now) {
            continue;
        }
        let first = seen.is_none();
        seen = Some(now);
        auth.reload(first);
    }
}
