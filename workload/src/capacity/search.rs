//! The search's next move, pure: from the stages probed so far (each a
//! rate and its worst SLA margin), double until a stage fails, then read
//! the rate where the worst margin crosses zero off a monotone cubic
//! through the probes, safeguarded to land inside the bracket, until the
//! bracket is within the tolerance; then sustain the highest rate that
//! held for a confirmation stage.

use super::pchip::Pchip;

/// One probed stage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe {
    /// Offered, req/s.
    pub rate: f64,
    /// The worst of the SLAs' `(bound − value) / bound`, clipped to
    /// [−1, 1]; −1 for a stage stopped as over-saturated.
    pub worst_margin: f64,
    /// Every SLA held (and it was not stopped).
    pub passed: bool,
    /// A confirmation stage rather than a probe.
    pub confirm: bool,
}

/// What to run next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    Probe(f64),
    Confirm(f64),
    /// The search is over: the highest rate that held, confirmed, if any.
    Done(Option<f64>),
}

/// The knobs of the search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchRules {
    /// The first rate probed, req/s.
    pub start: f64,
    /// Never probe below this (nothing holds: done).
    pub min_rate: f64,
    /// Never probe above this.
    pub max_rate: f64,
    /// A bracket narrower than this share of its low end is found.
    pub tolerance: f64,
    /// Confirmation stages at most (a failed one narrows the bracket).
    pub max_confirms: usize,
}

/// A new probe is kept this share of the bracket away from its ends, so
/// that every probe narrows it by at least that much.
const SAFEGUARD: f64 = 0.1;

/// The next stage after `probes` (in the order run).
pub fn next(probes: &[Probe], rules: &SearchRules) -> Next {
    // A confirmation that held ends the search.
    if let Some(last) = probes.last() {
        if last.confirm && last.passed {
            return Next::Done(Some(last.rate));
        }
    }
    let confirms = probes.iter().filter(|p| p.confirm).count();
    let failed_at = |r: f64| probes.iter().any(|p| p.rate == r && !p.passed);
    let lowest_fail = probes
        .iter()
        .filter(|p| !p.passed)
        .map(|p| p.rate)
        .fold(f64::INFINITY, f64::min);
    let best_pass = probes
        .iter()
        .filter(|p| p.passed && p.rate < lowest_fail && !failed_at(p.rate))
        .map(|p| p.rate)
        .fold(f64::NEG_INFINITY, f64::max);
    if probes.is_empty() {
        return Next::Probe(rules.start.clamp(rules.min_rate, rules.max_rate));
    }
    if best_pass == f64::NEG_INFINITY {
        // Nothing held yet: halve below the lowest failure.
        let r = lowest_fail / 2.0;
        return if r < rules.min_rate {
            Next::Done(None)
        } else {
            Next::Probe(r)
        };
    }
    if lowest_fail == f64::INFINITY {
        // Everything held: double, up to the ceiling, then confirm there.
        if best_pass >= rules.max_rate {
            return confirm_or_done(best_pass, confirms, rules);
        }
        return Next::Probe((2.0 * best_pass).min(rules.max_rate));
    }
    let (lo, hi) = (best_pass, lowest_fail);
    if (hi - lo) / lo <= rules.tolerance {
        return confirm_or_done(lo, confirms, rules);
    }
    let guess = crossing(probes, lo, hi).unwrap_or(0.5 * (lo + hi));
    let margin = SAFEGUARD * (hi - lo);
    Next::Probe(guess.clamp(lo + margin, hi - margin))
}

fn confirm_or_done(rate: f64, confirms: usize, rules: &SearchRules) -> Next {
    if confirms < rules.max_confirms {
        Next::Confirm(rate)
    } else {
        Next::Done(None)
    }
}

