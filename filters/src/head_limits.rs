//! The HTTP/1 request-head checks of `listeners[].limits`: an incremental
//! scanner fed the bytes of a connection as they arrive, which says when the
//! head is complete or which limit it broke. It scans each byte once, so a
//! head trickled one byte per read costs no more than one read whole. The
//! URI is checked before the header total, as the request line comes first.
//! The connection layer that feeds it (reads, timeouts, the error answer)
//! lives in the proxy.

/// The limits a head is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLimits {
    /// Bytes of the request target (the URI of the request line).
    pub max_uri_bytes: usize,
    /// Bytes of the header lines, line ends included, the request line not.
    pub max_header_bytes: usize,
    /// Header lines; pingora itself takes at most 256 and answers an empty
    /// 400 past them.
    pub max_headers: usize,
}

impl Default for HeadLimits {
    fn default() -> Self {
        Self {
            max_uri_bytes: 8 << 10,
            max_header_bytes: 64 << 10,
            max_headers: 256,
        }
    }
}

/// What the bytes seen so far amount to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadVerdict {
    /// No limit broken yet; the head is not complete.
    Partial,
    /// The head ends at this offset (after its blank line); what follows is body.
    Complete(usize),
    /// 414: the request target is longer than `max_uri_bytes`.
    UriTooLong,
    /// 431: the header lines are longer than `max_header_bytes`, or more
    /// than `max_headers`.
    HeaderTooLarge,
}

impl HeadVerdict {
    /// The status to answer with, for a broken limit.
    pub fn status(self) -> Option<u16> {
        match self {
            HeadVerdict::UriTooLong => Some(414),
            HeadVerdict::HeaderTooLarge => Some(431),
            HeadVerdict::Partial | HeadVerdict::Complete(_) => None,
        }
    }
}

/// Scans one request head, fed the whole buffer so far on each call.
#[derive(Clone, Debug)]
pub struct HeadScan {
    limits: HeadLimits,
    /// Bytes already looked at.
    scanned: usize,
    /// Where the line being read starts.
    line_start: usize,
    /// Where the header lines start, once the request line is complete.
    headers_start: Option<usize>,
    headers: usize,
}

impl HeadScan {
    pub fn new(limits: HeadLimits) -> Self {
        Self {
            limits,
            scanned: 0,
            line_start: 0,
            headers_start: None,
            headers: 0,
        }
    }

    /// `buf` is every byte of the connection since the head began: the
    /// bytes of the previous call, then the new ones. Once a verdict other
    /// than `Partial` is given, it is final.
    pub fn feed(&mut self, buf: &[u8]) -> HeadVerdict {
        while let Some(at) = buf
            .get(self.scanned..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
        {
            let end = self.scanned + at + 1;
            let line = trim_line(buf.get(self.line_start..end).unwrap_or_default());
            self.scanned = end;
            match self.headers_start {
                // Empty lines before the request line are allowed (RFC 9112 §2.2).
                None if line.is_empty() => {}
                None => {
                    if uri_len(line, true) > self.limits.max_uri_bytes {
                        return HeadVerdict::UriTooLong;
                    }
                    self.headers_start = Some(end);
                }
                Some(_) if line.is_empty() => return HeadVerdict::Complete(end),
                Some(start) => {
                    self.headers += 1;
                    if self.headers > self.limits.max_headers
                        || end - start > self.limits.max_header_bytes
                    {
                        return HeadVerdict::HeaderTooLarge;
                    }
                }
            }
            self.line_start = end;
        }
        self.scanned = buf.len();
        let partial = buf.get(self.line_start..).unwrap_or_default();
        match self.headers_start {
            None => {
                // An unfinished request line whose target (or method) is
                // already too long, whatever comes, breaks the limit now.
                if uri_len(partial, false) > self.limits.max_uri_bytes {
                    return HeadVerdict::UriTooLong;
                }
            }
            // A lone `\r` may be the start of the blank line, which is no
            // header byte: only a header line being written counts early.
            Some(start) if partial != b"\r" && buf.len() - start > self.limits.max_header_bytes => {
                return HeadVerdict::HeaderTooLarge;
            }
            Some(_) => {}
        }
        HeadVerdict::Partial
    }
}

/// The line without its `\n` or `\r\n`.
fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// What `max_uri_bytes` is checked against in `METHOD target VERSION`: the
/// target, from the first space to the last (the whole rest when there is
/// one space only), or the method when it is longer (a line without a space
/// is both). Of an unfinished line (`complete` false) it is what the finished
/// line's will be at least, so that a head fed in pieces gets the verdict it
/// gets whole: bytes after a second space may be the version, and a last
/// `\r` the line's end.
fn uri_len(line: &[u8], complete: bool) -> usize {
    let line = match line.strip_suffix(b"\r") {
        Some(before) if !complete => before,
        _ => line,
    };
    let Some(first) = memchr::memchr(b' ', line) else {
        return line.len();
    };
    let target = match memchr::memrchr(b' ', line) {
        Some(last) if last > first => last - first - 1,
        _ => line.len() - first - 1,
    };
    target.max(first)
}

#[cfg(test)]
mod tests;
