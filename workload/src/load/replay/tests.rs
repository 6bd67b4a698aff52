#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use serde_json::value::RawValue;
use sluice_filters::Body;

use super::*;
use crate::load::schedule::Shard;

fn line(i: usize, at_us: u64, session: Option<&str>) -> TraceLine {
    TraceLine {
        v: 1,
        request_id: format!("r{i}"),
        session_id: session.map(str::to_owned),
        method: Some("POST".to_owned()),
        path: Some(format!("/v1/chat/completions?n={i}")),
        arrival_us: at_us,
        ..TraceLine::default()
    }
}

/// `n` requests 10 ms apart (1000 µs + 10 ms·k, all even), sessions of 3.
fn synthetic(n: usize) -> Recording {
    let lines = (0..n)
        .map(|i| {
            let s = format!("sess-{}", i / 3);
            line(i, 1_000 + 10_000 * i as u64, Some(&s))
        })
        .collect();
    Recording::from_lines(lines).unwrap()
}

fn times(r: &Replay) -> Vec<u64> {
    let mut t: Vec<u64> = r.journeys.iter().flatten().map(|p| p.at_us).collect();
    t.sort_unstable();
    t
}

#[test]
fn the_recorded_times_are_kept_and_speed_divides_every_gap_exactly() {
    let rec = synthetic(30);
    let one = rec.plan(&ReplayOptions::default(), 1).unwrap();
    let want: Vec<u64> = (0..30).map(|k| 10_000 * k).collect();
    assert_eq!(times(&one), want);
    // Sessions of 3 are one journey each, starting at their first request.
    assert_eq!(one.journeys.len(), 10);
    assert_eq!(one.schedule.arrivals[1].at_us, 30_000);
    let fast = rec
        .plan(
            &ReplayOptions {
                speed: 2.0,
                ..ReplayOptions::default()
            },
            1,
        )
        .unwrap();
    let halved: Vec<u64> = want.iter().map(|t| t / 2).collect();
    assert_eq!(times(&fast), halved);
    assert_eq!(fast.schedule.span_us, one.schedule.span_us / 2);
}

#[test]
fn a_window_cuts_exactly_and_starts_the_run_at_its_start() {
    let rec = synthetic(30);
    let window = ReplayOptions {
        from: Some(Bound::parse("50ms").unwrap()),
        to: Some(Bound::parse("120ms").unwrap()),
        ..ReplayOptions::default()
    };
    let r = rec.plan(&window, 1).unwrap();
    // Offsets 50..120 ms (to excluded): requests 5..=11, shifted by 50 ms.
    let requests: Vec<usize> = r.journeys.iter().flatten().map(|p| p.request).collect();
    assert_eq!(requests, (5..12).collect::<Vec<_>>());
    assert_eq!(times(&r), (0..7).map(|k| 10_000 * k).collect::<Vec<_>>());
    assert_eq!(r.schedule.span_us, 70_000);
    assert_eq!(
        rec.plan(
            &ReplayOptions {
                from: Some(Bound::Offset(Duration::from_secs(5))),
                ..ReplayOptions::default()
            },
            1
        )
        .unwrap_err(),
        "no recorded request is left in the window and the sample"
    );
    assert_eq!(
        rec.plan(
            &ReplayOptions {
                from: Some(Bound::parse("2026-01-01T00:00:00Z").unwrap()),
                ..ReplayOptions::default()
            },
            1
        )
        .unwrap_err(),
        "--from: an RFC 3339 time needs `arrival` in the trace; give an offset like 30s"
    );
}

#[test]
fn a_wall_clock_window_reads_the_traces_arrival() {
    let lines = (0..10)
        .map(|i| {
            let mut l = line(i, 1_000_000 * i as u64, None);
            l.arrival = Some(format!("2026-01-01T00:00:{:02}.000000Z", i));
            l
        })
        .collect();
    let rec = Recording::from_lines(lines).unwrap();
    let r = rec
        .plan(
            &ReplayOptions {
                from: Some(Bound::parse("2026-01-01T00:00:03Z").unwrap()),
                to: Some(Bound::parse("2026-01-01T00:00:06Z").unwrap()),
                ..ReplayOptions::default()
            },
            1,
        )
        .unwrap();
    let requests: Vec<usize> = r.journeys.iter().flatten().map(|p| p.request).collect();
    assert_eq!(requests, [3, 4, 5]);
}

