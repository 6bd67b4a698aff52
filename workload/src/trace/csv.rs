//! The little CSV the public traces need: one row per line, fields split on
//! commas, double-quoted fields with `""` for a quote, spaces around fields
//! trimmed (BurstGPT's header has `Timestamp, Session ID`). Columns are
//! found by name, case-insensitively.

/// The fields of one line.
pub(super) fn split(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        let mut field = String::new();
        if chars.next_if_eq(&'"').is_some() {
            loop {
                match chars.next() {
                    Some('"') if chars.next_if_eq(&'"').is_some() => field.push('"'),
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err(format!("field {}: unterminated quote", fields.len() + 1)),
                }
            }
            while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
            if chars.peek().is_some_and(|c| *c != ',') {
                return Err(format!(
                    "field {}: text after a closing quote",
                    fields.len() + 1
                ));
            }
        } else {
            while let Some(c) = chars.next_if(|c| *c != ',') {
                field.push(c);
            }
            field.truncate(field.trim_end().len());
        }
        fields.push(field);
        if chars.next().is_none() {
            return Ok(fields);
        }
    }
}

/// A header row: the column names, and where each is.
pub(super) struct Header {
    names: Vec<String>,
}

impl Header {
    /// The header of a `format` trace (the name is for errors).
    pub(super) fn new(format: &str, line: &str) -> Result<Header, String> {
        if line.trim_start().starts_with('{') {
            return Err(format!(
                "a JSON line, not the CSV header of the {format} format"
            ));
        }
        let names = split(line).map_err(|e| format!("the {format} header: {e}"))?;
        Ok(Header { names })
    }

    /// The index of `name`, case and spaces aside.
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        self.names
            .iter()
            .position(|n| n.trim().eq_ignore_ascii_case(name))
    }

    /// The index of a column the format cannot do without.
    pub(super) fn require(&self, format: &str, name: &str) -> Result<usize, String> {
        self.find(name).ok_or_else(|| {
            format!(
                "no `{name}` column, which the {format} format needs (the header is `{}`)",
                self.names.join(",")
            )
        })
    }

    pub(super) fn len(&self) -> usize {
        self.names.len()
    }
}

/// The fields of a data row, as many as the header has.
pub(super) fn row(line: &str, header: &Header) -> Result<Vec<String>, String> {
    let fields = split(line)?;
    if fields.len() != header.len() {
        return Err(format!(
            "{} fields, but the header has {}",
            fields.len(),
            header.len()
        ));
    }
    Ok(fields)
}

/// One row, fields quoted where they must be.
pub(super) fn join(fields: &[&str]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| {
            if f.contains([',', '"', '\n', '\r']) || f.trim() != *f {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                (*f).to_owned()
            }
        })
        .collect();
    quoted.join(",")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn splits_quotes_and_spaces() {
        assert_eq!(split("a, b ,c").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            split("\"x, \"\"y\"\"\",,z\r").unwrap(),
            ["x, \"y\"", "", "z"]
        );
        assert_eq!(split("\"open").unwrap_err(), "field 1: unterminated quote");
        assert_eq!(
            split("a,\"b\"c").unwrap_err(),
            "field 2: text after a closing quote"
        );
        assert_eq!(
            join(&["GPT-4", "a,b", "say \"hi\""]),
            "GPT-4,\"a,b\",\"say \"\"hi\"\"\""
        );
        let header = Header::new("BurstGPT", "Timestamp, Session ID").unwrap();
        assert_eq!(header.find("session id"), Some(1));
        assert_eq!(
            header.require("BurstGPT", "Model").unwrap_err(),
            "no `Model` column, which the BurstGPT format needs (the header is `Timestamp,Session ID`)"
        );
    }
}
