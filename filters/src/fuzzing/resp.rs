//! The RESP request and reply parsers: the same requests or replies, and the
//! same first error, whatever the chunk boundaries; never more of them than
//! the bytes could hold; and a well-formed stream written from the fuzzer's
//! bytes reads back as exactly what was written.

use super::{ensure, Framed, Verdict};
use crate::resp::{ClientReply, Command, Reply, ReplyParser, Request, RequestParser, RespError};

/// What a parser made of a stream: everything completed before the first
/// error, and that error.
type Parsed<T> = (Vec<T>, Option<RespError>);

fn requests(pieces: &[&[u8]]) -> Parsed<Request> {
    let mut parser = RequestParser::default();
    let mut out = Vec::new();
    for piece in pieces {
        if let Err(e) = parser.feed(piece, &mut |r| out.push(r)) {
            return (out, Some(e));
        }
    }
    (out, None)
}

fn replies(pieces: &[&[u8]]) -> Parsed<Reply> {
    let mut parser = ReplyParser::default();
    let mut out = Vec::new();
    for piece in pieces {
        if let Err(e) = parser.feed(piece, &mut |r| out.push(r)) {
            return (out, Some(e));
        }
    }
    (out, None)
}

/// The client's side. The body is read as raw RESP, and also as commands to
/// encode: lines are commands, spaces split arguments.
pub fn resp_request(data: &[u8]) -> Verdict {
    let input = Framed::read(data);
    let pieces = input.pieces();
    let whole = requests(&[input.body]);
    let split = requests(&pieces);
    ensure(split == whole, || {
        format!("cut at {:?}: {split:?}, whole: {whole:?}", input.cuts)
    })?;
    // The shortest request is an inline `x\n`.
    ensure(whole.0.len() <= input.body.len() / 2, || {
        format!("{} requests from {} bytes", whole.0.len(), input.body.len())
    })?;

    let commands: Vec<Vec<&[u8]>> = input
        .body
        .split(|b| *b == b'\n')
        .map(|line| line.split(|b| *b == b' ').collect())
        .collect();
    let mut encoded = Vec::new();
    for args in &commands {
        encoded.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            encoded.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            encoded.extend_from_slice(arg);
            encoded.extend_from_slice(b"\r\n");
        }
    }
    let expected: Vec<Request> = commands.iter().map(|args| expected_request(args)).collect();
    let cuts = rescale(&input.cuts, input.body.len(), encoded.len());
    let got = requests(&pieces_at(&encoded, &cuts));
    ensure(got == (expected.clone(), None), || {
        format!("encoded {encoded:?} cut at {cuts:?} read as {got:?}, expected {expected:?}")
    })
}

/// What a request of these arguments is, computed apart from the parser.
fn expected_request(args: &[&[u8]]) -> Request {
    let arg = |i: usize| args.get(i).copied().unwrap_or_default();
    let command = Command::lookup(arg(0));
    let client_reply = if command == Command::CLIENT && arg(1).eq_ignore_ascii_case(b"reply") {
        match arg(2).to_ascii_lowercase().as_slice() {
            b"on" => Some(ClientReply::On),
            b"off" => Some(ClientReply::Off),
            b"skip" => Some(ClientReply::Skip),
            _ => None,
        }
    } else {
        None
    };
    Request {
        command,
        client_reply,
    }
}

/// The server's side. The body is read as raw RESP, and also as a recipe
/// for well-formed replies (see [`Writer`]).
pub fn resp_reply(data: &[u8]) -> Verdict {
    let input = Framed::read(data);
    let pieces = input.pieces();
    let whole = replies(&[input.body]);
    let split = replies(&pieces);
    ensure(split == whole, || {
        format!("cut at {:?}: {split:?}, whole: {whole:?}", input.cuts)
    })?;
    // The shortest reply is `+\r\n`.
    ensure(whole.0.len() <= input.body.len() / 3, || {
        format!("{} replies from {} bytes", whole.0.len(), input.body.len())
    })?;

    let mut writer = Writer {
        recipe: input.body,
        out: Vec::new(),
    };
    let mut expected = Vec::new();
    while !writer.recipe.is_empty() && expected.len() < 64 {
        expected.push(writer.top());
    }
    let cuts = rescale(&input.cuts, input.body.len(), writer.out.len());
    let got = replies(&pieces_at(&writer.out, &cuts));
    ensure(got == (expected.clone(), None), || {
        format!(
            "written {:?} cut at {cuts:?} read as {got:?}, expected {expected:?}",
            String::from_utf8_lossy(&writer.out)
        )
    })
}

