//! A rollout's evaluation: each tick gathers the signals, judges the gates
//! and acts on the transition (weights, events, the audit log, feedback on
//! a rollback), and a final state frees the route.

use super::*;

impl Cell {
    /// Once final with its weight applied (in fleet mode: on every
    /// target), the rollout takes itself out of the live config, which
    /// frees its route; the registry keeps it in its history (`source`:
    /// who finished it, for the audit log). `false`
    /// while it is not done, or the store refused (tried again next tick).
    pub(super) fn finish(&self, env: &Env, source: &str, inner: &Inner) -> bool {
        let state = inner.policy.state();
        if !state.is_final() || inner.want.is_some() {
            return false;
        }
        let action = format!(
            "rollout {}: finished ({state}), out of the config",
            self.name
        );
        match leave_config(&env.store, source, &action, &self.name) {
            Ok(_) => {
                self.done.store(true, Ordering::Release);
                // Saved again as finished, with its definition.
                env.shared.state.changed();
                true
            }
            Err(errors) => {
                warn!(rollout = %self.name, errors = %errors, "finished rollout not taken out of the config; retrying");
                false
            }
        }
    }

    /// One evaluation of what was `gathered`. `None` when the task should
    /// end: the rollout left the config, or reached a final state with its
    /// weight applied (in fleet mode: on every target) and left the config.
    pub(in crate::rollout) fn tick(
        &self,
        env: &Env,
        now: Instant,
        gathered: &Gathered,
    ) -> Option<Duration> {
        // Lock first: a command applied between a load and the lock would
        // look like someone else's change of the weights.
        let mut inner = self.lock();
        let snapshot = env.store.load();
        let config = snapshot.config.rollout(&self.name)?.clone();
        inner.policy.reconfigure(&config);
        if let Some(raw) = snapshot
            .config
            .raw
            .rollouts
            .iter()
            .find(|r| r.name == self.name)
        {
            if inner.raw.as_ref() != Some(raw) {
                inner.raw = Some(raw.clone());
            }
        }
        let breaches = inner.policy.breaches();
        if config.is_fleet() {
            // The targets' splits are the reconcile loop's to watch, not
            // this instance's; DNS targets follow their name's answers.
            if config.discovery.is_none() {
                let added = inner.targets.follow(&config.targets);
                inner.added(added);
            }
        } else if let Some(w) = inner.want {
            let action = format!("rollout {}: weight {w} (retry)", self.name);
            if apply_weight(env, "rollout", &config, w, &action) {
                inner.want = None;
            }
        } else if inner.policy.state() == State::Progressing {
            if let Some(reason) = drift(&snapshot.config, &config, inner.policy.weight()) {
                if let Some(t) = inner.policy.interrupt(reason) {
                    self.act(env, "rollout", &mut inner, t, now);
                }
            }
        }
        inner.source_errors = gathered.errors();
        let coverage = snapshot
            .route(&config.route)
            .and_then(|r| r.mirror.as_ref())
            .and_then(|m| m.coverage.clone());
        // Where the rollout stood when the figures were gathered: the
        // evaluation may step it on.
        let (step, weight) = (inner.policy.step(), inner.policy.weight());
        let progressing = inner.policy.state() == State::Progressing;
        let reading = coverage
            .as_ref()
            .map(|c| steps::coverage_status(c, step, &config));
        let mut observation = gathered.observation();
        if let Observation::Windows { coverage: c, .. } = &mut observation {
            *c = coverage.as_ref().map(|c| c.reading(step, &config.canary));
        }
        let (readings, transition) = inner.policy.evaluate(now, &observation);
        inner.readings = readings;
        inner.coverage = reading.clone();
        if progressing && step > 0 {
            self.record_step(env, &mut inner, gathered, (step, weight), reading);
        }
        if let Some(t) = transition {
            self.act(env, "rollout", &mut inner, t, now);
        } else if inner.policy.breaches() != breaches {
            // The count is saved: a restart does not forgive a breach.
            env.shared.state.changed();
        }
        if let Some(c) = &coverage {
            // Prompts are sampled while the rollout runs, at its step.
            let running = matches!(inner.policy.state(), State::Progressing | State::Paused);
            c.set_step(if running { inner.policy.step() } else { 0 });
        }
        if self.finish(env, "rollout", &inner) {
            return None;
        }
        Some(config.interval.max(MIN_INTERVAL))
    }

    /// Carries out one transition: the weight (one snapshot swap), the
    /// audit log (`source`: `rollout` for its own decisions, `api` for an
    /// operator's), the history, the metrics.
    pub(super) fn act(
        &self,
        env: &Env,
        source: &str,
        inner: &mut Inner,
        t: Transition,
        now: Instant,
    ) {
        let action = action(&self.name, &t);
        let (apply, to) = (t.apply, t.to);
        info!(
            rollout = %self.name,
            from = t.from.as_str(),
            to = t.to.as_str(),
            step = t.step,
            weight = t.weight,
            reason = %t.reason,
            "rollout transition"
        );
        let mut event = RolloutEvent {
            at_ms: now.saturating_duration_since(self.created).as_millis() as u64,
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            from: t.from,
            to: t.to,
            step: t.step,
            weight: t.weight,
            reason: t.reason,
            evidence: t.evidence,
            lineage: None,
        };
        event.lineage = crate::lineage::event_lineage(
            &env.store.load().config,
            inner.policy.config(),
            inner.seq,
            &event,
        );
        inner.seq += 1;
        // The audit entries this transition makes name it and its rollout.
        let ids = event
            .lineage
            .as_ref()
            .map(|l| serde_json::json!({"rollout": l.rollout, "rollout_event": l.id}));
        crate::events::with_lineage(ids, || match apply {
            Some(w) if inner.policy.config().is_fleet() => {
                // Applied by the task, outside the lock: see `push`.
                inner.want = Some(w);
                inner.targets.want();
                env.shared
                    .events
                    .push(source, &action, env.store.load().version, Vec::new());
            }
            Some(w) => {
                inner.want = Some(w);
                if apply_weight(env, source, inner.policy.config(), w, &action) {
                    inner.want = None;
                }
            }
            None => env
                .shared
                .events
                .push(source, &action, env.store.load().version, Vec::new()),
        });
        if to == State::RolledBack {
            env.metrics()
                .rollbacks
                .with_label_values(&[self.name.as_str()])
                .inc();
        }
        if inner.events.len() == HISTORY {
            inner.events.pop_front();
        }
        inner.events.push_back(event);
        if source == "rollout" {
            if let Some(event) = inner.events.back().filter(|e| feedback::is_breach(e)) {
                let config = env.store.load().config.clone();
                // The event's own number, as its lineage id was made with.
                let seq = event.lineage.as_ref().map_or(inner.seq - 1, |l| l.seq);
                let breach = Breach::of_rollout(&config, inner.policy.config(), seq, event);
                feedback::report(&env.shared, &env.store, breach);
            }
        }
        publish(env.metrics(), &self.name, &inner.policy);
        env.shared.state.changed();
    }
}
