//! Sleeping until an arrival's intended start, inside the runtime.
//!
//! tokio's own timer rounds to the millisecond, too coarse for dispatch
//! lag (the fidelity goal is a p99 under 1 ms). A timer thread is exact
//! but costs a kernel wake-up per arrival and a hand-over to the runtime,
//! which is most of what a request cost at high rates. A `timerfd` set to
//! the next start is exact to the µs and is one more descriptor in the
//! runtime's own `epoll`: when the runtime is idle the kernel wakes it at
//! the start, as it would a sleeping thread; when it is busy reading
//! answers, the expiry comes back in the same `epoll_wait` as they do, and
//! no thread is woken for it.

use std::io;
use std::time::{Duration, Instant};

/// A one-shot timer the runtime waits on.
pub(super) struct Ticker {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

#[cfg(target_os = "linux")]
impl Ticker {
    /// Needs the runtime's IO driver.
    pub(super) fn new() -> io::Result<Ticker> {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        // CLOCK_MONOTONIC: the clock `std::time::Instant` reads.
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // Deprecated because a borrowed descriptor could be closed while
        // registered; this one is owned and moved in, so it is closed only
        // after the drop deregisters it (and `register` is `unsafe`, which
        // the workspace denies).
        #[allow(deprecated)]
        let fd = tokio::io::unix::AsyncFd::with_interest(fd, tokio::io::Interest::READABLE)?;
        Ok(Ticker { fd })
    }

    /// Returns at `due` (at once when it has passed).
    pub(super) async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
        let wait = due.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return Ok(());
        }
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = Timespec {
            tv_sec: i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        let spec = Itimerspec {
            it_interval: zero,
            it_value: value,
        };
        // Relative to now: the µs between reading the clock and setting the
        // timer make it that much late, which dispatch lag measures.
        timerfd_settime(self.fd.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
        // Bounded: the timer expires once; a wake-up without an expiry
        // (readiness cleared by an earlier read) waits again.
        loop {
            let mut ready = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut expirations)?)) {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl Ticker {
    pub(super) fn new() -> io::Result<Ticker> {
        Ok(Ticker {})
    }

    /// tokio's timer: to the millisecond, where there is no `timerfd`.
    pub(super) async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
        tokio::time::sleep_until(due.into()).await;
        Ok(())
    }
}

/// The longest single sleep, so that a stop is seen soon.
pub(super) const STOP_POLL: Duration = Duration::from_millis(50);
