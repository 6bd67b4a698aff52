//! Wall-clock times as traces write them: RFC 3339 in UTC with
//! microseconds, and the shapes the public traces use (Azure's
//! `2023-11-16 18:15:46.6805900`). This crate reads no clock: callers pass
//! microseconds since the Unix epoch.

/// `2024-05-01T12:00:00.123456Z`.
pub fn format_rfc3339(unix_us: i64) -> String {
    let secs = unix_us.div_euclid(1_000_000);
    let micros = unix_us.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

/// Microseconds since the Unix epoch of `YYYY-MM-DD[T| ]HH:MM:SS[.fraction]`
/// followed by `Z`, an offset (`+02:00`, `+0200`) or nothing (UTC). Digits of
/// the fraction past the sixth are dropped.
pub fn parse_wall_clock(text: &str) -> Result<i64, String> {
    let bad = |what: &str| format!("`{text}` is not a timestamp ({what})");
    let b = text.as_bytes();
    // A character across byte 19 would cut the seconds' slice (a panic found
    // by the `trace` fuzzer); the other cuts are next to the ASCII checked here.
    if b.len() < 19
        || !text.is_char_boundary(19)
        || b[4] != b'-'
        || b[7] != b'-'
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad("expected YYYY-MM-DD HH:MM:SS"));
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad("expected `T` or a space between date and time"));
    }
    let field = |from: usize, to: usize| -> Result<i64, String> {
        let s = &text[from..to];
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse::<i64>().map_err(|_| bad("not a number"))
        } else {
            Err(bad("not a number"))
        }
    };
    let (year, month, day) = (field(0, 4)?, field(5, 7)?, field(8, 10)?);
    let (hour, minute, second) = (field(11, 13)?, field(14, 16)?, field(17, 19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("no such time"));
    }
    let mut rest = &text[19..];
    let mut micros = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("no digits after the decimal point"));
        }
        for (i, c) in fraction.bytes().take(6).take(digits).enumerate() {
            micros += i64::from(c - b'0') * 10i64.pow(5 - i as u32);
        }
        rest = &fraction[digits..];
    }
    let offset_s = match rest {
        "" | "Z" | "z" => 0,
        zone => {
            let sign = match zone.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return Err(bad("unknown time zone")),
            };
            let hm = zone[1..].replace(':', "");
            if hm.len() != 4 || !hm.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad("unknown time zone"));
            }
            let (h, m) = (field_of(&hm[..2]), field_of(&hm[2..]));
            sign * (h * 3600 + m * 60)
        }
    };
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Ok(secs * 1_000_000 + micros)
}

/// Two ASCII digits (checked by the caller).
fn field_of(s: &str) -> i64 {
    s.bytes().fold(0, |n, c| n * 10 + i64::from(c - b'0'))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's civil calendar algorithms (public domain): days since
// 1970-01-01 to and from a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_known_values() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00.000000Z");
        // 2023-11-16 18:15:46.68059 UTC, the Azure trace's first row.
        let azure = parse_wall_clock("2023-11-16 18:15:46.6805900").unwrap();
        assert_eq!(azure, 1_700_158_546_680_590);
        assert_eq!(format_rfc3339(azure), "2023-11-16T18:15:46.680590Z");
        for us in [-1, 951_782_400_000_001, 4_102_444_799_999_999] {
            assert_eq!(parse_wall_clock(&format_rfc3339(us)), Ok(us));
        }
        assert_eq!(
            parse_wall_clock("2024-05-10T02:00:00+02:00"),
            parse_wall_clock("2024-05-10 00:00:00Z")
        );
        assert_eq!(
            parse_wall_clock("2024-02-30 00:00:00").unwrap_err(),
            "`2024-02-30 00:00:00` is not a timestamp (no such date)"
        );
        assert!(parse_wall_clock("yesterday").is_err());
        assert!(parse_wall_clock("2024-05-10 00:00:00.").is_err());
        assert!(parse_wall_clock("2024-05-10 00:00:00 PST").is_err());
    }

    /// Found by the `trace` fuzzer: a character across byte 19 (the end of
    /// the seconds) panicked on the slice, from any trace's timestamp.
    #[test]
    fn a_character_across_the_seconds_is_refused() {
        assert_eq!(
            parse_wall_clock("2023-11-16 18:15:4é").unwrap_err(),
            "`2023-11-16 18:15:4é` is not a timestamp (expected YYYY-MM-DD HH:MM:SS)"
        );
        assert!(parse_wall_clock("2023-11-16 18:15:46é").is_err());
    }
}
