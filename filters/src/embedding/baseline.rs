//! The saved drift baseline: a route's primary-vs-shadow similarities as a
//! versioned JSON file (`compare.embeddings.baseline`), so that a new
//! process (or a new policy) compares its window with a distribution known
//! to be good instead of with its own first pairs. The raw similarities are
//! kept, not a histogram: [`super::similarity_kl`] bins both sides alike,
//! and a later change of the bins reads old files unchanged.

use serde::{Deserialize, Serialize};

/// The file format's version; a file with another is refused.
pub const BASELINE_VERSION: u32 = 1;

/// A saved baseline as written and read.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SavedBaseline {
    /// [`BASELINE_VERSION`].
    pub v: u32,
    /// The route it was saved from: provenance, not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The cosine similarities of the baseline's pairs, each in -1..=1.
    pub similarities: Vec<f64>,
}

impl SavedBaseline {
    pub fn new(route: &str, similarities: Vec<f64>) -> SavedBaseline {
        SavedBaseline {
            v: BASELINE_VERSION,
            route: Some(route.to_owned()),
            similarities,
        }
    }

    /// Reads a file's text strictly. The error names where: `line L column
    /// C: …` for text that is not JSON, then the field when there is one
    /// (`line 1 column 30: similarities[1]: invalid type …`); a value out of
    /// range by its field alone (`similarities[3]: …`).
    pub fn parse(text: &str) -> Result<SavedBaseline, String> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let saved: SavedBaseline = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let (line, column) = (inner.line(), inner.column());
            let message = inner.to_string();
            let message = match message.rfind(" at line ") {
                Some(at) => message[..at].to_owned(),
                None => message,
            };
            match path.as_str() {
                "." => format!("line {line} column {column}: {message}"),
                _ => format!("line {line} column {column}: {path}: {message}"),
            }
        })?;
        if saved.v != BASELINE_VERSION {
            return Err(format!(
                "v: version {} is not supported (this sluice reads {BASELINE_VERSION})",
                saved.v
            ));
        }
        if saved.similarities.is_empty() {
            return Err("similarities: empty; a baseline needs at least one pair".to_owned());
        }
        if let Some((i, s)) = saved
            .similarities
            .iter()
            .enumerate()
            .find(|(_, s)| !(-1.0..=1.0).contains(*s))
        {
            return Err(format!(
                "similarities[{i}]: {s} is not a cosine similarity (-1..=1)"
            ));
        }
        Ok(saved)
    }

    /// The file's text: one JSON document, ending in a newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}
