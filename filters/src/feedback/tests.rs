#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::{json, Value};

use super::*;

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn the_initial_weight_grows_with_the_error_rate_up_to_five() {
    assert_eq!(initial_weight(0.0), 1.0);
    assert!((initial_weight(0.2) - 3.0).abs() < 1e-12);
    assert_eq!(initial_weight(0.5), 5.0);
    assert_eq!(initial_weight(1.0), 5.0);
    // Out of range is taken at the nearest bound.
    assert_eq!(initial_weight(-1.0), 1.0);
    assert_eq!(initial_weight(f64::NAN), 1.0);
}

#[test]
fn the_weight_halves_every_half_life() {
    let half = 72 * HOUR;
    assert_eq!(weight_at(4.0, Duration::ZERO, half), 4.0);
    assert!((weight_at(4.0, half, half) - 2.0).abs() < 1e-12);
    assert!((weight_at(4.0, 2 * half, half) - 1.0).abs() < 1e-12);
    assert!((weight_at(4.0, half / 2, half) - 4.0 / 2f64.sqrt()).abs() < 1e-12);
    assert_eq!(weight_at(4.0, HOUR, Duration::ZERO), 0.0);
}

#[test]
fn the_default_half_lives_follow_the_cause() {
    let h = HalfLives::default();
    assert_eq!(h.of(Cause::UpstreamTimeout), 72 * HOUR);
    assert_eq!(h.of(Cause::CacheMiss), 24 * HOUR);
    assert_eq!(h.of(Cause::Other), 48 * HOUR);
}

#[test]
fn the_cause_comes_from_the_cluster_kind_and_the_statuses() {
    let timeouts = [Some(200), Some(504), Some(504), Some(502)];
    assert_eq!(cause_of(false, &timeouts), Cause::UpstreamTimeout);
    assert_eq!(cause_of(true, &timeouts), Cause::CacheMiss);
    let refused = [Some(502), Some(502), Some(504), None];
    assert_eq!(cause_of(false, &refused), Cause::Other);
    assert_eq!(cause_of(false, &[Some(200)]), Cause::Other);
    assert_eq!(cause_of(false, &[]), Cause::Other);
    assert!(is_error_status(None) && is_error_status(Some(0)) && is_error_status(Some(500)));
    assert!(!is_error_status(Some(429)) && !is_error_status(Some(200)));
}

fn sample() -> Manifest {
    let artifact = Artifact::new(
        ArtifactKind::Feedback,
        "chat-v2 rolled_back",
        json!({"route": "chat", "gate": "error_rate"}),
        vec![crate::lineage::content_id(&json!("event"))],
    );
    Manifest {
        v: FEEDBACK_VERSION,
        id: artifact.id.clone(),
        trigger: Trigger {
            kind: TriggerKind::RolloutBreach,
            cause: Cause::Other,
            gate: "error_rate".into(),
            value: Some(50.0),
            bound: 1.0,
            unit: "%".into(),
            reason: "error_rate 50% > 1% (20 samples) breached 1 evaluation(s) in a row".into(),
        },
        route: "chat".into(),
        rollout: Some("chat-v2".into()),
        fault: None,
        cluster: Some("llm-canary".into()),
        version: Some("v2.0.0".into()),
        lineage: FeedbackLineage::default(),
        window: Window {
            from: "2026-12-06T08:00:00.000000Z".into(),
            to: "2026-12-06T08:05:00.000000Z".into(),
        },
        requests: 40,
        errors: 8,
        error_rate: 0.2,
        initial_weight: 3.0,
        half_life: "48h".into(),
        created: "2026-12-06T08:05:00.000000Z".into(),
        trace: TRACE_FILE.into(),
        notes: Vec::new(),
        artifact,
    }
}

fn text_with(edit: impl FnOnce(&mut Value)) -> String {
    let mut v = serde_json::to_value(sample()).unwrap();
    edit(&mut v);
    v.to_string()
}

#[test]
fn a_manifest_round_trips_and_decays_from_its_creation() {
    let m = sample();
    let text = serde_json::to_string_pretty(&m).unwrap();
    assert!(text.contains(r#""kind": "rollout_breach""#), "{text}");
    let back = Manifest::parse(&text).unwrap();
    assert_eq!(back, m);
    let created = m.created_us();
    assert_eq!(m.weight_at(created), 3.0);
    assert!((m.weight_at(created + 48 * 3_600_000_000) - 1.5).abs() < 1e-12);
    assert!((m.weight_at(created + 96 * 3_600_000_000) - 0.75).abs() < 1e-12);
    // A clock behind the creation is age 0.
    assert_eq!(m.weight_at(created - 1_000_000), 3.0);
}

#[test]
fn a_manifest_is_read_strictly_and_its_errors_say_where() {
    let err = |edit: fn(&mut Value)| Manifest::parse(&text_with(edit)).unwrap_err().to_string();
    assert_eq!(
        err(|v| v["trigger"]["kind"] = json!("meltdown")),
        "trigger.kind: unknown variant `meltdown`, expected `rollout_breach` or `fault_halt`"
    );
    assert_eq!(
        err(|v| v["extra"] = json!(1)),
        "extra: unknown field `extra`, expected one of `v`, `id`, `trigger`, `route`, `rollout`, \
         `fault`, `cluster`, `version`, `lineage`, `window`, `requests`, `errors`, \
         `error_rate`, `initial_weight`, `half_life`, `created`, `trace`, `notes`, `artifact`"
    );
    assert_eq!(
        err(|v| v["requests"] = json!(-1)),
        "requests: invalid value: integer `-1`, expected u64"
    );
    assert_eq!(
        err(|v| v["v"] = json!(2)),
        "v: unsupported feedback manifest version 2 (this sluice reads 1)"
    );
    assert_eq!(
        err(|v| v["error_rate"] = json!(1.5)),
        "error_rate: 1.5 is not a fraction in [0, 1]"
    );
    assert_eq!(
        err(|v| v["half_life"] = json!("3d")),
        "half_life: `3d` has unknown unit `d` (use us, ms, s, m or h)"
    );
    assert_eq!(
        err(|v| v["window"]["to"] = json!("yesterday")),
        "window.to: `yesterday` is not a timestamp (expected YYYY-MM-DD HH:MM:SS)"
    );
    assert_eq!(
        err(|v| v["trace"] = json!("../../etc/passwd")),
        "trace: `../../etc/passwd` is not a file name beside the manifest"
    );
    assert_eq!(
        err(|v| v["artifact"]["kind"] = json!("report")),
        "artifact.kind: `report`, expected `feedback`"
    );
    assert_eq!(
        err(|v| v["id"] = json!("0000000000000000")),
        format!(
            "id: `0000000000000000` is not the artifact's id `{}`",
            sample().artifact.id
        )
    );
}
