//! Incremental parser of the server's side of RESP2 and RESP3: every reply
//! type, nested to any depth, split anywhere. It keeps no bytes: a bulk
//! payload is skipped by its length, and nesting is one counter of the
//! elements the current reply still owes, not a stack.

use memchr::memchr;

use super::length::{Length, LengthLine};
use super::RespError;

/// One complete top-level reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// A simple (`-`) or blob (`!`) error.
    pub error: bool,
    /// `$-1`, `*-1` or RESP3 `_`: what GET answers for a missing key.
    pub null: bool,
    /// A RESP3 push (`>`): out of band, the answer to no request.
    pub push: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Header {
    /// `$`, `!`, `=`: a payload of that many bytes follows.
    Blob,
    /// `*`, `~`, `>` (one element per count) and `%` (two: key and value).
    Aggregate { per_count: u64 },
    /// `|`: key-value pairs that annotate the element after them.
    Attribute,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before an element's type byte.
    Type,
    /// Inside a simple line (`+`, `-`, `:`, ...), waiting for `\r`.
    Simple,
    /// Reading a length or count.
    Header(Header, LengthLine),
    /// After the `\r` of a simple line.
    SimpleLf,
    /// After the `\r` of a header line.
    HeaderLf(Header, Length),
    /// Skipping a payload; bytes left.
    Payload(u64),
    PayloadCr,
    PayloadLf,
}

/// Parses a byte stream of replies into [`Reply`] values.
#[derive(Clone, Debug)]
pub struct ReplyParser {
    state: State,
    /// Elements still owed to the current top-level reply, the one being
    /// read included; 0 between replies.
    pending: u64,
    /// The top-level element's type byte has been seen (not only attributes).
    decided: bool,
    /// The element being read is the top-level one.
    at_top: bool,
    top: Reply,
}

impl Default for ReplyParser {
    fn default() -> Self {
        Self {
            state: State::Type,
            pending: 0,
            decided: false,
            at_top: false,
            top: Reply::default(),
        }
    }
}

impl ReplyParser {
    /// Reads `bytes`, calling `done` for each reply completed in them.
    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        done: &mut impl FnMut(Reply),
    ) -> Result<(), RespError> {
        while let Some((&byte, rest)) = bytes.split_first() {
            match self.state {
                State::Type => {
                    self.start(byte)?;
                    bytes = rest;
                }
                State::Simple => match memchr(b'\r', bytes) {
                    Some(i) => {
                        self.state = State::SimpleLf;
                        bytes = &bytes[i + 1..];
                    }
                    None => bytes = &[],
                },
                State::SimpleLf => {
                    expect(byte, b'\n')?;
                    self.element_done(done);
                    bytes = rest;
                }
                State::Header(header, mut line) => {
                    self.state = match line.take(byte)? {
                        Some(length) => State::HeaderLf(header, length),
                        None => State::Header(header, line),
                    };
                    bytes = rest;
                }
                State::HeaderLf(header, length) => {
                    expect(byte, b'\n')?;
                    self.header_done(header, length, done)?;
                    bytes = rest;
                }
                State::Payload(left) => {
                    let take = left.min(bytes.len() as u64);
                    let left = left - take;
                    self.state = if left == 0 {
                        State::PayloadCr
                    } else {
                        State::Payload(left)
                    };
                    bytes = &bytes[take as usize..];
                }
                State::PayloadCr => {
                    expect(byte, b'\r')?;
                    self.state = State::PayloadLf;
                    bytes = rest;
                }
                State::PayloadLf => {
                    expect(byte, b'\n')?;
                    self.element_done(done);
                    bytes = rest;
                }
            }
        }
        Ok(())
    }

    fn start(&mut self, byte: u8) -> Result<(), RespError> {
        if self.pending == 0 {
            self.pending = 1;
            self.decided = false;
            self.top = Reply::default();
        }
        // Only attributes can come before the top-level element, and once
        // they are read the top-level element is the one element still owed.
        self.at_top = !self.decided && self.pending == 1 && byte != b'|';
        if self.at_top {
            self.decided = true;
            self.top.error = matches!(byte, b'-' | b'!');
            self.top.null = byte == b'_';
            self.top.push = byte == b'>';
        }
        self.state = match byte {
            b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => State::Simple,
            b'$' | b'!' | b'=' => State::Header(Header::Blob, LengthLine::default()),
            b'*' | b'~' | b'>' => {
                State::Header(Header::Aggregate { per_count: 1 }, LengthLine::default())
            }
            b'%' => State::Header(Header::Aggregate { per_count: 2 }, LengthLine::default()),
            b'|' => State::Header(Header::Attribute, LengthLine::default()),
            other => return Err(RespError::BadType(other)),
        };
        Ok(())
    }

    fn header_done(
        &mut self,
        header: Header,
        length: Length,
        done: &mut impl FnMut(Reply),
    ) -> Result<(), RespError> {
        match (header, length) {
            (Header::Attribute, Length::Null) => return Err(RespError::BadLength),
            (Header::Attribute, Length::Count(n)) => {
                self.pending = owed(self.pending, n, 2)?;
                self.state = State::Type;
            }
            (_, Length::Null) => {
                if self.at_top {
                    self.top.null = true;
                }
                self.element_done(done);
            }
            (Header::Blob, Length::Count(0)) => self.state = State::PayloadCr,
            (Header::Blob, Length::Count(n)) => self.state = State::Payload(n),
            (Header::Aggregate { per_count }, Length::Count(n)) => {
                // The aggregate itself is replaced by its children.
                self.pending = owed(self.pending - 1, n, per_count)?;
                self.state = State::Type;
                if self.pending == 0 {
                    done(self.top);
                }
            }
        }
        Ok(())
    }

    fn element_done(&mut self, done: &mut impl FnMut(Reply)) {
        self.state = State::Type;
        self.pending -= 1;
        if self.pending == 0 {
            done(self.top);
        }
    }
}

/// `pending + n * per_count`, or an error where no real reply is that large.
fn owed(pending: u64, n: u64, per_count: u64) -> Result<u64, RespError> {
    n.checked_mul(per_count)
        .and_then(|children| pending.checked_add(children))
        .ok_or(RespError::BadLength)
}

fn expect(byte: u8, want: u8) -> Result<(), RespError> {
    if byte == want {
        Ok(())
    } else {
        Err(RespError::MissingCrlf)
    }
}
