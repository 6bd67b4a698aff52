//! A running stage, watched: sampled every half second for the early stop
//! (the backlog's and the TTFT's trends), and read every second for the
//! live signals from the measured requests that ended so far.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::drive::{CapacityOptions, StageRun};
use super::saturation::{over_saturated, stalled};
use super::signals::StageProgress;
use crate::load::{Answer, Live, Scenario};

/// How often a running stage is sampled for the early stop.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
/// Samples between two live readings of the signals: one a second.
const PROGRESS_EVERY: u32 = 2;

/// The live readings of a running stage.
pub(super) struct Reader<'a> {
    pub scenario: &'a Scenario,
    pub opts: &'a CapacityOptions,
    pub stage: &'a StageRun,
    /// The measured requests that ended so far.
    pub answers: Vec<Answer>,
    pub on_progress: &'a mut (dyn FnMut(&StageProgress) + Send),
}

impl Reader<'_> {
    /// Reads the stage `measured` into its measured part.
    fn read(&mut self, live: &Live, measured: Duration) {
        if let Some(tap) = live.answers.get() {
            tap.drain(&mut self.answers);
        }
        let stage = self.stage;
        let mut p = StageProgress::at(
            stage.index,
            stage.rate,
            stage.purpose,
            measured.as_secs_f64(),
        );
        p.length_s = stage.length.as_secs_f64();
        p.backlog = live.in_flight.load(Ordering::Acquire) + live.waiting.load(Ordering::Acquire);
        p.sla = self
            .opts
            .sla
            .iter()
            .map(|&(gate, _)| (gate, live.measures.gate_value(gate)))
            .collect();
        p.read(self.scenario, &self.answers, stage.base);
        (self.on_progress)(&p);
    }
}

/// Samples the stage until it is done; stops it (and says so) when it is
/// over-saturated or interrupted. Every second past the warm-up it reads
/// the live signals.
pub(super) fn watch(
    live: &Live,
    done: &AtomicBool,
    warmup: Duration,
    interrupt: &AtomicBool,
    reader: &mut Reader<'_>,
) -> bool {
    let start = Instant::now();
    let (mut backlog, mut ttft) = (Vec::new(), Vec::new());
    let (mut last_sum, mut last_count, mut last_ttft_at) = (0u64, 0u64, None);
    // Bounded by the stage: the engine ends it and sets `done`.
    for sample in 1u32.. {
        std::thread::sleep(SAMPLE_EVERY);
        if done.load(Ordering::Acquire) {
            return false;
        }
        if interrupt.load(Ordering::Acquire) {
            live.stop.store(true, Ordering::Release);
            return false;
        }
        let t = start.elapsed();
        if t < warmup {
            continue;
        }
        // The schedule's clock starts after the setup: the measured part
        // is read from it, the early stop's trend from this thread's own.
        let measured = live
            .began
            .get()
            .map_or(Duration::ZERO, |b| b.elapsed().saturating_sub(warmup));
        if sample.is_multiple_of(PROGRESS_EVERY) && !measured.is_zero() {
            reader.read(live, measured);
        }
        let t = (t - warmup).as_secs_f64();
        let q = live.in_flight.load(Ordering::Acquire) + live.waiting.load(Ordering::Acquire);
        backlog.push((t, q as f64));
        let m = &live.measures;
        let (sum, count) = (m.ttft_sum_us.load(Ordering::Acquire), m.ttft.count());
        if count > last_count {
            let mean_ms = (sum - last_sum) as f64 / (count - last_count) as f64 / 1000.0;
            ttft.push((t, mean_ms));
            last_ttft_at = Some(t);
        }
        (last_sum, last_count) = (sum, count);
        if over_saturated(&backlog, &ttft) || stalled(&backlog, last_ttft_at, t) {
            live.stop.store(true, Ordering::Release);
            return true;
        }
    }
    false
}
