//! Grows the process's file descriptor table once, at start, to the size a
//! busy proxy will reach.
//!
//! Linux grows a process's fd table by doubling, when a new fd does not fit
//! (past 256, 512, 1024 … open fds). In a multi-threaded process each growth
//! waits for an RCU grace period (`expand_fdtable` calls `synchronize_rcu`),
//! and the thread that opened the fd stalls for it: a data-plane thread
//! accepting a client or connecting upstream, with every stream queued behind
//! it. On the bench VM each stall was 12–20 ms, and they made the TTFT p99
//! overhead at 1k streams +1.35 … +4.28 ms, where single-threaded nginx paid
//! none (docs/BENCHMARKS.md, "The TTFT tail, found and fixed"). Opening one fd high up
//! and closing it again leaves the table at that size: the table never
//! shrinks, so the data plane never grows it.

use rustix::process::{getrlimit, Resource};

/// The largest table made up front: 64 Ki entries, about 0.5 MiB of kernel
/// memory. A process allowed more fds grows past it the usual way.
pub(crate) const MAX_PRESIZE: u64 = 1 << 16;

/// Grows the table to hold `min(RLIMIT_NOFILE, MAX_PRESIZE)` fds; returns
/// that size, or `None` when it could not (nothing else changes).
pub(crate) fn presize() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile).current.unwrap_or(MAX_PRESIZE);
    presize_to(limit.min(MAX_PRESIZE))
}

fn presize_to(size: u64) -> Option<u64> {
    let highest = i32::try_from(size.checked_sub(1)?).ok()?;
    // F_DUPFD_CLOEXEC: a copy of some open fd at the lowest free number
    // ≥ `highest`; both are closed again when they drop.
    let null = std::fs::File::open("/dev/null").ok()?;
    let copy = rustix::io::fcntl_dupfd_cloexec(&null, highest).ok()?;
    drop(copy);
    Some(size)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The table's size, from `/proc/self/status` (`FDSize:`).
    fn fd_table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("FDSize:")).unwrap();
        line["FDSize:".len()..].trim().parse().unwrap()
    }

    #[test]
    fn the_table_is_grown_once_and_stays_grown() {
        let limit = getrlimit(Resource::Nofile).current.unwrap_or(MAX_PRESIZE);
        let size = presize().expect("presize");
        assert_eq!(size, limit.min(MAX_PRESIZE));
        assert!(fd_table_size() >= size, "FDSize {}", fd_table_size());
        // Opening and closing fds afterwards leaves it as it is.
        let files: Vec<_> = (0..300)
            .map(|_| std::fs::File::open("/proc/self/stat"))
            .collect();
        drop(files);
        assert!(fd_table_size() >= size);
    }
}
