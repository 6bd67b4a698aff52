//! A step's parts beyond its request: `when`, `extract`, `perturb`, a
//! redis step's command and target, which keys a service refuses, and the
//! timeout.

use super::*;

/// `when: STEP.ok|error|hit|miss`, of a step `s` depends on (hit and miss
/// of a redis one).
pub(in crate::load::scenario::validate) fn when(
    s: &RawStep,
    all: &[RawStep],
    path: &str,
    e: &mut Errors,
) -> Option<When> {
    let w = s.when.as_deref()?;
    let (step, outcome) = w.rsplit_once('.').unwrap_or((w, ""));
    let ended = match outcome {
        "ok" => Ended::Ok,
        "error" => Ended::Error,
        "hit" => Ended::Hit,
        "miss" => Ended::Miss,
        _ => {
            e.add(
                path,
                format!("`{w}` is not STEP.ok, STEP.error, STEP.hit or STEP.miss"),
            );
            return None;
        }
    };
    if !depends(s).iter().any(|d| d == step) {
        e.add(
            path,
            format!("`{w}` names `{step}`, which this step does not depend on"),
        );
        return None;
    }
    let service = all
        .iter()
        .find(|r| r.name == step)
        .map(|r| r.service.as_str());
    if matches!(ended, Ended::Hit | Ended::Miss) && service != Some("redis") {
        e.add(
            path,
            format!(
                "`{w}`: hit and miss are of redis steps, and `{step}` is a {} step",
                service.unwrap_or("unknown")
            ),
        );
        return None;
    }
    Some(When {
        step: step.to_owned(),
        ended,
    })
}

pub(in crate::load::scenario::validate) fn extract(
    s: &RawStep,
    path: &str,
    e: &mut Errors,
) -> Vec<(String, JsonPath)> {
    let mut out = Vec::new();
    for (name, p) in &s.extract {
        if let Some(p) = e.check(&format!("{path}.extract.{name}"), JsonPath::parse(p)) {
            out.push((name.clone(), p));
        }
    }
    out
}

/// `perturb:`, on llm steps only (it rewords their user text); its keys
/// checked as `mirror.perturb`'s are.
pub(in crate::load::scenario::validate) fn perturb(
    s: &RawStep,
    service: Service,
    path: &str,
    e: &mut Errors,
) -> Option<Perturbation> {
    let spec = s.perturb.as_ref()?;
    if service != Service::Llm {
        e.add(format!("{path}.perturb"), "is for llm steps");
        return None;
    }
    let (policy, problems) = spec.policy();
    for (key, message) in problems {
        e.add(format!("{path}.perturb.{key}"), message);
    }
    Some(policy)
}

/// Whether `s` sets `key`, one of the keys only some services take.
fn sets(s: &RawStep, key: &str) -> bool {
    match key {
        "method" => s.method.is_some(),
        "path" => s.path.is_some(),
        "headers" => !s.headers.is_empty(),
        "body" => s.body.is_some(),
        "body_file" => s.body_file.is_some(),
        "prompt" => s.prompt.is_some(),
        "model" => s.model.is_some(),
        "max_tokens" => s.max_tokens.is_some(),
        "stream" => s.stream.is_some(),
        "ignore_eos" => s.ignore_eos.is_some(),
        "command" => s.command.is_some(),
        "extract" => !s.extract.is_empty(),
        "message" => s.message.is_some(),
        "metadata" => !s.metadata.is_empty(),
        "perturb" => s.perturb.is_some(),
        _ => false,
    }
}

/// An error `why` at each of `keys` that `s` sets: the keys of other
/// services, refused by name rather than ignored.
pub(in crate::load::scenario::validate) fn refuse(
    s: &RawStep,
    path: &str,
    keys: &[&str],
    why: &str,
    e: &mut Errors,
) {
    for key in keys.iter().filter(|k| sets(s, k)) {
        e.add(format!("{path}.{key}"), why);
    }
}

/// A redis step: `command` (each argument a template) to `target: HOST:PORT`;
/// the HTTP keys are refused.
pub(in crate::load::scenario::validate) fn redis_step(
    s: &RawStep,
    path: &str,
    all: &[RawStep],
    template: impl Fn(&str, &str, &mut Errors) -> Option<Template>,
    e: &mut Errors,
) -> Option<Step> {
    let at = |key: &str| format!("{path}.{key}");
    refuse(
        s,
        path,
        &[
            "method",
            "path",
            "headers",
            "body",
            "body_file",
            "prompt",
            "model",
            "max_tokens",
            "stream",
            "ignore_eos",
            "message",
            "metadata",
            "perturb",
        ],
        "is not for redis steps (they send `command`)",
        e,
    );
    let mut command = Vec::new();
    match &s.command {
        None => e.add(
            at("command"),
            "a redis step needs a command like [GET, key]",
        ),
        Some(args) if args.is_empty() => e.add(at("command"), "is empty"),
        Some(args) => {
            for (k, arg) in args.iter().enumerate() {
                command.extend(template(&format!("command[{k}]"), arg, e));
            }
        }
    }
    let target = match s.target.as_deref() {
        None => {
            e.add(
                at("target"),
                "a redis step needs the server's HOST:PORT (like 127.0.0.1:6379) or a redis:// URL",
            );
            None
        }
        Some(t) => e.check(&at("target"), check_redis_target(t)),
    };
    let timeout = timeout(s, path, e);
    let thresholds = super::super::thresholds(&s.thresholds, &at("thresholds"), e);
    let delay = s
        .delay
        .as_ref()
        .and_then(|d| e.check(&at("delay"), read_dist(d, Kind::Duration)));
    let when = when(s, all, &at("when"), e);
    Some(Step {
        name: s.name.clone(),
        service: Service::Redis,
        method: String::new(),
        path: Template::parse("").ok()?,
        headers: Vec::new(),
        body: Body::None,
        depends_on: depends(s),
        delay,
        model: None,
        max_tokens: None,
        input_tokens: None,
        shared_prefix: false,
        token_rho: None,
        stream: false,
        timeout,
        thresholds,
        when,
        ignore_eos: false,
        extract: extract(s, path, e),
        target: Some(target?),
        command,
        keep_text: false,
        perturb: None,
    })
}

pub(in crate::load::scenario::validate) fn timeout(
    s: &RawStep,
    path: &str,
    e: &mut Errors,
) -> std::time::Duration {
    timeout_at(s.timeout.as_deref(), &format!("{path}.timeout"), e)
}

/// A step's `timeout` at `at` (a replay's too): above 0, else the default.
pub(in crate::load::scenario::validate) fn timeout_at(
    text: Option<&str>,
    at: &str,
    e: &mut Errors,
) -> std::time::Duration {
    match text {
        None => DEFAULT_TIMEOUT,
        Some(t) => match e.check(at, parse_duration(t)) {
            Some(d) if d.is_zero() => {
                e.add(at, "must be greater than 0");
                DEFAULT_TIMEOUT
            }
            Some(d) => d,
            None => DEFAULT_TIMEOUT,
        },
    }
}
