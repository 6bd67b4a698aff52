//! The nesting bound on admin bodies, checked by one linear scan before any
//! parser sees the body: a YAML or JSON parser given 100,000 nested objects
//! spends seconds (and its stack) before it can say no.
//!
//! The scan reads both YAML forms. Flow collections (`{`, `[`, all of JSON)
//! count one level each, outside quoted strings and comments. Block
//! collections count one level per indentation step and per `- ` item marker.
//! It may count a level the parser would not (it is a bound, not a parser),
//! never fewer.

/// True when `body` nests deeper than `max` levels.
pub(super) fn too_deep(body: &[u8], max: usize) -> bool {
    Scanner::default().too_deep(body, max)
}

#[derive(Default)]
struct Scanner {
    /// Open flow collections.
    flow: usize,
    /// Indentations of the open block collections, rising.
    blocks: Vec<usize>,
    /// Inside a block scalar (`|`, `>`) opened at this indentation.
    scalar_at: Option<usize>,
}

impl Scanner {
    fn too_deep(mut self, body: &[u8], max: usize) -> bool {
        let mut quote: Option<u8> = None;
        for line in body.split(|&b| b == b'\n') {
            let indent = line.iter().take_while(|&&b| b == b' ').count();
            let rest = &line[indent..];
            let blank = rest.iter().all(|b| b.is_ascii_whitespace()) || rest.first() == Some(&b'#');
            if quote.is_none() && self.flow == 0 {
                if let Some(at) = self.scalar_at {
                    if blank || indent > at {
                        continue;
                    }
                    self.scalar_at = None;
                }
                if blank {
                    continue;
                }
                if self.block_line(indent, rest) > max {
                    return true;
                }
            }
            let mut prev = b' ';
            let mut i = 0;
            while i < rest.len() {
                let b = rest[i];
                match quote {
                    Some(b'"') if b == b'\\' => i += 1,
                    Some(q) if b == q => quote = None,
                    Some(_) => {}
                    None => match b {
                        // A quote opens a string only where a value starts
                        // (`it's` is plain text).
                        b'"' | b'\''
                            if matches!(prev, b' ' | b'\t' | b'[' | b'{' | b',' | b':') =>
                        {
                            quote = Some(b)
                        }
                        b'#' if prev == b' ' || prev == b'\t' => break,
                        b'{' | b'[' => {
                            self.flow += 1;
                            if self.blocks.len() + self.flow > max {
                                return true;
                            }
                        }
                        b'}' | b']' => self.flow = self.flow.saturating_sub(1),
                        _ => {}
                    },
                }
                prev = b;
                i += 1;
            }
            if quote.is_none() && self.flow == 0 && opens_block_scalar(rest) {
                self.scalar_at = Some(indent);
            }
        }
        false
    }

    /// Opens the block levels a line at `indent` starts (its own, and one per
    /// `- ` marker before its content); the depth then.
    fn block_line(&mut self, indent: usize, rest: &[u8]) -> usize {
        let mut at = indent;
        self.enter(at);
        let mut rest = rest;
        while let Some(after) = rest.strip_prefix(b"-") {
            if !(after.is_empty() || after[0] == b' ') {
                break;
            }
            let spaces = after.iter().take_while(|&&b| b == b' ').count();
            at += 1 + spaces;
            rest = &after[spaces..];
            if rest.is_empty() {
                break;
            }
            self.enter(at);
        }
        // A flow collection is the level itself (JSON's top object).
        if matches!(rest.first(), Some(b'{' | b'[')) {
            self.blocks.pop();
        }
        self.blocks.len()
    }

    fn enter(&mut self, indent: usize) {
        while self.blocks.last().is_some_and(|&top| top >= indent) {
            self.blocks.pop();
        }
        self.blocks.push(indent);
    }
}

/// A line whose value is `|` or `>` (with chomping or indentation marks):
/// the lines indented under it are text.
fn opens_block_scalar(line: &[u8]) -> bool {
    let text = match line.iter().position(|&b| b == b'#') {
        Some(i) => &line[..i],
        None => line,
    };
    let text = text.trim_ascii_end();
    let Some(last_space) = text.iter().rposition(|&b| b == b' ') else {
        return matches!(text.first(), Some(b'|' | b'>'));
    };
    let token = &text[last_space + 1..];
    matches!(token.first(), Some(b'|' | b'>'))
        && token[1..]
            .iter()
            .all(|b| matches!(b, b'+' | b'-') || b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::too_deep;

    fn depth(text: &str) -> usize {
        (0..200)
            .find(|&max| !too_deep(text.as_bytes(), max))
            .unwrap_or(200)
    }

    #[test]
    fn counts_json_and_flow_levels_outside_strings() {
        assert_eq!(depth(r#"{"a": {"b": [1, 2, {"c": 3}]}}"#), 4);
        assert_eq!(depth(r#"{"a": "{{{{[[[[", "b": '[[[['}"#), 1);
        assert_eq!(depth(r#"{"a": "\"{{{"}"#), 1);
        assert_eq!(depth("{a: 1} # {{{{"), 1);
        assert_eq!(depth("a: it's [[x]]"), 3);
        let deep = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
        assert!(too_deep(deep.as_bytes(), 64));
        assert!(!too_deep(deep.as_bytes(), 100_000));
    }

    #[test]
    fn counts_block_levels_and_item_markers() {
        assert_eq!(depth("a: 1\nb: 2\n"), 1);
        assert_eq!(depth("a:\n  b:\n    c: 1\nd: 2\n"), 3);
        assert_eq!(depth("a:\n  - x: 1\n    y: [1]\n"), 4);
        // One more than the parser: a bound may count a level too many.
        assert_eq!(depth("- - - 1\n"), 4);
        assert_eq!(depth("- [1]\n"), 2);
        let nested: String = (0..70).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert_eq!(depth(&nested), 70);
    }

    #[test]
    fn block_scalars_are_text() {
        assert_eq!(depth("a: |\n  {{{{\n    [[[[\n      x: y\nb: 1\n"), 1);
        assert_eq!(depth("a: >-\n  - - - -\nb: 1\n"), 1);
    }
}
