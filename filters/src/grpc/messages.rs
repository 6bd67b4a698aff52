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
            let have = usize::from(self.have);
            if have < GRPC_PREFIX {
                let take = (GRPC_PREFIX - have).min(chunk.len());
                self.prefix[have..have + take].copy_from_slice(&chunk[..take]);
                chunk = &chunk[take..];
                self.have += take as u8;
                if usize::from(self.have) == GRPC_PREFIX {
                    let [_, a, b, c, d] = self.prefix;
                    self.left = u32::from_be_bytes([a, b, c, d]);
                }
            } else {
                let take = chunk.len().min(self.left as usize);
                payload(&chunk[..take]);
                chunk = &chunk[take..];
                self.left -= take as u32;
            }
            if usize::from(self.have) == GRPC_PREFIX && self.left == 0 {
                ended = ended.saturating_add(1);
                self.have = 0;
            }
        }
        ended
    }

    /// Part of a message (or of its prefix) came and its end did not: the
    /// body was cut, or is not gRPC-framed.
    pub fn in_message(&self) -> bool {
        self.have > 0
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
}
