//! `steps:`: each step's service, request and timing, and the order of
//! `depends_on` (a cycle or an unknown name is an error).

use std::collections::BTreeSet;
use std::path::Path;

use sluice_filters::{check_redis_target, parse_duration, Perturbation};

use super::super::dist::{read as read_dist, Kind};
use super::super::raw::{RawNames, RawPrompt, RawStep};
use super::super::{Body, Ended, JsonPath, Service, Step, Template, When, DEFAULT_TIMEOUT};
use super::Errors;

mod fields;

use fields::{extract, perturb, redis_step};
pub(super) use fields::{refuse, timeout, timeout_at, when};

/// The path of an LLM step when none is written.
const CHAT_PATH: &str = "/v1/chat/completions";

/// The steps in the order they run.
pub(super) fn steps(
    raw: &[RawStep],
    dir: &Path,
    known: &BTreeSet<String>,
    e: &mut Errors,
) -> Vec<Step> {
    if raw.is_empty() {
        e.add("steps", "needs at least one step");
    }
    let mut out: Vec<Step> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, s) in raw.iter().enumerate() {
        let path = format!("steps[{i}]");
        if let Some(j) = names.iter().position(|n| *n == s.name) {
            e.add(
                format!("{path}.name"),
                format!("`{}` is already the name of steps[{j}]", s.name),
            );
        }
        names.push(&s.name);
        let mut mine = known.clone();
        mine.extend(ancestors(raw, s).into_iter().map(|a| format!("{a}.text")));
        if let Some(step) = step(s, &path, dir, &mine, raw, e) {
            out.push(step);
        }
    }
    for (i, s) in raw.iter().enumerate() {
        for d in depends(s) {
            if d == s.name {
                e.add(
                    format!("steps[{i}].depends_on"),
                    "a step cannot depend on itself",
                );
            } else if !names.contains(&d.as_str()) {
                e.add(
                    format!("steps[{i}].depends_on"),
                    format!("unknown step `{d}`"),
                );
            }
        }
    }
    let mut out = order(out, e);
    keep_texts(&mut out);
    out
}

/// `setup:` or `teardown:` (at `prefix`): steps run once in the order
/// written; each may use the `{{NAME.text}}` of the ones before it.
pub(super) fn hooks(
    raw: &[RawStep],
    prefix: &str,
    dir: &Path,
    known: &BTreeSet<String>,
    e: &mut Errors,
) -> Vec<Step> {
    let mut out = Vec::new();
    let mut mine = known.clone();
    for (i, s) in raw.iter().enumerate() {
        let path = format!("{prefix}[{i}]");
        for (key, present) in [
            ("depends_on", s.depends_on.is_some()),
            ("when", s.when.is_some()),
            ("delay", s.delay.is_some()),
        ] {
            if present {
                e.add(
                    format!("{path}.{key}"),
                    format!("is not for {prefix} steps (they run once, in order)"),
                );
            }
        }
        if let Some(step) = step(s, &path, dir, &mine, raw, e) {
            out.push(step);
        }
        mine.insert(format!("{}.text", s.name));
    }
    keep_texts(&mut out);
    out
}

/// Marks the steps whose `{{NAME.text}}` another uses.
fn keep_texts(steps: &mut [Step]) {
    let used: BTreeSet<String> = steps
        .iter()
        .flat_map(Step::vars)
        .filter_map(|v| v.strip_suffix(".text").map(str::to_owned))
        .collect();
    for s in steps {
        s.keep_text = used.contains(&s.name);
    }
}

/// The steps `s` depends on, directly or through others.
fn ancestors(raw: &[RawStep], s: &RawStep) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = depends(s);
    // Each name is expanded once: bounded by the number of steps.
    while let Some(name) = stack.pop() {
        if name == s.name || !seen.insert(name.clone()) {
            continue;
        }
        if let Some(d) = raw.iter().find(|r| r.name == name) {
            stack.extend(depends(d));
        }
    }
    seen
}

pub(super) fn depends(s: &RawStep) -> Vec<String> {
    match &s.depends_on {
        None => Vec::new(),
        Some(RawNames::One(n)) => vec![n.clone()],
        Some(RawNames::Many(v)) => v.clone(),
    }
}

