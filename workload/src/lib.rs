//! The load-testing half of sluice: trace readers and writers, workload
//! fits, scenarios, the open-loop load engine, capacity search, reports,
//! baselines and lineage. It shares the proxy's definitions through
//! `sluice-filters` (the token meter, units, the trace schema) and never
//! depends on `sluice-proxy` or pingora: `tests/e2e/layout.rs` fails if it does.
//!
//! Pure models first (they take data and an RNG), then the thin drivers
//! (dispatcher, clients, writers). So far: trace files, their
//! statistics, and the fit of a workload model to a trace.

mod capacity;
mod feedback;
mod files;
mod fit;
mod lineage;
// The trace and scenario fuzz targets' invariants, public so that `fuzz/` can
// call them; not API.
#[doc(hidden)]
pub mod fuzzing;
mod load;
mod report;
mod trace;

pub use capacity::{
    knee, margin, measure, next_stage, over_saturated, p99_token_slope, recommend, score,
    search as capacity_search, slope_interval, stalled, theil_sen, trend, worst, Bounds,
    CapacityError, CapacityOptions, CapacityReport, Knee, KneeResult, Next, Observer, Pchip, Probe,
    Purpose, Recommendation, Scored, SearchRules, SlaBound, SlaCheck, StageProgress, StageResult,
    StageSignals, TokenBin, TokenSlope, Trend, Weights, CAPACITY_VERSION, DEFAULT_KNEE_BOUND,
    DEFAULT_SLOPE_BOUND_MS, SLOPE_MIN_REQUESTS,
};
pub use feedback::{
    feedback_rows, feedback_table, mix_feedback, read_feedback_dir, FeedbackClock, FeedbackMix,
    FeedbackRow, FeedbackRun, Saved as SavedFeedback, FEEDBACK_STEP_PREFIX,
};
pub use files::{partial_path, sha256_file, write_atomically};
pub use fit::{
    compare_table, fit_file, fit_gaps, fit_to, write_model, ArrivalFit, ArrivalModel, Candidate,
    Cap, FitBuilder, FitError, FitOptions, Fitted, Quantiles, RateCurve, SessionModel,
    SessionsReport, Source, ThinkTime, TokenCorrelation, TokenLengths, Window, WorkloadModel,
    KL_DEFINITION, MAX_WINDOWS, MIN_REQUESTS, MODEL_VERSION,
};
pub use lineage::{
    capacity_artifact, model_artifact, read_dir as read_lineage_dir, report_artifact, run_artifact,
    scenario_artifact, write_artifact, Corrupt, Graph as LineageGraph, Walk as LineageWalk,
    LINEAGE_DIR, LINEAGE_DIR_ENV,
};
pub use load::{
    context_limit, mentions_context_limit, model_context, ContextLimit, ContextSweep, LimitReason,
    SweepResult, SweepStage, TTFT_JUMP_FACTOR, TTFT_JUMP_MIN_MS,
};
pub use load::{
    estimated_tokens, http_connector, mean_gap_s, merge_runs, parse_sla, run as run_load,
    run_mixed, run_replay, sized_prompt, summarize, trace_prompts, Answer, AnswerTap, Body, Bound,
    Cache, Data, Dispatch, Dist, Ended, EngineError, Failure, Goodput, GroupSummary, GrpcReply,
    HookResult, Intended, JsonPath, Lineage, Live, LiveHistogram, LiveMeasures, LlmApi, Mixed,
    Outcome, Plan, Planned, Process, Recorded, Recording, Replay, ReplayOptions, ReplayRun,
    ReplaySource, RunInfo, RunOptions, RunOutput, RunReport, Scenario, Schedule, ScheduleError,
    Seen, Segment, Service, Sessions, Shard, SizedPrompt, StageSummary, Step, StepSummary, Target,
    Template, ThresholdResult, TraceData, When, DEFAULT_MAX_IN_FLIGHT, DEFAULT_TIMEOUT,
    FILLER_WORDS, HASH_BLOCK_TOKENS, INTERRUPTED, LIVE_RELATIVE_ERROR, LOAD_HEADER, MAX_ARRIVALS,
    MEASURES as LOAD_MEASURES, QUANTILE_PROBS, REPLAY_STEP, RUN_VERSION, THRESHOLDS_FAILED,
};
pub use report::{
    bootstrap_quantile_diff, build as build_report, is_capacity, list_baselines, mann_whitney,
    newest_baseline, parse_json, read_fit_text, read_run, render_html, save_baseline,
    saved_baselines, trend_table, two_proportions, two_rates, Arrivals, AttachedFit, Attribution,
    Baseline, CandidateCurve, Capacity, Cdf, Dist as ReportDist, DistDiff, FitCandidate,
    Group as ReportGroup, Health as LayerHealth, Input as ReportInput, Interval, Layer,
    Lineage as ReportLineage, MannWhitney, Metric, MetricDiff, Options as ReportOptions, Report,
    Row, Run, Saved, StageRow, StageSpan, StepGroup, StepRow, Timeline, Totals, Worst,
    ARRIVAL_FIT_VERSION, DEFAULT_METRICS, GRPC_SUCCESS_MIN_PCT, HIST_MEASURES, LEVEL,
    REPORT_VERSION, RESAMPLES, SEED, SLOW_QUANTILE, STATISTICS,
};
pub use trace::{
    convert, for_each_row, prompt_of, quantised_warning, Converted, Format, Lengths, PromptField,
    Refused, Skipped, StatsBuilder, TraceError, TraceReader, TraceStats, TraceWriter, WriteError,
};

/// The units the load-testing half parses, the same as the proxy config's:
/// `250ms`, `5%`, `64KiB`.
pub use sluice_filters::{format_duration, parse_duration, parse_percent, parse_size};

/// The arrival process a model names (`arrival:`), shared with `sluice load`.
pub use sluice_filters::{Arrival, WeibullComponent};
/// Errors of a model file or a scenario, named by path.
pub use sluice_filters::{PathError, PathErrors};
