//! The live display of `sluice load` on stderr: an indicatif bar and its
//! message when stderr is a terminal, else a plain line every 2 s; and
//! Ctrl-C. The text is a pure function of a [`Snapshot`] and its [`Rates`].

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_workload::Live;

use super::snapshot::{Rates, Shape, Snapshot};

/// The rates' window, and how often the plain line is written.
pub(crate) const EVERY: Duration = Duration::from_secs(2);
/// How often Ctrl-C and the end are looked at, and the bar redrawn.
const TICK: Duration = Duration::from_millis(100);

/// Where `sluice load` writes while it runs: above the bar when there is one.
pub(crate) struct Stderr {
    bar: Option<ProgressBar>,
}

impl Stderr {
    /// With a bar when `display` is asked for and stderr is a terminal.
    pub(crate) fn new(display: bool, span_us: u64) -> Stderr {
        let bar = (display && std::io::stderr().is_terminal())
            .then(|| ProgressStyle::with_template("{bar:24} {msg}").ok())
            .flatten()
            .map(|style| {
                let bar = ProgressBar::with_draw_target(
                    Some(span_us / 1000),
                    ProgressDrawTarget::stderr(),
                );
                bar.set_style(style);
                bar
            });
        Stderr { bar }
    }

    /// One line, whatever the bar is doing.
    pub(crate) fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) if !bar.is_finished() => bar.println(line),
            _ => eprintln!("{line}"),
        }
    }
}

/// Until `done`: the display, and Ctrl-C turned into `live.stop` (the run
/// then drains and is marked interrupted). Bounded by the run's length and
/// an hour of setup and drain.
pub(crate) fn watch(live: &Live, done: &AtomicBool, shape: &Shape<'_>, out: &Stderr) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    runtime.block_on(async {
        let start = Instant::now();
        let span = Duration::from_micros(shape.span_us());
        let ticks = (span + Duration::from_secs(3600)).as_millis() / TICK.as_millis();
        let mut next = EVERY;
        let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
        let mut stopped = false;
        let mut before = Snapshot::default();
        let mut rates = Rates::default();
        for _ in 0..ticks {
            tokio::select! {
                r = &mut ctrl_c, if !stopped => {
                    stopped = true;
                    if r.is_ok() {
                        live.stop.store(true, Ordering::Release);
                        out.say("load: interrupted, draining what is in flight");
                    }
                }
                () = tokio::time::sleep(TICK) => {}
            }
            if done.load(Ordering::Acquire) {
                break;
            }
            let now = shape.take(live);
            let first = next == EVERY;
            let window_over = start.elapsed() >= next;
            if window_over {
                next += EVERY;
            }
            // Until the first window ends, the rates since the start.
            if window_over || first {
                rates = Rates::between(&before, &now);
            }
            match &out.bar {
                Some(bar) => {
                    let at = now.elapsed_us.unwrap_or(0).min(now.span_us);
                    bar.set_position(at / 1000);
                    bar.set_message(message(&now, rates));
                }
                None if window_over => out.say(&line(&now, rates)),
                None => {}
            }
            if window_over {
                before = now;
            }
        }
    });
    if let Some(bar) = &out.bar {
        bar.finish();
    }
}

/// The bar's message.
pub(crate) fn message(s: &Snapshot, r: Rates) -> String {
    format!(
        "{}  {}  {}  in flight {}  ttft p95 {}  failed {}  error rate {}  {}",
        clock(s),
        stage(s),
        rates(r),
        s.in_flight,
        ms(s.ttft_p95_ms),
        s.failed,
        percent(s.error_rate),
        eta(s)
    )
}

/// The plain line written every 2 s when stderr is not a terminal.
pub(crate) fn line(s: &Snapshot, r: Rates) -> String {
    format!(
        "load: {}  {}  {}  sent {}  done {}  failed {}  in flight {}  waiting {}  queued {}  \
         ttft p95 {}  error rate {}  {}",
        clock(s),
        stage(s),
        rates(r),
        s.sent,
        s.done,
        s.failed,
        s.in_flight,
        s.waiting,
        s.queued,
        ms(s.ttft_p95_ms),
        percent(s.error_rate),
        eta(s)
    )
}

/// `12s/1m00s`, or `setup` before the schedule's clock starts.
fn clock(s: &Snapshot) -> String {
    match s.elapsed_us {
        None => "setup".to_owned(),
        Some(us) => format!(
            "{}/{}",
            seconds(us / 1_000_000),
            seconds(s.span_us / 1_000_000)
        ),
    }
}

/// Counted from 1 for people; `draining` past the schedule's end.
fn stage(s: &Snapshot) -> String {
    match s.stage {
        Some(i) => format!("stage {}/{}", i + 1, s.stages),
        None => "draining".to_owned(),
    }
}

fn rates(r: Rates) -> String {
    let offered = r
        .offered
        .map_or("closed loop".to_owned(), |o| format!("offered {o:.1}/s"));
    format!("{offered}  achieved {:.1}/s", r.achieved)
}

/// The schedule's time left (rounded up); `-` in the setup and the drain.
fn eta(s: &Snapshot) -> String {
    match s.elapsed_us.filter(|e| *e < s.span_us) {
        Some(e) => format!("eta {}", seconds((s.span_us - e).div_ceil(1_000_000))),
        None => "eta -".to_owned(),
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.1} ms"))
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.1}%"))
}

/// `48s`, `4m08s`, `1h02m03s`.
fn seconds(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m{:02}s", s / 3600, s % 3600 / 60, s % 60),
    }
}

#[cfg(test)]
mod tests;
