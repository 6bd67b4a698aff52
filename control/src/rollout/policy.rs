//! The rollout state machine, pure: no I/O, no clock reads, no tasks. The
//! controller passes the time and what it observed in, and carries out the
//! transitions that come back (weight changes, events).
//!
//! `pending → progressing(step) → promoted | rolled_back | paused | aborted`,
//! and `paused → progressing` on resume. Rules:
//! - start at `steps[0]`;
//! - a gate is judged only with enough samples (see [`judge`]);
//! - a breach held for `consecutive` evaluations rolls back (canary weight 0)
//!   or pauses, as `on_breach` says; an evaluation with every judged gate
//!   passing clears the count;
//! - after `hold` at a step, with at least one gate judged and none failing,
//!   step up; reaching 100 is `promoted`; a gate that holds until met
//!   (`min_coverage`) keeps the step until it is;
//! - operators pause, resume, promote (canary 100) and abort (canary 0).

use tokio::time::Instant;

use super::gates::{judge, GateReading, Observation};
use crate::config::{format_duration, OnBreach, RolloutConfig};

sluice_filters::name_table! {
    /// Where a rollout stands; the `state` label of `sluice_rollout_state`.
    pub enum State: "rollout state" {
        Pending = "pending",
        Progressing = "progressing",
        Paused = "paused",
        Promoted = "promoted",
        RolledBack = "rolled_back",
        Aborted = "aborted",
    }
}

impl State {
    /// Nothing moves a rollout out of these.
    pub fn is_final(self) -> bool {
        match self {
            State::Promoted | State::RolledBack | State::Aborted => true,
            State::Pending | State::Progressing | State::Paused => false,
        }
    }
}

sluice_filters::name_table! {
    /// What an operator can ask of a rollout: the last segment of
    /// `POST /v1/rollouts/{name}/{command}`.
    pub enum Command: "rollout command" {
        Pause = "pause",
        Resume = "resume",
        Promote = "promote",
        Abort = "abort",
    }
}

/// One change of state, for the controller to carry out and record.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub from: State,
    pub to: State,
    /// 1-based position in `steps` after the transition (0: not started).
    pub step: usize,
    /// The canary weight after the transition.
    pub weight: u32,
    /// The canary weight to set now, when the transition moves it.
    pub apply: Option<u32>,
    pub reason: String,
    /// The gate readings that decided it (breached gates for a breach).
    pub evidence: Vec<GateReading>,
}

#[derive(Clone, Debug)]
pub struct Policy {
    config: RolloutConfig,
    state: State,
    /// Index into `config.steps`; meaningful once started.
    step: usize,
    /// The canary weight the rollout set last (0 before it started).
    weight: u32,
    /// When the current step began; `None` until started.
    step_since: Option<Instant>,
    /// Evaluations in a row with a breached gate.
    breaches: u32,
}

impl Policy {
    pub fn new(config: RolloutConfig) -> Policy {
        Policy {
            config,
            state: State::Pending,
            step: 0,
            weight: 0,
            step_since: None,
            breaches: 0,
        }
    }

    /// A policy back from a saved state (see `state`): at `state`, at the
    /// 1-based `step` (0: not started) with the canary at `weight`. The
    /// hold at that step starts again at `now`: the gates' windows are
    /// empty after a restart. A step that does not match the weight (the
    /// steps changed) is found again as [`Policy::reconfigure`] does.
    pub fn restored(
        config: RolloutConfig,
        state: State,
        step: usize,
        weight: u32,
        breaches: u32,
        now: Instant,
    ) -> Policy {
        let index = match step.checked_sub(1) {
            Some(i) if config.steps.get(i) == Some(&weight) => i,
            _ => config.steps.iter().rposition(|&s| s <= weight).unwrap_or(0),
        };
        Policy {
            config,
            state,
            step: index,
            weight,
            step_since: (step > 0).then_some(now),
            breaches,
        }
    }

