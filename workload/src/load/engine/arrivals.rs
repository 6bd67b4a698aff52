//! The schedule as the timer thread and the runtime share it: whoever finds
//! arrivals due first claims them.
//!
//! Why both: a timer thread that wakes for every arrival costs two context
//! switches a request (itself, then the runtime it wakes), which set the
//! open loop's ceiling (15,000 req/s on one core against wrk's 139,600).
//! While the runtime is busy it meets the schedule anyway: every request
//! that ends claims the arrivals due by then, on the spot. The timer thread
//! then sleeps [`GRACE`] past the next due time, as a backstop, and wakes
//! once per grace instead of once per arrival. When the runtime's workers
//! all park (nothing left to do), they wake the timer thread, which sleeps
//! to the exact due time again: an idle runtime still gets each arrival on
//! time from the `SCHED_FIFO` thread, as before.
//!
//! Where the schedule is dense (the next [`DENSE_SPAN`] arrivals under
//! [`DENSE_GAP`] apart, 5,000 req/s and more) the timer thread wakes at most
//! once a [`WINDOW`], 1 ms as wrk2's and oha's ticks, and hands over what
//! fell due in it: at 30,000 req/s thirty arrivals a wake-up, for at most a
//! window of dispatch lag, which is measured like any other. Batches that
//! size cost about 15% less CPU a request than the 200 µs window before
//! them (the target wakes once a batch, not once a request). A sparse
//! schedule (2,000 req/s, even Poisson) keeps its exact wake-ups.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::load::schedule::Intended;

/// How long past a due time the timer thread leaves an arrival to a busy
/// runtime before it hands the arrival over itself: the most a busy
/// runtime that ends no request can make an arrival late by.
pub(crate) const GRACE: Duration = Duration::from_micros(200);

/// The shortest spacing of the timer thread's wake-ups on a dense schedule.
pub(crate) const WINDOW: Duration = Duration::from_millis(1);
/// A schedule is dense where the next [`DENSE_SPAN`] arrivals fall within
/// [`DENSE_GAP`] each (5,000 req/s and more): sparser ones keep exact
/// wake-ups, so the window never adds lag at 2,000 req/s.
const DENSE_SPAN: usize = 8;
const DENSE_GAP: Duration = Duration::from_micros(200);

/// The intended starts and the first one not claimed yet.
pub(crate) struct Arrivals {
    list: Vec<Intended>,
    start: Instant,
    next: AtomicUsize,
}

impl Arrivals {
    pub(crate) fn new(list: Vec<Intended>, start: Instant) -> Arrivals {
        Arrivals {
            list,
            start,
            next: AtomicUsize::new(0),
        }
    }

    /// When arrival `a` is due.
    pub(crate) fn due(&self, a: &Intended) -> Instant {
        self.start + Duration::from_micros(a.at_us)
    }

    /// When the timer thread should next wake, its last wake-up having
    /// been at `last_wake`: the first unclaimed arrival's due time, or a
    /// [`WINDOW`] after the last wake-up where the schedule ahead is dense
    /// and that is later. `None` once all are claimed.
    pub(crate) fn wake_at(&self, last_wake: Instant) -> Option<Instant> {
        let first = self.next.load(Ordering::Acquire);
        let a = self.list.get(first)?;
        let due = self.due(a);
        let span_us = (DENSE_SPAN as u64).saturating_mul(DENSE_GAP.as_micros() as u64);
        let dense = self
            .list
            .get(first + DENSE_SPAN)
            .is_some_and(|b| b.at_us.saturating_sub(a.at_us) < span_us);
        Some(if dense {
            due.max(last_wake + WINDOW)
        } else {
            due
        })
    }

    /// How many were claimed.
    pub(crate) fn claimed(&self) -> u64 {
        self.next.load(Ordering::Acquire) as u64
    }

    /// Claims every arrival due by `now` that nobody has claimed: each one
    /// goes to exactly one caller.
    pub(crate) fn claim(&self, now: Instant) -> &[Intended] {
        let range = self.claim_range(now);
        self.list.get(range).unwrap_or_default()
    }

    fn claim_range(&self, now: Instant) -> Range<usize> {
        // Bounded: a failed exchange means another caller claimed at least
        // one arrival, and there are `len` of them.
        for _ in 0..=self.list.len() {
            let first = self.next.load(Ordering::Acquire);
            let due = self
                .list
                .get(first..)
                .unwrap_or_default()
                .iter()
                .take_while(|a| self.due(a) <= now)
                .count();
            if due == 0 {
                return 0..0;
            }
            let end = first + due;
            if self
                .next
                .compare_exchange(first, end, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return first..end;
            }
        }
        0..0
    }
}

/// Whether the runtime's workers are busy, as their park and unpark hooks
/// tell it, and the timer thread to wake when the last one parks.
pub(crate) struct Activity {
    workers: usize,
    parked: AtomicUsize,
    /// The timer thread sleeps past a due time, counting on a busy runtime.
    timer_waits: AtomicBool,
    timer: OnceLock<Thread>,
}

impl Activity {
    pub(crate) fn new(workers: usize) -> Activity {
        Activity {
            workers,
            parked: AtomicUsize::new(0),
            timer_waits: AtomicBool::new(false),
            timer: OnceLock::new(),
        }
    }

    /// A worker is about to park: if it is the last and the timer thread
    /// counts on the runtime, the timer thread must take over now.
    pub(crate) fn parking(&self) {
        self.parked.fetch_add(1, Ordering::SeqCst);
        if self.timer_waits.load(Ordering::SeqCst) {
            if let Some(t) = self.timer.get() {
                t.unpark();
            }
        }
    }

