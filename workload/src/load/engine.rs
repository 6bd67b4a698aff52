//! The load engine: a timer thread and a tokio runtime that share the
//! schedule of intended starts, the journeys (steps in order, with their
//! delays; turns of a session with their think time), `max_in_flight`
//! (beyond it requests wait for a slot, counted, never dropped), the drain
//! at the end, and the closed loop that `--closed N` runs instead.
//!
//! Whoever finds arrivals due first claims them (see [`arrivals`]): the
//! runtime at the end of each request while it is busy, the timer thread
//! otherwise. The timer thread sleeps until its next wake-up (the next
//! intended time, or a window later on a dense schedule) and does not
//! spin: the kernel's wake-up slack (tens of µs) is measured, as part of
//! `dispatch_lag = sent − intended`, never hidden. It asks for `SCHED_FIFO`
//! (the lowest real-time priority) and keeps the normal policy where the
//! kernel refuses: on a core shared with the runtime's worker, a normal
//! timer thread that wakes waits out the rest of the worker's time slice
//! (milliseconds), and every arrival due meanwhile is late by that much. At
//! each wake-up it claims every arrival that is due and hands them over as
//! one batch through a channel to a dispatcher task on the runtime, which
//! spawns the journeys there: one cross-thread wake-up per batch, not one
//! per arrival, and no work for the timer thread beyond counting. Every time
//! is read from one monotonic clock (`std::time::Instant`, which the timer
//! thread can read; tokio's clock lives inside the runtime).

mod answers;
mod arrivals;
mod journey;
mod live;
mod replay;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Semaphore};

use std::collections::BTreeMap;

use super::client::{since, Client, Failure, Grpc, Outcome, Redis};
use super::mixed::Mixed;
use super::replay::Planned;
use super::scenario::{Scenario, Service, Step};
use super::schedule::{Intended, Schedule};
use arrivals::{Activity, Arrivals};

pub use answers::{Answer, AnswerTap};
pub use live::{LiveHistogram, LiveMeasures, RELATIVE_ERROR as LIVE_RELATIVE_ERROR};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// `Some(n)`: n users back to back instead of the schedule.
    pub closed: Option<usize>,
    /// How long requests still in flight get once the schedule is done.
    pub drain: Duration,
    /// Sent in `x-sluice-load`.
    pub run_id: String,
    /// Worker threads of the runtime.
    pub threads: usize,
}

/// Counters a progress display reads while the run goes on.
#[derive(Debug, Default)]
pub struct Live {
    /// Requests sent.
    pub sent: AtomicU64,
    /// Requests answered (any status) or failed.
    pub done: AtomicU64,
    pub failed: AtomicU64,
    /// Requests sent and not yet done.
    pub in_flight: AtomicU64,
    /// Requests waiting for a `max_in_flight` slot now.
    pub waiting: AtomicU64,
    /// Requests that ever waited for a slot.
    pub queued: AtomicU64,
    /// Journeys started and not yet ended.
    pub journeys: AtomicU64,
    /// Journeys started in all.
    pub started: AtomicU64,
    /// The gate measures of the requests ended so far (warm-up left out).
    pub measures: LiveMeasures,
    /// When the schedule's clock started (after the setup): unset while
    /// the setup runs.
    pub began: OnceLock<Instant>,
    /// Set to stop dispatching (Ctrl-C): the run drains and ends, marked
    /// `interrupted`.
    pub stop: AtomicBool,
    /// Set by a caller that reads the measured requests while the run goes
    /// (the capacity search's live signals); unset, none are kept.
    pub answers: OnceLock<AnswerTap>,
}

impl Live {
    /// A request ended: into the live measures, and to the tap when one
    /// is set (warm-up left out of both).
    pub(crate) fn ended(&self, o: &Outcome) {
        self.measures.observe(o);
        if let (false, Some(tap)) = (o.warmup, self.answers.get()) {
            tap.push(Answer::of(o));
        }
    }
}

