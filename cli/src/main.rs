//! The `sluice` command line.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory as _, Parser, Subcommand};
use sluice_cli::{
    ctl, default_config_yaml, run_demo, DemoOptions, MockLlm, MockLlmOptions, MockThread, Stall,
};
use sluice_control::{parse_duration, Config, ConfigErrors};
use sluice_proxy::{Sluice, StartOptions};

mod baseline;
mod capacity;
mod feedback;
mod fit;
mod lineage;
mod load;
mod manual;
mod plan;
mod report;
mod trace;

#[derive(Parser)]
#[command(name = "sluice", version, about = "A sidecar proxy for AI services")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve. Without -c: the embedded default (proxy on 127.0.0.1:8080 in
    /// front of a built-in mock LLM, control API on 127.0.0.1:9901).
    Run {
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Zero-downtime upgrade: take the listening sockets over from the
        /// running sluice (send it SIGQUIT once this one waits) through
        /// `runtime.upgrade_sock`, instead of binding them.
        #[arg(long)]
        upgrade: bool,
    },
    /// The whole story in about a minute: two mock LLMs, the proxy, traffic,
    /// a rollout rolled back at step 3, then a healthy one promoted.
    Demo {
        /// Time budget in seconds (at least 30).
        #[arg(long, default_value_t = 60, value_parser = demo_seconds)]
        duration: u64,
    },
    /// Parse and validate a config or a `sluice load` scenario; print every
    /// error. Exit 0 valid, 2 invalid.
    Validate { file: PathBuf },
    /// An OpenAI-compatible streaming mock LLM.
    MockLlm(MockLlmArgs),
    /// Client for the control API (SLUICE_ADMIN_URL, SLUICE_ADMIN_TOKEN).
    Ctl(ctl::CtlArgs),
    /// Trace files: convert between formats, and their statistics.
    Trace(trace::TraceArgs),
    /// Fit a workload model (arrivals, rate curve, lengths, sessions) to a
    /// trace, and write it as YAML for `sluice load`.
    ///
    /// Inter-arrival times (seconds) against exponential, gamma (its shape
    /// is vLLM's burstiness and AIPerf's arrival-smoothness), Weibull,
    /// lognormal and a two-Weibull mixture (EM), the best by BIC, each with
    /// its log-likelihood, AIC, BIC, KS and KL; the rate per window; token
    /// lengths as lognormals truncated to [1, max] with a max_tokens cap as
    /// a point mass; sessions (turns, think time, session starts). Exit 2 on
    /// a bad trace, and then no model file is written.
    Fit(fit::FitArgs),
    /// Open-loop load from a scenario, measured from the intended send time
    /// (wrk2's rule): response time, service time, TTFT both ways and the
    /// dispatch lag, with vLLM's field names. Exit 2 on a bad scenario, 99
    /// when a threshold fails.
    Load(load::LoadArgs),
    /// The highest rate within the SLAs (`--sla`, the rollout gates'
    /// names), searched with short open-loop stages read off a monotone
    /// cubic and confirmed; the throughput knee, the P99 cost of a token
    /// under load, the cost of 1k tokens, and a recommended rate by their
    /// weighted score. Exit 0 with a rate, 99 when none held, 2 on bad input.
    Capacity(capacity::CapacityArgs),
    /// One self-contained HTML page (inline CSS and SVG, nothing from the
    /// network) of a load or capacity run: lineage, CDFs, latency over
    /// time, the diff against a baseline (bootstrap intervals, Mann–Whitney)
    /// and the attribution by layer; `--json` for its JSON twin. Exit 2 on a
    /// bad file, 99 on a regression with --fail-on-regression.
    Report(report::ReportArgs),
    /// Saved runs as the SLO's history: `save RUN.json --name NAME`, `list`.
    Baseline(baseline::BaselineArgs),
    /// The rollout plan for a change: steps, holds, gates and checks sized
    /// by what changed (major, minor or patch version; checkpoint; prompt
    /// template) and the route's traffic, each part with its rule. Exit 2
    /// on a version that is not semver where the plan needs it.
    Plan(plan::PlanArgs),
    /// The scenarios saved from rollout breaches and fault halts
    /// (`feedback.dir`): `list [DIR] [--json]`, each with its weight now.
    Feedback(feedback::FeedbackArgs),
    /// The lineage DAG: what each artefact (config, cluster, rollout, event,
    /// scenario, run, report) was made from and what was made from it.
    Lineage(lineage::LineageArgs),
    /// A shell's completion script on stdout, e.g.
    /// `sluice completions bash > ~/.local/share/bash-completion/completions/sluice`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The man page (roff) on stdout: `sluice man | man -l -`. With `--out
    /// DIR`, a page for each command at every depth instead (`sluice.1`,
    /// `sluice-ctl.1`, `sluice-ctl-rollout-watch.1`, ...).
    Man {
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// `sluice mock-llm` flags: the mock's options, as flags.
#[derive(clap::Args)]
struct MockLlmArgs {
    #[arg(long, default_value = "127.0.0.1:8000")]
    listen: SocketAddr,
    /// Time to first token, e.g. 200ms.
    #[arg(long, default_value = "50ms", value_parser = duration)]
    ttft: Duration,
    /// Gap between tokens.
    #[arg(long, default_value = "10ms", value_parser = duration)]
    itl: Duration,
    /// Uniform jitter added to each gap.
    #[arg(long, default_value = "0ms", value_parser = duration)]
    jitter: Duration,
    #[arg(long, default_value_t = 16)]
    tokens: u32,
    /// Share of requests answered 500, 0..=1.
    #[arg(long, default_value_t = 0.0)]
    error_rate: f64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value = "mock-llm")]
    model: String,
    /// Completions answered at once; more wait in arrival order (no limit when absent).
    #[arg(long)]
    max_concurrency: Option<NonZeroUsize>,
    /// Start of a stall, from the first completion request read: every completion read during
    /// the stall waits for its end (needs --stall-for).
    #[arg(long, value_parser = duration, requires = "stall_for")]
    stall_at: Option<Duration>,
    /// Length of the stall that starts at --stall-at.
    #[arg(long, value_parser = duration, requires = "stall_at")]
    stall_for: Option<Duration>,
}