/// Where the monotone cubic through the probes' mean margins (by rate)
/// falls through zero between `lo` and `hi`.
fn crossing(probes: &[Probe], lo: f64, hi: f64) -> Option<f64> {
    let mut by_rate: Vec<(f64, f64, f64)> = Vec::new();
    let mut sorted: Vec<&Probe> = probes.iter().collect();
    sorted.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    for p in sorted {
        match by_rate.last_mut() {
            Some(last) if last.0 == p.rate => {
                last.1 += p.worst_margin;
                last.2 += 1.0;
            }
            _ => by_rate.push((p.rate, p.worst_margin, 1.0)),
        }
    }
    let x: Vec<f64> = by_rate.iter().map(|p| p.0).collect();
    let y: Vec<f64> = by_rate.iter().map(|p| p.1 / p.2).collect();
    let curve = Pchip::new(&x, &y)?;
    let (mut a, mut b) = (lo, hi);
    if curve.at(a) < 0.0 || curve.at(b) >= 0.0 {
        return None;
    }
    for _ in 0..100 {
        let mid = 0.5 * (a + b);
        if curve.at(mid) >= 0.0 {
            a = mid;
        } else {
            b = mid;
        }
    }
    Some(a)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const RULES: SearchRules = SearchRules {
        start: 2.0,
        min_rate: 0.1,
        max_rate: 10_000.0,
        tolerance: 0.05,
        max_confirms: 2,
    };

    /// A server whose worst margin falls linearly, crossing zero at
    /// `capacity`: margin 1 − rate/capacity, clipped.
    fn probe(rate: f64, capacity: f64, confirm: bool) -> Probe {
        let m = (1.0 - rate / capacity).clamp(-1.0, 1.0);
        Probe {
            rate,
            worst_margin: m,
            passed: m >= 0.0,
            confirm,
        }
    }

    /// Runs the search to its end against `capacity`: the stages run.
    fn search(capacity: f64, rules: &SearchRules) -> (Vec<Probe>, Option<f64>) {
        let mut probes = Vec::new();
        for _ in 0..50 {
            match next(&probes, rules) {
                Next::Probe(r) => probes.push(probe(r, capacity, false)),
                Next::Confirm(r) => probes.push(probe(r, capacity, true)),
                Next::Done(found) => return (probes, found),
            }
        }
        panic!("the search did not end: {probes:?}");
    }

    #[test]
    fn it_finds_a_linear_capacity_within_the_tolerance_in_few_stages() {
        for capacity in [3.0, 17.3, 41.0, 250.0] {
            let (probes, found) = search(capacity, &RULES);
            let found = found.unwrap();
            assert!(
                found <= capacity && found >= capacity * 0.95,
                "{capacity}: {probes:?}"
            );
            // The cubic is exact on a line: a doubling run, one or two
            // reads of the crossing, and the confirmation.
            assert!(
                probes.len() <= 12,
                "{capacity}: {} stages {probes:?}",
                probes.len()
            );
            assert!(probes.last().unwrap().confirm);
        }
    }

    #[test]
    fn a_start_above_capacity_halves_first() {
        let rules = SearchRules {
            start: 100.0,
            ..RULES
        };
        let (probes, found) = search(9.0, &rules);
        assert_eq!(probes[1].rate, 50.0);
        assert!(found.unwrap() >= 9.0 * 0.95);
    }

    #[test]
    fn nothing_holds_then_nothing_is_found() {
        let rules = SearchRules {
            start: 1.0,
            min_rate: 0.2,
            ..RULES
        };
        let (probes, found) = search(0.01, &rules);
        assert_eq!(found, None);
        let rates: Vec<f64> = probes.iter().map(|p| p.rate).collect();
        assert_eq!(rates, [1.0, 0.5, 0.25]);
    }

    #[test]
    fn a_failed_confirmation_narrows_the_bracket_and_confirms_lower() {
        // Probes say 20 holds and 21 fails; the confirmation at 20 fails.
        let p = |rate, passed, confirm| Probe {
            rate,
            worst_margin: if passed { 0.01 } else { -0.05 },
            passed,
            confirm,
        };
        let probes = [
            p(10.0, true, false),
            p(20.0, true, false),
            p(21.0, false, false),
        ];
        assert_eq!(next(&probes, &RULES), Next::Confirm(20.0));
        let mut probes = probes.to_vec();
        probes.push(p(20.0, false, true));
        // 20 has now failed: the bracket is 10..20, read off the margins.
        let Next::Probe(r) = next(&probes, &RULES) else {
            panic!()
        };
        assert!(r > 10.0 && r < 20.0, "{r}");
        // A second failed confirmation ends it: two at most.
        probes.push(p(19.5, true, false));
        assert_eq!(next(&probes, &RULES), Next::Confirm(19.5));
        probes.push(p(19.5, false, true));
        assert!(matches!(
            next(&probes, &RULES),
            Next::Probe(_) | Next::Done(None)
        ));
    }

    #[test]
    fn the_ceiling_is_confirmed_when_everything_holds() {
        let rules = SearchRules {
            max_rate: 12.0,
            ..RULES
        };
        let (probes, found) = search(1000.0, &rules);
        let rates: Vec<f64> = probes.iter().map(|p| p.rate).collect();
        assert_eq!(rates, [2.0, 4.0, 8.0, 12.0, 12.0]);
        assert_eq!(found, Some(12.0));
    }

    #[test]
    fn a_steep_margin_is_read_off_the_cubic_not_a_straight_line() {
        // Margins that hold flat, then fall off a cliff near 30: the cubic
        // through them does not overshoot into the passing range.
        let probes = [
            Probe {
                rate: 10.0,
                worst_margin: 0.8,
                passed: true,
                confirm: false,
            },
            Probe {
                rate: 20.0,
                worst_margin: 0.7,
                passed: true,
                confirm: false,
            },
            Probe {
                rate: 40.0,
                worst_margin: -1.0,
                passed: false,
                confirm: false,
            },
        ];
        let Next::Probe(r) = next(&probes, &RULES) else {
            panic!()
        };
        assert!(r > 20.0 + 2.0 && r < 40.0 - 2.0, "{r}");
        let curve = Pchip::new(&[10.0, 20.0, 40.0], &[0.8, 0.7, -1.0]).unwrap();
        assert!(curve.at(r).abs() < 1e-9);
    }
}