/// What a run leaves: every request that ended, and what did not.
#[derive(Clone, Debug)]
pub struct RunOutput {
    pub outcomes: Vec<Outcome>,
    pub closed: Option<usize>,
    /// Journeys started (arrivals dispatched).
    pub journeys: u64,
    /// Of the schedule (or the closed run's length), µs.
    pub span_us: u64,
    /// The part of it that ran: `span_us`, or less when interrupted.
    pub ran_us: u64,
    pub queued: u64,
    /// Requests still in flight when the drain timed out.
    pub cut_in_flight: u64,
    /// Requests still waiting for a slot when the drain timed out.
    pub cut_waiting: u64,
    /// From the start to the end of the drain.
    pub elapsed: Duration,
    /// Stopped before the schedule's end (`Live::stop`).
    pub interrupted: bool,
    /// How each `setup:` step went, in order.
    pub setup: Vec<HookResult>,
    /// How each `teardown:` step went, in order.
    pub teardown: Vec<HookResult>,
}

/// One setup or teardown step's result (kept out of every summary).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HookResult {
    pub name: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// A grpc step's `grpc-status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

impl HookResult {
    fn of(step: &Step, o: &Outcome) -> HookResult {
        HookResult {
            name: step.name.clone(),
            ok: o.failure.is_none(),
            status: o.status,
            grpc_status: o.grpc.as_ref().and_then(|g| g.status),
            failure: o.failure,
        }
    }

    /// `status 409`, `grpc status 14`, `timeout`, …
    fn why(&self) -> String {
        match (self.grpc_status, self.status, self.failure) {
            (Some(g), _, Some(Failure::Status | Failure::RateLimited)) => {
                format!("grpc status {g}")
            }
            (_, Some(s), _) if !(200..=299).contains(&s) => format!("status {s}"),
            (_, _, Some(f)) => f.as_str().to_owned(),
            (_, _, None) => "ok".to_owned(),
        }
    }
}

/// Why nothing ran.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot start the load runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot start the timer thread: {0}")]
    Timer(std::io::Error),
    /// A setup step failed: no load was sent (the teardown ran).
    #[error("setup[{index}] (`{name}`) failed ({why}): no load was sent")]
    Setup {
        index: usize,
        name: String,
        why: String,
    },
    #[error("cannot set up the client: {0}")]
    Client(String),
}

/// The run's clients: the HTTP pool, the HTTP/2 pool of grpc steps and
/// one RESP connection per redis target.
pub(crate) struct Clients {
    pub(crate) http: Client,
    pub(crate) grpc: Grpc,
    pub(crate) redis: Redis,
}

/// What every journey shares.
pub(crate) struct Ctx {
    pub(crate) scenario: Scenario,
    pub(crate) clients: Clients,
    /// What the setup steps extracted: every journey starts with them.
    pub(crate) vars: BTreeMap<String, String>,
    pub(crate) slots: Semaphore,
    pub(crate) start: Instant,
    pub(crate) live: Arc<Live>,
    pub(crate) records: mpsc::UnboundedSender<Outcome>,
    /// Recorded journeys: a replay's (every arrival), or those sent beside
    /// a synthetic scenario's (the arrivals from `first` on).
    pub(crate) replay: Option<replay::Replayed>,
    /// The scenario's steps a synthetic journey runs: the first ones (the
    /// steps after them measure recorded requests).
    pub(crate) own_steps: usize,
    /// The open loop's schedule (empty in a closed loop).
    pub(crate) arrivals: Arrivals,
    /// Whether the runtime is busy: the timer thread leans on it then.
    pub(crate) activity: Arc<Activity>,
}

impl Ctx {
    /// A request ended: out of the in-flight count, into the live measures
    /// and the records; then the arrivals due by now are started from here
    /// (a busy runtime meets the schedule without the timer thread).
    pub(crate) fn ended(self: &Arc<Self>, outcome: Outcome) {
        let live = &self.live;
        live.in_flight.fetch_sub(1, Ordering::AcqRel);
        live.done.fetch_add(1, Ordering::AcqRel);
        if outcome.failure.is_some() {
            live.failed.fetch_add(1, Ordering::AcqRel);
        }
        live.ended(&outcome);
        // The receiver lives as long as the run.
        let _ = self.records.send(outcome);
        if !live.stop.load(Ordering::Acquire) {
            let due = self.arrivals.claim(Instant::now());
            start_journeys(self, due);
        }
    }
}