impl From<MockLlmArgs> for MockLlmOptions {
    fn from(a: MockLlmArgs) -> Self {
        MockLlmOptions {
            listen: a.listen,
            ttft: a.ttft,
            itl: a.itl,
            jitter: a.jitter,
            tokens: a.tokens,
            error_rate: a.error_rate,
            seed: a.seed,
            model: a.model,
            max_concurrency: a.max_concurrency,
            stall: a
                .stall_at
                .zip(a.stall_for)
                .map(|(at, lasts)| Stall { at, lasts }),
            ..MockLlmOptions::default()
        }
    }
}

/// Accepts `250ms` style durations, and plain numbers as milliseconds.
fn duration(s: &str) -> Result<Duration, String> {
    match s.parse::<u64>() {
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(_) => parse_duration(s),
    }
}

/// The demo's `--duration`: whole seconds, enough for every phase.
fn demo_seconds(s: &str) -> Result<u64, String> {
    let secs: u64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number of seconds"))?;
    if secs < 30 {
        return Err(format!("{secs} s is too short: the demo needs at least 30"));
    }
    Ok(secs)
}

/// mimalloc instead of glibc's malloc: pingora allocates and frees many small
/// objects per request, and glibc's malloc/free were ~20% of the instructions
/// per proxied request under callgrind (docs/BENCHMARKS.md, "Hot path profile").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo draws its own display; sluice's info logs would break it.
    init_tracing(match cli.command {
        Command::Demo { .. } => "warn",
        _ => "info",
    });
    let result = match cli.command {
        Command::Run { config, upgrade } => run(config, upgrade),
        Command::Demo { duration } => run_demo(DemoOptions {
            duration: Duration::from_secs(duration),
        }),
        Command::Validate { file } => return validate(&file),
        Command::MockLlm(args) => mock_llm(args.into()),
        Command::Ctl(args) => ctl::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Fit(args) => fit::run(args),
        Command::Load(args) => load::run(args),
        Command::Capacity(args) => capacity::run(args),
        Command::Report(args) => report::run(args),
        Command::Baseline(args) => baseline::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Feedback(args) => feedback::run(args),
        Command::Lineage(args) => lineage::run(args),
        Command::Completions { shell } => manual::completions(shell, Cli::command()),
        Command::Man { out } => manual::man(Cli::command(), out.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: not in log files, and not paid
        // for on every line written to one.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn load(file: &PathBuf) -> Result<Config, Vec<String>> {
    let text =
        std::fs::read_to_string(file).map_err(|e| vec![format!("{}: {e}", file.display())])?;
    Config::from_yaml(&text)
        .map_err(|ConfigErrors(errors)| errors.iter().map(ToString::to_string).collect())
}

fn validate(file: &PathBuf) -> ExitCode {
    // A scenario of `sluice load` is validated as one.
    if std::fs::read_to_string(file).is_ok_and(|t| load::is_scenario(&t)) {
        return match load::validate(file) {
            Ok(line) => {
                #[allow(clippy::print_stdout)]
                {
                    println!("{line}");
                }
                ExitCode::SUCCESS
            }
            Err(errors) => {
                for e in errors {
                    eprintln!("{e}");
                }
                ExitCode::from(2)
            }
        };
    }
    match load(file) {
        Ok(c) => {
            #[allow(clippy::print_stdout)]
            {
                println!(
                    "{}: valid ({} listeners, {} clusters, {} routes)",
                    file.display(),
                    c.listeners.len(),
                    c.clusters.len(),
                    c.routes.len()
                );
            }
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            ExitCode::from(2)
        }
    }
}

#[allow(clippy::print_stdout)]
fn run(path: Option<PathBuf>, upgrade: bool) -> anyhow::Result<ExitCode> {
    let mut _mock = None;
    let config = match &path {
        Some(file) => match load(file) {
            Ok(c) => c,
            Err(errors) => {
                for e in errors {
                    eprintln!("{e}");
                }
                return Ok(ExitCode::from(2));
            }
        },
        None => {
            let mock = MockThread::start(MockLlmOptions {
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                ttft: Duration::from_millis(120),
                itl: Duration::from_millis(15),
                tokens: 32,
                ..MockLlmOptions::default()
            })?;
            let yaml = default_config_yaml(mock.addr);
            _mock = Some(mock);
            Config::from_yaml(&yaml).map_err(|e| anyhow::anyhow!("embedded default: {e}"))?
        }
    };
    let sluice = Sluice::start(
        config,
        StartOptions {
            config_path: path,
            handle_signals: true,
            upgrade,
        },
    )?;
    for (name, addr) in &sluice.listeners {
        println!("listener {name} on {addr}");
    }
    println!("control API on http://{}", sluice.admin_addr);
    if sluice.token_generated {
        println!("admin token (generated, none configured): {}", sluice.token);
    }
    sluice.wait();
    Ok(ExitCode::SUCCESS)
}

fn mock_llm(options: MockLlmOptions) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mock = MockLlm::start(options).await.context("mock LLM")?;
        #[allow(clippy::print_stdout)]
        {
            println!("mock-llm listening on {}", mock.addr());
        }
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        mock.stop().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// A line on stdout; a reader that went away (`| head`) is not an error.
pub(crate) fn out(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// clap checks its definitions only when a command runs: here, all of
    /// them (two flags of one name in one command, say).
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
