//! The recorder against its files: one parseable line per request, think
//! times per session, rotation and the size limit, nothing overwritten,
//! keyed tokens, and the slot's life (ttl, the config, the API's stop).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use sluice_filters::{parse_lines, Bodies, Operation, RequestRecord, TraceLine};
use tokio_util::sync::CancellationToken;

use super::writer::numbered;
use super::*;
use crate::config::RawRecorder;
use crate::testing;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "sluice-recorder-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn trace(&self) -> PathBuf {
        self.0.join("trace.jsonl")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(path: &Path, extra: &str) -> RecorderConfig {
    let yaml = format!("{{ path: \"{}\"{extra} }}", path.display());
    let raw = RawRecorder::from_yaml(&yaml).unwrap();
    raw.validate(&[]).unwrap()
}

fn recorder() -> Arc<Recorder> {
    Recorder::new(&prometheus::Registry::new()).unwrap()
}

/// A recorder started on `path` with `extra` config, and its capture.
fn recording(path: &Path, extra: &str) -> (Arc<Recorder>, Arc<Capture>) {
    let recorder = recorder();
    recorder.start(config(path, extra), Source::Api).unwrap();
    let capture = recorder.current().unwrap();
    (recorder, capture)
}

/// A finished request of `session` that arrived `at` after `base` and took `e2e`.
fn captured(
    id: u32,
    session: Option<&str>,
    base: Instant,
    at: Duration,
    e2e: Duration,
) -> Captured {
    let request_id = format!("req-{id}");
    let path = "/v1/chat/completions".to_owned();
    // Every third request is load traffic.
    let load_run = format!("load-{id}");
    let record = RequestRecord {
        request_id: &request_id,
        route: "chat",
        cluster: "llm",
        version: "v1",
        model: "m",
        operation: Operation::Chat,
        method: "POST",
        path: &path,
        status: 200,
        e2e,
        failure: None,
        tokens: None,
        prompt_fingerprint: None,
        upstream: Default::default(),
        load_run: id.is_multiple_of(3).then_some(load_run.as_str()),
        // Request 4 is a gRPC call answered UNAVAILABLE.
        grpc_status: (id == 4).then_some(14),
        grpc_method: (id == 4).then_some("test.Svc/Echo"),
        kvcache_ratio: (id == 4).then_some(0.25),
    };
    let body = Bytes::from(format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"mail me at ann{id}@example.com"}}]}}"#
    ));
    // Every other request reached a cluster whose lineage id is known.
    let ids = CaptureIds {
        trace_id: None,
        session_id: session,
        lineage_id: id.is_multiple_of(2).then_some("0123456789abcdef"),
    };
    Captured::new(
        &record,
        ids,
        (base + at, SystemTime::now()),
        vec![body],
        false,
    )
}

/// A request of no session that arrived as the capture started and took no time.
fn untimed(capture: &Capture, id: u32) -> Captured {
    captured(id, None, capture.started(), Duration::ZERO, Duration::ZERO)
}

fn read(path: &Path) -> Vec<TraceLine> {
    let text = std::fs::read_to_string(path).unwrap();
    parse_lines(&text).map(Result::unwrap).collect()
}

#[test]
fn writes_one_redacted_line_per_request_with_think_times() {
    let dir = Dir::new("lines");
    let (recorder, capture) = recording(&dir.trace(), "");
    let base = capture.started();
    let ms = Duration::from_millis;
    // Session a: 0..100 ms, then 400 ms later (think 300 ms); b once; one without.
    capture.submit(captured(1, Some("a"), base, ms(0), ms(100)));
    capture.submit(captured(2, Some("b"), base, ms(50), ms(10)));
    capture.submit(captured(3, Some("a"), base, ms(400), ms(20)));
    capture.submit(captured(4, None, base, ms(500), ms(20)));
    let status = recorder.stop().unwrap();
    assert_eq!((status.lines, status.dropped_queue_full), (4, 0));
    assert!(recorder.current().is_none());

    let lines = read(&dir.trace());
    let ids: Vec<&str> = lines.iter().map(|l| l.request_id.as_str()).collect();
    assert_eq!(ids, ["req-1", "req-2", "req-3", "req-4"]);
    let arrivals: Vec<u64> = lines.iter().map(|l| l.arrival_us).collect();
    assert_eq!(arrivals, [0, 50_000, 400_000, 500_000]);
    let think: Vec<Option<f64>> = lines.iter().map(|l| l.think_time_ms).collect();
    assert_eq!(think, [None, None, Some(300.0), None]);
    let runs: Vec<Option<&str>> = lines.iter().map(|l| l.load_run.as_deref()).collect();
    assert_eq!(runs, [None, None, Some("load-3"), None]);
    let lineage: Vec<Option<&str>> = lines.iter().map(|l| l.lineage_id.as_deref()).collect();
    let known = Some("0123456789abcdef");
    assert_eq!(lineage, [None, known, None, known]);
    let grpc: Vec<(Option<&str>, Option<u32>)> = lines
        .iter()
        .map(|l| (l.grpc_method.as_deref(), l.grpc_status))
        .collect();
    let none = (None, None);
    assert_eq!(grpc, [none, none, none, (Some("test.Svc/Echo"), Some(14))]);
    // The serving endpoint's KV-cache reading reaches the line; unknown is absent.
    let kv: Vec<Option<f64>> = lines.iter().map(|l| l.kvcache_ratio).collect();
    assert_eq!(kv, [None, None, None, Some(0.25)]);
    assert_eq!(lines[0].messages, Some(1));
    assert!(lines[0].input_tokens_estimated);
    let text = std::fs::read_to_string(dir.trace()).unwrap();
    assert!(!text.contains("@example.com"), "{text}");
    assert!(text.contains("<email:"), "{text}");
    assert_eq!(status.bytes, text.len() as u64);
}