/// Polls of the drain: every 10 ms.
const DRAIN_POLL: Duration = Duration::from_millis(10);
/// The timer thread's longest sleep, so that a stop is seen soon.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Runs `schedule` (already sharded) against the scenario's target.
pub fn run(
    scenario: &Scenario,
    schedule: &Schedule,
    options: &RunOptions,
    live: Arc<Live>,
) -> Result<RunOutput, EngineError> {
    run_with(
        scenario,
        schedule,
        None,
        scenario.steps.len(),
        options,
        live,
    )
}

/// Runs a replay: `schedule` is the [`crate::load::Replay`]'s (already
/// sharded), and arrival k sends the recorded requests of `journeys[k]`
/// (of the scenario's `replay`) at their planned times.
pub fn run_replay(
    scenario: &Scenario,
    schedule: &Schedule,
    journeys: &[Vec<Planned>],
    options: &RunOptions,
    live: Arc<Live>,
) -> Result<RunOutput, EngineError> {
    if scenario.replay.is_none() {
        return Err(EngineError::Client(
            "run_replay needs a scenario with `workload.replay`".to_owned(),
        ));
    }
    if options.closed.is_some() {
        return Err(EngineError::Client(
            "a replay keeps the recorded times: it runs open loop only".to_owned(),
        ));
    }
    let replayed = replay::Replayed {
        recording: None,
        journeys: journeys.to_vec(),
        first: 0,
    };
    let own = scenario.steps.len();
    run_with(scenario, schedule, Some(replayed), own, options, live)
}

/// Runs a synthetic scenario with recorded requests beside it: `schedule`
/// is the [`Mixed`]'s (already sharded); an arrival below `mixed.first`
/// runs the scenario's own steps, one from it on sends the recorded
/// requests of its journey.
pub fn run_mixed(
    scenario: &Scenario,
    schedule: &Schedule,
    mixed: &Mixed,
    options: &RunOptions,
    live: Arc<Live>,
) -> Result<RunOutput, EngineError> {
    if scenario.replay.is_some() {
        return Err(EngineError::Client(
            "run_mixed needs a synthetic scenario: a replay's recording takes the requests"
                .to_owned(),
        ));
    }
    if options.closed.is_some() {
        return Err(EngineError::Client(
            "recorded requests keep their times: a mixed run is open loop only".to_owned(),
        ));
    }
    if mixed.own_steps > scenario.steps.len() {
        return Err(EngineError::Client(format!(
            "the mix names {} own steps; the scenario has {}",
            mixed.own_steps,
            scenario.steps.len()
        )));
    }
    let replayed = replay::Replayed {
        recording: Some(mixed.recording.clone()),
        journeys: mixed.journeys.clone(),
        first: mixed.first,
    };
    let own = mixed.own_steps;
    run_with(scenario, schedule, Some(replayed), own, options, live)
}

