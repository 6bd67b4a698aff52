//! A synthetic run with recorded requests beside it: every synthetic
//! journey runs the scenario's own step alone, every recorded request is
//! sent once as its own step, and the summary counts each step apart.

use super::*;
use crate::load::replay::{Recorded, Recording};
use crate::load::{recorded_step, Mixed};

fn recorded(at_ms: u64) -> Recorded {
    Recorded {
        arrival_us: at_ms * 1000,
        wall_us: None,
        session: None,
        method: "POST".into(),
        path: "/saved".into(),
        body: None,
        step: 1,
        sized: None,
    }
}

#[test]
fn recorded_requests_go_beside_the_journeys_as_their_own_step() {
    let srv = server(u64::MAX, Duration::ZERO);
    let mut s = scenario(srv.addr, 20, 1, 100);
    let synthetic = s.plan.schedule().unwrap();
    assert_eq!(synthetic.arrivals.len(), 20);
    let mut step = recorded_step();
    step.name = "feedback/a".into();
    s.steps.push(step);
    let recording = Recording {
        requests: [0, 100, 250].map(recorded).to_vec(),
        warnings: Vec::new(),
    };
    let mixed = Mixed::new(&s.plan, synthetic, 1, recording).unwrap();
    let out = run_mixed(
        &s,
        &mixed.schedule,
        &mixed,
        &options(None),
        Arc::new(Live::default()),
    )
    .unwrap();
    assert_eq!(out.journeys, 23);
    let mut paths = srv.paths();
    paths.sort();
    paths.dedup();
    assert_eq!(paths, ["/ping", "/saved"]);
    let count = |p: &str| srv.paths().iter().filter(|x| *x == p).count();
    // The feedback step never ran inside a synthetic journey.
    assert_eq!((count("/ping"), count("/saved")), (20, 3));
    let r = report(&s, &out);
    let steps: Vec<(&str, u64, u64)> = r
        .steps
        .iter()
        .map(|g| (g.name.as_str(), g.summary.requests, g.summary.completed))
        .collect();
    assert_eq!(steps, [("ping", 20, 20), ("feedback/a", 3, 3)]);

    let err = run_mixed(
        &s,
        &mixed.schedule,
        &mixed,
        &options(Some(2)),
        Arc::new(Live::default()),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot set up the client: recorded requests keep their times: a mixed run is open loop \
         only"
    );
}