#[test]
fn rotates_by_size_and_keeps_every_line() {
    let dir = Dir::new("rotate");
    let (recorder, capture) = recording(&dir.trace(), ", rotate_bytes: 4KiB");
    let base = capture.started();
    for i in 0..100 {
        capture.submit(captured(
            i,
            None,
            base,
            Duration::from_millis(i.into()),
            Duration::ZERO,
        ));
    }
    let status = recorder.stop().unwrap();
    assert_eq!(status.lines, 100);
    let mut files = vec![dir.trace()];
    files.extend((1..status.files).map(|n| numbered(&dir.trace(), n as u32)));
    assert!(status.files > 5, "{status:?}");
    let mut seen = Vec::new();
    for file in &files {
        assert!(std::fs::metadata(file).unwrap().len() <= 4096, "{file:?}");
        seen.extend(read(file).into_iter().map(|l| l.request_id));
    }
    seen.sort_by_key(|id| id[4..].parse::<u32>().unwrap());
    let want: Vec<String> = (0..100).map(|i| format!("req-{i}")).collect();
    assert_eq!(seen, want);
}

#[test]
fn stops_writing_at_max_bytes_and_counts_the_rest() {
    let dir = Dir::new("max");
    let (recorder, capture) = recording(&dir.trace(), ", max_bytes: 3000");
    for i in 0..20 {
        capture.submit(untimed(&capture, i));
    }
    let status = recorder.stop().unwrap();
    assert!(status.lines > 0 && status.lines < 20, "{status:?}");
    assert_eq!(status.lines + status.dropped_max_bytes, 20, "{status:?}");
    let size = std::fs::metadata(dir.trace()).unwrap().len();
    assert!(size <= 3000 && size == status.bytes, "{size} {status:?}");
}

#[test]
fn an_earlier_recording_is_moved_aside_not_overwritten() {
    let dir = Dir::new("aside");
    std::fs::write(dir.trace(), "earlier\n").unwrap();
    std::fs::write(numbered(&dir.trace(), 1), "older\n").unwrap();
    let recorder = recorder();
    recorder
        .start(config(&dir.trace(), ""), Source::Api)
        .unwrap();
    recorder.stop();
    assert_eq!(
        std::fs::read_to_string(numbered(&dir.trace(), 1)).unwrap(),
        "older\n"
    );
    assert_eq!(
        std::fs::read_to_string(numbered(&dir.trace(), 2)).unwrap(),
        "earlier\n"
    );
    assert_eq!(std::fs::read_to_string(dir.trace()).unwrap(), "");
}

#[test]
fn a_key_from_the_environment_gives_the_same_tokens_in_two_recordings() {
    let dir = Dir::new("key");
    std::env::set_var("SLUICE_TEST_RECORDER_KEY", "a fixed key");
    let extra = ", redaction: { key_env: SLUICE_TEST_RECORDER_KEY }";
    let token_of = |path: &Path| {
        let (recorder, capture) = recording(path, extra);
        capture.submit(untimed(&capture, 7));
        recorder.stop();
        let body = read(path)[0].body.clone().unwrap();
        body.0.get().to_owned()
    };
    let first = token_of(&dir.0.join("one.jsonl"));
    let second = token_of(&dir.0.join("two.jsonl"));
    assert_eq!(first, second);
    assert!(first.contains("<email:"), "{first}");

    let missing = ", redaction: { key_env: SLUICE_TEST_RECORDER_KEY_UNSET }";
    let err = recorder()
        .start(config(&dir.trace(), missing), Source::Api)
        .err()
        .unwrap();
    assert_eq!(err.field(), "redaction.key_env");
}

