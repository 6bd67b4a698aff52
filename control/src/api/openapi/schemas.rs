//! The JSON Schemas (2020-12, as OpenAPI 3.1 has them) of the API's bodies,
//! by name. They describe what the handlers write (`serde` views) and read
//! (the config's raw items, which refuse unknown keys).

use serde_json::{json, Map, Value};

/// `{"$ref": "#/components/schemas/NAME"}`
pub(super) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

fn array_of(name: &str) -> Value {
    json!({"type": "array", "items": reference(name)})
}

const STRING: &str = "string";

fn string() -> Value {
    json!({ "type": STRING })
}

fn count() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn number() -> Value {
    json!({"type": "number"})
}

fn nullable(kind: &str) -> Value {
    json!({ "type": [kind, "null"] })
}

/// A duration as the config writes it: `250ms`, `10s`, `5m`, `1h`.
fn duration() -> Value {
    json!({"type": "string", "pattern": "^[0-9]{1,6}(ms|s|m|h)$"})
}

fn percent() -> Value {
    json!({"type": "number", "minimum": 0, "maximum": 100})
}

pub(super) fn components() -> Value {
    // In parts: one `json!` of them all is past the macro's recursion limit.
    let parts = [
        json!({
        "Error": object(&["error"], json!({"error": string(), "path": string()})),
        "Errors": object(&["errors"], json!({"errors": {
            "type": "array",
            "items": object(&["path", "message"], json!({"path": string(), "message": string()})),
        }})),
        "AnyError": {"anyOf": [reference("Error"), reference("Errors")]},
        "Forbidden": object(&["error", "needed_scope"], json!({
            "error": string(),
            "needed_scope": {"type": "string", "enum": ["read", "write", "admin"]},
        })),
        "Status": object(&["status"], json!({"status": {
            "type": "string", "enum": ["ok", "ready", "not ready", "draining"],
        }})),
        "OpenApi": object(&["openapi", "info", "paths"], json!({"openapi": string()})),
        "Config": {
            "type": "object",
            "description": "The whole config, the YAML file's shape as JSON (docs/routing.md and the pages it links).",
        },
        }),
        json!({
        "ConfigView": object(&["version", "hash", "config"], json!({
            "version": count(), "hash": string(), "config": reference("Config"),
        })),
        "Applied": object(&["version", "hash"], json!({"version": count(), "hash": string()})),
        "Route": object(&["name", "listener", "split", "sticky"], json!({
            "name": string(), "listener": string(), "split": reference("Split"),
            "sticky": {"oneOf": [
                {"type": "null"},
                object(&["header"], json!({"header": string()})),
            ]},
        })),
        "Routes": array_of("Route"),
        "Split": {
            "type": "object",
            "description": "Cluster names to weights; traffic goes to each in proportion.",
            "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 4_294_967_295_u64},
        },
        "SplitSet": object(&["route", "split", "version"], json!({
            "route": string(), "split": reference("Split"), "version": count(),
        })),
        }),
        json!({
        "Mirror": object(&["cluster"], json!({
            "cluster": string(), "percent": percent(), "copies": {"type": "number", "minimum": 0},
            "max_body": string(), "rate_limit": {"type": "number", "minimum": 0},
            "max_in_flight": count(), "sample_by": string(), "timeout": duration(),
            "rewrite": {"type": "object"}, "compare": {"type": "object"},
            "perturb": {"type": "object"},
        })),
        "MirrorSet": object(&["route", "mirror", "version"], json!({
            "route": string(), "mirror": {"type": ["object", "null"]}, "version": count(),
        })),
        "EmbeddingBaseline": object(&["v", "similarities"], json!({
            "v": {"type": "integer", "const": 1}, "route": string(),
            "similarities": {"type": "array", "items": number()},
        })),
        "MirrorDiffs": object(&["capacity", "total", "diffs"], json!({
            "capacity": count(), "total": count(),
            "diffs": {"type": "array", "items": object(&["seq", "route", "kinds"], json!({
                "seq": count(), "route": string(),
                "kinds": {"type": "array", "items": string()},
            }))},
        })),
        "Latency": object(&["p50", "p95", "p99"], json!({
            "p50": number(), "p95": number(), "p99": number(),
        })),
        "Stats": object(&["window_seconds", "dropped_samples", "stats"], json!({
            "window_seconds": count(), "dropped_samples": count(),
            "stats": {"type": "array", "items": object(
                &["route", "cluster", "version", "requests", "rps", "errors", "error_rate",
                  "latency_ms", "ttft_ms", "gap_ms", "tpot_ms", "output_tokens",
                  "output_tokens_per_second"],
                json!({
                    "route": string(), "cluster": string(), "version": string(),
                    "requests": count(), "rps": number(), "errors": count(),
                    "error_rate": number(), "latency_ms": reference("Latency"),
                    "ttft_ms": {"oneOf": [{"type": "null"}, reference("Latency")]},
                    "gap_ms": {"oneOf": [{"type": "null"}, reference("Latency")]},
                    "tpot_ms": {"oneOf": [{"type": "null"}, reference("Latency")]},
                    "output_tokens": count(), "output_tokens_per_second": number(),
                }),
            )},
        })),
        "Events": object(&["events"], json!({"events": {"type": "array", "items": object(
            &["seq", "time_ms", "source", "action", "result", "version"],
            json!({
                "seq": count(), "time_ms": count(), "source": string(), "action": string(),
                "result": {"type": "string", "enum": ["applied", "rejected"]},
                "version": count(), "errors": {"type": "array", "items": string()},
                "evidence": {"type": "object"},
                "lineage": object(&["rollout", "rollout_event"], json!({
                    "rollout": string(), "rollout_event": string(),
                })),
            }),
        )}})),
        }),
        json!({
        "Gpu": object(&["available", "devices"], json!({
            "available": {"type": "boolean"}, "reason": string(),
            "devices": {"type": "array", "items": {"type": "object"}},
            "polled_at_ms": nullable("integer"),
        })),
        "Upstreams": object(&["clusters"], json!({
            "clusters": {"type": "array", "items": {"type": "object"}},
        })),
        "Fault": object(&["ttl", "action"], json!({
            "id": string(),
            "match": {"type": "object", "properties": {
                "route": string(), "cluster": string(), "listener": string(), "model": string(),
                "headers": {"type": "object", "additionalProperties": string()},
            }},
            "percent": percent(), "ttl": duration(), "max_active": count(),
            "halt_if": {"type": "object"},
            "action": {
                "type": "object",
                "description": "One action (docs/faults.md): abort, delay, reset, stream faults, ...",
                "minProperties": 1, "maxProperties": 1,
            },
        })),
        "FaultView": object(&["id", "kind", "state", "injected", "time_left_ms"], json!({
            "id": string(), "kind": string(), "state": string(), "injected": count(),
            "active_requests": count(), "time_left_ms": count(), "time_left": string(),
        })),
        "FaultList": object(&["faults"], json!({"faults": array_of("FaultView")})),
        "Removed": object(&["removed"], json!({"removed": string(), "version": count()})),
        }),
        json!({
        "Rollout": object(&["name", "route", "stable", "canary"], json!({
            "name": string(), "route": string(), "stable": string(), "canary": string(),
            "steps": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100}},
            "hold": duration(), "min_requests": count(), "interval": duration(),
            "window": duration(), "consecutive": count(),
            "on_breach": {"type": "string", "enum": ["rollback", "pause"]},
            "on_restart": {"type": "string", "enum": ["continue", "pause"]},
            "gates": {"type": "object"},
        })),
        "RolloutStatus": object(
            &["name", "route", "stable", "canary", "state", "step", "steps", "weight"],
            json!({
                "name": string(), "route": string(), "stable": string(), "canary": string(),
                "state": {"type": "string", "enum": [
                    "pending", "progressing", "paused", "promoted", "rolled_back", "aborted",
                ]},
                "step": count(), "steps": {"type": "array", "items": count()},
                "weight": count(), "breaches": count(), "gates": {"type": "object"},
                "targets": array_of("RolloutTarget"),
                "discovery": reference("RolloutDiscovery"),
                "coverage": reference("RolloutCoverage"),
                "step_history": array_of("RolloutStep"),
                "events": {"type": "array", "items": {"type": "object"}},
            }),
        ),
        "RolloutCoverage": object(&["step", "canary_clusters", "clusters_seen", "prompts"], json!({
            "step": count(), "canary_clusters": count(), "clusters_seen": count(),
            "percent": percent(), "prompts": count(), "prompts_seen": count(),
        })),
        "RolloutStep": object(&["step", "weight", "requests"], json!({
            "step": count(), "weight": count(), "requests": count(),
            "error_rate": percent(), "latency_p99_ms": number(),
            "coverage": reference("RolloutCoverage"),
        })),
        "RolloutTarget": object(&["url", "weight", "pending", "failures"], json!({
            "url": string(), "weight": nullable("integer"), "pending": {"type": "boolean"},
            "failures": count(), "error": string(), "drift": count(),
        })),
        "RolloutDiscovery": object(&["dns", "addresses", "failures"], json!({
            "dns": string(), "resolver": string(), "addresses": count(),
            "resolved_ms": count(), "failures": count(), "error": string(),
        })),
        "RolloutList": array_of("RolloutStatus"),
        "RecorderStart": object(&["path", "ttl"], json!({
            "path": string(), "ttl": duration(), "rotate_bytes": string(), "max_bytes": string(),
            "percent": percent(), "session_header": string(),
            "routes": {"type": "array", "items": string()},
            "bodies": {"type": "string", "enum": ["none", "redacted", "full"]},
            "allow_unredacted": {"type": "boolean"},
        })),
        "Recorder": object(&["recording"], json!({
            "recording": {"type": "boolean"}, "path": string(), "lines": count(), "bytes": count(),
        })),
        "LoadRunThreshold": {
            "type": "object",
            "required": ["name", "bound", "value", "passed"],
            "additionalProperties": false,
            "properties": {
                "name": string(), "step": string(), "bound": number(),
                "value": nullable("number"), "passed": {"type": "boolean"},
            },
        },
        }),
        json!({
        "LoadRun": {
            "type": "object",
            "required": ["run_id", "scenario", "state", "shard", "mode", "stages",
                "achieved_rate", "sent", "done", "failed", "in_flight", "queued",
                "thresholds", "passed", "elapsed_s", "duration_s", "started_at", "updated_at"],
            "additionalProperties": false,
            "properties": {
                "run_id": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
                "scenario": string(),
                "state": {"type": "string", "enum": ["running", "done", "interrupted"]},
                "shard": string(), "mode": string(),
                "stage": nullable("integer"), "stages": count(),
                "offered_rate": nullable("number"), "achieved_rate": number(),
                "sent": count(), "done": count(), "failed": count(), "in_flight": count(),
                "queued": count(), "ttft_p95_ms": nullable("number"),
                "error_rate": nullable("number"),
                "thresholds": array_of("LoadRunThreshold"),
                "passed": {"type": "boolean"}, "elapsed_s": number(), "duration_s": number(),
                "started_at": {"type": "string", "format": "date-time"},
                "updated_at": {"type": "string", "format": "date-time"},
            },
        },
        "LoadRuns": object(&["runs"], json!({"runs": array_of("LoadRun")})),
        "Artifact": {
            "type": "object",
            "required": ["v", "id", "kind", "label", "parents", "inputs"],
            "additionalProperties": false,
            "properties": {
                "v": count(),
                "id": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
                "kind": {"type": "string", "enum": [
                    "dataset", "checkpoint", "prompt_template", "config", "cluster",
                    "scenario", "model", "load_run", "capacity_run", "report", "rollout",
                    "rollout_event", "feedback",
                ]},
                "label": string(),
                "parents": {"type": "array", "items": {"type": "string", "pattern": "^[0-9a-f]{16}$"}},
                "inputs": {"description": "What the id is the SHA-256 of (docs/lineage.md)"},
                "attrs": {"type": "object"},
            },
        },
        "LineageList": object(&["artifacts"], json!({"artifacts": array_of("Artifact")})),
        }),
    ];
    let mut all = Map::new();
    for part in parts {
        if let Value::Object(map) = part {
            all.extend(map);
        }
    }
    Value::Object(all)
}
