//! The errors validation collects, and the checks of values that recur
//! across the config (names, percents, durations, addresses, headers).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use sluice_filters::{parse_duration, parse_percent, parse_size, HeaderMatch};

use super::super::raw::{RawPercent, RawSize};
use super::super::ConfigError;

/// Collects errors while validation goes on.
#[derive(Default)]
pub(super) struct Errors(pub(super) Vec<ConfigError>);

impl Errors {
    pub(super) fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError::new(path, message));
    }

    /// A percent, as a number or text such as `25%`, within 0..=100.
    pub(super) fn percent(&mut self, path: String, raw: Option<&RawPercent>) -> Option<f64> {
        let value = match raw? {
            RawPercent::Number(n) => *n,
            RawPercent::Text(t) => match parse_percent(t) {
                Ok(v) => v,
                Err(e) => {
                    self.push(path, e);
                    return None;
                }
            },
        };
        if !(0.0..=100.0).contains(&value) {
            self.push(path, format!("{value} is not within 0..=100"));
            return None;
        }
        Some(value)
    }

    /// A size, as a number of bytes or text such as `64KiB`.
    pub(super) fn size(&mut self, path: String, raw: Option<&RawSize>) -> Option<u64> {
        match raw? {
            RawSize::Bytes(n) => Some(*n),
            RawSize::Text(t) => match parse_size(t) {
                Ok(n) => Some(n),
                Err(e) => {
                    self.push(path, e);
                    None
                }
            },
        }
    }

    /// A size within `min..=max`; `range` is how the error writes them
    /// (`1 ..= 64MiB`).
    pub(super) fn size_within(
        &mut self,
        path: String,
        raw: Option<&RawSize>,
        (min, max): (u64, u64),
        range: &str,
    ) -> Option<u64> {
        let bytes = self.size(path.clone(), raw)?;
        if !(min..=max).contains(&bytes) {
            self.push(path, format!("{bytes} bytes is not within {range}"));
            return None;
        }
        Some(bytes)
    }

    pub(super) fn duration(
        &mut self,
        path: String,
        text: Option<&str>,
        default: Duration,
    ) -> Duration {
        let Some(text) = text else { return default };
        match parse_duration(text) {
            Ok(d) if d.is_zero() => {
                self.push(path, "must be greater than 0");
                default
            }
            Ok(d) => d,
            Err(e) => {
                self.push(path, e);
                default
            }
        }
    }

    pub(super) fn socket_addr(&mut self, path: String, text: &str) -> Option<SocketAddr> {
        match text.parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                self.push(
                    path,
                    format!("`{text}` is not an address like 127.0.0.1:8080"),
                );
                None
            }
        }
    }

    pub(super) fn name(&mut self, path: String, name: &str) {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !ok {
            self.push(
                path,
                format!("`{name}` is not a valid name (letters, digits, `-`, `_`, `.`)"),
            );
        }
    }

    pub(super) fn header_name(&mut self, path: String, name: &str) -> String {
        let ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !ok {
            self.push(path, format!("`{name}` is not a valid header name"));
        }
        name.to_ascii_lowercase()
    }

    /// The name of list item `at` (`routes[2]`): valid, and not an earlier
    /// item's (`seen`) of the same list.
    pub(super) fn item_name<'a>(
        &mut self,
        seen: &mut HashMap<&'a str, String>,
        at: &str,
        what: &str,
        name: &'a str,
    ) {
        self.name(format!("{at}.name"), name);
        self.unique(seen, format!("{at}.name"), what, name);
    }

    /// A `match.headers` block: names checked and lowercased.
    pub(super) fn header_matches(
        &mut self,
        at: &str,
        headers: &BTreeMap<String, String>,
    ) -> Vec<HeaderMatch> {
        headers
            .iter()
            .map(|(name, value)| HeaderMatch {
                name: self.header_name(format!("{at}.match.headers.{name}"), name),
                value: value.clone(),
            })
            .collect()
    }

    /// A number that must be finite and above 0.
    pub(super) fn positive(&mut self, path: String, raw: Option<f64>) -> Option<f64> {
        let value = raw?;
        if !(value.is_finite() && value > 0.0) {
            self.push(path, format!("must be greater than 0, found {value}"));
            return None;
        }
        Some(value)
    }

    /// A price in USD, a number or text such as `$0.012`, greater than 0.
    pub(super) fn usd(&mut self, path: String, raw: &RawPercent) -> Option<f64> {
        let value = match raw {
            RawPercent::Number(v) => Some(*v),
            RawPercent::Text(t) => t.trim().trim_start_matches('$').parse::<f64>().ok(),
        };
        match value {
            Some(v) if v.is_finite() && v > 0.0 => Some(v),
            _ => {
                let found = match raw {
                    RawPercent::Number(v) => v.to_string(),
                    RawPercent::Text(t) => format!("`{t}`"),
                };
                self.push(
                    path,
                    format!("must be a price in USD > 0 like 0.012, found {found}"),
                );
                None
            }
        }
    }

    /// Reports `name` as a duplicate if an earlier item (at `first`) had it.
    pub(super) fn unique<'a>(
        &mut self,
        seen: &mut HashMap<&'a str, String>,
        path: String,
        what: &str,
        name: &'a str,
    ) {
        if let Some(first) = seen.get(name) {
            self.push(
                path,
                format!("duplicate {what} `{name}` (first at {first})"),
            );
        } else {
            seen.insert(name, path);
        }
    }
}
