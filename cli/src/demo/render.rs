//! What the demo prints. On a terminal, a small block redrawn in place
//! (cursor up, clear) about four times a second, with transitions printed
//! above it as they happen; elsewhere (CI, a pipe) one line per change of
//! phase, state or step, a line every two seconds, and the transitions.
//! This is the only place the demo writes to stdout.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::api::{EventView, GateView, RolloutView, StatsView};
use super::script::{Story, TTFT_BOUND_MS};
use super::Ports;

/// Without a terminal, the longest silence between two status lines.
const LINE_EVERY: Duration = Duration::from_secs(2);

/// The live block's widest line: narrower than an 80-column terminal.
const WIDTH: usize = 79;

/// What the demo started, for the opening lines.
pub(super) struct Setup<'a> {
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    pub ports: &'a Ports,
    pub stable: SocketAddr,
    pub canary: SocketAddr,
    pub workers: usize,
}

/// One look at the system.
pub(super) struct Frame<'a> {
    pub phase: &'a str,
    pub rollout: Option<&'a RolloutView>,
    /// TTFT and errors per version over the last 10 s.
    pub stats: &'a [StatsView],
    /// Requests a second per version, over the last 2 s.
    pub rps: &'a BTreeMap<String, f64>,
    /// Client requests finished, of which failed.
    pub counts: (u64, u64),
}

pub(super) struct Screen {
    tty: bool,
    started: Instant,
    /// Lines of the live block now on screen (terminal only).
    drawn: usize,
    /// Phase, state and step of the last status line (no terminal).
    last_key: Option<String>,
    last_line: Option<Instant>,
    /// The newest status line when it was not printed (no terminal), so
    /// the summary can start from the final state.
    unprinted: Option<String>,
}

impl Screen {
    pub(super) fn new(started: Instant) -> Screen {
        Screen {
            tty: std::io::stdout().is_terminal(),
            started,
            drawn: 0,
            last_key: None,
            last_line: None,
            unprinted: None,
        }
    }

    pub(super) fn setup(&mut self, s: &Setup<'_>) {
        let taken = |preferred: bool, port: u16| match preferred {
            true => String::new(),
            false => format!(" ({port} was taken: an ephemeral port)"),
        };
        self.note(&format!(
            "proxy on http://{}{}, control API on http://{}{}",
            s.proxy,
            taken(s.ports.proxy_preferred, super::PROXY_PORT),
            s.admin,
            taken(s.ports.admin_preferred, super::ADMIN_PORT),
        ));
        self.note(&format!(
            "mock LLMs: llm-stable (v1) on {}, llm-canary (v2) on {}; {} streaming clients \
             with sticky sessions",
            s.stable, s.canary, s.workers
        ));
        self.note(
            "per version: rps over the last 2 s (/metrics counters), TTFT p95 and errors \
             over the last 10 s (/v1/stats)",
        );
    }

    /// A line that stays (above the live block on a terminal).
    pub(super) fn note(&mut self, text: &str) {
        let line = format!("[{:>5.1}s] {text}", self.started.elapsed().as_secs_f64());
        let mut out = self.erase();
        out.push_str(&line);
        out.push('\n');
        self.write(&out);
    }

    /// A rollout's transition, with its reason (and so its evidence).
    pub(super) fn event(&mut self, rollout: &str, e: &EventView) {
        self.note(&format!(
            "{rollout}: {} → {}, step {}, weight {}: {}",
            e.from, e.to, e.step, e.weight, e.reason
        ));
    }

    pub(super) fn frame(&mut self, f: &Frame<'_>) {
        if self.tty {
            let lines = self.block(f);
            let mut out = self.erase();
            for l in &lines {
                // A line that wraps would throw the cursor-up count off.
                out.extend(l.chars().take(WIDTH));
                out.push('\n');
            }
            self.drawn = lines.len();
            self.write(&out);
            return;
        }
        // The phases announce themselves in notes; a line is due when what
        // the rollout does changes.
        let key = match f.rollout {
            Some(r) => format!("{}/{}/{}", r.name, r.state, r.step),
            None => String::new(),
        };
        let due = self.last_line.is_none_or(|t| t.elapsed() >= LINE_EVERY);
        let line = status_line(f);
        if due || self.last_key.as_deref() != Some(key.as_str()) {
            self.last_key = Some(key);
            self.last_line = Some(Instant::now());
            self.unprinted = None;
            self.note(&line);
        } else {
            self.unprinted = Some(line);
        }
    }

    /// Leaves the final state in the output, whatever comes next: on a
    /// terminal the last block stays on screen; elsewhere its line is
    /// printed if it was not.
    pub(super) fn keep(&mut self) {
        self.drawn = 0;
        if let Some(line) = self.unprinted.take() {
            self.note(&line);
        }
    }

