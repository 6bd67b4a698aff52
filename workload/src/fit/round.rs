//! Numbers as a person reads and edits them: four significant digits.

/// `x` to four significant digits (0, NaN and the infinities unchanged).
pub(crate) fn sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 3 - x.abs().log10().floor() as i32;
    let factor = 10f64.powi(digits.abs());
    let rounded = if digits >= 0 {
        (x * factor).round() / factor
    } else {
        (x / factor).round() * factor
    };
    // `0.1 * 3` style noise: print back through the shortest decimal.
    format!("{rounded:.*}", digits.max(0) as usize)
        .parse()
        .unwrap_or(rounded)
}

/// To two decimals: log-likelihoods and information criteria, whose
/// differences matter, not their digits.
pub(crate) fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::sig;

    #[test]
    fn four_significant_digits() {
        assert_eq!(sig(0.123_456), 0.1235);
        assert_eq!(sig(123_456.0), 123_500.0);
        assert_eq!(sig(-0.000_012_345_6), -0.000_012_35);
        assert_eq!(sig(1.0), 1.0);
        assert_eq!(sig(0.0), 0.0);
        assert_eq!(sig(9.999_96), 10.0);
        assert_eq!(sig(59.99), 59.99);
    }
}
