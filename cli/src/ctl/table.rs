//! Aligned text tables for `sluice ctl`: each column padded to its widest
//! cell, numbers right-aligned, and colour (on a terminal only) added after
//! the padding, so that escape codes never shift a column.

use std::io::IsTerminal as _;

/// The few colours `sluice ctl` uses, for states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Colour {
    Green,
    Red,
    Yellow,
    Dim,
}

impl Colour {
    fn code(self) -> &'static str {
        match self {
            Colour::Green => "32",
            Colour::Red => "31",
            Colour::Yellow => "33",
            Colour::Dim => "2",
        }
    }

    /// `text` in this colour when `on`, else as it is.
    pub(crate) fn paint(self, text: &str, on: bool) -> String {
        match on {
            true => format!("\x1b[{}m{text}\x1b[0m", self.code()),
            false => text.to_string(),
        }
    }
}

/// Whether to colour what goes to stdout: only on a terminal, and not when
/// `NO_COLOR` is set to anything but the empty string (no-color.org's rule).
pub(crate) fn colour_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The colour of a state word of the API's answers (rollouts, experiments,
/// audit events, gate verdicts): done well green, failed red, under way
/// yellow, over and harmless dim.
pub(crate) fn state_colour(state: &str) -> Option<Colour> {
    match state {
        "promoted" | "applied" | "active" | "ok" => Some(Colour::Green),
        "rolled_back" | "aborted" | "rejected" | "halted" | "breached" => Some(Colour::Red),
        "pending" | "progressing" | "paused" => Some(Colour::Yellow),
        "expired" | "not judged" => Some(Colour::Dim),
        _ => None,
    }
}

/// One cell: its text, and a colour used only on a terminal.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Cell {
    text: String,
    colour: Option<Colour>,
}

impl Cell {
    /// A state word, in its colour (see [`state_colour`]).
    pub(crate) fn state(text: impl Into<String>) -> Cell {
        let text = text.into();
        Cell {
            colour: state_colour(&text),
            text,
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, colour: None }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_string())
    }
}

/// Rows under a header line; no header line when it has no headers (a
/// block of `key  value` lines).
#[derive(Debug, Default)]
pub(crate) struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

/// Between two columns.
const GAP: &str = "  ";

impl Table {
    pub(crate) fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// The lines of the table, without a newline after the last. The last
    /// column is not padded, so no line ends in spaces.
    pub(crate) fn render(&self, colour: bool) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.headers.len()])
            .max()
            .unwrap_or(0);
        let blank = Cell::from("");
        let cell = |row: &[Cell], c: usize| -> Cell { row.get(c).unwrap_or(&blank).clone() };
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                let header = self.headers.get(c).map_or(0, |h| width(h));
                let cells = self.rows.iter().map(|r| width(&cell(r, c).text));
                cells.chain([header]).max().unwrap_or(0)
            })
            .collect();
        let right: Vec<bool> = (0..columns)
            .map(|c| {
                let mut filled = self
                    .rows
                    .iter()
                    .map(|r| cell(r, c).text)
                    .filter(|t| !is_blank(t))
                    .peekable();
                filled.peek().is_some() && filled.all(|t| is_number(&t))
            })
            .collect();
        let mut lines = Vec::with_capacity(self.rows.len() + 1);
        if !self.headers.is_empty() {
            let headers: Vec<Cell> = self
                .headers
                .iter()
                .map(|h| Cell::from(h.as_str()))
                .collect();
            lines.push(line(&headers, &widths, &right, false));
        }
        for row in &self.rows {
            let cells: Vec<Cell> = (0..columns).map(|c| cell(row, c)).collect();
            lines.push(line(&cells, &widths, &right, colour));
        }
        lines.join("\n")
    }
}

fn line(cells: &[Cell], widths: &[usize], right: &[bool], colour: bool) -> String {
    let last = cells.len().saturating_sub(1);
    let mut text = String::new();
    for (c, cell) in cells.iter().enumerate() {
        let pad = " ".repeat(widths[c].saturating_sub(width(&cell.text)));
        let shown = match cell.colour {
            Some(k) => k.paint(&cell.text, colour),
            None => cell.text.clone(),
        };
        if c > 0 {
            text.push_str(GAP);
        }
        match (right[c], c == last) {
            (true, _) => {
                text.push_str(&pad);
                text.push_str(&shown);
            }
            (false, false) => {
                text.push_str(&shown);
                text.push_str(&pad);
            }
            (false, true) => text.push_str(&shown),
        }
    }
    text.trim_end().to_string()
}

