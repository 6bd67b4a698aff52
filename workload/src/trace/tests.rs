#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Cursor;

use sluice_filters::{TraceLine, TRACE_VERSION};

use super::*;

fn reader(name: &str, text: &str, from: Option<Format>) -> Result<TraceReader, TraceError> {
    TraceReader::new(name, Cursor::new(text.to_owned()), from)
}

fn read(name: &str, text: &str) -> Vec<TraceLine> {
    reader(name, text, None)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// `text` converted to `to`, as text.
fn convert_text(name: &str, text: &str, to: Format) -> Result<String, TraceError> {
    let mut r = reader(name, text, None)?;
    let (done, out) = convert(&mut r, TraceWriter::new(to, Vec::new()), "out", false)?;
    assert_eq!(done.skipped.count, 0);
    Ok(String::from_utf8(out).unwrap())
}

const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:16:00.0000000,900,200
";

const MOONCAKE: &str = r#"{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}
{"timestamp": 3000, "input_length": 600, "output_length": 10, "hash_ids": [46]}
"#;

const BURST_V1: &str = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45.5,GPT-4,1087,230,1317,API log
";

const BURST_SESSIONS: &str =
    "Timestamp, Session ID, Model, Request tokens, Response tokens, Total tokens, Log Type
0,s-1,ChatGPT,100,20,120,Conversation log
7,s-1,ChatGPT,150,0,150,Conversation log
";

fn sluice_lines() -> Vec<TraceLine> {
    (0..4u64)
        .map(|i| TraceLine {
            v: TRACE_VERSION,
            request_id: format!("r{i}"),
            session_id: Some("s".into()),
            arrival_us: i * 1_250_000,
            arrival: Some(sluice_filters::format_rfc3339(
                1_700_000_000_000_000 + i as i64,
            )),
            ttft_ms: Some(12.5),
            input_tokens: Some(100 + i),
            output_tokens: Some(7),
            hash_ids: vec![1, 2, 3 + i],
            ..TraceLine::default()
        })
        .collect()
}

fn jsonl(lines: &[TraceLine]) -> String {
    lines.iter().map(|l| l.to_json() + "\n").collect()
}

#[test]
fn formats_are_told_by_content() {
    let sluice = jsonl(&sluice_lines());
    for (text, format) in [
        (sluice.as_str(), Format::Sluice),
        (MOONCAKE, Format::Mooncake),
        (AZURE, Format::Azure),
        (BURST_V1, Format::BurstGpt),
        (BURST_SESSIONS, Format::BurstGpt),
    ] {
        let (bom, blank) = (format!("\u{feff}{text}"), format!("\n \n{text}"));
        for text in [text, &bom, &blank] {
            assert_eq!(reader("t", text, None).unwrap().format(), format, "{text}");
        }
    }
    let err = reader("t.csv", "a,b,c\n1,2,3\n", None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("t.csv:1: cannot tell the format from `a,b,c`"),
        "{err}"
    );
    let err = reader("t.jsonl", "\n{\"ts\": 1}\n", None)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "t.jsonl:2: a JSON line with neither `v` (sluice) nor `input_length` (Mooncake); pass --from"
    );
    assert_eq!(
        reader("e.csv", "\n\n", None).err().unwrap().to_string(),
        "e.csv: empty: no header and no requests"
    );
    // Told the wrong format, the header says what is missing.
    let err = reader("m.jsonl", MOONCAKE, Some(Format::Azure))
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "m.jsonl:1: a JSON line, not the CSV header of the Azure format"
    );
    let err = reader("b.csv", BURST_V1, Some(Format::Azure))
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .starts_with("b.csv:1: no `ContextTokens` column, which the Azure format needs"),
        "{err}"
    );
    assert_eq!(
        Format::from_name("csv").unwrap_err(),
        "unknown trace format `csv` (one of sluice, mooncake, azure, burstgpt)"
    );
}

