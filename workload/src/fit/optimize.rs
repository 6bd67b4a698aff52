//! Nelder–Mead in two dimensions, for the likelihoods without a closed-form
//! gradient (the truncated lognormal).

const MAX_ITERATIONS: usize = 2_000;
const TOLERANCE: f64 = 1e-11;

/// The minimum of `f` near `start`, with a first simplex of `step`.
pub(crate) fn nelder_mead(f: impl Fn([f64; 2]) -> f64, start: [f64; 2], step: f64) -> [f64; 2] {
    let value = |p: [f64; 2]| {
        let v = f(p);
        if v.is_nan() {
            f64::INFINITY
        } else {
            v
        }
    };
    let mut simplex: Vec<([f64; 2], f64)> = [
        start,
        [start[0] + step, start[1]],
        [start[0], start[1] + step],
    ]
    .into_iter()
    .map(|p| (p, value(p)))
    .collect();
    let along =
        |a: [f64; 2], b: [f64; 2], t: f64| [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])];
    for _ in 0..MAX_ITERATIONS {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (best, worst) = (simplex[0].1, simplex[2].1);
        if (worst - best).abs() <= TOLERANCE * (best.abs() + TOLERANCE) {
            break;
        }
        let centroid = along(simplex[0].0, simplex[1].0, 0.5);
        let far = simplex[2].0;
        let reflected = along(centroid, far, -1.0);
        let r = value(reflected);
        if r < simplex[0].1 {
            let expanded = along(centroid, far, -2.0);
            let e = value(expanded);
            simplex[2] = if e < r { (expanded, e) } else { (reflected, r) };
        } else if r < simplex[1].1 {
            simplex[2] = (reflected, r);
        } else {
            let contracted = along(centroid, far, 0.5);
            let c = value(contracted);
            if c < simplex[2].1 {
                simplex[2] = (contracted, c);
            } else {
                let keep = simplex[0].0;
                for vertex in simplex.iter_mut().skip(1) {
                    let p = along(keep, vertex.0, 0.5);
                    *vertex = (p, value(p));
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex[0].0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::nelder_mead;

    #[test]
    fn finds_the_minimum_of_rosenbrock() {
        let rosenbrock = |p: [f64; 2]| (1.0 - p[0]).powi(2) + 100.0 * (p[1] - p[0] * p[0]).powi(2);
        let [x, y] = nelder_mead(rosenbrock, [-1.2, 1.0], 0.5);
        assert!((x - 1.0).abs() < 1e-4 && (y - 1.0).abs() < 1e-4, "{x} {y}");
    }
}
