//! The demo's story, phase by phase: a rollout whose canary slows down at
//! step 3 and is rolled back, a pause while its slow samples leave the
//! gates' window, then a healthy retry walked to `promoted`. Each phase has
//! a deadline; missing one is an error that says where the story stopped.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::bail;

use super::api::{Admin, EventView, GateView, Rates, RolloutView, StatsView};
use super::render::{Frame, Screen};
use super::traffic::Traffic;
use super::HEALTHY_TTFT;
use crate::mock_llm::MockKnobs;

/// The demo config's one route.
pub(super) const ROUTE: &str = "chat";
pub(super) const FIRST: &str = "chat-v2";
pub(super) const RETRY: &str = "chat-v2-retry";
/// The step (1-based) at which the first canary goes bad.
pub(super) const SLOW_AT_STEP: usize = 3;
pub(super) const SLOW_TTFT: Duration = Duration::from_millis(400);
pub(super) const TTFT_BOUND_MS: u64 = 150;
const STEPS: &str = "[5, 10, 20, 50, 100]";
/// About four screen updates a second.
const TICK: Duration = Duration::from_millis(250);
/// The gates' window. At ~100 requests a second the canary at 5% puts
/// `min_requests` (20) into it in about four seconds.
const WINDOW: Duration = Duration::from_secs(5);

/// The timing of one run, scaled from `--duration`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub total: Duration,
    /// Time at a step before the next. Shorter than the window for short
    /// runs: a step is then judged partly on the one before, which is fine
    /// here since the canary is healthy until step 3, and at step 3 its
    /// slow answers dominate the p95 within a second.
    pub hold: Duration,
    /// Deadline of phase 1 (the rollback), from the start.
    pub phase1: Duration,
    /// How long the traffic runs after the promotion, on the new version.
    pub tail: Duration,
}

impl Plan {
    pub(super) fn for_duration(total: Duration) -> Plan {
        // The story takes about 10 s plus six holds (two to reach step 3,
        // four to promote the retry); this leaves a third of the rest spare.
        let hold = (total.saturating_sub(Duration::from_secs(16)) / 8)
            .clamp(Duration::from_secs(2), Duration::from_secs(10));
        Plan {
            total,
            // Whole seconds: it reads better in the rollout's events.
            hold: Duration::from_secs(hold.as_secs()),
            phase1: total.mul_f64(0.45),
            tail: Duration::from_secs(2),
        }
    }

    /// The rollout as `POST /v1/rollouts` takes it.
    fn rollout_yaml(&self, name: &str) -> String {
        format!(
            "name: {name}\n\
             route: {ROUTE}\n\
             stable: llm-stable\n\
             canary: llm-canary\n\
             steps: {STEPS}\n\
             hold: {}s\n\
             min_requests: 20\n\
             interval: 250ms\n\
             window: {}s\n\
             consecutive: 2\n\
             on_breach: rollback\n\
             gates:\n  ttft_p95: {TTFT_BOUND_MS}ms\n  error_rate: 5%\n",
            self.hold.as_secs(),
            WINDOW.as_secs()
        )
    }
}

/// What happened, for the summary.
#[derive(Clone, Debug)]
pub(super) struct Story {
    pub rollback: Rollback,
    pub promotion: Promotion,
    pub requests: u64,
    pub failed: u64,
    pub plan: Plan,
}

#[derive(Clone, Debug)]
pub(super) struct Rollback {
    pub step: usize,
    /// The canary weight when the breach was seen.
    pub weight: u32,
    /// The breached gates.
    pub evidence: Vec<GateView>,
    /// From slowing the canary to the rollback event, wall clock.
    pub after_slowdown: Duration,
}

#[derive(Clone, Debug)]
pub(super) struct Promotion {
    /// From the start of the retry to `promoted`.
    pub took: Duration,
    pub weight: u32,
}

pub(super) struct Script<'a> {
    pub admin: &'a Admin,
    pub canary: &'a Arc<MockKnobs>,
    pub traffic: &'a Traffic,
    pub screen: &'a mut Screen,
    pub started: Instant,
    pub plan: Plan,
    pub rates: Rates,
}

