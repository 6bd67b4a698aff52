//! Where the messages of a gRPC body end, whatever the chunk boundaries: each
//! message is a 5-byte prefix (a compressed flag, then the length as a u32
//! big-endian) and that many bytes. Only the prefix is read; a prefix split
//! across chunks is carried in 5 bytes of the framer itself, and nothing is
//! copied or allocated.

/// The length prefix of a gRPC message: flag byte and u32 length.
const GRPC_PREFIX: usize = 5;

/// Counts the messages of one gRPC body as it passes; one per stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrpcFramer {
    /// The current message's prefix, `have` bytes of it so far.
    prefix: [u8; GRPC_PREFIX],
    have: u8,
    /// Once the prefix is whole: the message's bytes still to come.
    left: u32,
}

impl GrpcFramer {
    pub fn new() -> GrpcFramer {
        GrpcFramer::default()
    }

    /// One chunk of the body as it arrived: how many messages had their last
    /// byte in it (an empty message ends with its prefix).
    pub fn feed(&mut self, chunk: &[u8]) -> u32 {
        self.feed_with(chunk, |_| {})
    }

    /// As [`GrpcFramer::feed`], and hands each piece of message bytes in
    /// the chunk (prefixes left out) to `payload`, in order: for a caller
    /// that keeps the messages (the load client), without a copy here.
    pub fn feed_with(&mut self, mut chunk: &[u8], mut payload: impl FnMut(&[u8])) -> u32 {
        let mut ended = 0u32;
        while !chunk.is_empty() {
            let (used, end) = self.advance(chunk, &mut payload);
            chunk = &chunk[used..];
            ended = ended.saturating_add(u32::from(end));
        }
        ended
    }

    /// Reads `chunk` up to the end of the current message at most: how many
    /// of its bytes that took, and whether the message ended there (an
    /// empty message ends with its prefix). Payload bytes go to `payload`.
    pub fn advance(&mut self, chunk: &[u8], mut payload: impl FnMut(&[u8])) -> (usize, bool) {
        let mut used = 0;
        while used < chunk.len() {
            let rest = &chunk[used..];
            let have = usize::from(self.have);
            if have < GRPC_PREFIX {
                let take = (GRPC_PREFIX - have).min(rest.len());
                self.prefix[have..have + take].copy_from_slice(&rest[..take]);
                self.have += take as u8;
                used += take;
                if usize::from(self.have) == GRPC_PREFIX {
                    let [_, a, b, c, d] = self.prefix;
                    self.left = u32::from_be_bytes([a, b, c, d]);
                }
            } else {
                let take = rest.len().min(self.left as usize);
                payload(&rest[..take]);
                self.left -= take as u32;
                used += take;
            }
            if usize::from(self.have) == GRPC_PREFIX && self.left == 0 {
                self.have = 0;
                return (used, true);
            }
        }
        (used, false)
    }

    /// Part of a message (or of its prefix) came and its end did not: the
    /// body was cut, or is not gRPC-framed.
    pub fn in_message(&self) -> bool {
        self.have > 0
    }
}

/// Cuts a gRPC body into whole messages, prefixes included, for a caller
/// that sends each on a timer of its own (a stream fault paces messages as
/// it paces SSE events). Every byte is handed on once, in order: a message
/// longer than the limit goes on in pieces as it comes, so memory stays
/// bounded, and [`GrpcCutter::finish`] hands on what is left of a cut one.
#[derive(Clone, Debug)]
pub struct GrpcCutter {
    framer: GrpcFramer,
    /// The current message's bytes so far, while under the limit.
    held: Vec<u8>,
    limit: usize,
}

impl GrpcCutter {
    /// Messages up to `limit` bytes (prefix included) are handed on whole.
    pub fn new(limit: usize) -> GrpcCutter {
        GrpcCutter {
            framer: GrpcFramer::new(),
            held: Vec::new(),
            limit,
        }
    }

    /// One chunk as it arrived. `out(bytes, ends_a_message)`: a whole
    /// message, or a piece of a long one (the last piece ends it).
    pub fn feed(&mut self, mut chunk: &[u8], mut out: impl FnMut(&[u8], bool)) {
        while !chunk.is_empty() {
            let (used, ended) = self.framer.advance(chunk, |_| {});
            let piece = &chunk[..used];
            chunk = &chunk[used..];
            if ended && self.held.is_empty() {
                out(piece, true);
            } else if ended {
                self.held.extend_from_slice(piece);
                out(&self.held, true);
                self.held.clear();
            } else if self.held.len() + piece.len() > self.limit {
                if !self.held.is_empty() {
                    out(&self.held, false);
                    self.held.clear();
                }
                out(piece, false);
            } else {
                self.held.extend_from_slice(piece);
            }
        }
    }

