//! `sluice load`: open-loop load from a scenario, measured from the
//! intended send time. Pure parts (the schedule) first, then the drivers.

mod client;
mod engine;
mod mixed;
mod prompt;
mod replay;
mod scenario;
mod schedule;
mod summary;

pub use client::{
    connector as http_connector, mentions_context_limit, model_context, Cache, Failure, GrpcReply,
    Outcome, LOAD_HEADER,
};
pub use engine::{
    run, run_mixed, run_replay, Answer, AnswerTap, EngineError, HookResult, Live, LiveHistogram,
    LiveMeasures, RunOptions, RunOutput, LIVE_RELATIVE_ERROR,
};
pub use mixed::Mixed;
pub use prompt::{estimated_tokens, sized_prompt, FILLER_WORDS};
pub use replay::{
    prompts as trace_prompts, Bound, LlmApi, Planned, Recorded, Recording, Replay, ReplayOptions,
    SizedPrompt, HASH_BLOCK_TOKENS,
};
pub(crate) use replay::{recorded as recorded_request, unit as seeded_unit};
pub(crate) use scenario::recorded_step;
pub use scenario::{
    context_limit, parse_sla, Body, ContextLimit, ContextSweep, Data, Dist, Ended, JsonPath,
    LimitReason, ReplaySource, Scenario, Service, Sessions, Step, SweepResult, SweepStage, Target,
    Template, TraceData, When, DEFAULT_MAX_IN_FLIGHT, DEFAULT_TIMEOUT, QUANTILE_PROBS, REPLAY_STEP,
    TTFT_JUMP_FACTOR, TTFT_JUMP_MIN_MS,
};
pub use schedule::{
    mean_gap_s, Intended, Plan, Process, Schedule, ScheduleError, Segment, Shard, MAX_ARRIVALS,
};
pub use summary::{
    merge_runs, summarize, Dispatch, Goodput, GroupSummary, Lineage, ReplayRun, RunInfo, RunReport,
    Seen, StageSummary, StepSummary, ThresholdResult, INTERRUPTED, MEASURES, RUN_VERSION,
    THRESHOLDS_FAILED,
};