/// Characters, not bytes: `→` or `µs` are one column each.
fn width(text: &str) -> usize {
    text.chars().count()
}

/// An empty cell or `-` (nothing to show) does not decide a column's side.
fn is_blank(text: &str) -> bool {
    text.is_empty() || text == "-"
}

/// `42`, `-3.5`, `120ms`, `50%`, `$0.012`, `1/5`, `4m30s`: a number, maybe
/// with its unit, so right-aligned; not a time (`2026-05-01 12:00:00`).
fn is_number(text: &str) -> bool {
    let text = text.strip_prefix('$').unwrap_or(text);
    let text = text.strip_prefix('-').unwrap_or(text);
    let unit_at = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '/'))
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(unit_at);
    digits.starts_with(|c: char| c.is_ascii_digit())
        && unit
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '%' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell_and_numbers_right_aligned() {
        let mut table = Table::new(&["ROUTE", "CLUSTER", "REQUESTS", "P99_MS"]);
        table.row(vec![
            "chat".into(),
            "llm-stable".into(),
            "1200".into(),
            "85.5".into(),
        ]);
        table.row(vec![
            "embeddings".into(),
            "vec".into(),
            "7".into(),
            "-".into(),
        ]);
        assert_eq!(
            table.render(false),
            "ROUTE       CLUSTER     REQUESTS  P99_MS\n\
             chat        llm-stable      1200    85.5\n\
             embeddings  vec                7       -"
        );
    }

    #[test]
    fn a_column_with_any_word_is_left_aligned_and_the_last_is_not_padded() {
        let mut table = Table::new(&["NAME", "STEP", "GATES"]);
        table.row(vec!["a".into(), "1/5".into(), "ttft_p95 ok".into()]);
        table.row(vec!["b".into(), "n/a".into(), "".into()]);
        table.row(vec!["ccc".into()]);
        assert_eq!(
            table.render(false),
            "NAME  STEP  GATES\na     1/5   ttft_p95 ok\nb     n/a\nccc"
        );
    }

    #[test]
    fn colour_goes_around_the_text_and_leaves_the_padding_as_it_was() {
        let mut table = Table::new(&["NAME", "STATE", "WEIGHT"]);
        table.row(vec!["v2".into(), Cell::state("rolled_back"), "0".into()]);
        table.row(vec!["v3".into(), Cell::state("promoted"), "100".into()]);
        let plain = table.render(false);
        assert_eq!(
            plain,
            "NAME  STATE        WEIGHT\n\
             v2    rolled_back       0\n\
             v3    promoted        100"
        );
        assert!(!plain.contains('\x1b'));
        let coloured = table.render(true);
        assert_eq!(
            coloured,
            "NAME  STATE        WEIGHT\n\
             v2    \x1b[31mrolled_back\x1b[0m       0\n\
             v3    \x1b[32mpromoted\x1b[0m        100"
        );
    }

    #[test]
    fn a_table_without_headers_is_a_block_of_key_value_lines() {
        let mut table = Table::new(&[]);
        table.row(vec!["name".into(), "chat-v2".into()]);
        table.row(vec!["weight".into(), "50%".into()]);
        assert_eq!(table.render(false), "name    chat-v2\nweight  50%");
        assert_eq!(Table::new(&["A", "B"]).render(false), "A  B");
    }

    #[test]
    fn numbers_are_told_from_words() {
        for n in ["0", "42", "-3.5", "120ms", "50%", "$0.012", "1/5", "4m30s"] {
            assert!(is_number(n), "{n}");
        }
        for w in [
            "v1",
            "chat",
            "n/a",
            "-",
            "",
            "$x",
            "2026-05-28 20:26:40",
            "1 s",
            "3-4",
        ] {
            assert!(!is_number(w), "{w}");
        }
    }
}
