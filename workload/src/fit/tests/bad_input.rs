//! A trace with nothing to fit, or a bad row, is an error with its full
//! text, and no model file is written.

use std::time::Duration;

use super::super::{fit_file, fit_to, FitOptions};
use super::temp_file;
use crate::Format;

/// The error of fitting `text` as file `name`, after checking that no model
/// was written.
fn refused(name: &str, text: &str, from: Option<Format>) -> String {
    refused_with(name, text, from, &FitOptions::default())
}

fn refused_with(name: &str, text: &str, from: Option<Format>, options: &FitOptions) -> String {
    let (path, dir) = temp_file(name, text);
    let out = dir.join("model.yaml");
    let error = fit_to(&path, from, options, Some(&out), 0)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from(name)], "for {error}");
    std::fs::remove_dir_all(&dir).unwrap();
    // The folder differs per test; the message after it is what is checked.
    error.replace(&dir.display().to_string(), "DIR")
}

fn sluice(arrivals_us: &[u64]) -> String {
    arrivals_us
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{{\"v\":1,\"request_id\":\"r{i}\",\"arrival_us\":{a}}}\n"))
        .collect()
}

#[test]
fn an_empty_trace() {
    assert_eq!(
        refused("t.jsonl", "", None),
        "DIR/t.jsonl: empty: no header and no requests"
    );
    assert_eq!(
        refused("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", None),
        "DIR/t.csv: no requests: a fit needs at least 3 (two inter-arrival times)"
    );
}

#[test]
fn one_request() {
    assert_eq!(
        refused("t.jsonl", &sluice(&[5_000_000]), None),
        "DIR/t.jsonl: 1 request: a fit needs at least 3 (two inter-arrival times)"
    );
}

#[test]
fn all_timestamps_equal() {
    assert_eq!(
        refused("t.jsonl", &sluice(&[2_500_000; 40]), None),
        "DIR/t.jsonl: all 40 requests arrive at the same instant (2.5 s): there is no \
         inter-arrival time to fit"
    );
    // Two distinct instants make one gap above 0.
    let mut two = vec![0; 20];
    two.extend([1_000_000; 20]);
    assert_eq!(
        refused("t.jsonl", &sluice(&two), None),
        "DIR/t.jsonl: 1 of 39 inter-arrival times are above 0: a fit needs at least 2"
    );
}

#[test]
fn negative_times() {
    let burst = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                 0,ChatGPT,10,5,15,Conversation log\n\
                 -1.5,ChatGPT,10,5,15,Conversation log\n";
    assert_eq!(
        refused("b.csv", burst, None),
        "DIR/b.csv:3: Timestamp: `-1.5` is not a time (a number >= 0)"
    );
    let text = sluice(&[0, 1]).replace("\"arrival_us\":1", "\"arrival_us\":-1");
    assert_eq!(
        refused("t.jsonl", &text, None),
        "DIR/t.jsonl:2: column 40: invalid value: integer `-1`, expected u64"
    );
}

#[test]
fn unsorted_times() {
    // Mooncake traces are written in arrival order: a row back in time is wrong.
    let mooncake: String = [0, 3000, 1000, 4000]
        .iter()
        .map(|ms| format!("{{\"timestamp\":{ms},\"input_length\":10,\"output_length\":5}}\n"))
        .collect();
    assert_eq!(
        refused("m.jsonl", &mooncake, None),
        "DIR/m.jsonl:3: arrival 1 s is before the previous row's 3 s: the trace must be \
         sorted by arrival"
    );
    let azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                 2023-11-16 18:15:46.6805900,374,44\n\
                 2023-11-16 18:15:45.0000000,396,109\n";
    assert_eq!(
        refused("a.csv", azure, None),
        "DIR/a.csv:3: TIMESTAMP: `2023-11-16 18:15:45.0000000` is before the first row's \
         (2023-11-16T18:15:46.680590Z): the rows must be in time order"
    );
}

/// The recorder writes a line when its request ends: a long answer's line
/// comes after later arrivals' lines. That trace fits as the sorted one.
#[test]
fn a_sluice_trace_in_the_order_requests_ended_fits_as_sorted() {
    let ended = [
        0, 3_000_000, 1_000_000, 4_000_000, 2_500_000, 6_000_000, 5_200_000,
    ];
    let mut arrived = ended;
    arrived.sort_unstable();
    let fit = |name: &str, arrivals: &[u64]| {
        let (path, dir) = temp_file(name, &sluice(arrivals));
        let fitted = fit_file(&path, None, &FitOptions::default(), 0).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        serde_json::to_value(&fitted.arrival).unwrap()
    };
    assert_eq!(fit("ended.jsonl", &ended), fit("arrived.jsonl", &arrived));
}

#[test]
fn nan_lengths() {
    let azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                 2023-11-16 18:15:46.6805900,374,44\n\
                 2023-11-16 18:15:47.0000000,NaN,109\n";
    assert_eq!(
        refused("a.csv", azure, Some(Format::Azure)),
        "DIR/a.csv:3: ContextTokens: `NaN` is not a whole number"
    );
    let text =
        sluice(&[0, 1]).replace("\"arrival_us\":1", "\"arrival_us\":1,\"output_tokens\":NaN");
    assert_eq!(
        refused("t.jsonl", &text, None),
        "DIR/t.jsonl:2: column 57: expected value"
    );
}

#[test]
fn a_window_too_short_for_the_trace() {
    let options = FitOptions {
        window: Duration::from_micros(1),
    };
    assert_eq!(
        refused_with(
            "t.jsonl",
            &sluice(&[0, 1_000_000, 3_000_000]),
            None,
            &options
        ),
        "DIR/t.jsonl: a window of 0.000001 s cuts the trace's 3 s into more than 1000000 \
         windows: take a longer one"
    );
}
