//! One journey: the scenario's steps in order (each after its delay), and
//! with `sessions:` its turns, each after the think time. A step's
//! intended start is the schedule's time for the first step of the first
//! turn, and the end of the step before plus its delay for the others.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use sluice_filters::{answer_text, mix64, PERTURBED_HEADER};

use super::{Clients, Ctx};
use crate::load::client::{since, Cache, Call, Outcome, MAX_KEPT};
use crate::load::prompt::{draw_lengths, step_prompt};
use crate::load::scenario::{Body, Ended, Scenario, Service, Step, Template};
use crate::load::schedule::Intended;

/// Turns of one session at most.
const MAX_TURNS: u64 = 1000;

/// Ends by counting itself out of `live.journeys`, whatever happened.
pub(super) async fn journey(ctx: Arc<Ctx>, arrival: Intended, due: Instant) {
    run(&ctx, arrival, due).await;
    ctx.live.journeys.fetch_sub(1, Ordering::AcqRel);
}

async fn run(ctx: &Arc<Ctx>, arrival: Intended, due: Instant) {
    let scenario = &ctx.scenario;
    // The journey's own draws depend on the seed and its index only, so a
    // shard draws what the unsharded run draws for the same arrival.
    let mut rng = StdRng::seed_from_u64(mix64(scenario.plan.seed ^ mix64(arrival.index + 1)));
    let mut vars = ctx.vars.clone();
    vars.extend(draw_vars(scenario, arrival.index, &mut rng));
    let turns = scenario.sessions.as_ref().map_or(1, |s| {
        (s.turns.sample(&mut rng).round() as u64).clamp(1, MAX_TURNS)
    });
    let carry = scenario.sessions.as_ref().is_some_and(|s| s.carry_history);
    // Per step: the messages of the turns before (with `carry_history`).
    // The scenario's own steps alone: those after them (`--feedback`'s)
    // measure recorded requests and never run in a synthetic journey.
    let steps = &scenario.steps[..ctx.own_steps.min(scenario.steps.len())];
    let mut history: Vec<Vec<Value>> = vec![Vec::new(); steps.len()];
    let mut at = due;
    for turn in 0..turns {
        if turn > 0 {
            if let Some(s) = &scenario.sessions {
                at += seconds(s.think_time.sample(&mut rng));
                tokio::time::sleep_until(at.into()).await;
            }
        }
        // How each step of this turn ended: Some((ok, cache)), None when
        // skipped.
        let mut ended: Vec<Option<(bool, Option<Cache>)>> = vec![None; steps.len()];
        for (i, step) in steps.iter().enumerate() {
            if let Some(w) = &step.when {
                let named = steps.iter().position(|s| s.name == w.step);
                let how = named.and_then(|k| ended.get(k).copied().flatten());
                if !how.is_some_and(|h| met(w.ended, h)) {
                    continue;
                }
            }
            if let Some(d) = &step.delay {
                at += seconds(d.sample(&mut rng));
                tokio::time::sleep_until(at.into()).await;
            }
            let mut outcome = Outcome {
                step: i,
                index: arrival.index,
                stage: arrival.stage,
                warmup: arrival.warmup,
                intended_us: since(ctx.start, at),
                ..Outcome::default()
            };
            let carried = history.get(i).map_or(&[][..], Vec::as_slice);
            // Sizes are drawn for prompt steps only (they alone send them).
            let (content, max_tokens) = match &step.body {
                Body::Prompt(t) => {
                    let (mut tokens, max_tokens) = draw_lengths(step, &mut rng);
                    // A context sweep sizes the llm prompts by the stage.
                    if let (Some(c), Service::Llm) = (&scenario.context_sweep, step.service) {
                        tokens = Some(c.input_tokens(arrival.stage));
                    }
                    let text = t.render(&vars);
                    let seed = scenario.plan.seed;
                    let content = step_prompt(step, text, tokens, seed, &mut rng);
                    (Some(content), max_tokens)
                }
                _ => (None, None),
            };
            let (content, reworded) = reword_prompt(step, content, arrival.index);
            let mut call = call(
                scenario,
                step,
                &vars,
                carried,
                content.as_deref(),
                max_tokens,
            );
            if reworded || reword_body(step, &mut call, arrival.index) {
                mark_perturbed(step, &mut call);
            }
            let prompt = content.filter(|_| carry);
            call.keep_body |= prompt.is_some() || step.keep_text;
            let Some(_permit) = slot(ctx, &mut outcome).await else {
                return;
            };
            ctx.live.sent.fetch_add(1, Ordering::AcqRel);
            ctx.live.in_flight.fetch_add(1, Ordering::AcqRel);
            // Boxed: the three clients' futures are large, and unboxed they
            // were copied into every journey's task and moved at each await
            // (a tenth of a request's time at 15,000 a second).
            let body = Box::pin(send(
                &ctx.clients,
                step,
                call,
                &vars,
                ctx.start,
                &mut outcome,
            ))
            .await;
            if let (Some(prompt), None) = (prompt, outcome.failure) {
                let answer = answer_text(&body).unwrap_or_default();
                if let Some(h) = history.get_mut(i) {
                    h.push(json!({"role": "user", "content": prompt}));
                    h.push(json!({"role": "assistant", "content": answer}));
                }
            }
            outcome.truncated |= cut_by_length(&outcome, max_tokens);
            absorb(step, &body, outcome.failure.is_none(), &mut vars);
            at = ctx.start + Duration::from_micros(outcome.end_us);
            if let Some(e) = ended.get_mut(i) {
                *e = Some((outcome.failure.is_none(), outcome.cache));
            }
            ctx.ended(outcome);
        }
    }
}