/// Kahn's sort, stable in the order written; what is left is a cycle.
fn order(mut steps: Vec<Step>, e: &mut Errors) -> Vec<Step> {
    let mut done: Vec<Step> = Vec::with_capacity(steps.len());
    // Each pass places at least one step or stops: bounded by the count.
    for _ in 0..=steps.len() {
        let ready = steps.iter().position(|s| {
            s.depends_on
                .iter()
                .all(|d| done.iter().any(|p| &p.name == d) || !steps.iter().any(|q| &q.name == d))
        });
        match ready {
            Some(i) => done.push(steps.remove(i)),
            None => break,
        }
    }
    if !steps.is_empty() {
        let cycle: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        e.add(
            "steps",
            format!("depends_on makes a cycle through {}", cycle.join(", ")),
        );
    }
    done
}

fn step(
    s: &RawStep,
    path: &str,
    dir: &Path,
    known: &BTreeSet<String>,
    all: &[RawStep],
    e: &mut Errors,
) -> Option<Step> {
    let at = |key: &str| format!("{path}.{key}");
    let service = match s.service.as_str() {
        "llm" => Service::Llm,
        "http" => Service::Http,
        "vector" => Service::Vector,
        "redis" => Service::Redis,
        "grpc" => Service::Grpc,
        other => {
            e.add(
                at("service"),
                format!(
                    "unknown service `{other}` (expected one of llm, http, vector, redis, grpc)"
                ),
            );
            return None;
        }
    };
    let template = |key: &str, text: &str, e: &mut Errors| -> Option<Template> {
        let t = e.check(&at(key), Template::parse(text))?;
        for v in t.vars() {
            if let (false, Some(named)) = (known.contains(v), v.strip_suffix(".text")) {
                let message = if all.iter().any(|r| r.name == named) {
                    format!(
                        "`{{{{{v}}}}}` is the answer of `{named}`, which does not run before \
                         this step (name it in depends_on)"
                    )
                } else {
                    format!("`{{{{{v}}}}}` names unknown step `{named}`")
                };
                e.add(at(key), message);
                return None;
            }
            if !known.contains(v) {
                // `NAME.text` has its own message; the data and extracts are listed.
                let list: Vec<&str> = known
                    .iter()
                    .map(String::as_str)
                    .filter(|k| !k.ends_with(".text"))
                    .collect();
                e.add(
                    at(key),
                    format!(
                        "unknown variable `{v}` (known: {})",
                        if list.is_empty() {
                            "none".to_owned()
                        } else {
                            list.join(", ")
                        }
                    ),
                );
                return None;
            }
        }
        Some(t)
    };
    match service {
        Service::Redis => return redis_step(s, path, all, template, e),
        Service::Grpc => return super::grpc::step(s, path, dir, all, template, e),
        _ => {}
    }
    refuse(
        s,
        path,
        &["message", "metadata"],
        &format!(
            "is for grpc steps (a {} step sends `body` and `headers`)",
            s.service
        ),
        e,
    );
    if s.command.is_some() {
        e.add(at("command"), "is for redis steps");
    }
    let target = s.target.as_ref().and_then(|t| {
        let url = t.trim_end_matches('/');
        e.check(&at("target"), super::check_url(url))
            .map(|()| url.to_owned())
    });
    let path_text = match (&s.path, service) {
        (Some(p), _) => p.as_str(),
        (None, Service::Llm) => CHAT_PATH,
        (None, _) => {
            e.add(at("path"), format!("a {} step needs a path", s.service));
            ""
        }
    };
    if !path_text.is_empty() && !path_text.starts_with('/') {
        e.add(
            at("path"),
            format!("must start with `/`, found `{path_text}`"),
        );
    }
    let url_path = template("path", path_text, e);
    let mut headers = Vec::new();
    for (name, value) in &s.headers {
        if let Some(t) = template(&format!("headers.{name}"), value, e) {
            headers.push((name.clone(), t));
        }
    }
    let method = s.method.clone().unwrap_or_else(|| match service {
        Service::Llm => "POST".to_owned(),
        _ => "GET".to_owned(),
    });
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        e.add(
            at("method"),
            format!("must be an HTTP method like GET or POST, found `{method}`"),
        );
    }
    let json = match (&s.body, &s.body_file) {
        (Some(_), Some(_)) => {
            e.add(path, "give one of `body` and `body_file`");
            None
        }
        (Some(b), None) => Some(b.clone()),
        (None, Some(file)) => std::fs::read_to_string(dir.join(file))
            .map_err(|err| format!("{file}: {err}"))
            .and_then(|t| {
                serde_json::from_str(&t).map_err(|err| format!("{file}: not JSON: {err}"))
            })
            .map_err(|m| e.add(at("body_file"), m))
            .ok(),
        (None, None) => None,
    };
    if let Some(j) = &json {
        let mut strings = Vec::new();
        collect_strings(j, &mut strings);
        for text in strings {
            template("body", &text, e);
        }
    }
    let prompt = match &s.prompt {
        None => None,
        Some(RawPrompt::Text(t)) => template("prompt", t, e),
        Some(RawPrompt::Template(t)) => template("prompt.template", &t.template, e),
    };
    let (input_tokens, shared_prefix) = match &s.prompt {
        Some(RawPrompt::Template(t)) => {
            let input_tokens = t
                .input_tokens
                .as_ref()
                .and_then(|d| e.check(&at("prompt.input_tokens"), read_dist(d, Kind::Count)));
            let shared = match t.prefix.as_deref() {
                None | Some("unique") => false,
                Some("shared") => true,
                Some(other) => {
                    e.add(
                        at("prompt.prefix"),
                        format!("must be `unique` or `shared`, found `{other}`"),
                    );
                    false
                }
            };
            if t.input_tokens.is_none() && t.prefix.is_some() {
                e.add(
                    at("prompt.prefix"),
                    "needs `input_tokens` (it names the filler's)",
                );
            }
            (input_tokens, shared)
        }
        _ => (None, false),
    };
    let body = match (service, prompt, json) {
        (Service::Llm, Some(_), Some(_)) => {
            e.add(path, "give one of `prompt` and a body");
            Body::None
        }
        (Service::Llm, Some(p), None) => Body::Prompt(p),
        (_, None, Some(j)) => Body::Json(j),
        (Service::Llm, None, None) => {
            if s.prompt.is_none() {
                e.add(path, "an llm step needs a `prompt` or a body");
            }
            Body::None
        }
        (_, Some(_), _) => {
            e.add(
                at("prompt"),
                format!("is for llm steps (a {} step sends `body`)", s.service),
            );
            Body::None
        }
        (_, None, None) => Body::None,
    };
    if service != Service::Llm {
        for (key, present) in [
            ("max_tokens", s.max_tokens.is_some()),
            ("model", s.model.is_some()),
        ] {
            if present {
                e.add(at(key), "is for llm steps");
            }
        }
    }
    let delay = s
        .delay
        .as_ref()
        .and_then(|d| e.check(&at("delay"), read_dist(d, Kind::Duration)));
    let max_tokens = s
        .max_tokens
        .as_ref()
        .and_then(|d| e.check(&at("max_tokens"), read_dist(d, Kind::Count)));
    let timeout = timeout(s, path, e);
    let thresholds = super::thresholds(&s.thresholds, &at("thresholds"), e);
    if service != Service::Llm && s.ignore_eos.is_some() {
        e.add(at("ignore_eos"), "is for llm steps");
    }
    let when = when(s, all, &at("when"), e);
    let extract = extract(s, path, e);
    let perturb = perturb(s, service, path, e);
    Some(Step {
        target,
        command: Vec::new(),
        keep_text: false,
        perturb,
        extract,
        thresholds,
        when,
        ignore_eos: s.ignore_eos.unwrap_or(false),
        name: s.name.clone(),
        service,
        method,
        path: url_path?,
        headers,
        body,
        depends_on: depends(s),
        delay,
        model: s.model.clone(),
        max_tokens,
        input_tokens,
        shared_prefix,
        token_rho: None,
        stream: s.stream.unwrap_or(service == Service::Llm),
        timeout,
    })
}

pub(crate) fn collect_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}
