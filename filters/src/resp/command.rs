//! Redis command names as a bounded label set: a fixed table of known
//! commands, everything else is `other`. The name comes from clients, so it
//! never becomes a label as sent.

/// Longest command name kept while parsing; longer names are `other`.
pub(super) const MAX_NAME: usize = 16;

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

/// A name as a number: its bytes, zero-padded to 16, big-endian. Names hold
/// no zero byte, so these numbers sort as the names do, and a lookup is a
/// binary search over integers instead of over strings.
const fn key(name: &[u8]) -> u128 {
    let mut bytes = [0u8; MAX_NAME];
    let mut i = 0;
    while i < name.len() && i < MAX_NAME {
        bytes[i] = name[i];
        i += 1;
    }
    u128::from_be_bytes(bytes)
}

const KEYS: [u128; KNOWN.len()] = {
    let mut keys = [0u128; KNOWN.len()];
    let mut i = 0;
    while i < KNOWN.len() {
        keys[i] = key(KNOWN[i].as_bytes());
        i += 1;
    }
    keys
};

/// The index of a known name, at compile time.
const fn known(name: &str) -> Command {
    let k = key(name.as_bytes());
    let mut i = 0;
    while i < KEYS.len() {
        if KEYS[i] == k {
            return Command(i as u8);
        }
        i += 1;
    }
    Command::OTHER
}

/// A command as an index into the known table, or `other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Command(u8);

impl Command {
    /// Every distinct command value, `other` last: the size of a per-command table.
    pub const COUNT: usize = KNOWN.len() + 1;
    pub const OTHER: Command = Command(KNOWN.len() as u8);
    pub const GET: Command = known("get");
    pub const CLIENT: Command = known("client");
    pub const MULTI: Command = known("multi");
    pub const EXEC: Command = known("exec");
    pub const DISCARD: Command = known("discard");
    /// After these, replies no longer follow requests one to one (pub/sub
    /// messages, a monitor feed, a replication stream).
    const UNPAIRED: [Command; 6] = [
        known("subscribe"),
        known("psubscribe"),
        known("ssubscribe"),
        known("monitor"),
        known("sync"),
        known("psync"),
    ];

    /// The command named `name` (any case); `other` when unknown or too long.
    pub fn lookup(name: &[u8]) -> Command {
        if name.len() > MAX_NAME {
            return Command::OTHER;
        }
        let mut lower = [0u8; MAX_NAME];
        for (l, b) in lower.iter_mut().zip(name) {
            *l = b.to_ascii_lowercase();
        }
        match KEYS.binary_search(&u128::from_be_bytes(lower)) {
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

    /// Whether replies stop following requests one to one after this command.
    pub fn ends_pairing(self) -> bool {
        Command::UNPAIRED.contains(&self)
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
        assert!(KEYS.windows(2).all(|w| w[0] < w[1]));
        assert!(KNOWN.iter().all(|k| !k.as_bytes().contains(&0)));
        assert_eq!(Command::GET.label(), "get");
        assert_eq!(Command::CLIENT.label(), "client");
        assert_eq!(Command::MULTI.label(), "multi");
        assert_eq!(Command::EXEC.label(), "exec");
        assert_eq!(Command::DISCARD.label(), "discard");
        let unpaired: Vec<_> = Command::UNPAIRED.iter().map(|c| c.label()).collect();
        assert_eq!(
            unpaired,
            [
                "subscribe",
                "psubscribe",
                "ssubscribe",
                "monitor",
                "sync",
                "psync"
            ]
        );
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
