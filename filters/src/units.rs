//! Durations (`250ms`, `1s`, `1.5m`), percents and byte sizes as they are
//! written, in the config and in workload scenarios alike: one parser for both halves.

use std::time::Duration;

/// Parses `<number><unit>` with unit one of `us`, `ms`, `s`, `m`, `h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{text}` has no unit (use us, ms, s, m or h)"))?;
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 250ms or 1s"))?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "`{text}` has unknown unit `{unit}` (use us, ms, s, m or h)"
            ))
        }
    };
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("`{text}` is out of range"))
}

/// Parses a percent written `1%`, `0.5 %` or as a bare number; the range
/// (0..=100) is checked by the caller, which knows the path.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim_end();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("`{text}` is not a percent like 1% or 0.5%")),
    }
}

/// Parses a byte size: `<number>` (bytes) or with a unit `B`, `KiB`, `MiB`,
/// `GiB` (powers of 1024) or `KB`, `MB`, `GB` (powers of 1000).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size like 512KiB or 1MiB"))?;
    let scale: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        other => {
            return Err(format!(
                "`{text}` has unknown unit `{other}` (use B, KiB, MiB, GiB, KB, MB or GB)"
            ))
        }
    };
    Ok((value * scale).round() as u64)
}

/// The inverse of [`parse_duration`] for display: the largest unit that is exact.
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0s".to_string()
    } else if us.is_multiple_of(3_600_000_000) {
        format!("{}h", us / 3_600_000_000)
    } else if us.is_multiple_of(60_000_000) {
        format!("{}m", us / 60_000_000)
    } else if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1_000) {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
    }

    #[test]
    fn parses_percents() {
        assert_eq!(parse_percent("1%"), Ok(1.0));
        assert_eq!(parse_percent(" 0.5 %"), Ok(0.5));
        assert_eq!(parse_percent("20"), Ok(20.0));
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("512 KiB"), Ok(512 << 10));
        assert_eq!(parse_size("2000"), Ok(2000));
        assert_eq!(parse_size("1.5KB"), Ok(1500));
    }

    #[test]
    fn rejects_with_reason() {
        let size_unit = "`1 parsec` has unknown unit `parsec` (use B, KiB, MiB, GiB, KB, MB or GB)";
        let cases = [
            (
                parse_duration("5").err(),
                "`5` has no unit (use us, ms, s, m or h)",
            ),
            (
                parse_duration("5 parsecs").err(),
                "`5 parsecs` has unknown unit ` parsecs` (use us, ms, s, m or h)",
            ),
            (
                parse_duration("fast").err(),
                "`fast` is not a duration like 250ms or 1s",
            ),
            (
                parse_percent("lots").err(),
                "`lots` is not a percent like 1% or 0.5%",
            ),
            (
                parse_percent("inf%").err(),
                "`inf%` is not a percent like 1% or 0.5%",
            ),
            (parse_size("1 parsec").err(), size_unit),
            (
                parse_size("big").err(),
                "`big` is not a size like 512KiB or 1MiB",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got.as_deref(), Some(want));
        }
    }

    #[test]
    fn formats_round_trip() {
        for s in ["250ms", "1s", "2m", "1h", "10us", "0s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap_or_default()), s);
        }
    }
}
