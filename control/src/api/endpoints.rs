//! Every endpoint of the control API, in one table: the method and path
//! template of each. The router resolves requests against it (405's
//! `allow` header included), `sluice ctl` builds its requests from it, and
//! a test checks that the docs name every one. `GET /v1/openapi.json` is
//! built from it too, with each endpoint's schemas (`openapi/spec.rs`).

use crate::config::Scope;
use crate::rollout::Command;

sluice_filters::name_table! {
    /// One endpoint, spelled `METHOD /path` with `{placeholders}`.
    pub enum ApiEndpoint: "endpoint" {
        Healthz = "GET /healthz",
        Readyz = "GET /readyz",
        Metrics = "GET /metrics",
        /// The web console's page, script, style and icon (`console.rs`).
        ConsolePage = "GET /ui",
        ConsoleScript = "GET /ui/console.js",
        ConsoleStyle = "GET /ui/console.css",
        ConsoleIcon = "GET /ui/favicon.svg",
        GetConfig = "GET /v1/config",
        PutConfig = "PUT /v1/config",
        ListRoutes = "GET /v1/routes",
        PutSplit = "PUT /v1/routes/{route}/split",
        PutMirror = "PUT /v1/routes/{route}/mirror",
        DeleteMirror = "DELETE /v1/routes/{route}/mirror",
        MirrorBaseline = "GET /v1/routes/{route}/mirror/embedding-baseline",
        MirrorDiffs = "GET /v1/mirror/diffs",
        Stats = "GET /v1/stats",
        Events = "GET /v1/events",
        Gpu = "GET /v1/gpu",
        Upstreams = "GET /v1/upstreams",
        ListFaults = "GET /v1/faults",
        AddFault = "POST /v1/faults",
        ShowFault = "GET /v1/faults/{id}",
        RemoveFault = "DELETE /v1/faults/{id}",
        ListRollouts = "GET /v1/rollouts",
        AddRollout = "POST /v1/rollouts",
        ShowRollout = "GET /v1/rollouts/{name}",
        RemoveRollout = "DELETE /v1/rollouts/{name}",
        /// `{command}` is one of [`Command`]'s names.
        RolloutCommand = "POST /v1/rollouts/{name}/{command}",
        GetRecorder = "GET /v1/recorder",
        PutRecorder = "PUT /v1/recorder",
        DeleteRecorder = "DELETE /v1/recorder",
        ListLoadRuns = "GET /v1/load-runs",
        PutLoadRun = "POST /v1/load-runs",
        ShowLoadRun = "GET /v1/load-runs/{id}",
        ListLineage = "GET /v1/lineage",
        ShowLineage = "GET /v1/lineage/{id}",
        /// This table as an OpenAPI 3.1 document (see `openapi.rs`).
        OpenApi = "GET /v1/openapi.json",
    }
}

/// The placeholder whose values are [`Command`]'s names. It matches any
/// segment, so that a wrong one is answered with the valid names.
const COMMAND: &str = "{command}";

impl ApiEndpoint {
    pub fn method(self) -> &'static str {
        self.as_str().split_once(' ').map_or("", |(m, _)| m)
    }

    /// The scope a token needs to call it; none for health, readiness,
    /// metrics and the console's static files, which need no token (the
    /// console holds no data: what it shows it asks `/v1/` for, with the
    /// token the operator typed in). Every `GET` is `read`; the data-plane
    /// knobs (weights, mirror, faults, recorder, load runs) `write`; the
    /// config and the rollouts `admin`.
    pub fn scope(self) -> Option<Scope> {
        use ApiEndpoint::*;
        match self {
            Healthz | Readyz | Metrics | ConsolePage | ConsoleScript | ConsoleStyle
            | ConsoleIcon => None,
            PutConfig | AddRollout | RemoveRollout | RolloutCommand => Some(Scope::Admin),
            PutSplit | PutMirror | DeleteMirror | AddFault | RemoveFault | PutRecorder
            | DeleteRecorder | PutLoadRun => Some(Scope::Write),
            GetConfig | ListRoutes | MirrorBaseline | MirrorDiffs | Stats | Events | Gpu
            | Upstreams | ListFaults | ShowFault | ListRollouts | ShowRollout | GetRecorder
            | ListLoadRuns | ShowLoadRun | ListLineage | ShowLineage | OpenApi => Some(Scope::Read),
        }
    }

    /// The path with its `{placeholders}`.
    pub fn template(self) -> &'static str {
        self.as_str().split_once(' ').map_or("", |(_, t)| t)
    }

    /// The path with `args` in its placeholders, in order (a missing one
    /// is left empty). What `sluice ctl` sends.
    pub fn path(self, args: &[&str]) -> String {
        let mut args = args.iter();
        let segments: Vec<&str> = self
            .template()
            .split('/')
            .map(|s| match is_placeholder(s) {
                true => args.next().copied().unwrap_or(""),
                false => s,
            })
            .collect();
        segments.join("/")
    }

    /// The template as the docs write it: `{command}` spelled out as
    /// `pause|resume|promote|abort`.
    pub fn documented(self) -> String {
        let commands: Vec<&str> = Command::ALL.iter().map(|c| c.as_str()).collect();
        self.template().replace(COMMAND, &commands.join("|"))
    }

    /// The placeholders' values when `segments` (the path split at `/`)
    /// is this endpoint's path.
    fn capture<'a>(self, segments: &[&'a str]) -> Option<Vec<&'a str>> {
        let template: Vec<&str> = self.template().split('/').collect();
        if template.len() != segments.len() {
            return None;
        }
        let mut args = Vec::new();
        for (want, &have) in template.iter().zip(segments) {
            if is_placeholder(want) {
                if have.is_empty() {
                    return None;
                }
                args.push(have);
            } else if *want != have {
                return None;
            }
        }
        Some(args)
    }
}

pub(super) fn is_placeholder(segment: &str) -> bool {
    segment.starts_with('{') && segment.ends_with('}')
}

/// What the table says of one request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Resolved<'a> {
    /// The endpoint, and its placeholders' values in order.
    Found(ApiEndpoint, Vec<&'a str>),
    /// The path exists, not with this method: the methods it answers.
    WrongMethod(String),
    NotFound,
}

pub(super) fn resolve<'a>(method: &str, path: &'a str) -> Resolved<'a> {
    let segments: Vec<&str> = path.split('/').collect();
    let mut allow: Vec<&str> = Vec::new();
    for &endpoint in ApiEndpoint::ALL {
        let Some(args) = endpoint.capture(&segments) else {
            continue;
        };
        if endpoint.method() == method {
            return Resolved::Found(endpoint, args);
        }
        if !allow.contains(&endpoint.method()) {
            allow.push(endpoint.method());
        }
    }
    match allow.is_empty() {
        true => Resolved::NotFound,
        false => Resolved::WrongMethod(allow.join(", ")),
    }
}

#[cfg(test)]
mod tests;