    /// The body ended: what was held of a message cut short, if any.
    pub fn finish(&mut self, mut out: impl FnMut(&[u8], bool)) {
        if !self.held.is_empty() {
            out(&self.held, false);
            self.held.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn framed(messages: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
        let (mut body, mut ends) = (Vec::new(), Vec::new());
        for (i, m) in messages.iter().enumerate() {
            body.push(u8::from(i % 2 == 1));
            body.extend_from_slice(&(m.len() as u32).to_be_bytes());
            body.extend_from_slice(m);
            ends.push(body.len());
        }
        (body, ends)
    }

    /// Messages ended in each chunk, cut at `cuts` (ascending offsets).
    fn per_chunk(body: &[u8], cuts: &[usize]) -> (Vec<u32>, bool) {
        let mut f = GrpcFramer::new();
        let mut from = 0;
        let mut counts = Vec::new();
        for &to in cuts.iter().chain([&body.len()]) {
            counts.push(f.feed(&body[from..to]));
            from = to;
        }
        (counts, f.in_message())
    }

    /// What each chunk should report: the messages whose last byte lies in it.
    fn expected(ends: &[usize], cuts: &[usize], len: usize) -> Vec<u32> {
        let mut from = 0;
        cuts.iter()
            .chain([&len])
            .map(|&to| {
                let n = ends.iter().filter(|&&e| e > from && e <= to).count() as u32;
                from = to;
                n
            })
            .collect()
    }

    const MESSAGES: &[&[u8]] = &[b"msg-0", b"", b"x", b"a longer message"];

    #[test]
    fn every_split_in_two_and_three_gives_the_same_messages() {
        let (body, ends) = framed(MESSAGES);
        for a in 0..=body.len() {
            for b in a..=body.len() {
                let cuts = [a, b];
                let (counts, partial) = per_chunk(&body, &cuts);
                assert_eq!(
                    counts,
                    expected(&ends, &cuts, body.len()),
                    "cut at {cuts:?}"
                );
                assert!(!partial);
            }
        }
    }

    #[test]
    fn a_cut_body_is_in_a_message() {
        let (body, _) = framed(MESSAGES);
        let mut f = GrpcFramer::new();
        assert_eq!(f.feed(&body[..body.len() - 1]), 3);
        assert!(f.in_message());
        let mut f = GrpcFramer::new();
        assert_eq!(f.feed(&body[..2]), 0);
        assert!(f.in_message());
    }

    #[test]
    fn a_long_message_spans_many_chunks() {
        let big = vec![7u8; 70_000];
        let (body, _) = framed(&[&big, b"end"]);
        let mut f = GrpcFramer::new();
        let counts: Vec<u32> = body.chunks(16_384).map(|c| f.feed(c)).collect();
        assert_eq!(counts, [0, 0, 0, 0, 2]);
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_same_messages(
            messages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8),
            mut cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let refs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
            let (body, ends) = framed(&refs);
            let mut cuts: Vec<usize> = cuts.drain(..).map(|i| i.index(body.len() + 1)).collect();
            cuts.sort_unstable();
            let (counts, partial) = per_chunk(&body, &cuts);
            prop_assert_eq!(counts, expected(&ends, &cuts, body.len()));
            prop_assert!(!partial);
        }
    }

    /// Cuts `body` at `cuts` and feeds the chunks: the pieces handed on.
    fn cut(body: &[u8], cuts: &[usize], limit: usize) -> Vec<(Vec<u8>, bool)> {
        let mut cutter = GrpcCutter::new(limit);
        let mut out = Vec::new();
        let mut from = 0;
        for &to in cuts.iter().chain([&body.len()]) {
            cutter.feed(&body[from..to], |b, end| out.push((b.to_vec(), end)));
            from = to;
        }
        cutter.finish(|b, end| out.push((b.to_vec(), end)));
        out
    }

    #[test]
    fn the_cutter_hands_on_each_message_whole_however_it_was_split() {
        let (body, ends) = framed(MESSAGES);
        let whole: Vec<(Vec<u8>, bool)> = [0]
            .iter()
            .chain(&ends)
            .zip(&ends)
            .map(|(&a, &b)| (body[a..b].to_vec(), true))
            .collect();
        for a in 0..=body.len() {
            for b in a..=body.len() {
                assert_eq!(cut(&body, &[a, b], 1024), whole, "cut at {a}, {b}");
            }
        }
    }

    #[test]
    fn a_message_over_the_limit_goes_in_pieces_and_a_cut_one_is_handed_on() {
        let big = vec![7u8; 100];
        let (body, _) = framed(&[&big, b"end"]);
        let out = cut(&body, &[30, 60, 90], 40);
        let joined: Vec<u8> = out.iter().flat_map(|(b, _)| b.clone()).collect();
        assert_eq!(joined, body, "every byte once, in order");
        assert!(out.iter().all(|(b, _)| b.len() <= 40 + 30));
        let ends: Vec<bool> = out.iter().map(|(_, e)| *e).collect();
        assert_eq!(ends.iter().filter(|e| **e).count(), 2, "{ends:?}");
        assert_eq!(out.last(), Some(&(body[body.len() - 8..].to_vec(), true)));
        // Cut in the middle of a message: its bytes come out at the end.
        let out = cut(&body[..50], &[20], 1024);
        assert_eq!(out, [(body[..50].to_vec(), false)]);
    }
}