impl Script<'_> {
    pub(super) async fn play(&mut self) -> anyhow::Result<Story> {
        let rollback = self.phase1().await?;
        self.clear_window().await?;
        let promotion = self.phase2().await?;
        self.watch_for(RETRY, "promoted: new requests all go to v2", self.plan.tail)
            .await?;
        let (requests, failed) = self.traffic.counts();
        Ok(Story {
            rollback,
            promotion,
            requests,
            failed,
            plan: self.plan,
        })
    }

    /// Rollout `chat-v2`; at step 3 the canary's TTFT goes to 400 ms and
    /// the controller must roll it back.
    async fn phase1(&mut self) -> anyhow::Result<Rollback> {
        self.screen.note(&format!(
            "phase 1: rollout {FIRST}, steps {STEPS}, hold {}s, gates ttft_p95 <= \
             {TTFT_BOUND_MS} ms, error_rate <= 5%; the canary slows to {} ms TTFT at step \
             {SLOW_AT_STEP}",
            self.plan.hold.as_secs(),
            SLOW_TTFT.as_millis()
        ));
        self.admin
            .start_rollout(self.plan.rollout_yaml(FIRST))
            .await?;
        let deadline = self.started + self.plan.phase1;
        let mut seen = 0;
        let mut slowed: Option<u64> = None;
        loop {
            let phase = match slowed {
                None => "phase 1: canary v2 healthy, stepping up",
                Some(_) => "phase 1: canary v2 slowed, gates watching",
            };
            let view = self.poll(FIRST, phase, &mut seen).await?;
            if slowed.is_none() && view.state == "progressing" && view.step >= SLOW_AT_STEP {
                self.canary.set_ttft(SLOW_TTFT);
                slowed = Some(wall_ms());
                self.screen.note(&format!(
                    "step {} reached (weight {}): canary v2 now takes {} ms to its first token",
                    view.step,
                    view.weight,
                    SLOW_TTFT.as_millis()
                ));
            }
            match (view.state.as_str(), slowed) {
                ("rolled_back", Some(at)) => return rolled_back(&view, at),
                ("rolled_back", None) => bail!(
                    "phase 1: {FIRST} was rolled back at step {} before the canary was slowed \
                     ({}): the machine is too busy for a {TTFT_BOUND_MS} ms TTFT gate",
                    view.step,
                    last_reason(&view, "rolled_back")
                ),
                ("promoted" | "aborted" | "paused", _) => bail!(
                    "phase 1: {FIRST} ended {} at step {} instead of being rolled back",
                    view.state,
                    view.step
                ),
                _ => {}
            }
            if Instant::now() >= deadline {
                bail!(
                    "phase 1: {FIRST} was not rolled back within {:.0}s (it is {} at step {}, \
                     weight {}); try a longer --duration",
                    self.plan.phase1.as_secs_f64(),
                    view.state,
                    view.step,
                    view.weight
                );
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Fixes the canary and waits until its slow answers have left the
    /// gates' window: the retry reads the same per-version stats, so it
    /// would otherwise be judged on the old canary's samples.
    async fn clear_window(&mut self) -> anyhow::Result<()> {
        self.canary.set_ttft(HEALTHY_TTFT);
        // A route has at most one rollout: the first must go before the retry.
        self.admin.delete_rollout(FIRST).await?;
        let wait = WINDOW + Duration::from_secs(1);
        self.screen.note(&format!(
            "canary v2 fixed ({} ms TTFT); {FIRST} removed; waiting {}s for its slow answers \
             to leave the {}s gate window",
            HEALTHY_TTFT.as_millis(),
            wait.as_secs(),
            WINDOW.as_secs()
        ));
        let until = Instant::now() + wait;
        while Instant::now() < until {
            self.show("between phases: all traffic on v1", None).await?;
            tokio::time::sleep(TICK).await;
        }
        Ok(())
    }

    /// Rollout `chat-v2-retry` with a healthy canary, to `promoted`.
    async fn phase2(&mut self) -> anyhow::Result<Promotion> {
        self.screen.note(&format!(
            "phase 2: rollout {RETRY}, same steps and gates, healthy canary"
        ));
        let begun = Instant::now();
        self.admin
            .start_rollout(self.plan.rollout_yaml(RETRY))
            .await?;
        let deadline = self.started + self.plan.total.saturating_sub(self.plan.tail);
        let mut seen = 0;
        loop {
            let view = self
                .poll(RETRY, "phase 2: healthy canary v2, stepping up", &mut seen)
                .await?;
            match view.state.as_str() {
                "promoted" if view.weight == 100 => {
                    return Ok(Promotion {
                        took: begun.elapsed(),
                        weight: view.weight,
                    })
                }
                "promoted" | "rolled_back" | "aborted" | "paused" => bail!(
                    "phase 2: {RETRY} ended {} at step {}, weight {} ({})",
                    view.state,
                    view.step,
                    view.weight,
                    last_reason(&view, &view.state)
                ),
                _ => {}
            }
            if Instant::now() >= deadline {
                bail!(
                    "phase 2: {RETRY} was not promoted within the {:.0}s budget (it is {} at \
                     step {}, weight {}); try a longer --duration",
                    self.plan.total.as_secs_f64(),
                    view.state,
                    view.step,
                    view.weight
                );
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Keeps showing `name` for `how_long`.
    async fn watch_for(
        &mut self,
        name: &str,
        phase: &str,
        how_long: Duration,
    ) -> anyhow::Result<()> {
        let until = Instant::now() + how_long;
        let mut seen = usize::MAX; // its events were shown already
        while Instant::now() < until {
            self.poll(name, phase, &mut seen).await?;
            tokio::time::sleep(TICK).await;
        }
        Ok(())
    }

    /// One look at a rollout through the control API, with the
    /// per-version stats; shows them and any transition not shown yet.
    async fn poll(
        &mut self,
        name: &str,
        phase: &str,
        seen: &mut usize,
    ) -> anyhow::Result<RolloutView> {
        let view = self.admin.rollout(name).await?;
        for event in view.events.iter().skip(*seen) {
            self.screen.event(&view.name, event);
        }
        *seen = (*seen).max(view.events.len());
        self.show(phase, Some(&view)).await?;
        Ok(view)
    }

    async fn show(&mut self, phase: &str, rollout: Option<&RolloutView>) -> anyhow::Result<()> {
        let stats: Vec<StatsView> = self.admin.stats().await?;
        let totals = self.admin.requests_by_version(ROUTE).await?;
        self.rates.push(Instant::now(), totals);
        self.screen.frame(&Frame {
            phase,
            rollout,
            stats: &stats,
            rps: &self.rates.per_second(),
            counts: self.traffic.counts(),
        });
        Ok(())
    }
}

/// The rollback, with its evidence and how long after the slowdown.
fn rolled_back(view: &RolloutView, slowed_ms: u64) -> anyhow::Result<Rollback> {
    let Some(event) = last_event(view, "rolled_back") else {
        bail!(
            "phase 1: {} is rolled_back but has no such event",
            view.name
        );
    };
    if event.step != SLOW_AT_STEP {
        bail!(
            "phase 1: {} was rolled back at step {}, not step {SLOW_AT_STEP} ({})",
            view.name,
            event.step,
            event.reason
        );
    }
    let weight = view
        .events
        .iter()
        .rev()
        .find(|e| e.to == "progressing")
        .map_or(0, |e| e.weight);
    Ok(Rollback {
        step: event.step,
        weight,
        evidence: event.evidence.clone(),
        after_slowdown: Duration::from_millis(event.time_ms.saturating_sub(slowed_ms)),
    })
}

fn last_event<'a>(view: &'a RolloutView, to: &str) -> Option<&'a EventView> {
    view.events.iter().rev().find(|e| e.to == to)
}

fn last_reason(view: &RolloutView, to: &str) -> String {
    last_event(view, to).map_or_else(|| "no event recorded".to_owned(), |e| e.reason.clone())
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_scales_with_the_duration_and_the_rollout_validates() {
        let plan = Plan::for_duration(Duration::from_secs(40));
        assert_eq!(plan.hold, Duration::from_secs(3));
        assert_eq!(plan.phase1, Duration::from_secs(18));
        let plan = Plan::for_duration(Duration::from_secs(60));
        assert_eq!(plan.hold, Duration::from_secs(5));
        let plan = Plan::for_duration(Duration::from_secs(300));
        assert_eq!(plan.hold, Duration::from_secs(10));
        let raw = sluice_control::RawRollout::from_yaml(&plan.rollout_yaml(FIRST));
        assert!(raw.is_ok(), "{raw:?}");
    }
}
