//! The decimal after a length or count prefix (`$5`, `*-1`), read one byte
//! at a time so a header may be split anywhere.

use super::RespError;

/// Digits beyond this cannot be a length any Redis would send.
const MAX_DIGITS: u8 = 19;

/// What a finished length line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Length {
    /// `-1`: a RESP2 null bulk string or null array.
    Null,
    Count(u64),
}

/// A length line being read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LengthLine {
    negative: bool,
    digits: u8,
    value: u64,
}

impl LengthLine {
    pub(super) fn push(&mut self, byte: u8) -> Result<(), RespError> {
        match byte {
            b'-' if !self.negative && self.digits == 0 => self.negative = true,
            b'0'..=b'9' if self.digits < MAX_DIGITS => {
                self.digits += 1;
                self.value = self.value * 10 + u64::from(byte - b'0');
            }
            b'0'..=b'9' => return Err(RespError::BadLength),
            // `?` is RESP3's streamed string or aggregate; Redis never sends one.
            _ => return Err(RespError::BadLength),
        }
        Ok(())
    }

    /// Reads one byte of the line: its value once `\r` ends it, `None`
    /// before.
    pub(super) fn take(&mut self, byte: u8) -> Result<Option<Length>, RespError> {
        match byte {
            b'\r' => self.finish().map(Some),
            _ => self.push(byte).map(|()| None),
        }
    }

    /// The value once `\r` ends the line: only `-1` may be negative.
    pub(super) fn finish(self) -> Result<Length, RespError> {
        match (self.negative, self.digits, self.value) {
            (_, 0, _) => Err(RespError::BadLength),
            (true, _, 1) => Ok(Length::Null),
            (true, _, _) => Err(RespError::BadLength),
            (false, _, n) => Ok(Length::Count(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Length, RespError> {
        let mut line = LengthLine::default();
        for b in text.bytes() {
            line.push(b)?;
        }
        line.finish()
    }

    #[test]
    fn reads_counts_null_and_rejects_the_rest() {
        assert_eq!(read("0"), Ok(Length::Count(0)));
        assert_eq!(read("1234"), Ok(Length::Count(1234)));
        assert_eq!(read("-1"), Ok(Length::Null));
        assert_eq!(read("-2"), Err(RespError::BadLength));
        assert_eq!(read(""), Err(RespError::BadLength));
        assert_eq!(read("-"), Err(RespError::BadLength));
        assert_eq!(read("1-"), Err(RespError::BadLength));
        assert_eq!(read("?"), Err(RespError::BadLength));
        assert_eq!(read("12a"), Err(RespError::BadLength));
        assert_eq!(
            read("9999999999999999999"),
            Ok(Length::Count(9_999_999_999_999_999_999))
        );
        assert_eq!(read("99999999999999999999"), Err(RespError::BadLength));
    }
}