/// Writes well-formed RESP2/RESP3 replies, each choice taken from the next
/// byte of the recipe (zeros once it runs out), and says what each top-level
/// reply is.
struct Writer<'a> {
    recipe: &'a [u8],
    out: Vec<u8>,
}

const MAX_DEPTH: u8 = 6;

impl Writer<'_> {
    fn byte(&mut self) -> u8 {
        match self.recipe.split_first() {
            Some((&b, rest)) => {
                self.recipe = rest;
                b
            }
            None => 0,
        }
    }

    fn put(&mut self, text: &str) {
        self.out.extend_from_slice(text.as_bytes());
    }

    /// One top-level reply, attributes before it sometimes.
    fn top(&mut self) -> Reply {
        let b = self.byte();
        if b & 0x80 != 0 {
            self.attribute(0);
        }
        self.element(b & 0x7f, 0)
    }

    /// `|n` then n key-value pairs: annotates what follows, is no reply.
    fn attribute(&mut self, depth: u8) {
        let n = self.byte() % 3;
        self.put(&format!("|{n}\r\n"));
        for _ in 0..2 * n {
            let b = self.byte();
            self.element(b, depth + 1);
        }
    }

    /// One element of kind `b`; what it is if it is the top-level reply.
    fn element(&mut self, b: u8, depth: u8) -> Reply {
        let mut reply = Reply::default();
        // Past the depth limit only scalars, so the recursion ends.
        let kinds = if depth >= MAX_DEPTH { 9 } else { 16 };
        match b % kinds {
            0 => self.put("+OK\r\n"),
            1 => {
                self.put("-ERR bad\r\n");
                reply.error = true;
            }
            2 => {
                let n = i64::from(self.byte()) - 128;
                self.put(&format!(":{n}\r\n"));
            }
            3 => self.put(",3.14\r\n"),
            4 => self.put("#t\r\n"),
            5 => self.put("(12345678901234567890\r\n"),
            6 => {
                self.put("_\r\n");
                reply.null = true;
            }
            7 => {
                self.put("$-1\r\n");
                reply.null = true;
            }
            8 => {
                // A payload holding CRLF and type bytes: skipped by its length.
                let n = usize::from(self.byte() % 16);
                let payload: Vec<u8> = (0..n).map(|i| b"\r\n*$+-"[i % 6]).collect();
                self.put(&format!("${n}\r\n"));
                self.out.extend_from_slice(&payload);
                self.put("\r\n");
            }
            9 => {
                self.put("!7\r\nERR bad\r\n");
                reply.error = true;
            }
            10 => self.put("=8\r\ntxt:abcd\r\n"),
            11 => {
                self.put("*-1\r\n");
                reply.null = true;
            }
            12 => self.aggregate('*', 1, depth),
            13 => self.aggregate('%', 2, depth),
            14 => {
                self.aggregate('>', 1, depth);
                reply.push = true;
            }
            _ => {
                self.attribute(depth);
                let b = self.byte();
                // An attribute annotates the element after it, which is
                // the reply itself.
                return self.element(b, depth + 1);
            }
        }
        reply
    }

    fn aggregate(&mut self, kind: char, per_count: u8, depth: u8) {
        let n = self.byte() % 4;
        self.put(&format!("{kind}{n}\r\n"));
        for _ in 0..n * per_count {
            let b = self.byte();
            self.element(b, depth + 1);
        }
    }
}

/// `cuts` of a body of `from` bytes, moved to the same fractions of `to`.
fn rescale(cuts: &[usize], from: usize, to: usize) -> Vec<usize> {
    cuts.iter().map(|c| c * to / from.max(1)).collect()
}

fn pieces_at<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        let cut = cut.clamp(start, bytes.len());
        pieces.push(bytes.get(start..cut).unwrap_or_default());
        start = cut;
    }
    pieces.push(bytes.get(start..).unwrap_or_default());
    pieces
}
