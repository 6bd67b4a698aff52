//! The shadow sender: takes finished requests' mirror jobs from a bounded
//! queue and sends their copies on a runtime and connection pool of its
//! own, so shadow traffic never competes with the primary for the data
//! plane's threads or sockets, and by default at the lowest CPU priority
//! there is (`SCHED_IDLE`), so not for its cores either (`runtime.
//! mirror_priority`). The pool is the sender's own, on the data plane's
//! connector code (`upstream.rs`). Copies are bounded per route by
//! `max_in_flight` and `rate_limit`; whatever cannot be sent is dropped and
//! counted by reason. Answers are read to the end, metered, and compared
//! with the primary's.

mod copy;
mod coverage;
mod embed;
mod health;
mod job;
mod limits;
mod report;

pub(crate) use job::{Answer, Job};

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sluice_control::{set_side_priority, Config, EventLog, MirrorDiffs, Runtimes, SidePriority};
use sluice_filters::{Metrics, MirrorResult};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info};

use copy::Shadow;
use limits::Limits;

/// Jobs waiting for the sender; one more is dropped as `queue_full`.
pub(crate) const QUEUE_CAPACITY: usize = 1024;
/// Worker threads of the sender's own runtime.
const SENDER_THREADS: usize = 2;
/// How long stopping waits for copies still out.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// The request path's end of the queue. `submit` never waits.
#[derive(Clone)]
pub(crate) struct MirrorQueue {
    tx: mpsc::Sender<Job>,
}

impl MirrorQueue {
    /// Hands a job to the sender, or drops it and counts its copies as
    /// `queue_full` when the queue is full (or the sender has stopped).
    pub(crate) fn submit(&self, job: Job) {
        if let Err(e) = self.tx.try_send(job) {
            let job = match e {
                mpsc::error::TrySendError::Full(job) | mpsc::error::TrySendError::Closed(job) => {
                    job
                }
            };
            job.policy
                .metrics
                .count(MirrorResult::QueueFull, job.shadow_copies);
            if job.coverage_step.is_some() {
                job.policy.metrics.count_coverage("queue_full", 1);
            }
        }
    }
}

/// The running sender. Stops (dropping copies still queued) on drop.
pub(crate) struct MirrorSender {
    cancel: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

impl MirrorSender {
    /// Copies go to the shadow clusters of `config` (TLS and timeouts from
    /// there); differing answers are kept in `diffs`.
    pub(crate) fn start(
        config: &Config,
        diffs: Arc<MirrorDiffs>,
        events: Arc<EventLog>,
        priority: SidePriority,
        runtimes: &Runtimes,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<(MirrorSender, MirrorQueue)> {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let shadow = Shadow::new(config, metrics).map_err(std::io::Error::other)?;
        let set_priority = move || set_side_priority(priority, "mirror sender");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(SENDER_THREADS)
            .thread_name("sluice-mirror")
            .on_thread_start(set_priority)
            .enable_all()
            .build()?;
        runtimes.watch("mirror", runtime.handle().clone());
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-mirror".into())
            .spawn(move || {
                set_priority();
                runtime.block_on(run(rx, (diffs, events), shadow, token));
                runtime.shutdown_timeout(STOP_GRACE);
            })?;
        Ok((
            MirrorSender {
                cancel,
                thread: Some(thread),
            },
            MirrorQueue { tx },
        ))
    }

    pub(crate) fn stop(&mut self) {
        self.cancel.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MirrorSender {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How often a busy sender takes what the proxy queued. The proxy never wakes
/// a busy sender: a `try_send` wakes a receiver parked in `recv()`, and on a
/// busy core that was a context switch per mirrored request (1.38 per request
/// at 100% x3 in benches/compare.sh). Draining on a tick batches the copies;
/// they leave at most this late, which a shadow does not notice. An idle
/// sender (a tick found nothing) parks in `recv()` instead, so a proxy with
/// no mirror traffic has no thread waking 200 times a second.
const DRAIN_INTERVAL: Duration = Duration::from_millis(5);

async fn run(
    mut rx: mpsc::Receiver<Job>,
    (diffs, events): (Arc<MirrorDiffs>, Arc<EventLog>),
    shadow: Shadow,
    cancel: CancellationToken,
) {
    info!(capacity = QUEUE_CAPACITY, "mirror sender started");
    let mut limits = Limits::default();
    let mut prompts = coverage::Batcher::default();
    let tracker = TaskTracker::new();
    // Sends the job's copies; gives back its prompt when it was sampled
    // for coverage, to be embedded with the others of this drain.
    let mut send = |job: Job| -> Option<coverage::Prompt> {
        let prompt = coverage::prompt_of(&job);
        // A job sampled only for coverage has no copy (and no noise copy).
        if job.shadow_copies == 0 {
            return prompt;
        }
        let admitted = limits.admit(&job);
        if admitted.is_empty() {
            return prompt;
        }
        let embedding = if job.policy.embedder.is_some() {
            limits
                .admit_embedding(&job)
                .map_err(|reason| job.policy.metrics.count_embedding(reason.label()))
                .ok()
        } else {
            None
        };
        let (shadow, diffs, events) = (shadow.clone(), diffs.clone(), events.clone());
        let job = Arc::new(job);
        tracker.spawn(async move {
            let answers = shadow.send_all(job.clone(), admitted).await;
            let texts = report::report(&job, answers, &diffs);
            if let (Some(slot), Some(texts)) = (embedding, texts) {
                embed::compare(&shadow, &job, texts, (&events, &diffs)).await;
                drop(slot);
            }
        });
        prompt
    };
    'park: loop {
        // Idle: wait for the first job, however long.
        let job = tokio::select! {
            () = cancel.cancelled() => break,
            job = rx.recv() => job,
        };
        let Some(job) = job else { break };
        if let Some(p) = send(job) {
            prompts.add(p);
        }
        // Busy: take what has queued once per tick, until a tick finds nothing.
        loop {
            tokio::select! {
                () = cancel.cancelled() => break 'park,
                () = tokio::time::sleep(DRAIN_INTERVAL) => {}
            }
            let mut took_any = false;
            loop {
                match rx.try_recv() {
                    Ok(job) => {
                        took_any = true;
                        if let Some(p) = send(job) {
                            prompts.add(p);
                        }
                    }
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => break 'park,
                }
            }
            prompts.flush(&shadow, &tracker);
            if !took_any {
                continue 'park;
            }
        }
    }
    tracker.close();
    debug!(outstanding = tracker.len(), "mirror sender stopping");
    let _ = tokio::time::timeout(STOP_GRACE, tracker.wait()).await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
