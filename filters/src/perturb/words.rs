//! A text cut into words and the gaps between them, so chosen words can be
//! replaced and the text put back together with everything else unchanged.

/// One piece of a text.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Piece {
    /// Letters and digits, with inner apostrophes (`don't`).
    Word(String),
    /// Whitespace and punctuation between words.
    Gap(String),
    /// A word removed by `drop`.
    Dropped,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Text {
    pub pieces: Vec<Piece>,
}

impl Text {
    pub(super) fn split(text: &str) -> Text {
        let mut pieces = Vec::new();
        let mut current = String::new();
        let mut in_word = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            // An apostrophe belongs to a word only between two letters.
            let wordish = c.is_alphanumeric()
                || (c == '\'' && in_word && chars.peek().is_some_and(|n| n.is_alphanumeric()));
            if wordish != in_word && !current.is_empty() {
                pieces.push(piece(std::mem::take(&mut current), in_word));
            }
            in_word = wordish;
            current.push(c);
        }
        if !current.is_empty() {
            pieces.push(piece(current, in_word));
        }
        Text { pieces }
    }

    /// Indices of the words that may be perturbed: every word but stopwords.
    pub(super) fn eligible(&self) -> impl Iterator<Item = usize> + '_ {
        self.pieces.iter().enumerate().filter_map(|(i, p)| match p {
            Piece::Word(w) if !is_stopword(w) => Some(i),
            _ => None,
        })
    }

    /// The text again; a dropped word takes the spaces before it along (or,
    /// first in the text, the spaces after it).
    pub(super) fn join(&self) -> String {
        let mut out = String::new();
        let mut skip_leading_space = false;
        for p in &self.pieces {
            match p {
                Piece::Word(w) => {
                    out.push_str(w);
                    skip_leading_space = false;
                }
                Piece::Gap(g) => {
                    let g = if skip_leading_space {
                        g.trim_start_matches(' ')
                    } else {
                        g
                    };
                    out.push_str(g);
                    skip_leading_space = false;
                }
                Piece::Dropped => {
                    let kept = out.trim_end_matches(' ').len();
                    skip_leading_space = kept == 0 || kept == out.len();
                    out.truncate(kept);
                }
            }
        }
        out
    }
}

fn piece(text: String, word: bool) -> Piece {
    if word {
        Piece::Word(text)
    } else {
        Piece::Gap(text)
    }
}

/// English function words: perturbing them changes little of what a prompt
/// asks, so they are never chosen (and do not count in the rate).
pub(super) const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

fn is_stopword(word: &str) -> bool {
    let lower = word.to_lowercase();
    STOPWORDS.binary_search(&lower.as_str()).is_ok()
}
