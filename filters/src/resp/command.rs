//! Redis command names as a bounded label set: a fixed table of known
//! commands, everything else is `other`. The name comes from clients, so it
//! never becomes a label as sent.

/// Longest command name kept while parsing; longer names are `other`.
pub const MAX_NAME: usize = 16;

/// Known commands, lower case and sorted, so a lookup is a binary search.
const KNOWN: &[&str] = &[
    "append",
    "auth",
    "bitcount",
    "blpop",
    "brpop",
    "client",
    "command",
    "config",
    "dbsize",
    "decr",
    "decrby",
    "del",
    "discard",
    "echo",
    "eval",
    "evalsha",
    "exec",
    "exists",
    "expire",
    "expireat",
    "flushall",
    "flushdb",
    "get",
    "getdel",
    "getex",
    "getrange",
    "getset",
    "hdel",
    "hello",
    "hexists",
    "hget",
    "hgetall",
    "hincrby",
    "hkeys",
    "hlen",
    "hmget",
    "hmset",
    "hscan",
    "hset",
    "hsetnx",
    "hvals",
    "incr",
    "incrby",
    "incrbyfloat",
    "info",
    "keys",
    "lindex",
    "llen",
    "lpop",
    "lpush",
    "lrange",
    "lrem",
    "lset",
    "ltrim",
    "mget",
    "monitor",
    "mset",
    "msetnx",
    "multi",
    "persist",
    "pexpire",
    "pfadd",
    "pfcount",
    "ping",
    "psetex",
    "psubscribe",
    "psync",
    "pttl",
    "publish",
    "quit",
    "reset",
    "rpop",
    "rpush",
    "sadd",
    "scan",
    "scard",
    "script",
    "select",
    "set",
    "setex",
    "setnx",
    "sismember",
    "smembers",
    "spop",
    "srem",
    "sscan",
    "ssubscribe",
    "strlen",
    "subscribe",
    "sync",
    "ttl",
    "type",
    "unlink",
    "unwatch",
    "watch",
    "xadd",
    "xlen",
    "xrange",
    "xread",
    "zadd",
    "zcard",
    "zcount",
    "zincrby",
    "zpopmin",
    "zrange",
    "zrangebyscore",
    "zrank",
    "zrem",
    "zrevrange",
    "zscore",
];

/// A command as an index into the known table, or `other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Command(u8);

impl Command {
    /// Every distinct command value, `other` last: the size of a per-command table.
    pub const COUNT: usize = KNOWN.len() + 1;
    pub const OTHER: Command = Command(KNOWN.len() as u8);

    /// The command named `name` (any case); `other` when unknown or too long.
    pub fn lookup(name: &[u8]) -> Command {
        if name.len() > MAX_NAME {
            return Command::OTHER;
        }
        let mut lower = [0u8; MAX_NAME];
        for (l, b) in lower.iter_mut().zip(name) {
            *l = b.to_ascii_lowercase();
        }
        let lower = &lower[..name.len()];
        match KNOWN.binary_search_by(|k| k.as_bytes().cmp(lower)) {
            Ok(i) => Command(i as u8),
            Err(_) => Command::OTHER,
        }
    }

    /// A known command by its lower-case label.
    pub fn named(label: &str) -> Command {
        Command::lookup(label.as_bytes())
    }

    /// The `command` label: the lower-case name, or `other`.
    pub fn label(self) -> &'static str {
        KNOWN.get(self.index()).copied().unwrap_or("other")
    }

    /// Position in a per-command table of [`Command::COUNT`] entries.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Commands after which replies no longer follow requests one to one
    /// (pub/sub messages, a replication stream, a monitor feed).
    pub fn ends_pairing(self) -> bool {
        matches!(
            self.label(),
            "subscribe" | "psubscribe" | "ssubscribe" | "monitor" | "sync" | "psync"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_fits() {
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
        assert!(KNOWN.iter().all(|k| k.len() <= MAX_NAME));
        assert!(Command::COUNT <= u8::MAX as usize);
    }

    #[test]
    fn lookup_ignores_case_and_folds_unknown_names() {
        assert_eq!(Command::lookup(b"GET").label(), "get");
        assert_eq!(Command::lookup(b"zRangeByScore").label(), "zrangebyscore");
        assert_eq!(Command::lookup(b"GETX"), Command::OTHER);
        assert_eq!(Command::lookup(b"").label(), "other");
        assert_eq!(Command::lookup(&[b'g'; 40]), Command::OTHER);
        assert_eq!(
            Command::named("set").index(),
            Command::lookup(b"SET").index()
        );
        assert!(Command::named("subscribe").ends_pairing());
        assert!(!Command::named("get").ends_pairing());
    }
}
