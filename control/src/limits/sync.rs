//! The sync task of fleet-wide budgets: every `sync_interval`, for each route
//! with `limits.store`, one pipelined round trip to Redis settles every
//! recently used key's leases (see `sluice_filters::FleetBucket` for the
//! arithmetic the script does atomically) and counts the sluices sharing the
//! route. A failed round trip puts the route on its `on_unavailable` mode
//! until one succeeds. Admission never waits for any of this.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use sluice_filters::{peer_ms, redis_connect_url, FleetAsks, LeaseGrant, WINDOW_MS};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::fleet::Fleet;
use super::{KeyEntry, RouteLimits};
use crate::store::SnapshotStore;

/// One sync of the buckets named by `KEYS[2..]`, after a heartbeat in the
/// route's set of peers `KEYS[1]` (a peer that has not synced within the
/// peer time is dropped, and so are its leases); `FleetBucket::sync` is its
/// model, step for step. ARGV: this sluice's id, the peer time (ms), how
/// long an untouched bucket is kept (ms), then six numbers per bucket:
/// limit, held, returned, debt, want, least. A bucket is a hash: `pool`,
/// `at`, `made`, `h:ID` (each sluice's lease) and `r:ID` (the first share
/// kept for a peer, from the bucket's making until that peer syncs it or
/// the peer time passes). Returns the peers, then the grant and the pool of
/// each bucket. The time is the store's own, so that the sluices' clocks
/// need not agree.
pub const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me = ARGV[1]
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, me)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
local peers = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = { tostring(#peers) }
local f = function(x) return string.format('%.17g', x) end
for i = 2, #KEYS do
  local a = 4 + (i - 2) * 6
  local limit = tonumber(ARGV[a])
  local held = math.max(0, tonumber(ARGV[a + 1]))
  if redis.call('EXISTS', KEYS[i]) == 0 then
    local share = limit / #peers
    for _, p in ipairs(peers) do
      redis.call('HSET', KEYS[i], 'r:' .. p, f(share))
    end
    redis.call('HSET', KEYS[i], 'pool', f(limit - share * #peers), 'at', now, 'made', now)
  end
  local s = redis.call('HGETALL', KEYS[i])
  local b = {}
  for j = 1, #s, 2 do
    b[s[j]] = s[j + 1]
  end
  local pool, at = tonumber(b['pool']), tonumber(b['at'])
  local expired = now - tonumber(b['made'] or 0) > ttl
  local leased = held
  for k, v in pairs(b) do
    local kind, id = string.sub(k, 1, 2), string.sub(k, 3)
    if kind == 'r:' and (id == me or expired or not redis.call('ZSCORE', KEYS[1], id)) then
      pool = pool + tonumber(v)
      redis.call('HDEL', KEYS[i], k)
    elseif kind == 'r:' then
      leased = leased + tonumber(v)
    elseif kind == 'h:' and id ~= me then
      if redis.call('ZSCORE', KEYS[1], id) then
        leased = leased + tonumber(v)
      else
        redis.call('HDEL', KEYS[i], k)
      end
    end
  end
  pool = pool + tonumber(ARGV[a + 2]) - tonumber(ARGV[a + 3])
  pool = math.min(pool + limit * math.max(0, now - at) / 60000, limit - leased)
  at = math.max(at, now)
  local granted = 0
  if pool >= tonumber(ARGV[a + 5]) then
    granted = math.min(tonumber(ARGV[a + 4]), math.max(pool, 0))
  end
  pool = pool - granted
  redis.call('HSET', KEYS[i], 'pool', f(pool), 'at', f(at), 'h:' .. me, f(held + granted))
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[3]))
  out[#out + 1] = f(granted)
  out[#out + 1] = f(pool)
end
return out
";

/// Keys per script call: one call holds Redis for its whole length.
const KEYS_PER_CALL: usize = 200;
/// A bucket nobody synced for this long is dropped: it is full again by then.
const BUCKET_TTL_MS: u64 = 2 * WINDOW_MS;
/// The longest the task sleeps: how soon it sees a route a reload added.
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// Runs until `cancel`: syncs each fleet-wide route of the live snapshot on
/// its own interval, one route after another.
pub(crate) async fn run_limit_sync(store: Arc<SnapshotStore>, cancel: CancellationToken) {
    let id = format!("{}-{:016x}", std::process::id(), rand::random::<u64>());
    let mut conns: HashMap<String, MultiplexedConnection> = HashMap::new();
    let mut due: Vec<(Arc<RouteLimits>, Instant)> = Vec::new();
    loop {
        let snapshot = store.load();
        let now = Instant::now();
        let mut next = now + LOOK_AGAIN;
        let mut still = Vec::new();
        for limits in snapshot.routes.iter().filter_map(|r| r.limits.as_ref()) {
            let Some(fleet) = &limits.fleet else { continue };
            let at = due
                .iter()
                .find(|(l, _)| Arc::ptr_eq(l, limits))
                .map_or(now, |(_, at)| *at);
            let at = if at <= now {
                let url = &fleet.store.url;
                match sync_route(limits, fleet, &mut conns, &id).await {
                    Ok(peers) => fleet.synced(peers),
                    Err(e) => {
                        conns.remove(url);
                        fleet.failed(&e);
                    }
                }
                now + fleet.store.sync_interval
            } else {
                at
            };
            next = next.min(at);
            still.push((limits.clone(), at));
        }
        // Routes gone from the snapshot (or rebuilt) are forgotten.
        due = still;
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep_until(next) => {}
        }
    }
}

/// How long one round trip (or making the connection) may take.
fn round_trip_limit(fleet: &Fleet) -> Duration {
    fleet.store.sync_interval.max(Duration::from_millis(250))
}

async fn connection(
    conns: &mut HashMap<String, MultiplexedConnection>,
    fleet: &Fleet,
) -> Result<MultiplexedConnection, String> {
    let written = &fleet.store.url;
    if let Some(c) = conns.get(written) {
        return Ok(c.clone());
    }
    let url = redis_connect_url(written, &|name| std::env::var(name).ok())?;
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let conn = tokio::time::timeout(
        round_trip_limit(fleet),
        client.get_multiplexed_async_connection(),
    )
    .await
    .map_err(|_| "no connection in time".to_owned())?
    .map_err(|e| e.to_string())?;
    conns.insert(written.clone(), conn.clone());
    Ok(conn)
}

/// One key's share of a sync: its leases' asks.
struct Pending {
    entry: Arc<Mutex<KeyEntry>>,
    asks: FleetAsks,
}

/// Syncs one route; the peers the store counted.
async fn sync_route(
    limits: &RouteLimits,
    fleet: &Fleet,
    conns: &mut HashMap<String, MultiplexedConnection>,
    id: &str,
) -> Result<u64, String> {
    let mut conn = connection(conns, fleet).await?;
    let peers = fleet.peers();
    // After a failed sync the store may have dropped this sluice and its
    // leases: they start over.
    let start_over = fleet.is_down();
    let keep_idle = (WINDOW_MS / fleet.sync_ms().max(1)).max(1) as u32;
    let prefix = format!("{}{}:", fleet.store.key_prefix, fleet.route);
    let mut names = Vec::new();
    let mut pending = Vec::new();
    // The map's read lock only while its entries are copied out: new keys
    // on the hot path wait for nothing longer.
    let entries: Vec<(String, Arc<Mutex<KeyEntry>>)> = limits
        .keys
        .read()
        .iter()
        .map(|(k, e)| (k.clone(), e.clone()))
        .collect();
    for (key, entry) in entries {
        let mut e = entry.lock();
        if e.idle_syncs > keep_idle {
            continue;
        }
        e.idle_syncs += 1;
        let Some(leases) = &mut e.fleet else { continue };
        if start_over {
            leases.forget();
        }
        let asks = leases.asks(&limits.config.limits, peers);
        drop(e);
        names.push(key);
        pending.push(Pending { entry, asks });
    }
    let peer_ttl = peer_ms(fleet.sync_ms());
    let mut pipe = redis::pipe();
    let chunks: Vec<_> = pending
        .chunks(KEYS_PER_CALL)
        .zip(names.chunks(KEYS_PER_CALL))
        .collect();
    let calls = chunks.len().max(1);
    for i in 0..calls {
        let mut keys = vec![format!("{prefix}peers")];
        let mut args = vec![
            id.to_owned(),
            peer_ttl.to_string(),
            BUCKET_TTL_MS.to_string(),
        ];
        if let Some((part, part_names)) = chunks.get(i) {
            for (p, name) in part.iter().zip(part_names.iter()) {
                for (kind, limit, ask) in &p.asks {
                    keys.push(format!("{prefix}{}:{name}", kind.key()));
                    args.extend(
                        [
                            *limit as f64,
                            ask.held,
                            ask.returned,
                            ask.debt,
                            ask.want,
                            ask.least,
                        ]
                        .map(|x| x.to_string()),
                    );
                }
            }
        }
        pipe.cmd("EVAL")
            .arg(SCRIPT)
            .arg(keys.len())
            .arg(keys)
            .arg(args);
    }
    let answer = tokio::time::timeout(
        round_trip_limit(fleet),
        pipe.query_async::<Vec<Vec<String>>>(&mut conn),
    )
    .await;
    let replies = match answer {
        Ok(Ok(replies)) if replies.len() == calls => replies,
        Ok(Ok(_)) => {
            let e = "the store answered a different number of calls".to_owned();
            return Err(give_back(&pending, e));
        }
        Ok(Err(e)) => return Err(give_back(&pending, e.to_string())),
        Err(_) => return Err(give_back(&pending, "no answer in time".to_owned())),
    };
    let mut peers = 1;
    let mut grants = Vec::new();
    for reply in &replies {
        let numbers: Vec<f64> = reply.iter().filter_map(|n| n.parse().ok()).collect();
        let Some((first, rest)) = numbers.split_first() else {
            return Err(give_back(&pending, "an empty answer".to_owned()));
        };
        peers = *first as u64;
        grants.extend(rest.chunks_exact(2).map(|g| LeaseGrant {
            granted: g[0],
            pool: g[1],
        }));
    }
    let mut grants = grants.into_iter();
    for p in &pending {
        let got: Vec<LeaseGrant> = grants.by_ref().take(p.asks.len()).collect();
        if let Some(leases) = &mut p.entry.lock().fleet {
            if got.len() == p.asks.len() {
                leases.granted(&p.asks, &got);
            } else {
                leases.failed(&p.asks);
            }
        }
    }
    Ok(peers)
}

/// The store did not answer: each key owes its debts again.
fn give_back(pending: &[Pending], error: String) -> String {
    for p in pending {
        if let Some(leases) = &mut p.entry.lock().fleet {
            leases.failed(&p.asks);
        }
    }
    error
}
