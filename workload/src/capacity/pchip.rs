//! Monotone piecewise cubic Hermite interpolation (Fritsch–Carlson), and
//! the root of such a curve: the search reads the worst SLA margin between
//! probed rates from it, so that a margin that falls steeply between two
//! probes is not overshot the way a straight line or a free cubic would.

/// A monotone cubic through `(x, y)` points with `x` strictly increasing.
#[derive(Clone, Debug, PartialEq)]
pub struct Pchip {
    x: Vec<f64>,
    y: Vec<f64>,
    /// The tangent at each point.
    m: Vec<f64>,
}

impl Pchip {
    /// `None` with fewer than two points, `x` not strictly increasing, or a
    /// value that is not finite.
    pub fn new(x: &[f64], y: &[f64]) -> Option<Pchip> {
        let n = x.len();
        if n < 2 || y.len() != n || x.iter().chain(y).any(|v| !v.is_finite()) {
            return None;
        }
        if x.windows(2).any(|w| w[1] <= w[0]) {
            return None;
        }
        let h: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
        let d: Vec<f64> = (0..n - 1).map(|k| (y[k + 1] - y[k]) / h[k]).collect();
        let mut m = vec![0.0; n];
        if n == 2 {
            m = vec![d[0]; 2];
        } else {
            for k in 1..n - 1 {
                // A local extremum or a flat side keeps the curve flat there;
                // otherwise the weighted harmonic mean keeps it monotone.
                if d[k - 1] * d[k] > 0.0 {
                    let (w1, w2) = (2.0 * h[k] + h[k - 1], h[k] + 2.0 * h[k - 1]);
                    m[k] = (w1 + w2) / (w1 / d[k - 1] + w2 / d[k]);
                }
            }
            m[0] = end_tangent(h[0], h[1], d[0], d[1]);
            m[n - 1] = end_tangent(h[n - 2], h[n - 3], d[n - 2], d[n - 3]);
        }
        Some(Pchip {
            x: x.to_vec(),
            y: y.to_vec(),
            m,
        })
    }

    /// The curve at `at`, held at the end values outside the points.
    pub fn at(&self, at: f64) -> f64 {
        let n = self.x.len();
        if at <= self.x[0] {
            return self.y[0];
        }
        if at >= self.x[n - 1] {
            return self.y[n - 1];
        }
        let k = self.x.partition_point(|&v| v <= at) - 1;
        let h = self.x[k + 1] - self.x[k];
        let t = (at - self.x[k]) / h;
        let (t2, t3) = (t * t, t * t * t);
        (2.0 * t3 - 3.0 * t2 + 1.0) * self.y[k]
            + (t3 - 2.0 * t2 + t) * h * self.m[k]
            + (-2.0 * t3 + 3.0 * t2) * self.y[k + 1]
            + (t3 - t2) * h * self.m[k + 1]
    }

    /// Where the curve first falls from ≥ 0 to below 0, found by bisection
    /// inside the first bracketing interval to `tolerance` in `x`. `None`
    /// when it never does (all at or above 0, or below 0 from the start).
    pub fn first_fall_through_zero(&self, tolerance: f64) -> Option<f64> {
        if self.y[0] < 0.0 {
            return None;
        }
        let k = self.y.windows(2).position(|w| w[0] >= 0.0 && w[1] < 0.0)?;
        let (mut lo, mut hi) = (self.x[k], self.x[k + 1]);
        // Each halving is exact to a bit; 200 rounds cover any f64 range.
        for _ in 0..200 {
            if hi - lo <= tolerance {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if self.at(mid) >= 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }
}

/// The three-point end tangent, kept monotone: zero when it points against
/// the first secant, limited to three secants when the secants change sign.
fn end_tangent(h0: f64, h1: f64, d0: f64, d1: f64) -> f64 {
    let m = ((2.0 * h0 + h1) * d0 - h0 * d1) / (h0 + h1);
    if m * d0 <= 0.0 {
        0.0
    } else if d0 * d1 < 0.0 && m.abs() > 3.0 * d0.abs() {
        3.0 * d0
    } else {
        m
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn it_passes_through_its_points_and_is_exact_on_a_line() {
        let x = [1.0, 2.0, 4.0, 8.0];
        let y: Vec<f64> = x.iter().map(|v| 3.0 - 0.5 * v).collect();
        let p = Pchip::new(&x, &y).unwrap();
        for (a, b) in x.iter().zip(&y) {
            assert_eq!(p.at(*a), *b);
        }
        for t in [1.5, 3.0, 5.5, 7.9] {
            assert!((p.at(t) - (3.0 - 0.5 * t)).abs() < 1e-12, "{t}");
        }
        // 3 − 0.5x = 0 at x = 6.
        let root = p.first_fall_through_zero(1e-9).unwrap();
        assert!((root - 6.0).abs() < 1e-8, "{root}");
    }

    #[test]
    fn it_stays_monotone_where_a_free_cubic_overshoots() {
        // A step: a natural cubic spline rings below 0 and above 1 here.
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let y = [0.0, 0.0, 0.0, 1.0, 1.0];
        let p = Pchip::new(&x, &y).unwrap();
        let mut last = f64::NEG_INFINITY;
        for i in 0..=400 {
            let v = p.at(f64::from(i) / 100.0);
            assert!((0.0..=1.0).contains(&v), "{v}");
            assert!(v >= last - 1e-12);
            last = v;
        }
    }

    #[test]
    fn the_known_tangent_of_fritsch_carlson() {
        // Equal spacing, secants 1 and 3: the harmonic mean 2·1·3/(1+3) = 1.5.
        let p = Pchip::new(&[0.0, 1.0, 2.0], &[0.0, 1.0, 4.0]).unwrap();
        assert!((p.m[1] - 1.5).abs() < 1e-12, "{:?}", p.m);
        // The three-point ends: (3·1 − 1·3)/2 = 0 at the start and
        // (3·3 − 1·1)/2 = 4 at the end.
        assert_eq!(p.m[0], 0.0);
        assert!((p.m[2] - 4.0).abs() < 1e-12);
    }

    #[test]
    fn no_root_when_the_margin_never_falls_below_zero_or_starts_below() {
        let x = [1.0, 2.0, 3.0];
        assert_eq!(
            Pchip::new(&x, &[0.5, 0.4, 0.1])
                .unwrap()
                .first_fall_through_zero(1e-6),
            None
        );
        assert_eq!(
            Pchip::new(&x, &[-0.1, -0.4, -0.5])
                .unwrap()
                .first_fall_through_zero(1e-6),
            None
        );
    }

    #[test]
    fn bad_points_are_refused() {
        assert!(Pchip::new(&[1.0], &[1.0]).is_none());
        assert!(Pchip::new(&[1.0, 1.0], &[1.0, 2.0]).is_none());
        assert!(Pchip::new(&[2.0, 1.0], &[1.0, 2.0]).is_none());
        assert!(Pchip::new(&[1.0, 2.0], &[1.0, f64::NAN]).is_none());
    }
}
