//! The recorder's memory of recent lines, for feedback scenarios: the last
//! trace lines written (already redacted, as in the file), bounded by count
//! and by bytes, with each line's route, cluster, status and wall-clock
//! arrival so that a breach's window can be cut out of it without reading
//! the files back.
//!
//! Why a ring and not the files: the files rotate, may hit `max_bytes`
//! (the ring keeps going), may be moved away by the operator, and would
//! have to be parsed whole to find a window's lines; the ring costs one
//! copy of each line on the writer thread (never on the request path) and
//! a lock taken once per line there and once per breach here.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Lines kept at most.
pub(crate) const RING_LINES: usize = 50_000;
/// Bytes of lines kept at most.
pub(crate) const RING_BYTES: usize = 32 * 1024 * 1024;

/// One kept line.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    /// The arrival, µs since the epoch.
    pub wall_us: i64,
    pub route: String,
    pub cluster: String,
    pub status: Option<u16>,
    /// The trace line as written, without its newline.
    pub line: Vec<u8>,
}

/// What a window of the ring holds.
#[derive(Debug, Default)]
pub(crate) struct Cut {
    /// In arrival order.
    pub lines: Vec<Kept>,
    /// Lines of the window may have been dropped to make room: the oldest
    /// dropped line arrived within it (or after its start).
    pub truncated: bool,
}

#[derive(Debug)]
pub(crate) struct Recent {
    /// Set while the live config has `feedback:`: without it the writer
    /// keeps nothing (no copy, no memory).
    enabled: AtomicBool,
    inner: Mutex<Ring>,
    max_lines: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Ring {
    lines: VecDeque<Kept>,
    bytes: usize,
    /// The latest arrival of a line dropped to make room.
    dropped_until: Option<i64>,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent::with_limits(RING_LINES, RING_BYTES)
    }
}

impl Recent {
    pub(crate) fn with_limits(max_lines: usize, max_bytes: usize) -> Recent {
        Recent {
            enabled: AtomicBool::new(false),
            inner: Mutex::new(Ring::default()),
            max_lines: max_lines.max(1),
            max_bytes,
        }
    }

    /// Whether the writer should keep its lines here.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns keeping on or off; off forgets what was kept.
    pub(crate) fn set_enabled(&self, on: bool) {
        if !self.enabled.swap(on, Ordering::Relaxed) || on {
            return;
        }
        let mut ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        *ring = Ring::default();
    }

    /// Keeps `kept`, dropping the oldest lines past either bound. A line
    /// larger than the byte bound alone is not kept.
    pub(crate) fn push(&self, kept: Kept) {
        let mut ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let len = kept.line.len();
        if len > self.max_bytes {
            ring.dropped_until = Some(
                ring.dropped_until
                    .map_or(kept.wall_us, |d| d.max(kept.wall_us)),
            );
            return;
        }
        while ring.lines.len() >= self.max_lines || ring.bytes + len > self.max_bytes {
            let Some(old) = ring.lines.pop_front() else {
                break;
            };
            ring.bytes -= old.line.len();
            ring.dropped_until = Some(
                ring.dropped_until
                    .map_or(old.wall_us, |d| d.max(old.wall_us)),
            );
        }
        ring.bytes += len;
        ring.lines.push_back(kept);
    }

    /// The lines of `route` that arrived in `[from_us, to_us]`.
    pub(crate) fn window(&self, route: &str, from_us: i64, to_us: i64) -> Cut {
        let ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut lines: Vec<Kept> = ring
            .lines
            .iter()
            .filter(|k| k.route == route && (from_us..=to_us).contains(&k.wall_us))
            .cloned()
            .collect();
        // Lines are written as requests end; the window is by arrival.
        lines.sort_by_key(|k| k.wall_us);
        Cut {
            lines,
            truncated: ring.dropped_until.is_some_and(|d| d >= from_us),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn kept(wall_us: i64, route: &str, bytes: usize) -> Kept {
        Kept {
            wall_us,
            route: route.into(),
            cluster: "c".into(),
            status: Some(200),
            line: vec![b'x'; bytes],
        }
    }

    #[test]
    fn a_window_is_the_routes_lines_by_arrival() {
        let recent = Recent::with_limits(10, 1000);
        for (at, route) in [
            (5, "chat"),
            (1, "chat"),
            (3, "other"),
            (9, "chat"),
            (12, "chat"),
        ] {
            recent.push(kept(at, route, 10));
        }
        let cut = recent.window("chat", 1, 9);
        let at: Vec<i64> = cut.lines.iter().map(|k| k.wall_us).collect();
        assert_eq!(at, [1, 5, 9]);
        assert!(!cut.truncated);
    }

    #[test]
    fn the_ring_is_bounded_by_lines_and_bytes_and_says_what_it_lost() {
        let recent = Recent::with_limits(3, 1000);
        for at in 1..=5 {
            recent.push(kept(at, "chat", 10));
        }
        let cut = recent.window("chat", 0, 100);
        assert_eq!(
            cut.lines.iter().map(|k| k.wall_us).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert!(cut.truncated);
        // A window that starts after the last line dropped lost nothing.
        assert!(!recent.window("chat", 3, 100).truncated);
        // Turned off (the config dropped `feedback:`), it forgets.
        recent.set_enabled(true);
        assert!(recent.enabled());
        recent.set_enabled(false);
        assert!(!recent.enabled());
        assert!(recent.window("chat", 0, 100).lines.is_empty());

        let bytes = Recent::with_limits(100, 25);
        for at in 1..=3 {
            bytes.push(kept(at, "chat", 10));
        }
        let cut = bytes.window("chat", 0, 100);
        assert_eq!(
            cut.lines.iter().map(|k| k.wall_us).collect::<Vec<_>>(),
            [2, 3]
        );
        // One line over the whole bound is not kept.
        bytes.push(kept(4, "chat", 26));
        assert_eq!(bytes.window("chat", 0, 100).lines.len(), 2);
        assert!(bytes.window("chat", 4, 100).truncated);
    }
}
