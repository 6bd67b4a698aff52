//! What each endpoint of the table takes and answers, by the names of the
//! schemas in `schemas.rs`: one exhaustive match, so that a new row in the
//! table does not build without its entry here.

use crate::api::ApiEndpoint;

/// The request body an endpoint reads.
pub(super) enum Body {
    None,
    /// JSON (or YAML, the same shape) of the named schema.
    Json(&'static str),
}

/// One endpoint's documentation.
pub(super) struct Spec {
    pub(super) summary: &'static str,
    pub(super) body: Body,
    /// Each status the endpoint itself answers, with its body's schema
    /// (`text`, `html`, `javascript`, `css` and `svg` for those media types). 401 (under `/v1/`) and, with a body, 400 and
    /// 413 are added by the document.
    pub(super) answers: &'static [(u16, &'static str)],
}

const fn spec(summary: &'static str, body: Body, answers: &'static [(u16, &'static str)]) -> Spec {
    Spec {
        summary,
        body,
        answers,
    }
}

impl Spec {
    pub(super) fn of(endpoint: ApiEndpoint) -> Spec {
        use ApiEndpoint as E;
        use Body::{Json, None};
        match endpoint {
            E::Healthz => spec("Liveness: the process answers", None, &[(200, "Status")]),
            E::Readyz => spec(
                "Readiness: 503 before the data plane listens and from the start of a drain",
                None,
                &[(200, "Status"), (503, "Status")],
            ),
            E::Metrics => spec(
                "Prometheus metrics, text exposition format 0.0.4",
                None,
                &[(200, "text")],
            ),
            E::ConsolePage => spec(
                "The web console's page (no token: the page asks /v1/ with the one typed in)",
                None,
                &[(200, "html")],
            ),
            E::ConsoleScript => spec("The web console's script", None, &[(200, "javascript")]),
            E::ConsoleStyle => spec("The web console's style sheet", None, &[(200, "css")]),
            E::ConsoleIcon => spec("The web console's icon", None, &[(200, "svg")]),
            E::GetConfig => spec(
                "The live config, its version and hash",
                None,
                &[(200, "ConfigView")],
            ),
            E::PutConfig => spec(
                "Replace the whole config (validated whole, then swapped in)",
                Json("Config"),
                &[(200, "Applied"), (400, "AnyError")],
            ),
            E::ListRoutes => spec("Every route and its split", None, &[(200, "Routes")]),
            E::PutSplit => spec(
                "Replace a route's split: cluster names to weights",
                Json("Split"),
                &[(200, "SplitSet"), (400, "AnyError"), (404, "Error")],
            ),
            E::PutMirror => spec(
                "Set a route's mirror policy, replaced whole",
                Json("Mirror"),
                &[(200, "MirrorSet"), (400, "AnyError"), (404, "Error")],
            ),
            E::DeleteMirror => spec(
                "Stop mirroring a route",
                None,
                &[(200, "MirrorSet"), (400, "AnyError"), (404, "Error")],
            ),
            E::MirrorBaseline => spec(
                "The route's embedding drift baseline, as the file compare.embeddings.baseline reads",
                None,
                &[(200, "EmbeddingBaseline"), (404, "Error"), (409, "Error")],
            ),
            E::MirrorDiffs => spec(
                "The latest shadow answers that differed, newest first",
                None,
                &[(200, "MirrorDiffs")],
            ),
            E::Stats => spec(
                "Per route, cluster and version over the last window: rps, errors, latency and token timing",
                None,
                &[(200, "Stats")],
            ),
            E::Events => spec("The audit log of config changes", None, &[(200, "Events")]),
            E::Gpu => spec("The GPUs as last polled", None, &[(200, "Gpu")]),
            E::Upstreams => spec(
                "The model servers' load as last scraped",
                None,
                &[(200, "Upstreams")],
            ),
            E::ListFaults => spec("Every fault experiment", None, &[(200, "FaultList")]),
            E::AddFault => spec(
                "Add a fault experiment (one `faults:` item)",
                Json("Fault"),
                &[(201, "FaultView"), (400, "AnyError"), (409, "Error")],
            ),
            E::ShowFault => spec(
                "One fault experiment",
                None,
                &[(200, "FaultView"), (404, "Error")],
            ),
            E::RemoveFault => spec(
                "Remove a fault experiment",
                None,
                &[(200, "Removed"), (400, "AnyError"), (404, "Error")],
            ),
            E::ListRollouts => spec("Every rollout", None, &[(200, "RolloutList")]),
            E::AddRollout => spec(
                "Start a rollout (one `rollouts:` item)",
                Json("Rollout"),
                &[(201, "RolloutStatus"), (400, "AnyError"), (409, "Error")],
            ),
            E::ShowRollout => spec(
                "One rollout with its events",
                None,
                &[(200, "RolloutStatus"), (404, "Error")],
            ),
            E::RemoveRollout => spec(
                "Stop and remove a rollout; its weights stay",
                None,
                &[(200, "Removed"), (400, "AnyError"), (404, "Error"), (409, "Error")],
            ),
            E::RolloutCommand => spec(
                "Pause, resume, promote or abort a rollout",
                None,
                &[(200, "RolloutStatus"), (400, "AnyError"), (404, "Error"), (409, "Error")],
            ),
            E::GetRecorder => spec("The running recording, if any", None, &[(200, "Recorder")]),
            E::PutRecorder => spec(
                "Start a recording (the config's `recorder:` with a required ttl)",
                Json("RecorderStart"),
                &[(201, "Recorder"), (400, "AnyError"), (500, "Error")],
            ),
            E::DeleteRecorder => spec(
                "Stop the running recording",
                None,
                &[(200, "Recorder"), (404, "Error")],
            ),
            E::ListLoadRuns => spec(
                "The load runs reported by `sluice load --report-to`, newest first",
                None,
                &[(200, "LoadRuns")],
            ),
            E::PutLoadRun => spec(
                "Report a load run's summary: 201 when new, 200 when it replaces one",
                Json("LoadRun"),
                &[(200, "LoadRun"), (201, "LoadRun"), (400, "Error")],
            ),
            E::ShowLoadRun => spec("One load run", None, &[(200, "LoadRun"), (404, "Error")]),
            E::ListLineage => spec(
                "The live lineage artefacts: the config, each cluster version with its \
                 dataset, checkpoint and prompt template, each rollout and its events",
                None,
                &[(200, "LineageList")],
            ),
            E::ShowLineage => spec(
                "One live lineage artefact by its id",
                None,
                &[(200, "Artifact"), (400, "Error"), (404, "Error")],
            ),
            E::OpenApi => spec("This document", None, &[(200, "OpenApi")]),
        }
    }
}
