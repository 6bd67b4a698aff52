//! Incremental parser of the client's side of RESP: arrays of bulk strings
//! and inline commands, split anywhere. It keeps the first few bytes of the
//! first three arguments (enough to name the command and see `CLIENT REPLY
//! OFF`) and skips everything else by length.

use memchr::memchr;

use super::command::{Command, MAX_NAME};
use super::length::{Length, LengthLine};
use super::RespError;

/// Redis refuses an inline command longer than this (`PROTO_INLINE_MAX_SIZE`).
const MAX_INLINE: usize = 64 * 1024;
/// Arguments kept: the command, a subcommand and its argument.
const KEPT_ARGS: usize = 3;

/// `CLIENT REPLY ON|OFF|SKIP`: the client switching the server's replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientReply {
    On,
    Off,
    Skip,
}

/// One complete request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub command: Command,
    pub client_reply: Option<ClientReply>,
}

/// The leading bytes of the first arguments; a length past `MAX_NAME`
/// marks an argument too long to be a name we know.
#[derive(Clone, Copy, Debug, Default)]
struct KeptArgs {
    bytes: [[u8; MAX_NAME]; KEPT_ARGS],
    lens: [usize; KEPT_ARGS],
}

impl KeptArgs {
    fn keep(&mut self, arg: usize, part: &[u8]) {
        let (Some(bytes), Some(len)) = (self.bytes.get_mut(arg), self.lens.get_mut(arg)) else {
            return;
        };
        let room = MAX_NAME.saturating_sub(*len);
        if part.len() > room {
            *len = MAX_NAME + 1;
        } else {
            bytes[*len..*len + part.len()].copy_from_slice(part);
            *len += part.len();
        }
    }

    fn arg(&self, arg: usize) -> &[u8] {
        match (self.bytes.get(arg), self.lens.get(arg)) {
            (Some(bytes), Some(&len)) if len <= MAX_NAME => &bytes[..len],
            _ => &[],
        }
    }

    fn request(&self) -> Request {
        let command = Command::lookup(self.arg(0));
        let client_reply =
            if command == Command::named("client") && self.arg(1).eq_ignore_ascii_case(b"reply") {
                let mode = self.arg(2);
                if mode.eq_ignore_ascii_case(b"on") {
                    Some(ClientReply::On)
                } else if mode.eq_ignore_ascii_case(b"off") {
                    Some(ClientReply::Off)
                } else if mode.eq_ignore_ascii_case(b"skip") {
                    Some(ClientReply::Skip)
                } else {
                    None
                }
            } else {
                None
            };
        Request {
            command,
            client_reply,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before a request's first byte: `*` starts an array, anything else a line.
    Start,
    /// The array's element count.
    Count(LengthLine),
    CountLf(Length),
    /// Before an argument's `$`.
    ArgType,
    ArgLength(LengthLine),
    ArgLengthLf(Length),
    /// Inside an argument: bytes left.
    ArgData(u64),
    ArgCr,
    ArgLf,
    /// Inside an inline command: bytes read so far, whether a token is open.
    Inline {
        read: usize,
        in_token: bool,
    },
}

/// Parses a byte stream of requests into [`Request`] values.
#[derive(Clone, Debug)]
pub struct RequestParser {
    state: State,
    /// Arguments still to read in the current array.
    args_left: u64,
    /// Index of the argument (or inline token) being read.
    arg: usize,
    kept: KeptArgs,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self {
            state: State::Start,
            args_left: 0,
            arg: 0,
            kept: KeptArgs::default(),
        }
    }
}

impl RequestParser {
    /// Reads `bytes`, calling `done` for each request completed in them.
    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        done: &mut impl FnMut(Request),
    ) -> Result<(), RespError> {
        while let Some((&byte, rest)) = bytes.split_first() {
            match self.state {
                State::Start => {
                    self.arg = 0;
                    self.kept = KeptArgs::default();
                    if byte == b'*' {
                        self.state = State::Count(LengthLine::default());
                        bytes = rest;
                    } else {
                        // The byte belongs to the line: read it there.
                        self.state = State::Inline {
                            read: 0,
                            in_token: false,
                        };
                    }
                }
                State::Count(mut line) => {
                    self.state = match line.take(byte)? {
                        Some(length) => State::CountLf(length),
                        None => State::Count(line),
                    };
                    bytes = rest;
                }
                State::CountLf(length) => {
                    expect(byte, b'\n')?;
                    self.state = match length {
                        // Redis ignores an empty or null array: no reply follows.
                        Length::Null | Length::Count(0) => State::Start,
                        Length::Count(n) => {
                            self.args_left = n;
                            State::ArgType
                        }
                    };
                    bytes = rest;
                }
                State::ArgType => {
                    if byte != b'$' {
                        return Err(RespError::BadType(byte));
                    }
                    self.state = State::ArgLength(LengthLine::default());
                    bytes = rest;
                }
                State::ArgLength(mut line) => {
                    self.state = match line.take(byte)? {
                        Some(length) => State::ArgLengthLf(length),
                        None => State::ArgLength(line),
                    };
                    bytes = rest;
                }
                State::ArgLengthLf(length) => {
                    expect(byte, b'\n')?;
                    self.state = match length {
                        Length::Null => return Err(RespError::BadLength),
                        Length::Count(0) => State::ArgCr,
                        Length::Count(n) => State::ArgData(n),
                    };
                    bytes = rest;
                }
                State::ArgData(left) => {
                    let take = left.min(bytes.len() as u64) as usize;
                    self.kept.keep(self.arg, &bytes[..take]);
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::ArgCr
                    } else {
                        State::ArgData(left)
                    };
                    bytes = &bytes[take..];
                }
                State::ArgCr => {
                    expect(byte, b'\r')?;
                    self.state = State::ArgLf;
                    bytes = rest;
                }
                State::ArgLf => {
                    expect(byte, b'\n')?;
                    self.arg += 1;
                    self.args_left -= 1;
                    if self.args_left == 0 {
                        self.state = State::Start;
                        done(self.kept.request());
                    } else {
                        self.state = State::ArgType;
                    }
                    bytes = rest;
                }
                State::Inline { read, in_token } => {
                    let end = memchr(b'\n', bytes);
                    let line = &bytes[..end.unwrap_or(bytes.len())];
                    let read = read + line.len();
                    if read > MAX_INLINE {
                        return Err(RespError::InlineTooLong);
                    }
                    let in_token = self.tokens(line, in_token);
                    match end {
                        Some(i) => {
                            // A blank line is no command: Redis does not answer it.
                            let any = self.arg > 0 || in_token;
                            self.state = State::Start;
                            if any {
                                done(self.kept.request());
                            }
                            bytes = &bytes[i + 1..];
                        }
                        None => {
                            self.state = State::Inline { read, in_token };
                            bytes = &[];
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Keeps the first tokens of an inline line (split on whitespace, as
    /// Redis does); returns whether a token is still open at the end.
    fn tokens(&mut self, line: &[u8], mut in_token: bool) -> bool {
        for (i, &b) in line.iter().enumerate() {
            if self.arg >= KEPT_ARGS {
                // The rest of the line cannot change what is kept.
                return in_token || line[i..].iter().any(|b| !is_space(*b));
            }
            if is_space(b) {
                if in_token {
                    self.arg += 1;
                }
                in_token = false;
            } else {
                in_token = true;
                self.kept.keep(self.arg, &line[i..=i]);
            }
        }
        in_token
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

fn expect(byte: u8, want: u8) -> Result<(), RespError> {
    if byte == want {
        Ok(())
    } else {
        Err(RespError::MissingCrlf)
    }
}
