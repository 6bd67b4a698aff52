//! The redis steps' client: one multiplexed RESP connection per target,
//! made once per run and shared by every journey; a command timed on the
//! run's clock into the same [`Outcome`] as an HTTP request (the reply's
//! first byte is its end), a nil reply read as a miss.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{RedisError, Value};
use sluice_filters::redis_connect_url;

use super::{since, Failure, Outcome};

/// A cache lookup's result, counted per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cache {
    Hit,
    Miss,
}

/// How long making a target's connection may take at the start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What to open for a step's `target`, its `${VAR}`s read from the
/// environment now (the scenario checked they are set; the values are never kept).
fn connect_url(target: &str) -> String {
    redis_connect_url(target, &|name| std::env::var(name).ok()).unwrap_or_default()
}

/// The run's connections, by the step's `target` as written; `None` where none could be made
/// (its commands then fail as transport errors).
#[derive(Clone, Default)]
pub(crate) struct Redis {
    conns: BTreeMap<String, Option<MultiplexedConnection>>,
}

impl Redis {
    /// One connection to each target.
    pub(crate) async fn connect(targets: impl IntoIterator<Item = String>) -> Redis {
        let mut conns = BTreeMap::new();
        for t in targets {
            if conns.contains_key(&t) {
                continue;
            }
            let conn = match redis::Client::open(connect_url(&t)) {
                Ok(client) => {
                    tokio::time::timeout(CONNECT_TIMEOUT, client.get_multiplexed_async_connection())
                        .await
                        .ok()
                        .and_then(Result::ok)
                }
                Err(_) => None,
            };
            conns.insert(t, conn);
        }
        Redis { conns }
    }

    /// Sends `args` to `target` now, with `timeout`, and fills `out`;
    /// returns the reply as text (empty on a failure).
    pub(crate) async fn send(
        &self,
        target: &str,
        args: &[String],
        timeout: Duration,
        start: Instant,
        out: &mut Outcome,
    ) -> String {
        let sent = Instant::now();
        out.sent_us = since(start, sent);
        let conn = self.conns.get(target).cloned().flatten();
        let reply = match (conn, args.split_first()) {
            (Some(mut conn), Some((name, rest))) => {
                let mut cmd = redis::cmd(name);
                for a in rest {
                    cmd.arg(a);
                }
                match tokio::time::timeout(timeout, cmd.query_async::<Value>(&mut conn)).await {
                    Ok(r) => r.map_err(|e| failure(&e)),
                    Err(_) => Err(Failure::Timeout),
                }
            }
            _ => Err(Failure::Transport),
        };
        out.end_us = since(start, Instant::now());
        match reply.and_then(|v| read(&v)) {
            Ok((cache, text)) => {
                out.first_byte_us = Some(out.end_us);
                out.cache = Some(cache);
                text
            }
            Err(f) => {
                out.failure = Some(f);
                String::new()
            }
        }
    }
}

/// A failed command's kind: connect and I/O → transport, a timeout →
/// timeout, an error reply → status.
pub(crate) fn failure(e: &RedisError) -> Failure {
    if e.is_timeout() {
        Failure::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        Failure::Transport
    } else {
        Failure::Status
    }
}

/// A reply's hit or miss (nil or an empty array is a miss) and its text;
/// an error reply is a `status` failure.
pub(crate) fn read(v: &Value) -> Result<(Cache, String), Failure> {
    match v {
        Value::ServerError(_) => Err(Failure::Status),
        Value::Nil => Ok((Cache::Miss, String::new())),
        Value::Array(a) | Value::Set(a) if a.is_empty() => Ok((Cache::Miss, "[]".to_owned())),
        other => Ok((Cache::Hit, text(other))),
    }
}

/// A reply as text: strings as they are, numbers as written, arrays as
/// JSON arrays of their items' text.
fn text(v: &Value) -> String {
    match v {
        Value::Nil => String::new(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Okay => "OK".to_owned(),
        Value::Int(n) => n.to_string(),
        Value::Double(x) => x.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Array(a) | Value::Set(a) => {
            serde_json::Value::from(a.iter().map(text).collect::<Vec<_>>()).to_string()
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use redis::ErrorKind;

    #[test]
    fn nil_and_empty_arrays_are_misses_and_the_rest_hits_with_their_text() {
        assert_eq!(read(&Value::Nil), Ok((Cache::Miss, String::new())));
        assert_eq!(read(&Value::Array(vec![])), Ok((Cache::Miss, "[]".into())));
        assert_eq!(
            read(&Value::BulkString(b"the answer".to_vec())),
            Ok((Cache::Hit, "the answer".into()))
        );
        assert_eq!(read(&Value::Okay), Ok((Cache::Hit, "OK".into())));
        assert_eq!(read(&Value::Int(3)), Ok((Cache::Hit, "3".into())));
        assert_eq!(
            read(&Value::Array(vec![
                Value::BulkString(b"a".to_vec()),
                Value::Int(2),
                Value::Nil
            ])),
            Ok((Cache::Hit, r#"["a","2",""]"#.into()))
        );
        // An error reply off the wire, either way the parser gives it.
        let err = match redis::parse_redis_value(b"-ERR wrong number of arguments\r\n") {
            Ok(v) => read(&v),
            Err(e) => Err(failure(&e)),
        };
        assert_eq!(err, Err(Failure::Status));
        let nil = redis::parse_redis_value(b"$-1\r\n").unwrap();
        assert_eq!(read(&nil), Ok((Cache::Miss, String::new())));
    }

    #[test]
    fn errors_map_onto_the_failure_kinds() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(failure(&io), Failure::Transport);
        let reset = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(failure(&reset), Failure::Transport);
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(failure(&timeout), Failure::Timeout);
        let reply = RedisError::from((ErrorKind::ResponseError, "ERR unknown command"));
        assert_eq!(failure(&reply), Failure::Status);
    }
}
