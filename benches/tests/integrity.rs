//! The CI share of the integrity run (issue 19): 50,000 checksummed
//! requests, bodies up to 128 KiB each way (about 1 GiB in all), through
//! sluice under churn. `benches/integrity.sh` runs the million.

#![allow(clippy::expect_used)]

use sluice_benches::integrity::{self, Plan, COPIES};

#[test]
fn fifty_thousand_checksummed_requests_under_churn_arrive_byte_exact_and_add_up() {
    let plan = Plan {
        requests: 50_000,
        max_body: 128 << 10,
        ..Plan::full()
    };
    let totals = integrity::run(&plan, &|ended, seconds| {
        eprintln!("integrity: {ended} ended after {seconds:.0} s");
    })
    .expect("the run starts");
    let report = integrity::report(&plan, &totals);
    eprint!("{report}");
    assert_eq!(
        totals.discrepancies(COPIES),
        Vec::<String>::new(),
        "{report}"
    );
    assert_eq!((totals.sent, totals.ok), (50_000, 50_000), "{report}");
    // Each of the 12 kinds (HTTP/1.1 or h2c, request with a length or
    // chunked, answer with a length, chunked or SSE) was sent.
    assert_eq!(totals.mix.len(), 12, "{report}");
    assert!(totals.mix.values().all(|n| *n > 1_000), "{report}");
    // The mirror made copies, and the shadow got them whole.
    assert!(
        totals.mirror.get("ok").copied().unwrap_or(0) > 0,
        "{report}"
    );
    // The churn happened, and every change was accepted.
    let count = |what: &str| {
        totals
            .churn
            .iter()
            .filter(|(k, _)| k.starts_with(what))
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    assert!(count("split") >= 100, "{report}");
    assert!(
        count("fault add") >= 30 && count("fault remove") >= 30,
        "{report}"
    );
    assert!(count("reload") >= 2, "{report}");
    let refused: Vec<_> = totals
        .churn
        .keys()
        .filter(|k| !(k.ends_with(" 200") || k.ends_with(" 201")))
        .collect();
    assert!(refused.is_empty(), "{report}");
}