#[test]
fn sampling_keeps_whole_sessions_and_about_the_share_asked() {
    // 3,000 sessions of 3 requests, and 3,000 requests without a session.
    let mut lines: Vec<TraceLine> = (0..9_000)
        .map(|i| line(i, 1_000 * i as u64, Some(&format!("s{}", i / 3))))
        .collect();
    lines.extend((0..3_000).map(|i| line(9_000 + i, 1_000 * i as u64 + 500, None)));
    let rec = Recording::from_lines(lines).unwrap();
    let r = rec
        .plan(
            &ReplayOptions {
                sample: Some(0.25),
                ..ReplayOptions::default()
            },
            7,
        )
        .unwrap();
    let mut per_session: BTreeMap<&str, usize> = BTreeMap::new();
    let mut alone: usize = 0;
    for p in r.journeys.iter().flatten() {
        match rec.requests[p.request].session.as_deref() {
            Some(s) => *per_session.entry(s).or_default() += 1,
            None => alone += 1,
        }
    }
    assert!(per_session.values().all(|n| *n == 3), "a session was cut");
    // Binomial(3000, 0.25): sd 23.7; 4 sd is 95.
    assert!(
        per_session.len().abs_diff(750) < 95,
        "{}",
        per_session.len()
    );
    assert!(alone.abs_diff(750) < 95, "{alone}");
    // The same seed keeps the same sessions; another seed others.
    assert_eq!(
        r,
        rec.plan(
            &ReplayOptions {
                sample: Some(0.25),
                ..ReplayOptions::default()
            },
            7
        )
        .unwrap()
    );
    assert_ne!(
        r,
        rec.plan(
            &ReplayOptions {
                sample: Some(0.25),
                ..ReplayOptions::default()
            },
            8
        )
        .unwrap()
    );
}