#[test]
fn sluice_to_mooncake_to_sluice_keeps_what_both_have() {
    let original = sluice_lines();
    let mooncake = convert_text("a.jsonl", &jsonl(&original), Format::Mooncake).unwrap();
    assert_eq!(
        mooncake.lines().nth(1),
        Some(r#"{"timestamp":1250,"input_length":101,"output_length":7,"hash_ids":[1,2,4]}"#)
    );
    let back = read(
        "b.jsonl",
        &convert_text("m.jsonl", &mooncake, Format::Sluice).unwrap(),
    );
    assert_eq!(back.len(), original.len());
    for (a, b) in original.iter().zip(&back) {
        assert_eq!(
            (a.arrival_us, a.input_tokens, a.output_tokens, &a.hash_ids),
            (b.arrival_us, b.input_tokens, b.output_tokens, &b.hash_ids)
        );
        // What Mooncake has no place for is gone, not invented.
        assert_eq!(
            (b.session_id.as_ref(), b.ttft_ms, b.arrival.as_ref()),
            (None, None, None)
        );
    }
    let m = read("m.jsonl", MOONCAKE);
    assert_eq!(
        (m[1].arrival_us, m[1].request_id.as_str()),
        (3_000_000, "mooncake:2")
    );
}

/// The recorder writes lines in the order requests ended; Mooncake (like
/// the CSV formats) is in arrival order, so the conversion sorts.
#[test]
fn a_sluice_trace_in_end_order_converts_in_arrival_order() {
    let mut lines = sluice_lines();
    lines.swap(0, 2);
    let mooncake = convert_text("e.jsonl", &jsonl(&lines), Format::Mooncake).unwrap();
    let timestamps: Vec<u64> = read("m.jsonl", &mooncake)
        .iter()
        .map(|l| l.arrival_us / 1000)
        .collect();
    assert_eq!(timestamps, [0, 1250, 2500, 3750]);
    // sluice to sluice keeps the order it was given.
    let same = convert_text("e.jsonl", &jsonl(&lines), Format::Sluice).unwrap();
    assert_eq!(same, jsonl(&lines));
}

#[test]
fn azure_to_sluice_to_azure_is_the_same_file() {
    let sluice = convert_text("a.csv", AZURE, Format::Sluice).unwrap();
    let lines = read("s.jsonl", &sluice);
    assert_eq!(lines[1].arrival_us, 4_314_579);
    assert_eq!(
        lines[1].arrival.as_deref(),
        Some("2023-11-16T18:15:50.995169Z")
    );
    assert_eq!(
        (lines[2].input_tokens, lines[2].output_tokens),
        (Some(900), Some(200))
    );
    assert_eq!(
        convert_text("s.jsonl", &sluice, Format::Azure).unwrap(),
        AZURE
    );
}

#[test]
fn burstgpt_reads_every_release_and_writes_the_session_one() {
    let v1 = read("b.csv", BURST_V1);
    assert_eq!(v1[1].arrival_us, 45_500_000);
    assert_eq!(
        (v1[1].model.as_deref(), v1[1].input_tokens),
        (Some("GPT-4"), Some(1087))
    );
    let sessions = read("b.csv", BURST_SESSIONS);
    assert_eq!(sessions[1].session_id.as_deref(), Some("s-1"));
    let out = convert_text("b.csv", BURST_SESSIONS, Format::BurstGpt).unwrap();
    assert_eq!(
        out,
        "Timestamp,Session ID,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
         0,s-1,ChatGPT,100,20,120,Conversation log\n\
         7,s-1,ChatGPT,150,0,150,Conversation log\n"
    );
}

#[test]
fn a_bad_row_names_its_file_and_line() {
    let bad = AZURE.replace("396,109", "abc,109");
    let err = convert_text("t.csv", &bad, Format::Sluice).unwrap_err();
    assert_eq!(
        err.to_string(),
        "t.csv:3: ContextTokens: `abc` is not a whole number"
    );
    let cases = [
        (
            AZURE.replace("396,109", "396"),
            "t.csv:3: 2 fields, but the header has 3",
        ),
        (
            AZURE.replace("2023-11-16 18:15:50", "2023-11-16 18:15:40"),
            "t.csv:3: TIMESTAMP: `2023-11-16 18:15:40.9951690` is before the first row's \
             (2023-11-16T18:15:46.680590Z): the rows must be in time order",
        ),
        (
            BURST_V1.replace("472,18,490", "472,18,491"),
            "t.csv:2: Total tokens: 491 is not Request tokens + Response tokens (472 + 18)",
        ),
        (
            MOONCAKE.replace("\"output_length\": 10", "\"output_len\": 10"),
            "t.csv:2: column 53: unknown field `output_len`, expected one of `timestamp`, \
             `input_length`, `output_length`, `hash_ids`",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(
            convert_text("t.csv", &text, Format::Sluice)
                .unwrap_err()
                .to_string(),
            expected
        );
    }
    // A row the output format cannot take is an error of its input line.
    let mut lines = sluice_lines();
    lines[2].output_tokens = None;
    let err = convert_text("s.jsonl", &jsonl(&lines), Format::Azure).unwrap_err();
    assert_eq!(
        err.to_string(),
        "s.jsonl:3: no output_tokens, which Azure's GeneratedTokens needs"
    );
}

#[test]
fn skip_bad_counts_and_goes_on() {
    let text = format!(
        "{}not json\n{}",
        jsonl(&sluice_lines()[..2]),
        jsonl(&sluice_lines()[2..])
    );
    let mut r = reader("s.jsonl", &text, None).unwrap();
    let (done, out) = convert(
        &mut r,
        TraceWriter::new(Format::Mooncake, Vec::new()),
        "o",
        true,
    )
    .unwrap();
    assert_eq!((done.rows, done.skipped.count), (4, 1));
    assert_eq!(
        done.skipped.first[0].to_string(),
        "s.jsonl:3: column 2: expected ident"
    );
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 4);
    // Without it, nothing past the bad line is read.
    let mut r = reader("s.jsonl", &text, None).unwrap();
    let mut seen = 0;
    let err = for_each_row(&mut r, false, |_| {
        seen += 1;
        Ok(())
    })
    .unwrap_err();
    assert_eq!((seen, err.line), (2, 3));
}

#[test]
fn an_empty_csv_trace_keeps_its_header() {
    let mut r = reader("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", None).unwrap();
    let (done, out) = convert(
        &mut r,
        TraceWriter::new(Format::BurstGpt, Vec::new()),
        "o",
        false,
    )
    .unwrap();
    assert_eq!(done.rows, 0);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("{}\n", burstgpt::HEADER)
    );
    assert_eq!(seconds_text(1), "0.000001");
    assert_eq!(seconds_text(12_500_000), "12.5");
}

mod extremes;