    pub(crate) fn unparked(&self) {
        // Saturating: a hook called out of order must not wrap the count.
        let _ = self
            .parked
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |p| p.checked_sub(1));
    }

    fn busy(&self) -> bool {
        self.parked.load(Ordering::SeqCst) < self.workers
    }

    /// Called once by the timer thread, so that a parking worker can wake it.
    pub(crate) fn register_timer(&self) {
        let _ = self.timer.set(std::thread::current());
    }

    /// The timer thread's sleep towards a due time `wait` away: exactly
    /// that long while the runtime is idle; while it is busy, up to
    /// [`GRACE`] longer, cut short when the last worker parks.
    pub(crate) fn sleep(&self, wait: Duration) {
        if self.busy() {
            self.timer_waits.store(true, Ordering::SeqCst);
            // Checked again after the flag is up: a worker parking between
            // the two reads sees the flag and wakes this thread.
            if self.busy() {
                std::thread::park_timeout(wait + GRACE);
                self.timer_waits.store(false, Ordering::SeqCst);
                return;
            }
            self.timer_waits.store(false, Ordering::SeqCst);
        }
        std::thread::sleep(wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: &[u64]) -> Vec<Intended> {
        us.iter()
            .enumerate()
            .map(|(i, &at_us)| Intended {
                index: i as u64,
                at_us,
                stage: 0,
                warmup: false,
            })
            .collect()
    }

    #[test]
    fn claims_only_what_is_due_and_each_arrival_once() {
        let start = Instant::now();
        let arrivals = Arrivals::new(at(&[0, 10, 20, 1_000_000]), start);
        assert!(arrivals.claim(start).len() == 1);
        assert!(arrivals.claim(start).is_empty(), "claimed twice");
        let claimed = arrivals.claim(start + Duration::from_micros(25));
        assert_eq!(
            claimed.iter().map(|a| a.index).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(arrivals.claimed(), 3);
        assert_eq!(
            arrivals.wake_at(start),
            Some(start + Duration::from_secs(1)),
            "the next wake-up is the first unclaimed arrival's due time"
        );
        assert_eq!(arrivals.claim(start + Duration::from_secs(2)).len(), 1);
        assert_eq!(arrivals.wake_at(start), None);
        assert!(arrivals.claim(start + Duration::from_secs(3)).is_empty());
    }

    #[test]
    fn a_dense_schedule_is_woken_for_once_a_window_and_a_sparse_one_at_each_due_time() {
        let start = Instant::now();
        let long_ago = start - Duration::from_secs(1);
        let just_now = start;
        // 50 µs apart: dense.
        let dense: Vec<u64> = (0..20).map(|i| 1_000 + 50 * i).collect();
        let arrivals = Arrivals::new(at(&dense), start);
        let first_due = start + Duration::from_micros(1_000);
        assert_eq!(arrivals.wake_at(long_ago), Some(first_due));
        assert_eq!(
            arrivals.wake_at(just_now),
            Some(first_due),
            "due after the window"
        );
        let late = start + Duration::from_micros(900);
        assert_eq!(
            arrivals.wake_at(late),
            Some(late + WINDOW),
            "a window after the last"
        );
        // 500 µs apart: sparse, woken for at each due time.
        let sparse: Vec<u64> = (0..20).map(|i| 1_000 + 500 * i).collect();
        let arrivals = Arrivals::new(at(&sparse), start);
        assert_eq!(arrivals.wake_at(late), Some(first_due));
        // The last few: nothing DENSE_SPAN ahead, so exact.
        let few = Arrivals::new(at(&[1_000, 1_010]), start);
        assert_eq!(few.wake_at(late), Some(first_due));
        assert!(Arrivals::new(Vec::new(), start).wake_at(late).is_none());
    }

    #[test]
    fn racing_claimers_split_the_arrivals_without_loss_or_repeat() {
        let start = Instant::now();
        let list: Vec<u64> = (0..20_000).collect();
        let arrivals = Arrivals::new(at(&list), start);
        let seen: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut mine = Vec::new();
                        // Bounded: 20 ms of schedule, claimed as time passes.
                        let deadline = Instant::now() + Duration::from_secs(5);
                        while arrivals.claimed() < 20_000 && Instant::now() < deadline {
                            mine.extend(arrivals.claim(Instant::now()).iter().map(|a| a.index));
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let mut all: Vec<u64> = seen.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, list, "every arrival claimed exactly once");
    }

    #[test]
    fn a_busy_runtime_lets_the_timer_wait_past_the_due_time_until_it_parks() {
        let activity = std::sync::Arc::new(Activity::new(1));
        activity.register_timer();
        // Idle (the worker parked): the sleep is the wait, not the grace.
        activity.parking();
        let t = Instant::now();
        activity.sleep(Duration::from_micros(100));
        let idle = t.elapsed();
        assert!(idle >= Duration::from_micros(100), "{idle:?}");
        // Busy: a long wait is cut short by the worker parking.
        activity.unparked();
        let a = activity.clone();
        let parker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            a.parking();
        });
        let t = Instant::now();
        activity.sleep(Duration::from_secs(30));
        let waited = t.elapsed();
        assert!(parker.join().is_ok());
        // The idle path would have slept the whole 30 s.
        assert!(
            waited < Duration::from_secs(10),
            "the parking worker did not wake the timer: {waited:?}"
        );
    }
}