    /// A restart with `on_restart: pause`: a rollout that was moving by
    /// itself waits for an operator.
    pub fn pause_at_restart(&mut self) -> Option<Transition> {
        matches!(self.state, State::Pending | State::Progressing).then(|| {
            self.go(
                State::Paused,
                None,
                "sluice restarted (on_restart: pause)".into(),
                Vec::new(),
            )
        })
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// 1-based position in `steps` (0: not started).
    pub fn step(&self) -> usize {
        if self.step_since.is_some() {
            self.step + 1
        } else {
            0
        }
    }

    pub fn weight(&self) -> u32 {
        self.weight
    }

    pub fn breaches(&self) -> u32 {
        self.breaches
    }

    pub fn config(&self) -> &RolloutConfig {
        &self.config
    }

    /// Takes a changed definition in place (gates, timing, steps). With new
    /// steps, the rollout stands at the highest step not above its weight,
    /// so the next step up goes on from there.
    pub fn reconfigure(&mut self, config: &RolloutConfig) {
        if *config == self.config {
            return;
        }
        if config.steps != self.config.steps {
            self.step = config
                .steps
                .iter()
                .rposition(|&s| s <= self.weight)
                .unwrap_or(0);
        }
        self.config = config.clone();
    }

    /// One evaluation at `now`: the gate readings, and the transition they
    /// call for, if any. Only `pending` and `progressing` move by themselves.
    pub fn evaluate(
        &mut self,
        now: Instant,
        obs: &Observation<'_>,
    ) -> (Vec<GateReading>, Option<Transition>) {
        let readings = judge(&self.config, obs);
        let transition = match self.state {
            State::Pending => {
                let reason = match &self.config.plan {
                    Some(plan) => format!("started; {}", plan.summary()),
                    None => "started".into(),
                };
                Some(self.start(now, reason))
            }
            State::Progressing => self.progress(now, &readings),
            State::Paused | State::Promoted | State::RolledBack | State::Aborted => None,
        };
        (readings, transition)
    }

    /// An operator's command; `Err` says why it is not allowed now.
    pub fn command(&mut self, command: Command, now: Instant) -> Result<Transition, String> {
        let reason = format!("operator: {}", command.as_str());
        match (command, self.state) {
            (Command::Pause, State::Pending | State::Progressing) => {
                Ok(self.go(State::Paused, None, reason, Vec::new()))
            }
            (Command::Resume, State::Paused) if self.step_since.is_none() => {
                Ok(self.start(now, reason))
            }
            (Command::Resume, State::Paused) => {
                self.step_since = Some(now);
                self.breaches = 0;
                // Re-set the step's weight: it may have been moved by hand.
                Ok(self.go(State::Progressing, Some(self.weight), reason, Vec::new()))
            }
            (Command::Promote, State::Pending | State::Progressing | State::Paused) => {
                Ok(self.go(State::Promoted, Some(100), reason, Vec::new()))
            }
            (Command::Abort, State::Pending | State::Progressing | State::Paused) => {
                Ok(self.go(State::Aborted, Some(0), reason, Vec::new()))
            }
            (command, state) => Err(format!(
                "cannot {} a rollout that is {}",
                command.as_str(),
                state.as_str()
            )),
        }
    }

    /// Something else changed the weights (an operator's split, a reload):
    /// a progressing rollout pauses rather than step on from a state it no
    /// longer controls.
    pub fn interrupt(&mut self, reason: String) -> Option<Transition> {
        (self.state == State::Progressing).then(|| self.go(State::Paused, None, reason, Vec::new()))
    }

    fn start(&mut self, now: Instant, reason: String) -> Transition {
        self.step = 0;
        self.step_since = Some(now);
        self.breaches = 0;
        let weight = self.config.steps.first().copied().unwrap_or(100);
        let to = if weight >= 100 {
            State::Promoted
        } else {
            State::Progressing
        };
        self.go(to, Some(weight), reason, Vec::new())
    }

    fn progress(&mut self, now: Instant, readings: &[GateReading]) -> Option<Transition> {
        let breached: Vec<GateReading> =
            readings.iter().filter(|r| r.breached()).cloned().collect();
        if !breached.is_empty() {
            self.breaches += 1;
            if self.breaches < self.config.consecutive {
                return None;
            }
            let reason = format!(
                "{} breached {} evaluation(s) in a row",
                breached
                    .iter()
                    .map(GateReading::describe)
                    .collect::<Vec<_>>()
                    .join(", "),
                self.breaches
            );
            return Some(match self.config.on_breach {
                OnBreach::Rollback => self.go(State::RolledBack, Some(0), reason, breached),
                OnBreach::Pause => self.go(State::Paused, None, reason, breached),
            });
        }
        let judged = readings.iter().any(|r| r.ok.is_some());
        if judged {
            self.breaches = 0;
        }
        let since = self.step_since.unwrap_or(now);
        if !judged || now.saturating_duration_since(since) < self.config.hold {
            return None;
        }
        // `min_coverage` below its bound: not enough evidence to step up,
        // so hold (never roll back on it).
        if readings
            .iter()
            .any(|r| r.gate.holds_until_met() && r.ok != Some(true))
        {
            return None;
        }
        // The next step is the first above the weight set last, whatever
        // a change of `steps` did to the index.
        let next = self
            .config
            .steps
            .iter()
            .position(|&s| s > self.weight)
            .unwrap_or(self.config.steps.len().saturating_sub(1));
        let weight = self.config.steps.get(next).copied().unwrap_or(100);
        self.step = next;
        self.step_since = Some(now);
        let to = if weight >= 100 {
            State::Promoted
        } else {
            State::Progressing
        };
        let reason = format!(
            "held {} with every judged gate passing",
            format_duration(self.config.hold)
        );
        let evidence = readings
            .iter()
            .filter(|r| r.ok.is_some())
            .cloned()
            .collect();
        Some(self.go(to, Some(weight), reason, evidence))
    }

    fn go(
        &mut self,
        to: State,
        apply: Option<u32>,
        reason: String,
        evidence: Vec<GateReading>,
    ) -> Transition {
        let from = self.state;
        self.state = to;
        if let Some(w) = apply {
            self.weight = w;
        }
        Transition {
            from,
            to,
            step: self.step(),
            weight: self.weight,
            apply,
            reason,
            evidence,
        }
    }
}

#[cfg(test)]
mod tests;
