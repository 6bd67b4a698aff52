#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;
use crate::ctl::rollout::tests::status;

#[test]
fn promoted_exits_0_rolled_back_and_aborted_1_and_the_others_go_on() {
    let codes: Vec<(&str, Option<u8>)> = State::ALL
        .iter()
        .map(|&s| (s.as_str(), exit_code(s)))
        .collect();
    assert_eq!(
        codes,
        [
            ("pending", None),
            ("progressing", None),
            ("paused", None),
            ("promoted", Some(0)),
            ("rolled_back", Some(1)),
            ("aborted", Some(1)),
        ]
    );
    // Every state that ends a rollout ends the watch.
    for &s in State::ALL {
        assert_eq!(exit_code(s).is_some(), s.is_final(), "{s}");
    }
}

fn rolled_back() -> Value {
    let mut s = status();
    s["state"] = json!("rolled_back");
    s["weight"] = json!(0);
    s["breaches"] = json!(3);
    s["gates"]["ttft_p95"]["value"] = json!(400.0);
    s["gates"]["ttft_p95"]["ok"] = json!(false);
    s["events"].as_array_mut().unwrap().push(json!({
        "at_ms": 900, "time_ms": 1_780_000_000_900u64, "from": "progressing",
        "to": "rolled_back", "step": 1, "weight": 0,
        "reason": "gate breached: ttft_p95 400ms > 150ms (40 samples)"}));
    s
}

fn shown(display: Display, polls: &[Value]) -> String {
    let mut out = Vec::new();
    let mut screen = Screen::new(&mut out, display);
    for rollout in polls {
        screen.show(rollout, &rollout.to_string());
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn piped_a_line_is_written_for_each_change_and_not_for_a_gate_value_moving() {
    let mut moved = status();
    moved["gates"]["ttft_p95"]["value"] = json!(130.0);
    let text = shown(Display::Lines, &[status(), moved, rolled_back()]);
    assert_eq!(
        text,
        "chat-v2 progressing step 1/2 weight 50% breaches 0 | error_rate n/a vs 1%, \
         ttft_p95 120.5ms<=150ms | last: pending -> progressing (step 1, weight 50): started\n\
         chat-v2 rolled_back step 1/2 weight 0% breaches 3 | error_rate n/a vs 1%, \
         ttft_p95 400ms>150ms | last: progressing -> rolled_back (step 1, weight 0): \
         gate breached: ttft_p95 400ms > 150ms (40 samples)\n"
    );
}

#[test]
fn with_json_each_change_is_the_answer_on_one_line() {
    let text = shown(Display::Json, &[status(), status(), rolled_back()]);
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, [status(), rolled_back()]);
}

#[test]
fn on_a_terminal_each_poll_redraws_the_page_over_the_last_one() {
    let first = page(&status(), true);
    assert_eq!(first.lines().count(), 5, "{first}");
    let redraw = Display::Redraw {
        colour: true,
        width: None,
    };
    let text = shown(redraw, &[status(), status(), rolled_back()]);
    let second = page(&rolled_back(), true);
    assert_eq!(
        text,
        format!("{first}\n\x1b[5A\r\x1b[J{first}\n\x1b[5A\r\x1b[J{second}\n")
    );
    assert!(second.starts_with("chat-v2  \x1b[31mrolled_back\x1b[0m  step 1/2"));
    assert_eq!(
        page(&status(), false),
        "chat-v2  progressing  step 1/2  weight 50%  breaches 0\n\
         GATE        VALUE    BOUND  SAMPLES  VERDICT\n\
         error_rate  n/a         1%        3  not judged\n\
         ttft_p95    120.5ms  150ms       40  ok\n\
         last: pending -> progressing (step 1, weight 50): started"
    );
}

#[test]
fn a_redraw_goes_up_over_the_rows_a_wrapped_line_took() {
    // 60 columns: the last line (103 characters) of the rolled-back page wraps
    // once; its colour codes take no columns.
    let narrow = Display::Redraw {
        colour: true,
        width: Some(60),
    };
    let plain = page(&rolled_back(), false);
    let widths: Vec<usize> = plain.lines().map(|l| l.chars().count()).collect();
    assert_eq!(widths, [53, 42, 45, 43, 103]);
    let text = shown(narrow, &[rolled_back(), status()]);
    assert!(text.contains("\x1b[6A\r\x1b[J"), "{text:?}");
    assert_eq!(rows("abc\n\nxyz", Some(3)), 3);
    assert_eq!(rows("abcd", Some(3)), 2);
}

#[test]
fn the_interval_is_a_duration_above_zero() {
    assert_eq!(interval("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(interval("0s"), Err("must be more than 0".to_string()));
    assert!(interval("soon").is_err());
}