fn run_with(
    scenario: &Scenario,
    schedule: &Schedule,
    replay: Option<replay::Replayed>,
    own_steps: usize,
    options: &RunOptions,
    live: Arc<Live>,
) -> Result<RunOutput, EngineError> {
    let workers = options.threads.max(1);
    let activity = Arc::new(Activity::new(workers));
    let (parking, unparked) = (activity.clone(), activity.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .on_thread_park(move || parking.parking())
        .on_thread_unpark(move || unparked.unparked())
        .build()
        .map_err(EngineError::Runtime)?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let all = scenario
        .setup
        .iter()
        .chain(&scenario.steps)
        .chain(&scenario.teardown);
    let targets: Vec<String> = all
        .filter(|s| s.service == Service::Redis)
        .filter_map(|s| s.target.clone())
        .collect();
    let clients = Clients {
        http: Client::new(
            &options.run_id,
            &scenario.target.ca_certs,
            scenario.target.max_connections,
        )
        .map_err(EngineError::Client)?,
        grpc: Grpc::new(&options.run_id, &scenario.target.ca_certs).map_err(EngineError::Client)?,
        redis: runtime.block_on(Redis::connect(targets)),
    };
    let mut vars = BTreeMap::new();
    let mut setup = Vec::new();
    for (index, step) in scenario.setup.iter().enumerate() {
        let o = runtime.block_on(journey::hook(&clients, scenario, step, &mut vars));
        let r = HookResult::of(step, &o);
        setup.push(r.clone());
        if !r.ok {
            let mut teardown_vars = vars.clone();
            teardown(&runtime, &clients, scenario, &mut teardown_vars);
            return Err(EngineError::Setup {
                index,
                name: r.name.clone(),
                why: r.why(),
            });
        }
    }
    // The schedule's clock starts once the setup is done.
    let start = Instant::now();
    let _ = live.began.set(start);
    let ctx = Arc::new(Ctx {
        scenario: scenario.clone(),
        clients,
        vars,
        slots: Semaphore::new(scenario.max_in_flight.min(Semaphore::MAX_PERMITS)),
        start,
        live: live.clone(),
        records: tx,
        own_steps,
        replay,
        arrivals: Arrivals::new(
            match options.closed {
                None => schedule.arrivals.clone(),
                Some(_) => Vec::new(),
            },
            start,
        ),
        activity,
    });
    let span_us = schedule.span_us;
    let journeys = match options.closed {
        None => {
            let (batches, due) = mpsc::unbounded_channel();
            let dispatcher = runtime.spawn(dispatch(ctx.clone(), due));
            let c = ctx.clone();
            let timer = std::thread::Builder::new()
                .name("sluice-load-timer".into())
                .spawn(move || timer(&batches, &c))
                .map_err(EngineError::Timer)?;
            // The thread ends once every arrival is claimed, and with it the
            // channel, so the dispatcher ends once it spawned its batches.
            let _ = timer.join();
            let _ = runtime.block_on(dispatcher);
            ctx.arrivals.claimed()
        }
        Some(users) => runtime.block_on(closed_loop(ctx.clone(), users, span_us)),
    };
    let ran_us = if live.stop.load(Ordering::Acquire) {
        since(start, Instant::now()).min(span_us)
    } else {
        span_us
    };
    // The drain: wait for the journeys, up to `drain`.
    let deadline = Instant::now() + options.drain;
    let polls = options.drain.as_millis() / DRAIN_POLL.as_millis() + 1;
    for _ in 0..polls {
        if live.journeys.load(Ordering::Acquire) == 0 || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(DRAIN_POLL);
    }
    let cut_in_flight = live.in_flight.load(Ordering::Acquire);
    let cut_waiting = live.waiting.load(Ordering::Acquire);
    let elapsed = start.elapsed();
    let mut vars = ctx.vars.clone();
    let teardown = teardown(&runtime, &ctx.clients, scenario, &mut vars);
    // Dropping the runtime cancels what is left: it was counted as cut.
    runtime.shutdown_timeout(Duration::ZERO);
    drop(ctx);
    let mut outcomes = Vec::new();
    while let Ok(o) = rx.try_recv() {
        outcomes.push(o);
    }
    Ok(RunOutput {
        outcomes,
        closed: options.closed,
        journeys,
        span_us,
        ran_us,
        queued: live.queued.load(Ordering::Acquire),
        cut_in_flight,
        cut_waiting,
        elapsed,
        interrupted: live.stop.load(Ordering::Acquire),
        setup,
        teardown,
    })
}

/// Every teardown step, in order, whatever the ones before did.
fn teardown(
    runtime: &tokio::runtime::Runtime,
    clients: &Clients,
    scenario: &Scenario,
    vars: &mut BTreeMap<String, String>,
) -> Vec<HookResult> {
    let mut out = Vec::new();
    for step in &scenario.teardown {
        let o = runtime.block_on(journey::hook(clients, scenario, step, vars));
        out.push(HookResult::of(step, &o));
    }
    out
}

/// Arrivals claimed at one wake-up of the timer thread.
type Batch = Vec<Intended>;

/// Sleeps until the next intended start (past it by the grace while the
/// runtime is busy and claims arrivals itself) and sends every arrival then
/// due and unclaimed to [`dispatch`] as one batch; ends once all are claimed.
fn timer(batches: &mpsc::UnboundedSender<Batch>, ctx: &Ctx) {
    realtime_priority();
    ctx.activity.register_timer();
    let mut last_wake = ctx.start;
    // Bounded: each turn sleeps towards the next wake-up (at most
    // STOP_POLL) or claims at least one arrival.
    while let Some(at) = ctx.arrivals.wake_at(last_wake) {
        if ctx.live.stop.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        if at > now {
            ctx.activity.sleep((at - now).min(STOP_POLL));
            continue;
        }
        let batch = ctx.arrivals.claim(now).to_vec();
        if batch.is_empty() {
            continue;
        }
        last_wake = now;
        let n = batch.len() as u64;
        ctx.live.journeys.fetch_add(n, Ordering::AcqRel);
        ctx.live.started.fetch_add(n, Ordering::AcqRel);
        // The dispatcher lives until this sender is dropped.
        if batches.send(batch).is_err() {
            ctx.live.journeys.fetch_sub(n, Ordering::AcqRel);
            return;
        }
    }
}

/// The timer thread's policy: `SCHED_FIFO` at the lowest real-time
/// priority where the kernel allows it (root, `CAP_SYS_NICE`, or an
/// `RLIMIT_RTPRIO`), else the normal one. It cannot hog the core: it only
/// sleeps, reads the schedule and sends batches (and Linux throttles
/// real-time threads at 95% of each second).
fn realtime_priority() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{
            set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy,
            ThreadPriority, ThreadSchedulePolicy,
        };
        let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
        match set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, fifo) {
            Ok(()) => tracing::debug!("load timer thread on SCHED_FIFO"),
            Err(e) => {
                tracing::info!(error = ?e, "load timer thread keeps the normal policy");
            }
        }
    }
}