#[test]
fn an_unwritable_path_is_an_error_that_names_it() {
    let recorder = recorder();
    let err = recorder
        .start(
            config(Path::new("/proc/sluice/trace.jsonl"), ""),
            Source::Api,
        )
        .err()
        .unwrap();
    assert_eq!(err.field(), "path");
    assert!(
        err.to_string().contains("/proc/sluice/trace.jsonl"),
        "{err}"
    );
    assert!(recorder.current().is_none());
}

#[test]
fn sessions_are_kept_whole_at_the_percent() {
    let dir = Dir::new("sample");
    let (recorder, capture) = recording(&dir.trace(), ", percent: 30, routes: []");
    let mut kept = 0;
    for s in 0..5000 {
        let key = format!("user-{s}");
        let first = capture.keeps("chat", Some(key.as_bytes()));
        assert!((0..4).all(|_| capture.keeps("chat", Some(key.as_bytes())) == first));
        kept += usize::from(first);
    }
    // Binomial(5000, 0.3): sd 32.
    assert!((1350..=1650).contains(&kept), "kept {kept}");
    recorder.stop();
}

#[test]
fn defaults_and_route_choice() {
    let config = config(Path::new("/tmp/x.jsonl"), "");
    assert_eq!(config.max_bytes, 1 << 30);
    assert_eq!(config.bodies, Bodies::Redacted);
    assert!(config.records("any"));
    assert_eq!(config.session_header(None), "x-session-id");
    assert_eq!(config.session_header(Some("x-user")), "x-user");
}

#[tokio::test(start_paused = true)]
async fn the_ttl_ends_the_recording_and_the_config_is_followed() {
    let dir = Dir::new("ttl");
    let yaml = format!(
        "{}routes:\n  - {{ name: chat, listener: public, split: {{ a: 100 }} }}\n",
        testing::two_clusters("a", "b")
    );
    let (store, shared) = testing::store(&yaml);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(run_recorder(
        shared.recorder.clone(),
        store.clone(),
        shared.events.clone(),
        cancel.clone(),
    ));
    shared
        .recorder
        .start(config(&dir.0.join("api.jsonl"), ", ttl: 10s"), Source::Api)
        .unwrap();
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(shared.recorder.is_recording());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!shared.recorder.is_recording(), "the ttl passed");

    // A config that gains `recorder:` starts it; one that drops it stops it.
    let path = dir.0.join("config.jsonl");
    store
        .apply("test", "add recorder", |raw| {
            raw.recorder = Some(RawRecorder {
                path: path.display().to_string(),
                ..RawRecorder::default()
            });
            Ok(())
        })
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let running = shared.recorder.current().expect("the config's recording");
    assert_eq!(running.source(), Source::Config);
    store
        .apply("test", "drop recorder", |raw| {
            raw.recorder = None;
            Ok(())
        })
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!shared.recorder.is_recording());
    testing::stop(&cancel, task).await;
}

#[test]
fn with_feedback_on_the_writer_keeps_its_last_lines_as_written() {
    let dir = Dir::new("recent");
    let recorder = recorder();
    // Off (no `feedback:`): nothing kept.
    recorder
        .start(config(&dir.trace(), ""), Source::Api)
        .unwrap();
    let capture = recorder.current().unwrap();
    capture.submit(untimed(&capture, 1));
    recorder.stop().unwrap();
    let all = |r: &Recorder| r.recent().window("chat", 0, i64::MAX);
    assert!(all(&recorder).lines.is_empty());

    recorder.recent().set_enabled(true);
    recorder
        .start(config(&dir.trace(), ""), Source::Api)
        .unwrap();
    let capture = recorder.current().unwrap();
    capture.submit(untimed(&capture, 2));
    capture.submit(untimed(&capture, 3));
    recorder.stop().unwrap();
    let cut = all(&recorder);
    let kept: Vec<String> = cut
        .lines
        .iter()
        .map(|k| String::from_utf8(k.line.clone()).unwrap())
        .collect();
    // The same redacted bytes as the file's lines.
    let text = std::fs::read_to_string(dir.trace()).unwrap();
    let written: Vec<&str> = text.lines().collect();
    assert_eq!(kept, written);
    assert!(!kept[0].contains("@example.com"), "{}", kept[0]);
    assert_eq!(cut.lines[0].cluster, "llm");
    assert_eq!(cut.lines[0].status, Some(200));
    assert!(!cut.truncated);
}
