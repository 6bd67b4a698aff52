//! Side threads: work beside the data plane (the shadow sender, the
//! recorder's writer) that must never slow it.

use crate::config::SidePriority;

/// Puts the calling thread at `priority`. Under `Idle` (Linux `SCHED_IDLE`)
/// it runs only on CPU time no other thread wants, and a data-plane thread
/// that wakes preempts it at once; without that, a proxy thread waking
/// behind a busy side thread on its core could wait out the rest of the
/// side thread's time slice (+45% primary p99 with a live ×3 shadow, and a
/// p99 of 7 ms instead of 0.5 ms with the recorder on: docs/BENCHMARKS.md).
/// The price: on a saturated machine the side work waits and its queue
/// overflows, which is why it can be set to `Normal` where complete side
/// work matters more than the primary's tail. `what` names the thread in
/// the warning when the kernel refuses.
pub fn set_side_priority(priority: SidePriority, what: &str) {
    #[cfg(target_os = "linux")]
    if priority == SidePriority::Idle {
        use thread_priority::{
            set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
            ThreadPriority, ThreadSchedulePolicy,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(e) =
            set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
        {
            tracing::warn!(error = ?e, thread = what, "keeps normal CPU priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (priority, what);
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use thread_priority::unix::thread_schedule_policy;
    use thread_priority::{NormalThreadSchedulePolicy, ThreadSchedulePolicy};

    use super::*;

    fn policy_under(priority: SidePriority) -> ThreadSchedulePolicy {
        std::thread::spawn(move || {
            set_side_priority(priority, "test");
            thread_schedule_policy().unwrap()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn idle_is_sched_idle_and_normal_is_left_alone() {
        assert_eq!(SidePriority::default(), SidePriority::Idle);
        assert_eq!(
            policy_under(SidePriority::Idle),
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle)
        );
        assert_eq!(
            policy_under(SidePriority::Normal),
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other)
        );
    }
}