/// `finish_reason: length` short of the request's `max_tokens`: the
/// model's context, not the request, ended the answer (one that asked for
/// no `max_tokens` was cut by nothing else).
fn cut_by_length(outcome: &Outcome, max_tokens: Option<u64>) -> bool {
    if outcome.finish_reason.as_deref() != Some("length") {
        return false;
    }
    match (max_tokens, outcome.output_tokens) {
        (Some(max), Some(n)) => n < max,
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// Whether a step that ended so meets `when`'s `ended`.
/// A `max_in_flight` slot, waited for in arrival order (counted as
/// queued) when none is free; `None` only if the semaphore were closed,
/// which it never is: then the journey ends.
pub(crate) async fn slot<'a>(
    ctx: &'a Ctx,
    outcome: &mut Outcome,
) -> Option<tokio::sync::SemaphorePermit<'a>> {
    if let Ok(p) = ctx.slots.try_acquire() {
        return Some(p);
    }
    outcome.queued = true;
    ctx.live.queued.fetch_add(1, Ordering::AcqRel);
    ctx.live.waiting.fetch_add(1, Ordering::AcqRel);
    let p = ctx.slots.acquire().await;
    ctx.live.waiting.fetch_sub(1, Ordering::AcqRel);
    p.ok()
}

fn met(ended: Ended, (ok, cache): (bool, Option<Cache>)) -> bool {
    match ended {
        Ended::Ok => ok,
        Ended::Error => !ok,
        Ended::Hit => ok && cache == Some(Cache::Hit),
        Ended::Miss => ok && cache == Some(Cache::Miss),
    }
}

/// Sends a step's request now: `call` over HTTP (HTTP/2 for grpc), or
/// (redis) its command; the answer's bytes (a redis reply as text, a grpc
/// answer's messages without their prefixes).
async fn send(
    clients: &Clients,
    step: &Step,
    call: Call,
    vars: &BTreeMap<String, String>,
    start: Instant,
    out: &mut Outcome,
) -> Vec<u8> {
    match (step.service, &step.target) {
        (Service::Redis, Some(target)) => {
            let args: Vec<String> = step.command.iter().map(|t| t.render(vars)).collect();
            clients
                .redis
                .send(target, &args, step.timeout, start, out)
                .await
                .into_bytes()
        }
        (Service::Grpc, _) => clients.grpc.send(call, start, out).await,
        _ => clients.http.send(call, start, out).await,
    }
}

/// What a step's answer gives the steps after it: `{{NAME.text}}` (the
/// llm's assistant text, or the body or reply as text, bounded; empty on a
/// failure) and the `extract` variables.
fn absorb(step: &Step, body: &[u8], ok: bool, vars: &mut BTreeMap<String, String>) {
    if step.keep_text {
        let text = match (ok, step.service) {
            (false, _) => String::new(),
            (true, Service::Llm) => answer_text(body).unwrap_or_default(),
            (true, _) => String::from_utf8_lossy(&body[..body.len().min(MAX_KEPT)]).into_owned(),
        };
        vars.insert(format!("{}.text", step.name), text);
    }
    if !step.extract.is_empty() {
        // An answer that is not JSON, or lacks a path, leaves the
        // variable as it was (empty at first).
        if let Ok(json) = serde_json::from_slice::<Value>(body) {
            for (name, path) in &step.extract {
                if let Some(v) = path.text(&json) {
                    vars.insert(name.clone(), v);
                }
            }
        }
    }
}

