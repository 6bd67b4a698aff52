//! `routes[].limits.store`: fleet-wide budgets in Redis, their defaults,
//! and every error with its path.

use std::time::Duration;

use super::*;

const STICKY: &str = "sticky: { header: X-Session-Id }";

fn with_store(store: &str) -> String {
    GOOD.replacen(
        STICKY,
        &format!("{STICKY}\n    limits: {{ requests_per_minute: 60, store: {store} }}"),
        1,
    )
}

#[test]
fn a_redis_store_is_read_with_its_defaults() {
    let c = Config::from_yaml(&with_store(
        "{ redis: { url: \"redis://127.0.0.1:6379\" } }",
    ))
    .unwrap();
    let store = c.routes[0].limits.as_ref().unwrap().store.clone().unwrap();
    assert_eq!(
        store,
        LimitStore {
            url: "redis://127.0.0.1:6379".into(),
            sync_interval: DEFAULT_SYNC_INTERVAL,
            on_unavailable: OnUnavailable::Open,
            key_prefix: DEFAULT_KEY_PREFIX.into(),
        }
    );
    assert_eq!(DEFAULT_SYNC_INTERVAL, Duration::from_millis(100));
    // Every key, and a password read from the environment at connect time.
    let c = Config::from_yaml(&with_store(
        "{ redis: { url: \"redis://:${REDIS_PASSWORD}@10.0.0.5:6380/2\", sync_interval: 250ms, \
         on_unavailable: closed, key_prefix: \"prod:rl:\" } }",
    ))
    .unwrap();
    let store = c.routes[0].limits.as_ref().unwrap().store.clone().unwrap();
    assert_eq!(
        store,
        LimitStore {
            url: "redis://:${REDIS_PASSWORD}@10.0.0.5:6380/2".into(),
            sync_interval: Duration::from_millis(250),
            on_unavailable: OnUnavailable::Closed,
            key_prefix: "prod:rl:".into(),
        }
    );
}

#[test]
fn every_bad_store_value_is_named_with_its_path() {
    assert_eq!(
        errors_in(&with_store(
            "{ redis: { url: \"redis://localhost\", sync_interval: 20s, key_prefix: \"\" } }"
        )),
        [
            "routes[0].limits.store.redis.url: must be HOST:PORT like 127.0.0.1:6379, or \
             redis://[:PASSWORD@]HOST:PORT[/DB], found `redis://localhost`",
            "routes[0].limits.store.redis.sync_interval: must be within 10ms ..= 10s, found 20s",
            "routes[0].limits.store.redis.key_prefix: must not be empty",
        ]
    );
    assert_eq!(
        errors_in(&with_store(
            "{ redis: { url: \"rediss://cache:6379\", sync_interval: 5ms } }"
        )),
        [
            "routes[0].limits.store.redis.url: rediss:// (Redis over TLS) is not supported yet",
            "routes[0].limits.store.redis.sync_interval: must be within 10ms ..= 10s, found 5ms",
        ]
    );
    assert_eq!(
        errors_in(&with_store(
            "{ redis: { url: 127.0.0.1:6379, sync_interval: soon } }"
        )),
        ["routes[0].limits.store.redis.sync_interval: `soon` is not a duration like 250ms or 1s"]
    );
    assert_eq!(
        errors_in(&with_store(
            "{ redis: { url: 127.0.0.1:6379, sync_interval: 0s } }"
        )),
        ["routes[0].limits.store.redis.sync_interval: must be greater than 0"]
    );
    assert_eq!(
        errors_in(&with_store("{}")),
        ["routes[0].limits.store: names no store (redis)"]
    );
}

#[test]
fn unknown_store_keys_and_modes_are_refused_with_their_path() {
    let unknown = errors_in(&with_store("{ memcached: { url: 127.0.0.1:11211 } }"));
    assert_eq!(
        unknown,
        [
            "routes[0].limits.store.memcached: unknown field `memcached`, expected `redis` \
          at line 18 column 49"
        ]
    );
    let mode = errors_in(&with_store(
        "{ redis: { url: 127.0.0.1:6379, on_unavailable: maybe } }",
    ));
    assert_eq!(
        mode,
        [
            "routes[0].limits.store.redis.on_unavailable: unknown variant `maybe`, \
          expected `open` or `closed` at line 18 column 95"
        ]
    );
    let key = errors_in(&with_store(
        "{ redis: { url: 127.0.0.1:6379, expected_peers: 3 } }",
    ));
    assert_eq!(
        key,
        [
            "routes[0].limits.store.redis.expected_peers: unknown field `expected_peers`, \
          expected one of `url`, `sync_interval`, `on_unavailable`, `key_prefix` \
          at line 18 column 79"
        ]
    );
}
