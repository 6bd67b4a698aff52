//! The bar's message and the plain line, exactly, for known snapshots.

use super::*;

fn running() -> Snapshot {
    Snapshot {
        elapsed_us: Some(12_400_000),
        span_us: 300_000_000,
        stage: Some(1),
        stages: 2,
        due: Some(248),
        ended: 240,
        sent: 250,
        done: 245,
        failed: 3,
        in_flight: 5,
        waiting: 0,
        queued: 2,
        ttft_p95_ms: Some(41.26),
        error_rate: Some(1.2244),
        thresholds: Vec::new(),
    }
}

const RATES: Rates = Rates {
    offered: Some(20.0),
    achieved: 19.5,
};

#[test]
fn the_bars_message_says_stage_rates_in_flight_ttft_errors_and_eta() {
    assert_eq!(
        message(&running(), RATES),
        "12s/5m00s  stage 2/2  offered 20.0/s  achieved 19.5/s  in flight 5  \
         ttft p95 41.3 ms  failed 3  error rate 1.2%  eta 4m48s"
    );
}

#[test]
fn the_plain_line_adds_the_counts() {
    assert_eq!(
        line(&running(), RATES),
        "load: 12s/5m00s  stage 2/2  offered 20.0/s  achieved 19.5/s  sent 250  done 245  \
         failed 3  in flight 5  waiting 0  queued 2  ttft p95 41.3 ms  error rate 1.2%  eta 4m48s"
    );
}

#[test]
fn setup_drain_and_a_closed_loop_read_as_such() {
    let setup = Snapshot {
        elapsed_us: None,
        span_us: 10_000_000,
        stage: Some(0),
        stages: 1,
        due: Some(0),
        ..Snapshot::default()
    };
    assert_eq!(
        line(&setup, Rates::default()),
        "load: setup  stage 1/1  closed loop  achieved 0.0/s  sent 0  done 0  failed 0  \
         in flight 0  waiting 0  queued 0  ttft p95 -  error rate -  eta -"
    );
    let draining = Snapshot {
        elapsed_us: Some(3_725_500_000),
        span_us: 3_600_000_000,
        stage: None,
        due: None,
        ..running()
    };
    let closed = Rates {
        offered: None,
        achieved: 0.26,
    };
    assert_eq!(
        message(&draining, closed),
        "1h02m05s/1h00m00s  draining  closed loop  achieved 0.3/s  in flight 5  \
         ttft p95 41.3 ms  failed 3  error rate 1.2%  eta -"
    );
}

#[test]
fn the_eta_rounds_up_to_the_second() {
    let s = |elapsed_us| Snapshot {
        elapsed_us: Some(elapsed_us),
        span_us: 60_000_000,
        ..Snapshot::default()
    };
    assert_eq!(eta(&s(0)), "eta 1m00s");
    assert_eq!(eta(&s(59_000_001)), "eta 1s");
    assert_eq!(eta(&s(60_000_000)), "eta -");
    assert_eq!(clock(&s(59_999_999)), "59s/1m00s");
}