    /// The closing lines: what happened and where to look.
    pub(super) fn summary(&mut self, story: &Story, admin: SocketAddr, token: &str) {
        let took = self.started.elapsed().as_secs_f64();
        let rb = &story.rollback;
        let ttft = rb.evidence.iter().find(|g| g.gate == "ttft_p95");
        let why = match ttft {
            Some(g) => format!(
                "TTFT p95 {} > {TTFT_BOUND_MS} ms bound ({} samples)",
                g.value
                    .map_or_else(|| "n/a".into(), |v| format!("{v:.0} ms")),
                g.samples
            ),
            None => describe_all(&rb.evidence),
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\nsummary ({took:.1}s of a {}s budget; {} client requests, {} failed)",
            story.plan.total.as_secs(),
            story.requests,
            story.failed
        );
        let _ = writeln!(
            out,
            "  1. {}: canary slowed at step {} (weight {}) and rolled back {:.1}s later: {why}",
            super::script::FIRST,
            rb.step,
            rb.weight,
            rb.after_slowdown.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "  2. {}: healthy canary promoted to weight {} in {:.1}s, each step passing its gates",
            super::script::RETRY,
            story.promotion.weight,
            story.promotion.took.as_secs_f64()
        );
        let _ = writeln!(out, "  metrics:     http://{admin}/metrics");
        let _ = writeln!(
            out,
            "  control API: http://{admin}/v1/rollouts (Authorization: Bearer {token})"
        );
        let _ = writeln!(
            out,
            "  (sluice stops with the demo; `scripts/run.sh run` keeps one serving)"
        );
        self.write(&out);
    }

    /// Terminal: the escape codes that take the live block off the screen,
    /// so the next lines are written where it was.
    fn erase(&mut self) -> String {
        let mut out = String::new();
        if self.tty && self.drawn > 0 {
            let _ = write!(out, "\x1b[{}A\r\x1b[J", self.drawn);
            self.drawn = 0;
        }
        out
    }

    fn write(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        // A closed stdout (the reader went away) must not stop the demo.
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    /// The live block.
    fn block(&self, f: &Frame<'_>) -> Vec<String> {
        let mut lines = vec![format!(
            "  {:<60} {:>6.1}s",
            f.phase,
            self.started.elapsed().as_secs_f64()
        )];
        match f.rollout {
            Some(r) => {
                lines.push(format!(
                    "  rollout  {:<14} {:<12} step {}/{}  weight v1 {}% · v2 {}%",
                    r.name,
                    r.state,
                    r.step,
                    r.steps.len(),
                    100 - r.weight.min(100),
                    r.weight
                ));
                // One gate a line: the block must stay narrower than an
                // 80-column terminal, or wrapped lines break the redraw.
                for (name, g) in &r.gates {
                    lines.push(format!("  gate     {}", g.describe(name)));
                }
            }
            None => {
                lines.push("  rollout  -  (the split stays v1 100% · v2 0%)".to_owned());
                lines.push("  gate     -".to_owned());
            }
        }
        lines.push(format!(
            "  {:<8} {:<12} {:>7} {:>9} {:>7}",
            "version", "cluster", "rps", "TTFT p95", "errors"
        ));
        for v in ["v1", "v2"] {
            let s = row(f.stats, v);
            lines.push(format!(
                "  {v:<8} {:<12} {:>7.1} {:>9} {:>7}",
                cluster(v),
                f.rps.get(v).copied().unwrap_or(0.0),
                s.map_or_else(|| "-".to_owned(), ttft),
                s.map_or_else(|| "-".to_owned(), errors),
            ));
        }
        lines.push(format!(
            "  clients  {} requests, {} failed",
            f.counts.0, f.counts.1
        ));
        lines
    }
}

/// One line for logs: rollout, then each version, then the clients.
fn status_line(f: &Frame<'_>) -> String {
    let mut line = match f.rollout {
        Some(r) => format!(
            "{} {} step {}/{} weight {}",
            r.name,
            r.state,
            r.step,
            r.steps.len(),
            r.weight
        ),
        None => "no rollout, weight 0".to_owned(),
    };
    for v in ["v1", "v2"] {
        let s = row(f.stats, v);
        let _ = write!(
            line,
            " | {v} {:.0} rps ttft_p95 {} err {}",
            f.rps.get(v).copied().unwrap_or(0.0),
            s.map_or_else(|| "-".to_owned(), ttft),
            s.map_or_else(|| "-".to_owned(), errors),
        );
    }
    let _ = write!(
        line,
        " | clients {} sent, {} failed",
        f.counts.0, f.counts.1
    );
    line
}

/// The demo's route only: `/v1/stats` lists every route and cluster.
fn row<'a>(stats: &'a [StatsView], version: &str) -> Option<&'a StatsView> {
    stats
        .iter()
        .find(|s| s.route == "chat" && s.version == version)
}

fn ttft(s: &StatsView) -> String {
    s.ttft_ms
        .as_ref()
        .map_or_else(|| "-".to_owned(), |q| format!("{:.0} ms", q.p95))
}

fn errors(s: &StatsView) -> String {
    format!("{:.1}%", s.error_rate * 100.0)
}

/// The demo config's cluster of each version.
fn cluster(version: &str) -> &'static str {
    match version {
        "v1" => "llm-stable",
        _ => "llm-canary",
    }
}

fn describe_all(gates: &[GateView]) -> String {
    gates
        .iter()
        .map(|g| g.describe(&g.gate))
        .collect::<Vec<_>>()
        .join(", ")
}