/// Spawns the journeys of each batch on the runtime, in order; ends when
/// the timer thread is done.
async fn dispatch(ctx: Arc<Ctx>, mut batches: mpsc::UnboundedReceiver<Batch>) {
    while let Some(batch) = batches.recv().await {
        for a in batch {
            spawn_journey(&ctx, a);
        }
    }
}

/// Counts `due` (claimed on the runtime) as started and spawns them.
fn start_journeys(ctx: &Arc<Ctx>, due: &[Intended]) {
    if due.is_empty() {
        return;
    }
    let n = due.len() as u64;
    ctx.live.journeys.fetch_add(n, Ordering::AcqRel);
    ctx.live.started.fetch_add(n, Ordering::AcqRel);
    for a in due {
        spawn_journey(ctx, *a);
    }
}

/// One journey's task. Counted out of `live.journeys` by the journey
/// itself; the drain waits for them.
fn spawn_journey(ctx: &Arc<Ctx>, a: Intended) {
    match &ctx.replay {
        // Boxed: the task holds a pointer, not the whole journey (moving it
        // into the task was a tenth of a request's time).
        Some(r) if a.index >= r.first => {
            tokio::spawn(Box::pin(replay::journey(ctx.clone(), a)));
        }
        _ => {
            let due = ctx.arrivals.due(&a);
            tokio::spawn(Box::pin(journey::journey(ctx.clone(), a, due)));
        }
    }
}

/// `users` journeys at a time, each starting when the one before it ends,
/// until the run's length has passed; the intended time is the send time.
async fn closed_loop(ctx: Arc<Ctx>, users: usize, span_us: u64) -> u64 {
    let next = Arc::new(AtomicU64::new(0));
    let warmup_us = u64::try_from(ctx.scenario.plan.warmup.as_micros()).unwrap_or(0);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..users {
        let (ctx, next) = (ctx.clone(), next.clone());
        tasks.spawn(async move {
            // Bounded by the run's length; each journey takes some time.
            loop {
                let now = Instant::now();
                let at_us = since(ctx.start, now);
                if at_us >= span_us || ctx.live.stop.load(Ordering::Acquire) {
                    break;
                }
                let a = Intended {
                    index: next.fetch_add(1, Ordering::AcqRel),
                    at_us,
                    stage: 0,
                    warmup: at_us < warmup_us,
                };
                ctx.live.journeys.fetch_add(1, Ordering::AcqRel);
                ctx.live.started.fetch_add(1, Ordering::AcqRel);
                journey::journey(ctx.clone(), a, now).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    next.load(Ordering::Acquire)
}
