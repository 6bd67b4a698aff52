//! The one thing an experiment injects, and where in a request's life it
//! acts: before the upstream (L7), on a streamed answer, or on a TCP
//! connection (L4 toxics).

use std::time::Duration;

/// How a delay's random part is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// `delay ± jitter`, every value equally likely.
    Uniform,
    /// Mean `delay`, standard deviation `jitter`.
    Normal,
    /// Median `delay`, log-space standard deviation `jitter / delay`.
    Lognormal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TruncateMode {
    /// End the stream as if it were complete (the last chunk, no `[DONE]`).
    Clean,
    /// Cut the connection mid-stream.
    Abrupt,
}

/// Which bytes of a TCP connection a toxic slows: those going to the
/// upstream, or those coming back to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Upstream,
    Downstream,
}

/// L4 toxics, as Toxiproxy names them.
#[derive(Clone, Debug, PartialEq)]
pub enum Toxic {
    Latency {
        latency: Duration,
        jitter: Duration,
        direction: Direction,
    },
    Bandwidth {
        bytes_per_sec: u64,
        direction: Direction,
    },
    Slicer {
        average_size: usize,
        size_variation: usize,
        delay: Duration,
        direction: Direction,
    },
    /// Delays the close of the connection once either side ended it.
    SlowClose { delay: Duration },
    /// Passes nothing; closes the connection after `timeout` (never when 0).
    Timeout { timeout: Duration },
    /// Resets the client's connection (RST) after `timeout`.
    ResetPeer { timeout: Duration },
    /// Closes the connection once `bytes` went through in `direction`.
    LimitData { bytes: u64, direction: Direction },
}

/// What an experiment injects, by where it acts; each stage matches only
/// the actions it carries out.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultAction {
    /// Before the request goes upstream (HTTP listeners).
    Request(RequestAction),
    /// On a streamed answer (HTTP listeners, LLM clusters).
    Stream(StreamAction),
    /// On a TCP listener's connection.
    Tcp(Toxic),
}

#[derive(Clone, Debug, PartialEq)]
pub enum RequestAction {
    Delay {
        delay: Duration,
        jitter: Duration,
        distribution: Distribution,
    },
    /// Answers the request itself: `status` and `body`, or on a gRPC call
    /// with `grpc` set, that gRPC status the way sluice writes its own
    /// gRPC errors.
    Abort {
        status: u16,
        body: String,
        grpc: Option<GrpcAbort>,
    },
    /// TCP RST to the client.
    Reset,
    /// Close the client's connection without an answer.
    Close,
}

/// The gRPC answer of an `abort` on a gRPC call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcAbort {
    /// 0..=16.
    pub status: u32,
    /// The `grpc-message`, before percent-encoding.
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamAction {
    FirstTokenDelay {
        delay: Duration,
    },
    TokenDelay {
        delay: Duration,
        jitter: Duration,
    },
    Stall {
        after_chunks: u32,
        duration: Duration,
    },
    Truncate {
        after_chunks: u32,
        mode: TruncateMode,
    },
    DropUsage,
    DropDone,
    Corrupt {
        after_chunks: u32,
    },
    Bandwidth {
        bytes_per_sec: u64,
    },
}

crate::name_table! {
    /// The name of an action: its key under `action:` in the config, and the
    /// `kind` label of `sluice_faults_injected_total`. `bandwidth` is a
    /// stream's pace on an HTTP listener and a toxic on a tcp one.
    pub enum ActionName: "action" {
        Delay = "delay",
        Abort = "abort",
        Reset = "reset",
        Close = "close",
        FirstTokenDelay = "first_token_delay",
        TokenDelay = "token_delay",
        Stall = "stall",
        Truncate = "truncate",
        DropUsage = "drop_usage",
        DropDone = "drop_done",
        Corrupt = "corrupt",
        Bandwidth = "bandwidth",
        Latency = "latency",
        Slicer = "slicer",
        SlowClose = "slow_close",
        Timeout = "timeout",
        ResetPeer = "reset_peer",
        LimitData = "limit_data",
    }
}

/// Where an action acts: [`FaultAction`]'s variant without its action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Request,
    Stream,
    Tcp,
}

impl FaultAction {
    pub fn kind(&self) -> FaultKind {
        match self {
            FaultAction::Request(_) => FaultKind::Request,
            FaultAction::Stream(_) => FaultKind::Stream,
            FaultAction::Tcp(_) => FaultKind::Tcp,
        }
    }

    /// The `kind` label of `sluice_faults_injected_total` and the action's
    /// key in the config.
    pub fn name(&self) -> &'static str {
        self.action_name().as_str()
    }

    pub fn action_name(&self) -> ActionName {
        match self {
            FaultAction::Request(a) => a.action_name(),
            FaultAction::Stream(a) => a.action_name(),
            FaultAction::Tcp(t) => t.action_name(),
        }
    }
}

impl RequestAction {
    pub fn action_name(&self) -> ActionName {
        match self {
            RequestAction::Delay { .. } => ActionName::Delay,
            RequestAction::Abort { .. } => ActionName::Abort,
            RequestAction::Reset => ActionName::Reset,
            RequestAction::Close => ActionName::Close,
        }
    }
}

impl StreamAction {
    pub fn action_name(&self) -> ActionName {
        match self {
            StreamAction::FirstTokenDelay { .. } => ActionName::FirstTokenDelay,
            StreamAction::TokenDelay { .. } => ActionName::TokenDelay,
            StreamAction::Stall { .. } => ActionName::Stall,
            StreamAction::Truncate { .. } => ActionName::Truncate,
            StreamAction::DropUsage => ActionName::DropUsage,
            StreamAction::DropDone => ActionName::DropDone,
            StreamAction::Corrupt { .. } => ActionName::Corrupt,
            StreamAction::Bandwidth { .. } => ActionName::Bandwidth,
        }
    }
}

impl Toxic {
    pub fn action_name(&self) -> ActionName {
        match self {
            Toxic::Latency { .. } => ActionName::Latency,
            Toxic::Bandwidth { .. } => ActionName::Bandwidth,
            Toxic::Slicer { .. } => ActionName::Slicer,
            Toxic::SlowClose { .. } => ActionName::SlowClose,
            Toxic::Timeout { .. } => ActionName::Timeout,
            Toxic::ResetPeer { .. } => ActionName::ResetPeer,
            Toxic::LimitData { .. } => ActionName::LimitData,
        }
    }
}

impl Distribution {
    /// One delay drawn from two independent uniform numbers in [0, 1).
    /// Never negative; the normal and lognormal draws use Box–Muller.
    pub fn draw(self, delay: Duration, jitter: Duration, u1: f64, u2: f64) -> Duration {
        let base = delay.as_secs_f64();
        let spread = jitter.as_secs_f64();
        let secs = match self {
            Distribution::Uniform => base + spread * (2.0 * u1 - 1.0),
            Distribution::Normal => base + spread * standard_normal(u1, u2),
            Distribution::Lognormal if base > 0.0 => {
                base * (spread / base * standard_normal(u1, u2)).exp()
            }
            Distribution::Lognormal => 0.0,
        };
        Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::ZERO)
    }
}

fn standard_normal(u1: f64, u2: f64) -> f64 {
    // 1 - u1 is in (0, 1], so the logarithm is finite.
    (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}