/// A setup or teardown step, once, outside the measurement: its request
/// and what it gives the steps after it.
pub(super) async fn hook(
    clients: &Clients,
    scenario: &Scenario,
    step: &Step,
    vars: &mut BTreeMap<String, String>,
) -> Outcome {
    let start = Instant::now();
    let content = match &step.body {
        Body::Prompt(t) => Some(t.render(vars)),
        _ => None,
    };
    let max_tokens = step
        .max_tokens
        .as_ref()
        .map(|d| d.sample(&mut StdRng::seed_from_u64(0)).round() as u64);
    let mut c = call(scenario, step, vars, &[], content.as_deref(), max_tokens);
    c.keep_body |= step.keep_text;
    let mut outcome = Outcome::default();
    let body = send(clients, step, c, vars, start, &mut outcome).await;
    absorb(step, &body, outcome.failure.is_none(), vars);
    outcome
}

fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::ZERO)
}

/// One value of every data variable, and `NAME_hash` for each: the first
/// 16 hex digits of the SHA-256 of the value.
fn draw_vars(scenario: &Scenario, index: u64, rng: &mut StdRng) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for (name, data) in &scenario.data {
        let n = data.values.len().max(1);
        let k = if data.sequential {
            usize::try_from(index % n as u64).unwrap_or(0)
        } else {
            rng.random_range(0..n)
        };
        let value = data.values.get(k).cloned().unwrap_or_default();
        let digest = Sha256::digest(value.as_bytes());
        let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        vars.insert(format!("{name}_hash"), hash);
        vars.insert(name.clone(), value);
    }
    vars
}

fn call(
    scenario: &Scenario,
    step: &Step,
    vars: &BTreeMap<String, String>,
    history: &[Value],
    content: Option<&str>,
    max_tokens: Option<u64>,
) -> Call {
    let path = step.path.render(vars);
    let mut headers = scenario.target.headers.clone();
    headers.extend(
        step.headers
            .iter()
            .map(|(n, t)| (n.clone(), t.render(vars))),
    );
    let body = match &step.body {
        Body::None => None,
        Body::Grpc(message) => Some(message.clone()),
        Body::Json(v) => Some(render_json(v, vars).to_string().into_bytes()),
        Body::Prompt(_) => {
            let mut chat = json!({
                "model": step.model.as_deref().unwrap_or("default"),
                "messages": history
                    .iter()
                    .cloned()
                    .chain([json!({"role": "user", "content": content.unwrap_or_default()})])
                    .collect::<Vec<Value>>(),
                "stream": step.stream,
            });
            if let Some(m) = max_tokens {
                chat["max_tokens"] = json!(m);
            }
            if step.stream {
                chat["stream_options"] = json!({"include_usage": true});
            }
            if step.ignore_eos {
                chat["ignore_eos"] = json!(true);
            }
            Some(chat.to_string().into_bytes())
        }
    };
    Call {
        method: Method::from_bytes(step.method.as_bytes()).unwrap_or(Method::GET),
        uri: [
            step.target.as_deref().unwrap_or(&scenario.target.base_url),
            &path,
        ]
        .concat(),
        headers,
        body,
        path,
        timeout: step.timeout,
        keep_body: !step.extract.is_empty(),
    }
}

/// A prompt step's new user text reworded by the step's `perturb`, and
/// whether it was (a text too short for the rate goes as it is). The
/// journey's index salts the choice, so journeys that send the same text
/// reword different words.
fn reword_prompt(step: &Step, content: Option<String>, index: u64) -> (Option<String>, bool) {
    match (&step.perturb, content) {
        (Some(p), Some(text)) => match p.apply_text(&text, index) {
            Some(reworded) => (Some(reworded), true),
            None => (Some(text), false),
        },
        (_, content) => (content, false),
    }
}

/// A step with its own JSON body: the body's user text reworded, as a
/// mirror copy's is; whether it was.
fn reword_body(step: &Step, call: &mut Call, index: u64) -> bool {
    let (Some(p), Body::Json(_), Some(body)) = (&step.perturb, &step.body, &call.body) else {
        return false;
    };
    // The copy number of the mirror's policy; journeys past 2^32 reuse one.
    let salt = index as u32;
    match p.apply(body, salt) {
        Some(reworded) => {
            call.body = Some(reworded);
            true
        }
        None => false,
    }
}

/// `x-sluice-perturbed: <rate>`, as a perturbed mirror copy carries.
fn mark_perturbed(step: &Step, call: &mut Call) {
    if let Some(p) = &step.perturb {
        call.headers
            .push((PERTURBED_HEADER.to_owned(), p.rate.to_string()));
    }
}

/// `{{var}}` replaced in every string of a JSON body.
fn render_json(v: &Value, vars: &BTreeMap<String, String>) -> Value {
    match v {
        Value::String(s) => match Template::parse(s) {
            Ok(t) => Value::String(t.render(vars)),
            Err(_) => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|x| render_json(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), render_json(x, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}