#[test]
fn shards_partition_the_replay_and_keep_sessions_whole() {
    let rec = synthetic(100);
    let whole = rec.plan(&ReplayOptions::default(), 1).unwrap();
    let mut seen: Vec<usize> = Vec::new();
    for i in 0..4 {
        let part = whole.schedule.shard(Shard { index: i, count: 4 });
        for a in &part.arrivals {
            let journey = &whole.journeys[a.index as usize];
            let sessions: BTreeSet<_> = journey
                .iter()
                .map(|p| rec.requests[p.request].session.clone())
                .collect();
            assert_eq!(sessions.len(), 1);
            seen.extend(journey.iter().map(|p| p.request));
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
}

#[test]
fn max_tokens_follow_the_recorded_output_and_prompts_come_from_bodies() {
    let mut chat = line(0, 0, None);
    chat.output_tokens = Some(42);
    chat.body = Some(Body(
        RawValue::from_string(
            r#"{"model":"m","messages":[{"role":"user","content":"<email:0123abcd> hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"again"}],"max_tokens":7}"#
                .to_owned(),
        )
        .unwrap(),
    ));
    let mut completion = line(1, 10, None);
    completion.body = Some(Body(
        RawValue::from_string(r#"{"prompt":"once upon"}"#.to_owned()).unwrap(),
    ));
    let rec = Recording::from_lines(vec![completion, chat]).unwrap();
    // Sorted by arrival: the chat first.
    let body: Value = serde_json::from_slice(rec.requests[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(body["max_tokens"], 42);
    // Without output_tokens the body is sent as recorded, byte for byte.
    assert_eq!(
        rec.requests[1].body.as_deref().unwrap(),
        br#"{"prompt":"once upon"}"#
    );
    assert_eq!(prompts(&rec), ["again", "once upon"]);
}

#[test]
fn a_quantised_trace_warns_in_the_words_of_trace_stats() {
    // Timestamps on a 3 s grid, four requests per instant.
    let lines: Vec<TraceLine> = (0..40)
        .map(|i| line(i, 3_000_000 * (i as u64 / 4), None))
        .collect();
    let stats = crate::trace::TraceStats::of(&lines).unwrap();
    let rec = Recording::from_lines(lines).unwrap();
    assert_eq!(rec.warnings, stats.warnings);
    assert_eq!(
        rec.warnings,
        [
            "76.9% of inter-arrival times are exactly 0 (timestamps on a 3000 ms grid, up to 4 \
          requests at one instant): the timestamps look quantised, and a faithful replay would \
          fire artificial bursts"
        ]
    );
    assert!(synthetic(30).warnings.is_empty());
}

#[test]
fn bad_options_are_refused() {
    let rec = synthetic(3);
    let plan = |o: ReplayOptions| rec.plan(&o, 1).unwrap_err();
    assert_eq!(
        plan(ReplayOptions {
            speed: 0.0,
            ..ReplayOptions::default()
        }),
        "--speed: must be a number > 0, found 0"
    );
    assert_eq!(
        plan(ReplayOptions {
            sample: Some(1.5),
            ..ReplayOptions::default()
        }),
        "--sample: must be within (0, 1], found 1.5"
    );
    assert_eq!(
        plan(ReplayOptions {
            from: Some(Bound::Offset(Duration::from_secs(2))),
            to: Some(Bound::Offset(Duration::from_secs(1))),
            ..ReplayOptions::default()
        }),
        "--to: must be after --from"
    );
    assert_eq!(
        Recording::from_lines(Vec::new()).unwrap_err(),
        "has no requests"
    );
    assert!(Bound::parse("soon")
        .unwrap_err()
        .starts_with("`soon` is neither an offset"));
}

#[test]
fn a_bodiless_llm_row_is_sized_and_any_other_row_is_sent_as_recorded() {
    let row = |path: Option<&str>, operation: Option<&str>| TraceLine {
        path: path.map(str::to_owned),
        operation: operation.map(str::to_owned),
        input_tokens: Some(300),
        output_tokens: Some(20),
        hash_ids: vec![5, 6],
        ..line(0, 0, None)
    };
    let api = |path, operation| SizedPrompt::of(&row(path, operation)).map(|s| s.api);
    // Mooncake, Azure, BurstGPT: neither path nor operation.
    assert_eq!(api(None, None), Some(LlmApi::Chat));
    assert_eq!(
        api(Some("/v1/chat/completions?x=1"), None),
        Some(LlmApi::Chat)
    );
    assert_eq!(
        api(Some("/v1/completions"), None),
        Some(LlmApi::Completions)
    );
    assert_eq!(api(None, Some("chat")), Some(LlmApi::Chat));
    assert_eq!(
        api(None, Some("text_completion")),
        Some(LlmApi::Completions)
    );
    assert_eq!(api(Some("/v1/embeddings"), Some("embeddings")), None);
    assert_eq!(api(None, Some("embeddings")), None);
    let sized = SizedPrompt::of(&row(None, None)).unwrap();
    assert_eq!(
        (sized.input_tokens, sized.output_tokens, &sized.hash_ids[..]),
        (300, Some(20), &[5, 6][..])
    );
    // A body is sent as recorded; without input_tokens there is no size.
    let mut with_body = row(None, None);
    with_body.body = Some(Body(RawValue::from_string("{}".to_owned()).unwrap()));
    assert_eq!(SizedPrompt::of(&with_body), None);
    let mut no_size = row(None, None);
    no_size.input_tokens = None;
    assert_eq!(SizedPrompt::of(&no_size), None);
    let rec = Recording::from_lines(vec![row(None, None), no_size]).unwrap();
    assert!(rec.requests[0].sized.is_some() && rec.requests[0].body.is_none());
    assert!(rec.requests[1].sized.is_none() && rec.requests[1].body.is_none());
}

#[test]
fn a_sized_prompt_draws_each_hash_block_from_its_id_and_the_rest_from_the_row() {
    let sized = |input_tokens, hash_ids: &[u64]| SizedPrompt {
        api: LlmApi::Completions,
        input_tokens,
        output_tokens: None,
        hash_ids: hash_ids.to_vec(),
        model: Some("recorded".to_owned()),
    };
    let words = |p: String| p.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let block = HASH_BLOCK_TOKENS as usize;
    // One block id: the same words whatever the row; past the blocks, the row's.
    let a = words(sized(1000, &[3]).prompt(1, 0));
    let b = words(sized(1000, &[3]).prompt(1, 1));
    assert_eq!((a.len(), b.len()), (1000, 1000));
    assert_eq!(a[..block], b[..block]);
    assert_ne!(a[block..], b[block..]);
    // A short last block is the start of the full block's words.
    let short = words(sized(100, &[3]).prompt(1, 7));
    assert_eq!(short[..], a[..100]);
    // More blocks than tokens: cut at the size.
    assert_eq!(words(sized(600, &[3, 4, 5]).prompt(1, 0)).len(), 600);
    // Another seed, other words.
    assert_ne!(words(sized(1000, &[3]).prompt(2, 0))[..block], a[..block]);
    // A completion body, the recorded model unless replay_step names one.
    let mut step = crate::load::scenario::recorded_step();
    let body: Value = serde_json::from_slice(&sized(10, &[]).body(&step, 1, 0)).unwrap();
    assert_eq!(body["model"], "recorded");
    assert_eq!(words(body["prompt"].as_str().unwrap().to_owned()).len(), 10);
    assert!(body.get("max_tokens").is_none() && body.get("messages").is_none());
    step.model = Some("smol".to_owned());
    step.ignore_eos = true;
    let body: Value = serde_json::from_slice(&sized(10, &[]).body(&step, 1, 0)).unwrap();
    assert_eq!(
        (&body["model"], &body["ignore_eos"]),
        (&json!("smol"), &json!(true))
    );
}
